"""Build the two wheels from this source tree.

- staff (``tinytorch-grader``): the tree as it is, ``pip wheel`` of the checkout.
- student (``tinytorch-grader-student``): a staging copy of the tree without what students must not
  have or do not need, built with the same hatchling configuration:
  - no staff-only folder of any course module, by the unit's own declaration (``ModuleUnit.staff_only``:
    its reference solution, its golden submissions, its reviewed mutants, its tests);
  - each rubric keeps only its public (``visible``) checks: the hidden checks' ids, inputs and
    hints stay with the staff;
  - no staff tools: batch grading, gradebook exports, feedback pages, the Docker image build, the
    Gradescope mode, mutant selftests and these build tools (``STAFF_ONLY`` below);
  - ``grader/edition.py`` says ``student``, so the front ends offer only the local backend and say
    that the official grade comes from the staff;
  - the public checks' expected outputs (``<unit>/public_expected/``) are shipped instead of the
    reference; they are current (``python -m grader.dist refresh --check``) or the build stops.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable
from pathlib import Path

from .. import modules

ROOT = Path(__file__).resolve().parents[2]
STUDENT_NAME = "tinytorch-grader-student"
# Paths under grader/ that only the staff package has.
STAFF_ONLY = ("batch", "results", "export", "feedback", "selftest", "dist", "service", "sandbox/image.py", "gradescope_mode.py")
STUDENT_README = """\
# tinytorch-grader-student

Practice grading for TinyTorch course modules: `tito test --module NAME` in your TinyTorch checkout
(`tito-grade test --module NAME --notebook PATH` elsewhere), or `pytest --module NAME`.

It runs the course's public checks in a local sandbox and compares your results with expected
outputs that the course staff computed and shipped with this package. It holds no reference
solution and no hidden checks: your official grade comes from the course staff.
"""


def build_staff_wheel(out: Path) -> Path:
    return _pip_wheel(ROOT, out)


def build_student_wheel(out: Path) -> Path:
    """The student wheel, built from a staging copy of this tree; its path."""
    with tempfile.TemporaryDirectory(prefix="grader-student-") as tmp:
        return _pip_wheel(stage_student_tree(Path(tmp) / "src"), out)


def stage_student_tree(dest: Path, root: Path | None = None, units: Iterable[modules.ModuleUnit] | None = None) -> Path:
    """The student package's source tree, staged in ``dest`` from ``root`` (default: this checkout)
    for ``units`` (default: every installed one; those of other distributions are skipped)."""
    root = ROOT if root is None else root
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")
    shutil.copytree(root / "grader", dest / "grader", ignore=ignore)
    shutil.copytree(root / "reference" / "runtime", dest / "reference" / "runtime", ignore=ignore)
    shutil.copytree(root / "packaging", dest / "packaging", ignore=ignore)
    for name in STAFF_ONLY:
        path = dest / "grader" / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    for unit in modules.installed().values() if units is None else units:
        staged = dest.joinpath(*unit.package.split("."))
        if not staged.is_dir():
            continue  # a unit of another distribution: not ours to ship
        for rel in unit.staff_only:
            path = staged / rel
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
        rubric = staged / "rubric.toml"
        rubric.write_text(public_rubric(rubric.read_text(encoding="utf-8")), encoding="utf-8")
    edition = dest / "grader" / "edition.py"
    edition.write_text(edition.read_text(encoding="utf-8").replace('EDITION: str = "staff"', 'EDITION: str = "student"'),
                       encoding="utf-8")
    (dest / "README.md").write_text(STUDENT_README, encoding="utf-8")
    (dest / "pyproject.toml").write_text(student_pyproject(), encoding="utf-8")
    return dest


def public_rubric(text: str) -> str:
    """The rubric with only its visible checks (blocks of ``[[checks]]`` text, so comments stay)."""
    head, *blocks = re.split(r"(?m)^(?=\[\[checks\]\]\s*$)", text)
    checks = [(b, tomllib.loads(b)["checks"][0]) for b in blocks]
    kept = [b for b, c in checks if c.get("visibility", "visible") == "visible"]
    # What the left-out checks are worth, so that a student's total says what it does not cover.
    defaults = tomllib.loads(head).get("defaults", {})
    withheld = [(c["visibility"], c.get("points", defaults.get("points", 0))) for _b, c in checks
                if c.get("visibility", "visible") != "visible"]
    if withheld:
        line = "withheld = [" + ", ".join(f'{{visibility = "{v}", points = {float(p)!r}}}' for v, p in withheld) + "]\n"
        table = re.search(r"(?m)^\[", head)  # a top-level key goes before the first table
        head = head[:table.start()] + line + "\n" + head[table.start():] if table else head + line
    result = head + "".join(kept)
    tomllib.loads(result)  # still a valid rubric file
    return result


# The staff package's dependencies that grading one notebook does not need (the batch store, the
# feedback pages, the Gradescope and LMS layouts): the student package leaves them out.
STAFF_DEPENDENCIES = ("SQLAlchemy", "alembic", "Jinja2", "PyYAML")


# The oldest Python that TinyTorch and NumPy still support; CI grades with the student wheel on it.
STUDENT_PYTHON = ">=3.10"


def student_dependencies(dependencies: list[str]) -> list[str]:
    return [d for d in dependencies if not d.startswith(STAFF_DEPENDENCIES)] + ['tomli>=1.1; python_version < "3.11"']


def student_pyproject() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    scripts = {k: v for k, v in project["scripts"].items() if k in ("grader", "tito-grade")}
    lines = [
        "[build-system]", 'requires = ["hatchling"]', 'build-backend = "hatchling.build"', "",
        "[project]", f"name = {_toml(STUDENT_NAME)}", f"version = {_toml(project['version'])}",
        f"description = {_toml('Practice grading for TinyTorch course modules (public checks; no solutions)')}",
        'readme = "README.md"', f"requires-python = {_toml(STUDENT_PYTHON)}",
        f"license = {_toml(project['license'])}", f"dependencies = {_toml(student_dependencies(project['dependencies']))}", "",
        "[project.scripts]", *(f"{k} = {_toml(v)}" for k, v in scripts.items()), "",
    ]
    for group, points in project["entry-points"].items():
        lines += [f"[project.entry-points.{_toml(group)}]", *(f"{k} = {_toml(v)}" for k, v in points.items()), ""]
    lines += [
        "[tool.hatch.build.targets.wheel]", 'packages = ["grader"]', "",
        "[tool.hatch.build.targets.wheel.force-include]",
        '"reference/runtime" = "grader/_data/reference/runtime"',
        '"packaging/tinytorch_grader_tito.pth" = "tinytorch_grader_tito.pth"', "",
    ]
    return "\n".join(lines)


def _toml(value: object) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML here")


def _pip_wheel(source: Path, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="grader-wheel-") as tmp:
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                               "-w", tmp, str(source)], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"pip wheel {source} failed (is hatchling installed? pip install hatchling):\n"
                               f"{done.stdout}{done.stderr}")
        (wheel,) = Path(tmp).glob("*.whl")
        target = out / wheel.name
        shutil.move(wheel, target)
    return target
