"""Course modules are units: a second one (tests/units/toy_relu, grading a ``relu`` function)
plugs in through the same entry point as module 11 and is graded end to end, with no change to
shared code; and the core names no module and has no import circle."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import modules
from grader.errors import ModuleUnitError
from grader.session import Session

from .conftest import ROOT, SUBMISSIONS, write_notebook

CORRECT = "import numpy as np\n\ndef relu(x):\n    return np.where(x > 0, x, 0.0)\n"
WRONG_SIDE = "import numpy as np\n\ndef relu(x):\n    return np.minimum(x, 0)\n"
IN_PLACE = "def relu(x):\n    x[x < 0] = 0\n    return x\n"


def _notebook(tmp: Path, name: str, source: str) -> Path:
    return write_notebook(tmp / f"{name}.ipynb", [source])


def _digest(folder: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def test_the_toy_unit_plugs_in_with_no_core_change(tmp_path: Path) -> None:
    """Adding a unit is its own folder and one entry point: installed from a copy outside the
    repository, it is found, chooses itself for its notebooks with no --module, and grades, while
    nothing in the core is edited or written (no registry, no generated file, no shared runtime)."""
    from .conftest import TOY_UNIT, unit_installed

    core = {name: _digest(ROOT / name) for name in ("grader", "reference")}
    assert sorted(p.name for p in TOY_UNIT.iterdir() if p.name != "__pycache__") == [
        "__init__.py", "examples", "judge", "mutants", "probes", "reference", "rubric.toml"]
    with unit_installed(tmp_path / "site"), Session() as session:
        report = session.grade(_notebook(tmp_path, "relu", CORRECT))
        module_11 = session.grade(ROOT / "submissions" / "correct_tinytorch.ipynb")
    assert (report.rubric_id, report.score) == ("toy-relu", 10)
    assert module_11.score == module_11.max_score
    assert {name: _digest(ROOT / name) for name in core} == core


def test_the_toy_unit_is_discovered_through_the_entry_point(toy_site: Path) -> None:
    units = modules.installed()
    assert units["relu"].package == "toy_relu" and units["relu"].root == toy_site / "toy_relu"
    with pytest.raises(ModuleUnitError, match=r"several course modules are installed .*--module"):
        modules.default()


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_the_toy_unit_is_graded_end_to_end(toy_site: Path, tmp_path: Path, backend: str) -> None:
    with Session() as session:
        correct = session.grade(_notebook(tmp_path, "correct", CORRECT), module="relu", backend=backend)
        wrong = session.grade(_notebook(tmp_path, "wrong_side", WRONG_SIDE), module="relu", backend=backend)
        in_place = session.grade(_notebook(tmp_path, "in_place", IN_PLACE), module="relu", backend=backend)
    assert (correct.rubric_id, correct.score, correct.max_score) == ("toy-relu", 10, 10)
    checks = {c.id: c for c in wrong.checks}
    assert checks["relu_values"].status == "failed"
    assert "Likely cause: the positive values were set to 0 instead of the negative ones" in checks["relu_values"].detail
    assert {c.id: c.status for c in in_place.checks} == {"relu_values": "passed", "relu_keeps_input": "failed"}


def test_the_command_line_chooses_among_installed_modules(toy_site: Path, tmp_path: Path) -> None:
    """With two units installed, ``grader grade`` needs no --module for a notebook that says which
    module it is; one that says nothing is exit 2 with the installed modules and the fix."""
    env = {**os.environ, "PYTHONPATH": str(toy_site), "GRADER_NO_DAEMON": "1"}
    env.pop("GRADER_MODULE")  # no standing default: the notebook alone decides

    def grade(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "grader.cli", "grade", *args], env=env, capture_output=True,
                              text=True, timeout=180)

    toy = grade(str(_notebook(tmp_path, "correct", CORRECT)), "--json", str(tmp_path / "toy.json"))
    assert toy.returncode == 0, toy.stderr
    assert json.loads((tmp_path / "toy.json").read_text())["rubric_id"] == "toy-relu"
    silent = grade(str(_notebook(tmp_path, "scratch", "def helper(x):\n    return x\n")))
    assert silent.returncode == 2 and "Traceback" not in silent.stderr
    message = " ".join(silent.stderr.split())
    assert "cannot tell which course module scratch.ipynb is" in message
    assert "installed: attention (12), embeddings (11), relu; choose one with --module NAME" in message
    chosen = grade("--module", "relu", str(_notebook(tmp_path, "scratch", "def relu(x):\n    return x\n")),
                   "--json", str(tmp_path / "r.json"))
    assert chosen.returncode == 1, chosen.stderr  # graded as relu: its negatives stay negative
    assert json.loads((tmp_path / "r.json").read_text())["rubric_id"] == "toy-relu"


def test_the_toy_unit_is_mutation_tested_with_its_own_material(toy_site: Path) -> None:
    """``grader selftest --mutants --module relu``: the toy's reference and its own golden notebook
    (examples/), its own reviewed equivalents (mutants/), its generation the rubric's default."""
    env = {**os.environ, "PYTHONPATH": str(toy_site), "GRADER_NO_DAEMON": "1"}
    run = subprocess.run([sys.executable, "-m", "grader.cli", "selftest", "--mutants", "--module", "relu"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    out = " ".join(run.stdout.split())
    assert "from 2 source(s)" in out and "correct_relu course" in out and "every non-equivalent mutant was killed" in out


def test_a_course_admin_finds_a_modules_parts_and_grades_with_an_edited_rubric(toy_site: Path, tmp_path: Path) -> None:
    """``grader modules`` lists both units with their rubrics; ``grader modules 11`` says where each
    part is; ``--copy-rubrics rubrics/`` writes NN_name.toml copies, and ``--rubric`` grades with one."""
    env = {**os.environ, "GRADER_NO_DAEMON": "1"}

    def grader(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "grader.cli", *args], env=env, capture_output=True, text=True,
                              timeout=180, cwd=tmp_path)

    listed = grader("modules")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()]
    assert rows == [["-", "relu", str(toy_site / "toy_relu" / "rubric.toml")],
                    ["11", "embeddings", str(ROOT / "grader" / "modules" / "embeddings" / "rubric.toml")],
                    ["12", "attention", str(ROOT / "grader" / "modules" / "attention" / "rubric.toml")]]
    one = grader("modules", "11_embeddings")
    assert f"reviewed equivalent mutants: {ROOT / 'grader/modules/embeddings/mutants/equivalent.toml'}" in \
        " ".join(one.stdout.split())
    assert grader("modules", "--copy-rubrics", "rubrics").returncode == 0
    assert sorted(p.name for p in (tmp_path / "rubrics").iterdir()) == ["11_embeddings.toml", "12_attention.toml", "relu.toml"]
    copy = tmp_path / "rubrics" / "relu.toml"
    copy.write_text(copy.read_text(encoding="utf-8").replace("points = 6", "points = 16"), encoding="utf-8")
    graded = grader("grade", "--rubric", str(copy), str(_notebook(tmp_path, "correct", CORRECT)), "--json", "r.json")
    assert graded.returncode == 0, graded.stderr
    assert json.loads((tmp_path / "r.json").read_text())["max_score"] == 20
    unknown = grader("modules", "13")
    assert unknown.returncode == 2 and "no course module '13' is installed" in unknown.stderr


# Generic words that contain a module-11 word, each with why it is not about the course module.
ALLOWED = {
    "a program embedding the grader": "English: a host program that embeds the grader (grader/intake.py)",
}


def _names_of(unit: modules.ModuleUnit) -> re.Pattern[str]:
    """A course module's name, number and targets, as code or prose would spell them."""
    from grader.rubric import load_rubric

    words = [re.escape(unit.name.rstrip("s")), *(re.escape(t) for t in load_rubric(module=unit.name).targets)]
    if unit.number is not None:
        words += [rf"(?<![a-z0-9]){unit.number:02d}_", rf"module.{unit.number}\b"]  # not h11_
    return re.compile("|".join(words), re.IGNORECASE)


def test_the_core_names_no_course_module() -> None:
    """No course module's name, number or classes appear outside its own unit (module 11's
    sinusoids and positional encodings included): the core learns about course modules from the
    units. Runtimes are shared, and their records say which module needed what. A unit's own tests
    quote the course's text, which speaks of other modules."""
    names = {unit.name: _names_of(unit) for unit in modules.installed().values()}
    names["embeddings"] = re.compile(names["embeddings"].pattern + r"|sinusoid|positional.?encoding", re.IGNORECASE)
    found = []
    for path in sorted((ROOT / "grader").rglob("*")):
        if path.suffix not in (".py", ".toml", ".html", ".j2", ".js", ".css", ".md"):
            continue
        if re.search(r"/modules/[a-z0-9_]+/tests/", path.as_posix()):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name, words in names.items():
                if f"modules/{name}/" not in path.as_posix() and words.search(line) \
                        and not any(allowed in line for allowed in ALLOWED):
                    found.append(f"{path.relative_to(ROOT)}:{n}: ({name}) {line.strip()}")
    assert found == []


def _imports(path: Path, package: str) -> set[str]:
    """Modules of ``package`` that ``path`` imports, anywhere in it (lazy imports included)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    pkg = parts[:-1]  # a relative import is resolved in the folder of the file, __init__.py included
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == package}
        elif isinstance(node, ast.ImportFrom):
            base = list(pkg[:len(pkg) - node.level + 1]) if node.level else []
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            if target.split(".")[0] == package:
                found.add(target)
                found |= {f"{target}.{a.name}" for a in node.names}
    return found


def test_there_is_no_import_circle_in_the_grader() -> None:
    files = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
             for p in (ROOT / "grader").rglob("*.py")}
    graph = {name: {t for t in _imports(path, "grader") if t in files and t != name} for name, path in files.items()}
    # a package's __init__ that only re-exports is part of the package: edges into it from its own
    # submodules are the package importing itself, not a circle
    graph = {name: {t for t in targets if not name.startswith(t + ".")} for name, targets in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert circles == []


def test_batch_grades_a_mixed_class_each_notebook_by_its_own_module(tmp_path: Path) -> None:
    """A class that hands in module-11 and module-12 notebooks together, with no --module: each is
    graded by its own module, into one results folder per module."""
    attention = modules.get("attention").examples_dir
    assert attention is not None
    src = tmp_path / "class"
    src.mkdir()
    picks = {"alice": SUBMISSIONS / "correct_tinytorch.ipynb", "bob": attention / "correct_older.ipynb",
             "carol": attention / "bug_no_output_projection.ipynb", "dave": SUBMISSIONS / "bug_sin_exponent.ipynb"}
    for student, path in picks.items():
        shutil.copyfile(path, src / f"{student}.ipynb")
    out = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if k != "GRADER_MODULE"}
    run = subprocess.run([sys.executable, "-m", "grader.cli", "batch", str(src), "--out", str(out), "--workers", "1"],
                         capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode in (0, 1), run.stderr
    from grader.results.store import SQLiteStore

    assert sorted(p.name for p in out.iterdir()) == ["attention", "embeddings"]  # one results folder per module
    graded = {}
    for folder in ("attention", "embeddings"):
        for r in SQLiteStore(out / folder).results():
            graded[r.student_id] = (folder, r.report.rubric_id if r.report else None, r.score)
        assert (out / folder / "summary.html").is_file()
    assert graded["alice"] == ("embeddings", "tinytorch-11-embeddings", 100.0)
    assert graded["bob"] == ("attention", "tinytorch-12-attention", 100.0)
    assert graded["carol"] == ("attention", "tinytorch-12-attention", 68.0)
    dave = graded["dave"][2]
    assert graded["dave"][:2] == ("embeddings", "tinytorch-11-embeddings") and dave is not None and dave < 100
    assert f"results in {out / 'attention'}, {out / 'embeddings'}" in " ".join(run.stdout.split())
