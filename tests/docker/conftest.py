"""Fixtures of the Docker backend's tests: an engine (or a skip with the reason), the image, graders.

Without an engine the marked tests skip with the reason, unless ``GRADER_REQUIRE_DOCKER=1`` (set by
CI), which turns that skip into a failure: the Docker path can never silently stop being tested.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import fast_rubric_file

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "submissions"


def _engine_problem() -> str | None:
    try:
        import docker  # noqa: F401
    except ImportError:
        return "the Docker SDK is not installed (pip install 'tinytorch-grader[docker]')"
    from grader.errors import SandboxUnavailable
    from grader.sandbox.image import docker_client

    try:
        docker_client(timeout=20)
    except SandboxUnavailable as e:
        return str(e)
    return None


@pytest.fixture(scope="session")
def docker_client() -> Any:
    problem = _engine_problem()
    if problem is not None:
        if os.environ.get("GRADER_REQUIRE_DOCKER") == "1":
            pytest.fail(f"GRADER_REQUIRE_DOCKER=1 but no Docker engine can be used: {problem}", pytrace=False)
        pytest.skip(f"no Docker engine: {problem}")
    from grader.sandbox.image import docker_client as make

    return make()


@pytest.fixture(scope="session")
def image(docker_client: Any) -> str:
    """The sandbox image's tag, built on first use (offline unless GRADER_IMAGE_ONLINE=1)."""
    from grader.sandbox.image import build_image

    return build_image()


@pytest.fixture(scope="session")
def test_labels() -> dict[str, str]:
    """An extra label on this session's containers: the engine may be shared with other graders."""
    return {"grader.test": uuid.uuid4().hex}


@pytest.fixture(scope="session")
def sandbox(image: str, test_labels: dict[str, str]) -> Any:
    from grader.sandbox.docker import DockerSandbox

    return DockerSandbox(image, labels=test_labels)


@pytest.fixture(scope="session")
def grader_docker(sandbox: Any) -> Iterator[Any]:
    from grader import Grader

    with Grader(backend=sandbox) as g:
        yield g


@pytest.fixture(scope="session")
def fast_rubric(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module-11 rubric with short timeouts, so that hanging submissions end in seconds."""
    return fast_rubric_file(tmp_path_factory.mktemp("rubric"), 1.5, 3, 15)


@pytest.fixture
def labelled(docker_client: Any, test_labels: dict[str, str], sandbox: Any) -> Any:
    """A function listing this session's grader containers (running or not), once the session
    sandbox's background work is done, except those it keeps waiting for a job (they never ran one)."""
    from grader.sandbox.docker import LABEL

    wanted = [f"{LABEL}=1", *(f"{k}={v}" for k, v in test_labels.items())]

    def listed() -> list[Any]:
        sandbox.settle()
        waiting = {f"/{name}" for name in sandbox.waiting()}
        return [c for c in docker_client.api.containers(all=True, filters={"label": wanted})
                if not waiting & set(c.get("Names") or ())]

    return listed


@pytest.fixture
def hostile(tmp_path: Path) -> Any:
    """A function making the correct solution run ``statement`` when ``class Embedding`` is defined."""

    def make(name: str, statement: str) -> Path:
        source = (SUBMISSIONS / "correct_source.py").read_text(encoding="utf-8")
        patched = source.replace("class Embedding:\n", f"class Embedding:\n    {statement}\n", 1)
        assert patched != source
        path = tmp_path / f"{name}.py"
        path.write_text(patched, encoding="utf-8")
        return path

    return make
