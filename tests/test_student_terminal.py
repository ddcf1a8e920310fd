"""What a student's laptop may be like, and the grader still answers without a traceback (issue 22):
a cache folder it cannot write, a terminal that prints only ASCII, an install without dependencies."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from .conftest import SUBMISSIONS

CORRECT = SUBMISSIONS / "correct_tinytorch.ipynb"
BUGGY = SUBMISSIONS / "bug_sin_exponent.ipynb"


def tito(*args: str | Path, env: Mapping[str, str] | None = None, cwd: Path | None = None,
         python: str = sys.executable, user: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """``tito-grade test --module embeddings ARGS`` as a student runs it (``user``: as whom; then
    in ``env`` alone)."""
    argv = [*(user or []), python, *(["-P"] if user is None else []), "-m", "grader.tito", "test", "--module",
            "embeddings", *map(str, args)]
    return subprocess.run(argv, env={**(os.environ if user is None else {}), **(env or {})}, cwd=cwd,
                          capture_output=True, timeout=300, text=True, encoding="utf-8", errors="replace")


# ---- a cache folder that cannot be used ----------------------------------------------------------


def test_a_cache_folder_that_cannot_be_made_gives_way_to_a_temporary_one(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")  # a path through a file cannot be made, not even by root
    run = tito("--notebook", CORRECT, env={"GRADER_CACHE": str(blocker / "cache")}, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "All 28 public checks passed" in " ".join(run.stdout.split())
    (note,) = run.stderr.splitlines()
    assert f"the grader's cache folder {blocker / 'cache'} cannot be used (Not a directory)" in note
    assert "temporary folder" in note and "GRADER_CACHE" in note


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the grader as an ordinary user")
def test_a_read_only_cache_folder_gives_way_to_a_temporary_one() -> None:
    """An empty cache folder of mode 0555, for an ordinary user (root would ignore the mode)."""
    import importlib

    from grader import modules

    # tests/security's helper (mypy knows it by another name: tests/security is on its path)
    python = importlib.import_module(".security.tt_modes", __package__).portable_python()
    if python is None:
        pytest.skip("no interpreter an ordinary user can run here")
    if not modules.get("embeddings").rubric_path.stat().st_mode & stat.S_IROTH:
        pytest.skip("the staff files are root's alone here (a fallback-mode sandbox protected them)")
    home = Path(tempfile.mkdtemp(prefix="ro-cache-"))
    try:
        os.chmod(home, 0o755)
        cache = home / "cache"
        cache.mkdir(mode=0o555)
        os.chmod(cache, 0o555)
        run = tito("--notebook", CORRECT, env={"PATH": "/usr/bin:/bin", "HOME": str(home), "GRADER_CACHE": str(cache)},
                   cwd=home, python=python, user=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        assert run.returncode == 0, run.stderr
        assert "Traceback" not in run.stderr
        assert f"cache folder {cache} cannot be used (Permission denied)" in run.stderr
        assert not any(cache.iterdir())
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=False)


def test_a_new_cache_folder_is_private(tmp_path: Path) -> None:
    cache = tmp_path / "deep" / "cache"
    run = tito("--notebook", CORRECT, env={"GRADER_CACHE": str(cache)}, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert stat.S_IMODE((cache / "expected").stat().st_mode) == 0o700


# ---- a terminal that prints only ASCII ------------------------------------------------------------

ASCII_TERMINALS = {"PYTHONIOENCODING=ascii": {"PYTHONIOENCODING": "ascii"},
                   "LC_ALL=C": {"LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}}


@pytest.fixture
def daemon_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {**os.environ, "GRADER_CACHE": str(tmp_path / "cache"), "GRADER_DAEMON_IDLE_S": "60", "GRADER_NO_DAEMON": ""}
    yield env
    subprocess.run([sys.executable, "-m", "grader.cli", "daemon", "stop"], env=env, capture_output=True, timeout=60)


@pytest.mark.parametrize("terminal", ASCII_TERMINALS)
def test_an_ascii_terminal_gets_plain_text_from_the_grader_and_from_its_daemon(
        terminal: str, daemon_env: dict[str, str], tmp_path: Path) -> None:
    env = {**daemon_env, **ASCII_TERMINALS[terminal]}
    first = tito("--notebook", BUGGY, env=env, cwd=tmp_path)  # in this process; starts the daemon
    sockets = tmp_path / "cache" / "daemon"
    deadline = time.monotonic() + 60
    while not list(sockets.glob("*.sock")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert list(sockets.glob("*.sock")), "the first run should start a daemon"
    second = tito("--notebook", BUGGY, env=env, cwd=tmp_path)  # answered by the daemon
    for run in (first, second):
        assert run.returncode == 1, run.stderr
        assert "Traceback" not in run.stderr and run.stderr == ""
        assert run.stdout.isascii() and "\ufffd" not in run.stdout
        out = " ".join(run.stdout.split())
        assert "sin_values | x failed" in out and "emb_lookup | + passed" in out
        assert "!! 2 of 28 public checks did not pass (88/94 points)" in out
    assert second.stdout == first.stdout


# ---- an install without its dependencies ------------------------------------------------------------


def hidden_package(folder: Path, name: str) -> Path:
    """A folder that, first on sys.path, makes ``import NAME`` fail as if NAME were not installed."""
    (folder / name).mkdir(parents=True)
    (folder / name / "__init__.py").write_text(
        f"raise ModuleNotFoundError(\"No module named '{name}'\", name={name!r})\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize("entry", ["tito-grade", "grader grade"])
def test_a_missing_dependency_is_named_with_the_command_that_installs_it(entry: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(hidden_package(tmp_path / "site", "pydantic"))}
    if entry == "tito-grade":
        run = tito("--notebook", CORRECT, env=env, cwd=tmp_path)
    else:
        run = subprocess.run([sys.executable, "-m", "grader.cli", "grade", str(CORRECT)], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    (line,) = run.stderr.splitlines()
    assert line.startswith("error: the grader needs pydantic, which is not installed: pip install 'pydantic>=")
