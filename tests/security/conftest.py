"""Fixtures of the red-team suite: backends, a fast rubric, baselines and per-test tripwires."""

from __future__ import annotations

import os
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import fast_rubric_file

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the suite's helper modules (pytest runs with --import-mode=importlib)
    sys.path.insert(0, str(HERE))

from tt_support import Baselines, Host, docker_unavailable, kill_pids, marker_files, processes_with, remove_markers  # noqa: E402


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The sandbox backend of a case (parametrized indirectly); docker cases skip without an engine,
    unless GRADER_REQUIRE_DOCKER=1, which turns the skip into a failure."""
    name: str = request.param
    if name == "docker":
        reason = docker_unavailable()
        if reason is not None:
            if os.environ.get("GRADER_REQUIRE_DOCKER") == "1":
                pytest.fail(f"GRADER_REQUIRE_DOCKER=1 but {reason}")
            pytest.skip(reason)
    return name


@pytest.fixture(scope="session")
def fast_rubric(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module-11 rubric with its timeouts cut down, so that denial-of-service cases end in seconds."""
    return fast_rubric_file(tmp_path_factory.mktemp("rubric"), 2, 4, 8)


@pytest.fixture(scope="session")
def template_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A grader cache with a pristine bundle and compiled schema (no expected outputs), copied per case."""
    return tmp_path_factory.mktemp("template-cache")


@pytest.fixture(scope="session")
def baselines(fast_rubric: Path, tmp_path_factory: pytest.TempPathFactory, template_cache: Path) -> Baselines:
    return Baselines(fast_rubric, tmp_path_factory.mktemp("baselines"), template_cache)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    """A unique token and marker prefix, a listener on the host's loopback, a directory to protect.
    Afterwards: kill whatever carries the token (processes a hostile notebook started) and remove markers."""
    token = uuid.uuid4().hex[:12]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.setblocking(False)
    victim = tmp_path / f"victim-{token}"
    victim.mkdir()
    (victim / "keep.txt").write_text("must survive", encoding="utf-8")
    try:
        yield Host(token, f"/tmp/tt_pwned_{token}", listener, victim)
    finally:
        listener.close()
        kill_pids([pid for pid, _ in processes_with(token)])
        remove_markers(marker_files(token, tmp_path))
