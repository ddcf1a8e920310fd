"""The unit author's two faces of the grader: ``grader.unit`` (host side) and
``grader.harness.probes`` (sandbox side), each with a pinned ``__all__``; the units themselves
import the grader through those faces only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import grader.harness.probes
import grader.unit
import grader.unittesting

from .conftest import ROOT, TOY_UNIT

HOST_FACE = "grader.unit"
SANDBOX_FACE = "grader.harness.probes"
TEST_FACES = {HOST_FACE, "grader.unittesting"}  # a unit's own tests/ also use the test kit
UNITS = [pytest.param(ROOT / "grader" / "modules" / "embeddings", "grader.modules.embeddings", id="module-11"),
         pytest.param(ROOT / "grader" / "modules" / "attention", "grader.modules.attention", id="module-12"),
         pytest.param(TOY_UNIT, "toy_relu", id="toy")]


def test_the_host_face_exports_exactly_this() -> None:
    assert len(set(grader.unit.__all__)) == len(grader.unit.__all__)
    assert set(grader.unit.__all__) == {
        "NOT_A_TENSOR", "Cause", "CheckOutput", "Comparator", "CrashMeaning", "Diagnosis", "ErrorCause",
        "Generation", "Inputs", "Mismatch", "ModuleUnit", "NotApplicable", "Outputs", "Probe", "ProbeError",
        "SourceGeneration", "close", "judge_draw", "ks_threshold", "likely_cause", "shapes",
    }
    for name in grader.unit.__all__:
        assert getattr(grader.unit, name) is not None


def test_the_sandbox_face_exports_exactly_this() -> None:
    assert len(set(grader.harness.probes.__all__)) == len(grader.harness.probes.__all__)
    assert set(grader.harness.probes.__all__) == {
        "FOREIGN", "NOT_A_TENSOR", "Inputs", "Outputs", "Probe", "ProbeError", "as_array", "attempt", "caught",
        "decode_inputs", "dyadic", "encode_inputs", "exception_name", "fmt", "grad_of", "held_tensors", "inject",
        "load_probes", "parameters_of", "raised", "shape_of", "takes_parameter", "tensor_class", "token_ids",
    }
    for name in grader.harness.probes.__all__:
        assert getattr(grader.harness.probes, name) is not None


def test_the_test_kit_exports_exactly_this() -> None:
    """What a unit's own tests import (grader.unittesting): its fixtures and catalog kinds."""
    assert set(grader.unittesting.__all__) == {
        "Bug", "GradeReport", "Rubric", "Session", "Style", "build_notebook", "code_cells", "course_checkout",
        "grader_environment", "grading_session", "load_rubric", "not_passed", "tito", "write_notebook",
    }
    for name in grader.unittesting.__all__:
        assert getattr(grader.unittesting, name) is not None


def test_finding_a_unit_imports_only_the_standard_library() -> None:
    """A unit's ``__init__`` (what finding the installed units imports) pulls in neither pydantic
    nor numpy: the front ends name a missing dependency with its install command after that."""
    import subprocess
    import sys

    code = ("import sys, grader.modules.embeddings, grader.unit; "
            "print(sorted(m for m in ('pydantic', 'numpy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def _grader_imports(path: Path, package: str, unit_dir: Path) -> list[str]:
    """The grader modules ``path`` imports (relative imports resolved against the unit's package)."""
    rel = path.relative_to(unit_dir).with_suffix("").parts
    here = [*package.split("."), *rel[:-1]]  # the file's own package (an __init__'s too)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "grader"]
        elif isinstance(node, ast.ImportFrom):
            base = here[:len(here) - node.level + 1] if node.level else []
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            if target.split(".")[0] == "grader" and not target.startswith(package):
                found.append(target)
    return found


@pytest.mark.parametrize(("unit_dir", "package"), UNITS)
def test_a_unit_imports_the_grader_only_through_its_two_faces(unit_dir: Path, package: str) -> None:
    """Sandbox side (``probes/``): only ``grader.harness.probes`` (the bundle has nothing else of the
    grader). Its own tests (``tests/``): ``grader.unit`` and the test kit ``grader.unittesting``.
    Host side (everything else): only ``grader.unit``."""
    wrong = []
    for path in sorted(unit_dir.rglob("*.py")):
        parts = path.relative_to(unit_dir).parts
        allowed = {SANDBOX_FACE} if "probes" in parts else TEST_FACES if parts[0] == "tests" else {HOST_FACE}
        wrong += [f"{path.relative_to(unit_dir)}: {target}" for target in _grader_imports(path, package, unit_dir)
                  if target not in allowed]
    assert wrong == []
