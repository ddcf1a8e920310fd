"""The student's install: the grader and a real TinyTorch in one environment, in either order.

Each scenario makes a fresh virtual environment (tests/packaging.py), installs TinyTorch from a
minimal checkout made of a real TinyTorch's files (``TINYTORCH_SOURCE``: a checkout of
MLSysBook/TinyTorch at 02364f8; without it these tests skip, or fail under
``GRADER_REQUIRE_UPSTREAM=1`` as CI sets it) the way TinyTorch's setup does (``pip install -e .``),
and the grader from its wheel. Then it compares TinyTorch's own commands, their output and exit
status, with and without the grader, and checks that ``tito test --module`` grades, through
TinyTorch's ``tito setup`` (which runs ``pip install -e .`` again) and ``pip uninstall``.

``tito setup`` also installs matplotlib, jupyter, jupyterlab and psutil; they are empty stand-in
wheels here (no network, and a minute saved), while its pip calls, its ``pip install -e .``
included, are real.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import SUBMISSIONS
from .packaging import ROOT, Venv, build_wheel, make_venv, outer_packages, stub_wheels

# What the commands compared below and `pip install -e .` need of a TinyTorch checkout.
CHECKOUT_FILES = ("pyproject.toml", "README.md", "LICENSE", "settings.ini", "tito", "tinytorch", "src/11_embeddings",
                  "modules/11_embeddings", "tests/conftest.py", "tests/11_embeddings")
UPSTREAM_COMMANDS = (("--help",), ("test", "11"), ("module", "test", "11"), ("module", "status"))
GRADE = ("test", "--module", "embeddings")
SETUP_STAND_INS = ("matplotlib==3.5.0", "jupyter==1.0.0", "jupyterlab==3.0.0", "psutil==5.8.0")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def tinytorch_source() -> Path:
    source = os.environ.get("TINYTORCH_SOURCE", "")
    problem = ("set TINYTORCH_SOURCE to a checkout of MLSysBook/TinyTorch at 02364f8 (scripts/test.sh finds one)"
               if not source else f"TINYTORCH_SOURCE={source} has no tito/main.py" if
               not (Path(source) / "tito" / "main.py").is_file() else "")
    if problem:
        if os.environ.get("GRADER_REQUIRE_UPSTREAM") == "1":
            pytest.fail(f"GRADER_REQUIRE_UPSTREAM=1 but {problem}", pytrace=False)
        pytest.skip(problem)
    return Path(source)


@pytest.fixture(scope="session")
def grader_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(ROOT, tmp_path_factory.mktemp("grader-wheel"))


def test_the_grader_wheel_carries_the_units_but_not_their_own_tests(grader_wheel: Path) -> None:
    """A unit's tests (and module 11's bug notebooks in them) belong to the repository: the wheel
    has both units' rubrics and probes, and no ``grader/modules/*/tests``."""
    import zipfile

    names = zipfile.ZipFile(grader_wheel).namelist()
    assert {"grader/modules/embeddings/rubric.toml", "grader/modules/attention/rubric.toml"} <= set(names)
    assert [n for n in names if re.match(r"grader/modules/[^/]+/tests/", n)] == []


@pytest.fixture(scope="session")
def links(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return outer_packages(tmp_path_factory.mktemp("outer") / "links")


def minimal_checkout(source: Path, dest: Path) -> Path:
    for name in CHECKOUT_FILES:
        src = source / name
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copyfile(src, dest / name)
    # The student's work: a finished notebook in place of the starter one.
    for old in (dest / "modules" / "11_embeddings").glob("*.ipynb"):
        old.unlink()
    shutil.copyfile(SUBMISSIONS / "correct_tinytorch.ipynb", dest / "modules" / "11_embeddings" / "embeddings.ipynb")
    return dest


@pytest.fixture
def student(tmp_path: Path, tinytorch_source: Path, links: Path) -> Iterator[tuple[Venv, Path]]:
    checkout = minimal_checkout(tinytorch_source, tmp_path / "TinyTorch")
    home = tmp_path / "home"
    home.mkdir()
    venv = make_venv(tmp_path / "venv", links, home=home, find_links=stub_wheels(tmp_path / "stubs", *SETUP_STAND_INS),
                     extra_env={"GRADER_CACHE": str(tmp_path / "cache"), "GRADER_NO_DAEMON": "1"})
    yield venv, checkout


def tito(venv: Venv, checkout: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return venv.run(venv.bin / "tito", *args, cwd=checkout, stdin=stdin)


def upstream_behaviour(venv: Venv, checkout: Path) -> dict[str, tuple[int, str, str]]:
    """Exit status, stdout and stderr of TinyTorch's own commands (timings masked)."""
    seen = {}
    for command in UPSTREAM_COMMANDS:
        run = tito(venv, checkout, *command)
        seen[" ".join(command)] = (run.returncode, _mask(run.stdout), _mask(run.stderr))
    return seen


# Every visible check passed, with all of its points; the count follows the rubric.
FULL_MARKS = re.compile(r"All \d+ (?:public )?checks passed \((\d+(?:\.\d+)?)/\1 points\)")


def _mask(text: str) -> str:
    return re.sub(r"\d+\.\d+ ?m?s\b", "<t>", text)


def assert_grades(venv: Venv, checkout: Path) -> None:
    run = tito(venv, checkout, *GRADE)
    out = " ".join(run.stdout.split())
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Grading module 11 embeddings: modules/11_embeddings/embeddings.ipynb" in out
    assert FULL_MARKS.search(out), out


def assert_grades_the_jupyter_copy(venv: Venv, checkout: Path) -> None:
    """The checkout as cloned (its notebook committed) and the student's work saved as Jupyter's copy
    of it: ``tito test --module`` grades the copy, and says which file it left out."""
    folder = checkout / "modules" / "11_embeddings"
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "the course's checkout"], check=True)
    copy = folder / "embeddings-Copy1.ipynb"
    shutil.copyfile(SUBMISSIONS / "bug_sin_cos_swapped.ipynb", copy)
    try:
        run = tito(venv, checkout, *GRADE)
        out = " ".join(run.stdout.split())
        assert run.returncode == 1, run.stdout + run.stderr  # the copy's bug, not the shipped solution's full marks
        assert "Grading module 11 embeddings: modules/11_embeddings/embeddings-Copy1.ipynb" in out, out
        assert not FULL_MARKS.search(out)
        said = " ".join(run.stderr.split())
        assert ("graded embeddings-Copy1.ipynb (the one changed since the checkout); not graded: embeddings.ipynb"
                in said), run.stderr
    finally:
        copy.unlink()
        shutil.rmtree(checkout / ".git")


def assert_uninstalled(venv: Venv) -> None:
    """No code, hook or metadata of the grader is left. (pytest's own rewritten copies of a plugin's
    modules, ``__pycache__/*-pytest-*.pyc``, stay behind, as for every pytest plugin.)"""
    site = venv.site_packages
    left = [p for p in site.rglob("*") if ("grader" in p.name and p.is_file()) or (p.suffix in (".py", ".pth")
            and "grader" in str(p.relative_to(site)))]
    assert not left, f"pip uninstall left {left}"


def rerun_setup(venv: Venv, checkout: Path) -> None:
    """TinyTorch's own ``tito setup``: pip installs, then ``pip install -e .`` of the checkout again."""
    run = tito(venv, checkout, "setup", "--skip-venv", "--skip-profile", stdin="n\n")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "installed in development mode" in run.stdout


def test_tinytorch_first_then_the_grader_then_setup_then_uninstall(student: tuple[Venv, Path], grader_wheel: Path) -> None:
    venv, checkout = student
    venv.pip("install", "-e", checkout)
    script = (venv.bin / "tito").read_bytes()
    without = upstream_behaviour(venv, checkout)
    unknown = tito(venv, checkout, *GRADE)
    assert unknown.returncode == 2 and "unrecognized arguments: --module" in unknown.stderr  # upstream has no --module

    venv.pip("install", grader_wheel)
    assert (venv.bin / "tito").read_bytes() == script, "the grader must not touch TinyTorch's tito script"
    assert upstream_behaviour(venv, checkout) == without
    assert_grades(venv, checkout)

    rerun_setup(venv, checkout)
    assert upstream_behaviour(venv, checkout) == without
    assert_grades(venv, checkout)
    assert_grades_the_jupyter_copy(venv, checkout)

    venv.pip("uninstall", "-y", "tinytorch-grader")
    assert (venv.bin / "tito").read_bytes() == script
    assert upstream_behaviour(venv, checkout) == without
    assert_uninstalled(venv)
    after = tito(venv, checkout, *GRADE)
    assert (after.returncode, _mask(after.stdout), _mask(after.stderr)) == (
        unknown.returncode, _mask(unknown.stdout), _mask(unknown.stderr))


def test_the_grader_first_then_tinytorch_then_setup_then_uninstall(student: tuple[Venv, Path], grader_wheel: Path) -> None:
    venv, checkout = student
    venv.pip("install", grader_wheel)
    assert not (venv.bin / "tito").exists(), "the grader ships no tito script: TinyTorch's is the only one"
    alone = venv.run(venv.bin / "tito-grade", *GRADE, "--notebook", checkout / "modules/11_embeddings/embeddings.ipynb",
                     cwd=checkout)
    assert alone.returncode == 0 and FULL_MARKS.search(" ".join(alone.stdout.split())), alone.stdout + alone.stderr

    venv.pip("install", "-e", checkout)
    script = (venv.bin / "tito").read_bytes()
    assert_grades(venv, checkout)
    with_grader = upstream_behaviour(venv, checkout)

    rerun_setup(venv, checkout)
    assert upstream_behaviour(venv, checkout) == with_grader
    assert_grades(venv, checkout)
    assert_grades_the_jupyter_copy(venv, checkout)

    venv.pip("uninstall", "-y", "tinytorch-grader")
    assert (venv.bin / "tito").read_bytes() == script
    assert upstream_behaviour(venv, checkout) == with_grader  # the same as with the grader: nothing of ours showed
    assert_uninstalled(venv)


def test_pytest_rewrites_asserts_only_in_its_own_modules(tmp_path: Path, links: Path, grader_wheel: Path) -> None:
    """The student's ``tinytorch`` keeps plain asserts in every pytest run of the environment, with
    the grader installed from its wheel and as an editable checkout; an editable install exposes
    ``grader`` alone."""
    project = tmp_path / "project"
    (project / "tinytorch").mkdir(parents=True)
    (project / "tinytorch" / "__init__.py").write_text("def check(x):\n    assert x == 1\n", encoding="utf-8")
    (project / "test_student.py").write_text("import tinytorch\n\n\ndef test_it():\n    tinytorch.check(2)\n",
                                             encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    for how in ("wheel", "editable"):
        venv = make_venv(tmp_path / how, links, home=home)
        venv.pip("install", "--no-deps", *((grader_wheel,) if how == "wheel" else ("-e", ROOT)))
        run = venv.run(venv.python, "-m", "pytest", "-p", "no:cacheprovider", "-W", "error", "test_student.py",
                       cwd=project)
        assert run.returncode == 1, run.stdout + run.stderr
        assert "assert x == 1" in run.stdout and "AssertionError" in run.stdout
        assert "assert 2 == 1" not in run.stdout, f"{how}: pytest rewrote the student's tinytorch"
        assert "PytestAssertRewriteWarning" not in run.stdout + run.stderr
        probe = ("import importlib.util as u; print(*(u.find_spec(m) is not None for m in "
                 "('grader', 'tests', 'benchmarks', 'reference', 'hatch_build')))")
        assert venv.run_python(probe, cwd=tmp_path).stdout.split() == ["True", "False", "False", "False", "False"]
