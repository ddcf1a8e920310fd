"""Sandbox stage: run the harness on a Job and a StudentCode, somewhere isolated.

Every backend implements the ``Sandbox`` protocol. The caller owns ``workdir`` (the job's files go
there); ``run`` returns the files the harness wrote, as read back through the sandbox's capped
result stream, for ``grader.channel`` to validate. Nothing else is read from the sandbox.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..models import BackendInfo, Chunk
    from ..plan import Job


@dataclass(frozen=True)
class RunResult:
    """What the host observed: the outputs read back, the capped log, and why it killed the run."""

    outputs: Mapping[str, bytes]  # out/'s files by relative name (``import.json``, ``<check>/<name>.npy``)
    log: str
    killed: str | None
    elapsed_s: float
    isolation: tuple[str, ...] | None = None  # the layers this run's layer check verified, where the backend has one
    # The visible checks' files (and import.json) as frozen before the hidden checks' inputs existed,
    # when the run got that far: visible checks are judged from these alone, never from anything
    # (a deadline, a cut stream) that happened once the hidden checks' inputs were inside.
    frozen: Mapping[str, bytes] | None = None


class Sandbox(Protocol):
    """Runs untrusted code; never sees expected values."""

    def info(self) -> BackendInfo: ...

    def run(self, job: Job, chunks: Sequence[Chunk], workdir: Path, hide: Sequence[Path] = ()) -> RunResult: ...


@runtime_checkable
class Startable(Protocol):
    """A sandbox with warm-up and tear-down: ``start`` before the first job, ``close`` at the end."""

    def start(self) -> None: ...

    def close(self) -> None: ...


BACKENDS = ("local", "docker")  # what --backend accepts, everywhere


class HidingSandbox:
    """A sandbox that also keeps ``hide`` (e.g. Gradescope's ROOT/source with the course's files and
    seed secret, and ROOT/results) away from the student's code."""

    def __init__(self, inner: Sandbox, hide: Sequence[Path]) -> None:
        self.inner, self.hide = inner, tuple(hide)

    def info(self) -> BackendInfo:
        return self.inner.info()

    def run(self, job: Job, chunks: Sequence[Chunk], workdir: Path, hide: Sequence[Path] = ()) -> RunResult:
        return self.inner.run(job, chunks, workdir, hide=(*hide, *self.hide))

    def start(self) -> None:
        if isinstance(self.inner, Startable):
            self.inner.start()

    def close(self) -> None:
        if isinstance(self.inner, Startable):
            self.inner.close()


def make_sandbox(backend: str, official: bool = False, keep_ready: bool = True) -> Sandbox:
    """The sandbox for a ``--backend`` name; raises SandboxUnavailable with the fix when it can't run.

    ``official`` (batch, Gradescope mode): the local backend refuses unless every isolation layer
    of its mode is verified (docs/SECURITY.md); Docker is always official. ``keep_ready``: after
    each run, make the next run's sandbox ready (leave it out when no run will follow)."""
    if backend == "local":
        from .local import LocalSandbox

        return LocalSandbox(official=official, keep_ready=keep_ready)
    if backend == "docker":
        from .docker import DockerSandbox  # type: ignore[import-not-found,unused-ignore]

        return DockerSandbox(keep_ready=keep_ready)  # type: ignore[no-any-return,unused-ignore]
    from ..errors import SandboxUnavailable

    raise SandboxUnavailable(f"unknown backend {backend!r}; choose 'local' or 'docker'")
