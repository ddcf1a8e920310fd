"""The words README.md's "Words" section defines mean one thing each in the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

GRADER = Path(__file__).resolve().parent.parent / "grader"
SOURCES = sorted(GRADER.rglob("*.py"))


def _is_a_name(annotation: ast.expr | None) -> bool:
    """What a course module's name is typed as: ``str``, optional, a form field's ``Text``, or the
    error that stands for a name not found."""
    if annotation is None:
        return True
    text = ast.unparse(annotation).replace(" ", "")
    return text in {"str", "str|None", "None|str", "Optional[str]", "Text", "str|GraderError"}


def test_module_always_names_a_course_module_never_a_python_module() -> None:
    wrong = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.arg) and node.arg == "module" and node.annotation is not None \
                    and not _is_a_name(node.annotation):
                wrong.append(f"{path.relative_to(GRADER)}:{node.lineno} parameter module: {ast.unparse(node.annotation)}")
            elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name | ast.Attribute)
                  and (getattr(node.target, "id", None) or getattr(node.target, "attr", None)) == "module"
                  and not _is_a_name(node.annotation)):
                wrong.append(f"{path.relative_to(GRADER)}:{node.lineno} module: {ast.unparse(node.annotation)}")
            elif isinstance(node, ast.Assign):
                value = ast.unparse(node.value)
                if (any(isinstance(t, ast.Name) and t.id == "module" for t in node.targets)
                        and re.search(r"ModuleType|import_module|__import__|sys\.modules\[", value)):
                    wrong.append(f"{path.relative_to(GRADER)}:{node.lineno} module = {value}")
            elif isinstance(node, ast.ClassDef) and re.search(r"Module(?!Unit|Ref|Work)", node.name) \
                    and not node.name.endswith("Error"):
                wrong.append(f"{path.relative_to(GRADER)}:{node.lineno} class {node.name}")
    assert not wrong, "`module` means a course module (README.md, Words):\n" + "\n".join(wrong)


def test_selftest_is_only_the_mutation_command() -> None:
    """The sandbox's check of its own layers is the *layer check*; "selftest" is the mutation
    test alone, in its package and the command line that runs it."""
    allowed = {GRADER / "cli.py", GRADER / "errors.py", GRADER / "dist" / "build.py"}
    wrong = [
        f"{path.relative_to(GRADER)}:{n}: {line.strip()}"
        for path in SOURCES if path.parent.name != "selftest" and path not in allowed
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"self-?test", line, re.IGNORECASE) and "grader selftest" not in line
    ]
    assert not wrong, "\n".join(wrong)
