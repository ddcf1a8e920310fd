"""The grading daemon: later runs are answered by a warm process, with the same output."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import SUBMISSIONS


@pytest.fixture
def daemon_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {**os.environ, "GRADER_CACHE": str(tmp_path / "cache"), "GRADER_DAEMON_IDLE_S": "60"}
    env.pop("GRADER_NO_DAEMON", None)
    yield env
    subprocess.run([sys.executable, "-m", "grader.cli", "daemon", "stop"], env=env, capture_output=True, timeout=30)


def grade(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader.cli", "grade", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_second_run_is_served_by_the_daemon_with_identical_results(daemon_env: dict[str, str], tmp_path: Path) -> None:
    buggy = str(SUBMISSIONS / "bug_backward_overwrite.ipynb")
    first = grade(daemon_env, tmp_path, buggy)  # in-process; starts the daemon
    sockets = tmp_path / "cache" / "daemon"
    deadline = time.monotonic() + 30
    while not list(sockets.glob("*.sock")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(sockets.glob("*.sock")), "the first run should start a daemon"
    assert oct(sockets.stat().st_mode & 0o777) == "0o700"
    second = grade(daemon_env, tmp_path, buggy, "--json", "report.json")  # relative to the caller's cwd
    assert (second.returncode, first.returncode) == (1, 1)
    assert second.stdout == first.stdout and "row 0 received 1x the gradient" in second.stdout
    assert json.loads((tmp_path / "report.json").read_text())["score"] < 100
    bad = tmp_path / "bad.ipynb"
    bad.write_text("{")
    third = grade(daemon_env, tmp_path, "bad.ipynb")
    assert third.returncode == 2 and "bad.ipynb: not valid JSON" in third.stderr


def test_daemon_stop_ends_it(daemon_env: dict[str, str], tmp_path: Path) -> None:
    grade(daemon_env, tmp_path, str(SUBMISSIONS / "correct_tinytorch.ipynb"))
    time.sleep(1.5)
    stop = subprocess.run([sys.executable, "-m", "grader.cli", "daemon", "stop"], env=daemon_env,
                          capture_output=True, text=True, timeout=30)
    assert "stopped" in stop.stdout
    assert not list((tmp_path / "cache" / "daemon").glob("*.sock"))


def test_a_request_that_fails_is_answered_and_the_daemon_keeps_serving(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    from grader import commands, daemon

    def broken(*args: object) -> int:
        raise IndexError("tuple index out of range")

    monkeypatch.setattr(commands, "execute", broken)
    request = {"command": "grade", "paths": [str(tmp_path / "x.ipynb")], "columns": 80, "color": False}
    reply = daemon._handle_safely(request, session=None)  # type: ignore[arg-type]
    assert reply["exit"] == 2 and reply["stdout"] == ""
    assert reply["stderr"] == "error: internal grader error, please report it: IndexError: tuple index out of range\n"
    monkeypatch.setattr(commands, "execute", lambda *args: 0)
    assert daemon._handle_safely(request, session=None)["exit"] == 0  # type: ignore[arg-type]  # the next is served


def test_a_malformed_request_is_refused_not_executed() -> None:
    from grader import daemon

    reply = daemon._handle_safely({"command": "rm -rf", "paths": "/"}, session=None)  # type: ignore[arg-type]
    assert reply["exit"] == 2 and "internal grader error" in str(reply["stderr"])


def test_the_daemon_lives_in_the_users_cache_directory_however_deep(tmp_path: Path) -> None:
    """No GRADER_CACHE: the socket and caches go to $XDG_CACHE_HOME/tinytorch-grader, also when that
    path is longer than a Unix socket address may be; ``tito-grade test --module --verbose`` says where."""
    xdg = tmp_path / ("deep" * 30)
    env = {k: v for k, v in os.environ.items() if k not in ("GRADER_CACHE", "GRADER_NO_DAEMON")}
    env.update(XDG_CACHE_HOME=str(xdg), GRADER_DAEMON_IDLE_S="60")
    notebook = shutil.copyfile(SUBMISSIONS / "correct_alt_style.ipynb", tmp_path / "mine.ipynb")

    def tito() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "grader.tito", "test", "--module", "embeddings", "--notebook",
                               str(notebook), "--verbose"], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)

    try:
        first = tito()
        assert first.returncode == 0, first.stderr
        cache = xdg / "tinytorch-grader"
        assert f"grader cache: {cache}" in first.stderr and "one starts in the background after this run" in first.stderr
        deadline = time.monotonic() + 30
        while not list((cache / "daemon").glob("*.sock")) and time.monotonic() < deadline:
            time.sleep(0.1)
        (sock,) = (cache / "daemon").glob("*.sock")
        assert len(str(sock)) > 108  # reached through /proc/self/fd
        second = tito()
        assert second.returncode == 0 and f"grader daemon socket: {sock} (a daemon is listening there)" in second.stderr
        assert second.stdout == first.stdout
    finally:
        subprocess.run([sys.executable, "-m", "grader.cli", "daemon", "stop"], env=env, capture_output=True, timeout=30)


def test_a_daemon_that_ends_leaves_a_newer_daemons_socket_alone(daemon_env: dict[str, str], tmp_path: Path) -> None:
    env = daemon_env | {"GRADER_DAEMON_IDLE_S": "2"}
    grade(env, tmp_path, str(SUBMISSIONS / "correct_tinytorch.ipynb"))  # starts a daemon that idles out in 2 s
    sockets = tmp_path / "cache" / "daemon"
    deadline = time.monotonic() + 30
    while not list(sockets.glob("*.sock")) and time.monotonic() < deadline:
        time.sleep(0.1)
    [path] = list(sockets.glob("*.sock"))
    path.unlink()  # someone cleared it, and a newer daemon bound the same path
    import socket

    newer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    newer.bind(str(path))
    try:
        time.sleep(4)  # the first daemon idles out and ends
        assert path.exists(), "the ending daemon deleted the newer daemon's socket"
    finally:
        newer.close()
        path.unlink(missing_ok=True)
