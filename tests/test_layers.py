"""The folders of the grader in layers, read from the imports (lazy, function-level ones included):
the results (record, store, name rules, SQL tables and migrations: grader/results/) sit below
``grader batch``, the exports, the feedback pages, Gradescope mode and the grading service, which
read results and never one another's command."""

from __future__ import annotations

import ast
from pathlib import Path

from .conftest import ROOT

# the folders (or top-level modules) the results room sits below
ABOVE_RESULTS = ("batch", "export", "feedback", "service", "gradescope_mode")
LAYERED = ("results", *ABOVE_RESULTS)


def _targets(path: Path) -> set[str]:
    """Every ``grader`` module (or name in one) that ``path`` imports, anywhere in the file."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    pkg = parts[:-1]  # a relative import is resolved in the file's folder, __init__.py included
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "grader"}
        elif isinstance(node, ast.ImportFrom):
            base = list(pkg[:len(pkg) - node.level + 1]) if node.level else []
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            if target.split(".")[0] == "grader":
                found.add(target)
                found |= {f"{target}.{a.name}" for a in node.names}
    return found


def _folder(module: str) -> str | None:
    """``grader.batch.store`` -> ``batch``; ``grader.gradescope_mode`` -> ``gradescope_mode``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def folder_imports() -> dict[str, dict[str, set[str]]]:
    """folder -> folder it imports -> the files (relative to the repository) that do."""
    edges: dict[str, dict[str, set[str]]] = {}
    for path in sorted((ROOT / "grader").rglob("*.py")):
        source = _folder(".".join(path.relative_to(ROOT).with_suffix("").parts))
        for target in map(_folder, _targets(path)):
            if source and target and target != source:
                edges.setdefault(source, {}).setdefault(target, set()).add(path.relative_to(ROOT).as_posix())
    return edges


def two_way_ties(edges: dict[str, dict[str, set[str]]], among: tuple[str, ...] | None = None) -> list[tuple[str, str]]:
    return sorted((a, b) for a in edges for b in edges[a]
                  if a < b and a in edges.get(b, {}) and (among is None or {a, b} <= set(among)))


def test_export_feedback_and_the_service_never_import_the_batch_command() -> None:
    edges = folder_imports()
    found = {folder: sorted(edges.get(folder, {}).get("batch", ())) for folder in ("export", "feedback", "service")}
    assert found == {"export": [], "feedback": [], "service": []}


def test_the_batch_command_never_imports_the_service() -> None:
    assert sorted(folder_imports().get("batch", {}).get("service", ())) == []


def test_the_results_import_nothing_above_them() -> None:
    above = folder_imports().get("results", {})
    assert {folder: sorted(files) for folder, files in above.items() if folder in ABOVE_RESULTS} == {}


def test_no_two_folders_import_each_other() -> None:
    """Anywhere in grader/, not only among the layered rooms: the sandbox owns its image, a unit's
    declaration (grader/moduleunit.py) sits below the registry and the units' public face."""
    edges = folder_imports()
    assert two_way_ties(edges, LAYERED) == []
    assert two_way_ties(edges) == []


if __name__ == "__main__":  # python -m tests.test_layers: the folder-level two-way ties of a checkout
    for a, b in two_way_ties(folder_imports()):
        print(f"{a} <-> {b}")


# The makers of what a grading borrows: sandboxes and reference workers (issue 25 §3).
MAKERS = {"make_sandbox", "LocalSandbox", "DockerSandbox", "HidingSandbox", "oracle_for", "ReferenceOracle",
          "ShippedOracle"}
# where they are defined, and the one door that calls them for everyone else
MAKER_HOMES = ("grader/session.py", "grader/sandbox/", "grader/reference.py", "grader/shipped.py")


def _makers_called(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in MAKERS:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    return found


def test_only_the_session_makes_sandboxes_and_reference_workers() -> None:
    """Every grader borrows its sandbox and reference worker from a Session (grader/session.py),
    which makes and closes them; grader.Grader opens a session of its own (grader/standalone.py)."""
    outside = [hit for path in sorted((ROOT / "grader").rglob("*.py"))
               if not path.relative_to(ROOT).as_posix().startswith(MAKER_HOMES) for hit in _makers_called(path)]
    assert outside == []
    assert _makers_called(ROOT / "grader" / "session.py")  # the test sees a maker where there is one


def test_a_grader_made_alone_closes_the_session_it_opened() -> None:
    from grader import Grader

    with Grader() as grader:
        session, sandbox = grader.session, grader.sandbox
        assert session.sandbox("local") is sandbox and session.oracle(grader.rubric.module) is grader.reference
    try:
        session.sandbox("local")
    except RuntimeError as e:
        assert "closed" in str(e)
    else:
        raise AssertionError("the grader's own session is still open")
