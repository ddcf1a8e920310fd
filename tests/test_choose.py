"""Which course module grades a notebook is chosen in one place (grader.modules.choose), by the
precedence its docstring writes down; with two units installed (module 11 and the toy ``relu``
unit) module 11's notebooks are graded exactly as before without --module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader import modules
from grader.errors import ModuleUnitError
from grader.modules.choose import choose_module
from grader.session import Session

from .conftest import SUBMISSIONS, write_notebook
from .test_pipeline import GOLDEN, SUBMISSION_FILES, normalized

RELU = "import numpy as np\n\ndef relu(x):\n    return np.maximum(x, 0.0)\n"
SILENT = "def helper(x):\n    return x\n"


def test_the_grader_ships_modules_11_and_12_and_a_silent_notebook_needs_a_default(tmp_path: Path) -> None:
    assert list(modules.installed()) == ["attention", "embeddings"]
    scratch = write_notebook(tmp_path / "scratch.ipynb", [SILENT])
    with pytest.raises(ModuleUnitError, match=r"installed: attention \(12\), embeddings \(11\); choose one"):
        choose_module(scratch, environ={})
    assert choose_module(scratch, environ={"GRADER_MODULE": "11"}).name == "embeddings"
    assert choose_module(write_notebook(tmp_path / "scratch2.ipynb", ["#| default_exp core.attention\n" + SILENT]),
                         environ={"GRADER_MODULE": "11"}).name == "attention"  # the notebook beats the default


@pytest.mark.parametrize("path", SUBMISSION_FILES, ids=[p.stem for p in SUBMISSION_FILES])
def test_module_11_notebooks_say_they_are_module_11(toy_site: Path, path: Path) -> None:
    assert choose_module(path, environ={}).name == "embeddings"


@pytest.mark.parametrize("name", ["correct_tinytorch.ipynb", "bug_unfinished_starter.ipynb", "correct_source.py"])
def test_module_11_golden_notebooks_grade_as_before_with_two_units(toy_site: Path, name: str) -> None:
    with Session() as session:
        got = normalized(session.grade(SUBMISSIONS / name))
    assert got == json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))


def test_each_kind_of_evidence_picks_its_unit(toy_site: Path, tmp_path: Path) -> None:
    (tmp_path / "modules" / "11_embeddings").mkdir(parents=True)
    cases = {
        "export line": (write_notebook(tmp_path / "a.ipynb", ["#| default_exp core.relu\n" + SILENT]), "relu"),
        "file name": (write_notebook(tmp_path / "relu.ipynb", [SILENT]), "relu"),
        "folder name": (write_notebook(tmp_path / "modules" / "11_embeddings" / "mine.ipynb", [SILENT]), "embeddings"),
        "what it defines": (write_notebook(tmp_path / "b.ipynb", [RELU]), "relu"),
        "export line over what it defines": (
            write_notebook(tmp_path / "c.ipynb", ["#| default_exp core.embeddings\n" + RELU]), "embeddings"),
    }
    assert {why: choose_module(path, environ={}).name for why, (path, _) in cases.items()} == \
        {why: unit for why, (_, unit) in cases.items()}


def test_the_precedence(toy_site: Path, tmp_path: Path) -> None:
    toy, silent = write_notebook(tmp_path / "b.ipynb", [RELU]), write_notebook(tmp_path / "s.ipynb", [SILENT])
    standing = {"GRADER_MODULE": "embeddings"}
    assert choose_module(toy, "11", environ=standing).name == "embeddings"  # --module beats the notebook
    assert choose_module(toy, environ=standing).name == "relu"  # the notebook beats a standing default
    assert choose_module(silent, environ=standing, course="relu").name == "embeddings"  # env, then course
    assert choose_module(silent, environ={}, course="relu").name == "relu"
    with pytest.raises(ModuleUnitError, match=r"^cannot tell which course module s\.ipynb is: .*installed: "
                                              r"attention \(12\), embeddings \(11\), relu; choose one with --module NAME$"):
        choose_module(silent, environ={})
    with pytest.raises(ModuleUnitError, match=r"no course module 'transformers' is installed \(installed: attention "
                                              r"\(12\), embeddings \(11\), relu\)"):
        choose_module(toy, "transformers", environ={})
    exported = write_notebook(tmp_path / "e.ipynb", ["#| default_exp core.relu\n", RELU])
    with pytest.raises(ModuleUnitError, match=r"e\.ipynb says it is module relu \(its `#\| default_exp` line\), not "
                                              r"embeddings: drop --module 11"):
        choose_module(exported, "11", environ={})


def test_batch_grades_a_folder_of_module_11_without_module(toy_site: Path, tmp_path: Path) -> None:
    from grader.batch.runner import run_batch

    source = tmp_path / "class"
    source.mkdir()
    for name in ("correct_tinytorch.ipynb", "bug_batch_lookup.ipynb"):
        (source / name).write_bytes((SUBMISSIONS / name).read_bytes())
    outcome = run_batch(source, tmp_path / "out", workers=1)
    assert (outcome.total, outcome.graded, outcome.invalid, outcome.failed) == (2, 2, 0, 0)


def test_another_unit_leaves_module_11s_caches_alone(toy_site: Path) -> None:
    """Each unit has its own bundle hash: the shipped expected outputs' fingerprint, the reference
    cache key and the reference bundle of module 11 move only when module 11 (or the harness or
    its runtime) changes, not when another unit is installed or edited."""
    from grader.dist.expected import fingerprint, stale
    from grader.reference import ReferenceOracle
    from grader.sandbox.bundle import bundle_hash, ensure_bundle

    def module_11() -> tuple[str, str, str, Path]:
        ensure_bundle.cache_clear()
        return (fingerprint("embeddings"), bundle_hash("embeddings"), ReferenceOracle("embeddings")._version,
                ensure_bundle("embeddings"))

    assert stale("embeddings") is None  # the committed fingerprint was made without the toy unit
    probes = toy_site / "toy_relu" / "probes" / "__init__.py"
    before, shared, toy = module_11(), bundle_hash(), bundle_hash("relu")
    original = probes.read_text(encoding="utf-8")
    try:
        probes.write_text(original + "\nCHANGED = True\n", encoding="utf-8")
        assert bundle_hash("relu") != toy  # the change is seen, by the toy's own bundle
        assert bundle_hash() == shared  # the shared one (the zygote's, the image's) holds no unit
        assert module_11() == before
        assert not (before[3] / "toy_relu").exists()
    finally:
        probes.write_text(original, encoding="utf-8")
        ensure_bundle.cache_clear()
