"""The two distributions: the student wheel holds no solution and grades the public checks as the staff does.

The student wheel is built from this tree (``python -m grader.dist student``), then read file by
file and installed into a fresh virtual environment (tests/packaging.py) to grade the golden
submissions. The shipped expected outputs must be current: CI fails here when the rubric, the
reference, the probes or the runtime changed without ``python -m grader.dist refresh``.
"""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from grader import modules
from grader.dist import expected as shipped_expected
from grader.dist.build import build_student_wheel, public_rubric
from grader.plan import plan, submission_seed
from grader.reference import ReferenceOracle
from grader.rubric import load_rubric
from grader.settings import settings
from grader.shipped import ShippedOracle

from .conftest import ROOT, SUBMISSIONS, TOY_UNIT
from .packaging import SERVER_PACKAGES, Venv, make_venv, outer_packages

UNIT = modules.get("embeddings")
GOLDEN = sorted(SUBMISSIONS.glob("*.ipynb"))
REFRESH = "stale: run python -m grader.dist refresh and commit grader/modules/*/public_expected"


def test_the_shipped_expected_outputs_are_current(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A private cache: the shared one may hold this job's outputs from a run with another numpy
    # seed (the cache key leaves it out: only statistical checks read random initialisations).
    from grader.settings import reload

    monkeypatch.setenv("GRADER_CACHE", str(tmp_path / "cache"))
    reload()
    assert shipped_expected.stale("embeddings") is None, REFRESH
    job = shipped_expected.public_job("embeddings")
    oracle = ReferenceOracle("embeddings")
    try:
        fresh = oracle.expected(job)
    finally:
        oracle.close()
    shipped = ShippedOracle("embeddings").expected(job)
    for check in job.checks:
        assert shipped[check.id].facts == fresh[check.id].facts, f"{check.id}: {REFRESH}"
        assert shipped[check.id].arrays.keys() == fresh[check.id].arrays.keys(), f"{check.id}: {REFRESH}"
        for name, array in fresh[check.id].arrays.items():
            assert np.array_equal(shipped[check.id].arrays[name], array), f"{check.id}/{name}: {REFRESH}"


def test_a_changed_or_foreign_check_is_refused_not_misjudged(tmp_path: Path) -> None:
    from grader.errors import RubricError

    rubric = load_rubric()
    hidden = tuple(c for c in rubric.checks if not c.public)
    with pytest.raises(RubricError, match="official grade comes from the course staff"):
        ShippedOracle("embeddings").expected(plan(rubric, hidden, 7))


def test_the_public_rubric_keeps_exactly_the_visible_checks() -> None:
    import tomllib

    text = UNIT.rubric_path.read_text(encoding="utf-8")
    kept = tomllib.loads(public_rubric(text))["checks"]
    assert [c["id"] for c in kept] == [c.id for c in load_rubric().checks if c.public]
    assert {c.get("visibility", "visible") for c in kept} == {"visible"}
    # what the others are worth stays, so that a student's total can say what it does not cover
    left_out = [(c.visibility, c.points) for c in load_rubric().checks if not c.public]
    assert [(w["visibility"], w["points"]) for w in tomllib.loads(public_rubric(text))["withheld"]] == left_out


# ---- the wheel itself (slow: builds it, installs it into a fresh environment) ------------------------


def test_a_units_staff_only_folders_stay_out_of_the_student_tree(tmp_path: Path) -> None:
    """The unit's own declaration (``staff_only``) says what the student package drops: here a unit
    of this distribution with golden submissions (solutions), reviewed mutants, tests and a note."""
    import shutil

    from grader.dist.build import stage_student_tree
    from grader.modules import ModuleUnit

    root = tmp_path / "root"
    ignore = shutil.ignore_patterns("__pycache__")
    for rel in ("grader", "reference/runtime", "packaging"):
        shutil.copytree(ROOT / rel, root / rel, ignore=ignore)
    unit_dir = root / "grader" / "modules" / "toyunit"
    shutil.copytree(TOY_UNIT, unit_dir, ignore=ignore)
    (unit_dir / "tests").mkdir()
    (unit_dir / "tests" / "test_relu.py").write_text("def test_it():\n    pass\n", encoding="utf-8")
    (unit_dir / "notes.md").write_text("the answers\n", encoding="utf-8")
    unit = ModuleUnit(name="relu", package="grader.modules.toyunit", examples="examples",
                      equivalents="mutants/equivalent.toml", staff_only=(*ModuleUnit.staff_only, "notes.md"))
    staged = stage_student_tree(tmp_path / "src", root, [unit]) / "grader" / "modules" / "toyunit"
    left = sorted(p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file())
    assert left == ["__init__.py", "judge/__init__.py", "probes/__init__.py", "rubric.toml"]


def test_a_unit_must_declare_its_solutions_staff_only() -> None:
    from grader.errors import ModuleUnitError
    from grader.modules import ModuleUnit

    with pytest.raises(ModuleUnitError, match=r"examples \(goldens\) must be in staff_only"):
        ModuleUnit(name="relu", package="toy_relu", examples="goldens")
    with pytest.raises(ModuleUnitError, match="reference"):
        ModuleUnit(name="relu", package="toy_relu", staff_only=("examples",))


@pytest.fixture(scope="module")
def student_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_student_wheel(tmp_path_factory.mktemp("student-wheel"))


def wheel_files(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as z:
        return {name: z.read(name) for name in z.namelist()}


def solution_lines() -> set[str]:
    """The reference solution's code lines that say something (not blank, not a bare keyword or import)."""
    lines = set()
    for raw in UNIT.reference_path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if len(line) >= 24 and not line.startswith(("#", "import ", "from ", '"""', "def __", "return self")):
            lines.add(line)
    return lines


@pytest.mark.slow
def test_the_student_wheel_holds_no_solution_and_no_hidden_check(student_wheel: Path) -> None:
    files = wheel_files(student_wheel)
    names = list(files)
    assert not [n for n in names if "/reference/solution" in n or n.endswith("solution.py")]
    unit_files = [n.split("/", 3)[3] for n in names if n.startswith("grader/modules/") and n.count("/") > 3]
    assert not [n for n in unit_files if n.split("/")[0] in UNIT.staff_only]  # its declaration, e.g. mutants/
    assert not [n for n in names if n.startswith(("grader/batch/", "grader/export/", "grader/dist/", "grader/sandbox/image.py"))]
    text = {n: data.decode("utf-8", "replace") for n, data in files.items()}
    code = solution_lines()
    assert len(code) > 40  # the check below is about the solution's real code
    leaked = {(n, line) for n, t in text.items() for line in code if line in t}
    assert not leaked, f"solution code in the student wheel: {sorted(leaked)[:5]}"

    rubric = load_rubric()
    hidden = [c for c in rubric.checks if not c.public]
    assert hidden
    import tomllib

    shipped_ids = {c["id"] for c in tomllib.loads(text["grader/modules/embeddings/rubric.toml"])["checks"]}
    assert shipped_ids == {c.id for c in rubric.checks if c.public}
    assert not {c.id for c in hidden} & {n.split("/")[-1].removesuffix(".json") for n in names}

    # The hidden checks' expected values for the golden submissions' own seeds appear nowhere, except
    # those that a public check's expected output holds too (a sinusoid table's first rows are the
    # same for every input): the staff's reference says which.
    oracle = ReferenceOracle("embeddings")
    try:
        public = b"\0".join(a.astype(t).tobytes() for out in oracle.expected(shipped_expected.public_job("embeddings")).values()
                            for a in out.arrays.values() for t in (np.float64, np.float32))
        secret = settings().seed_secret
        assert secret is not None  # the tests' GRADER_SEED_SECRET
        hidden_values = [array for f in GOLDEN
                         for out in oracle.expected(plan(rubric, tuple(hidden), submission_seed(_sha(f), secret))).values()
                         for array in out.arrays.values() if array.size >= 4 and array.tobytes() not in public]
    finally:
        oracle.close()
    assert len(hidden_values) >= len(GOLDEN)
    blob = b"\0".join(files.values())
    shipped_arrays = [_npy(data) for n, data in files.items() if n.endswith(".npy")]
    for array in hidden_values:
        for dtype in (np.float64, np.float32):
            assert array.astype(dtype).tobytes() not in blob
        assert not any(s.shape == array.shape and np.allclose(s, array) for s in shipped_arrays)


@pytest.mark.slow
def test_the_student_wheel_gives_the_staff_packages_public_verdicts(student_wheel: Path, tmp_path: Path) -> None:
    links = outer_packages(tmp_path / "links", leave_out=SERVER_PACKAGES)  # a laptop without server libraries
    (tmp_path / "home").mkdir()
    venv = make_venv(tmp_path / "venv", links, home=tmp_path / "home",
                     extra_env={"GRADER_CACHE": str(tmp_path / "cache"), "GRADER_NO_DAEMON": "1"})
    venv.pip("install", "--no-deps", student_wheel)
    venv.pip("check")  # every dependency the student wheel declares is there: it declares no server part
    student = _grade(venv, venv.bin / "grader", tmp_path / "student.json")
    assert "your official grade comes from the course staff" in " ".join(student.stdout.split())
    from grader import Grader  # the staff package: this checkout

    with Grader(public_only=True) as staff:
        expected = {f.name: [(c.id, c.status, c.score) for c in staff.grade(f).checks] for f in GOLDEN}
    got = {r["submission"]: [(c["id"], c["status"], c["score"]) for c in r["checks"]]
           for r in json.loads((tmp_path / "student.json").read_text(encoding="utf-8"))}
    assert got == expected
    assert {s for verdicts in got.values() for _, s, _ in verdicts} >= {"passed", "failed"}
    staff_only = venv.run(venv.bin / "grader", "batch", "x", "--out", tmp_path / "r")
    assert staff_only.returncode == 2 and "invalid choice: 'batch'" in staff_only.stderr


@pytest.mark.slow
def test_the_student_wheel_grades_on_the_oldest_python_it_supports(student_wheel: Path, tmp_path: Path) -> None:
    """Python 3.10 (TinyTorch and NumPy still support it), with only the student package's own
    dependencies: the same public verdicts as the staff package. scripts/test.sh makes that
    environment (.venv-oldest, scripts/oldest-python.sh) when the machine has a Python 3.10."""
    oldest = os.environ.get("GRADER_OLDEST_PYTHON", "")
    if not oldest:
        if os.environ.get("GRADER_REQUIRE_OLDEST_PYTHON") == "1":
            pytest.fail("GRADER_REQUIRE_OLDEST_PYTHON=1 but no Python 3.10 was found (scripts/oldest-python.sh)")
        pytest.skip("no Python 3.10 here (GRADER_OLDEST_PYTHON; scripts/oldest-python.sh makes one)")
    version = subprocess.run([oldest, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
                             text=True, check=True).stdout.split()
    assert version == ["3", "10"], version
    site = subprocess.run([oldest, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / "home").mkdir()
    venv = make_venv(tmp_path / "venv", Path(site), home=tmp_path / "home", python=oldest,
                     extra_env={"GRADER_CACHE": str(tmp_path / "cache"), "GRADER_NO_DAEMON": "1"})
    venv.pip("install", "--no-deps", student_wheel)
    venv.pip("check")
    _grade(venv, venv.bin / "grader", tmp_path / "student.json")
    from grader import Grader  # the staff package, on this Python

    with Grader(public_only=True) as staff:
        expected = {f.name: [(c.id, c.status, c.score) for c in staff.grade(f).checks] for f in GOLDEN}
    got = {r["submission"]: [(c["id"], c["status"], c["score"]) for c in r["checks"]]
           for r in json.loads((tmp_path / "student.json").read_text(encoding="utf-8"))}
    assert got == expected


def _grade(venv: Venv, grader: Path, json_out: Path) -> subprocess.CompletedProcess[str]:
    done = venv.run(grader, "grade", *GOLDEN, "--json", json_out, cwd=json_out.parent)
    assert done.returncode == 1, done.stdout + done.stderr  # the buggy golden submissions fail
    return done


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _npy(data: bytes) -> np.ndarray:
    import io

    return np.asarray(np.load(io.BytesIO(data), allow_pickle=False))


# ---- the student edition's command lines, run from a staged tree (fast: no wheel) -----------------------


@pytest.fixture(scope="module")
def student_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from grader.dist.build import stage_student_tree

    return stage_student_tree(tmp_path_factory.mktemp("student-tree") / "src")


def run_student(tree: Path, *args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    import os
    import sys

    env = {**os.environ, "PYTHONPATH": str(tree), "GRADER_NO_DAEMON": "1", "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-P", "-m", *map(str, args)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_student_help_offers_only_what_the_student_package_does(student_tree: Path, tmp_path: Path) -> None:
    for helped in (("grader.tito", "test", "--help"), ("grader.cli", "grade", "--help")):
        shown = run_student(student_tree, *helped, cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        for offered in ("--hidden", "docker", "--staff", "--seed", "--due-date", "--publish-date"):
            assert offered not in shown.stdout, (helped, offered)
    refusals: dict[tuple[str | Path, ...], str] = {
        ("grader.tito", "test", "--module", "embeddings", "--hidden"): "--hidden: the hidden checks are not in the "
                                                                        "student package",
        ("grader.tito", "test", "--module", "embeddings", "--backend", "docker"): "'docker': the Docker sandbox is the "
                                                                                   "official grading's",
        ("grader.cli", "grade", SUBMISSIONS / "correct_tinytorch.ipynb", "--backend", "docker"): "part of the staff "
                                                                                                  "package",
        ("grader.cli", "grade", SUBMISSIONS / "correct_tinytorch.ipynb", "--staff"): "--staff: the student package has "
                                                                                     "only the public checks",
    }
    for command, why in refusals.items():
        refused = run_student(student_tree, *command, cwd=tmp_path)
        assert refused.returncode == 2 and why in refused.stderr and "Traceback" not in refused.stderr, command


def test_the_student_total_and_footer_say_one_thing(student_tree: Path, tmp_path: Path) -> None:
    run = run_student(student_tree, "grader.tito", "test", "--module", "embeddings", "--notebook",
                      SUBMISSIONS / "correct_tinytorch.ipynb", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    out = " ".join(run.stdout.split())
    assert ("94/94 on the public checks; 1 hidden check and 1 check released after the due date (6 points) run only "
            "in the official grading") in out
    assert ("practice run: the public checks, compared with the expected outputs shipped with the student package; "
            "your official grade comes from the course staff") in out
    assert "Docker" not in out
