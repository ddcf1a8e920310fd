"""errors.py is the grader's one exception tree, and its docstring draws that tree."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import grader
from grader import errors

PACKAGE = Path(grader.__file__).parent
# The harness runs inside the sandbox, where the grader package is not importable, so its
# ProbeError cannot derive from GraderError.
SANDBOX_SIDE = PACKAGE / "harness"


def tree_classes() -> list[type[errors.GraderError]]:
    return [c for _, c in inspect.getmembers(errors, inspect.isclass)
            if issubclass(c, errors.GraderError) and c.__module__ == errors.__name__]


def drawn_tree() -> dict[str, str | None]:
    """Each class the module docstring draws -> the class it is drawn under (None for the root)."""
    parents: dict[str, str | None] = {}
    above: list[tuple[int, str]] = []  # (column, name) of the lines above that may be parents
    for line in (errors.__doc__ or "").splitlines():
        m = re.match(r"^ {4}(?:[│ ]*[├└]── )?(\w+)(?:\s{2,}|$)", line)
        if m is None:
            continue
        column, name = m.start(1), m.group(1)
        above = [(c, n) for c, n in above if c < column]
        parents[name] = above[-1][1] if above else None
        above.append((column, name))
    return parents


def test_the_docstring_draws_every_error_under_its_parent() -> None:
    real = {c.__name__: next((b.__name__ for b in c.__bases__ if issubclass(b, errors.GraderError)), None)
            for c in tree_classes()}
    assert drawn_tree() == real


def test_no_other_module_defines_a_public_exception() -> None:
    """A module may keep a private exception for its own control flow, never one that callers see."""
    bases = {c.__name__ for c in tree_classes()} | {"Exception", "BaseException"}
    elsewhere = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "errors.py" or SANDBOX_SIDE in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.ClassDef) and not node.name.startswith("_")
                    and any(isinstance(b, ast.Name) and b.id in bases for b in node.bases)):
                elsewhere.append((str(path.relative_to(PACKAGE)), node.name))
    # CheckFailed is how the pytest plugin fails a check's test item: a verdict, not a grader fault.
    assert elsewhere == [("pytest_plugin.py", "CheckFailed")]


def test_the_old_import_paths_still_work() -> None:
    from grader.export import RosterError
    from grader.locate import LocateError

    assert LocateError is errors.LocateError and issubclass(LocateError, FileNotFoundError)
    assert RosterError is errors.RosterError and issubclass(RosterError, ValueError)
