"""Run the harness as a child process with host-side deadlines and capped output."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from ..models import Chunk
    from ..plan import Job

OUTPUT_CAP = 1024 * 1024
POLL_S = 0.01


def write_job(workdir: Path, job: Job, chunks: Sequence[Chunk]) -> None:
    """The two input files of the harness; the only things besides the bundle that go in."""
    (workdir / "out").mkdir(parents=True, exist_ok=True)
    (workdir / "job.json").write_text(job.model_dump_json(), encoding="utf-8")
    student = {"chunks": [c.model_dump() for c in chunks]}
    (workdir / "student.json").write_text(json.dumps(student), encoding="utf-8")


def deadlines(job: Job) -> tuple[float, float]:
    """(seconds to finish importing, seconds for the whole run), enforced by the host."""
    checks = sum(c.timeout_s + 0.5 for c in job.checks)
    return job.import_timeout_s, min(job.total_timeout_s, job.import_timeout_s + checks + 2.0)


class CappedReader(threading.Thread):
    """Drain a pipe, keeping at most ``cap`` bytes so a flood can neither block nor exhaust us."""

    def __init__(self, stream: IO[bytes], cap: int = OUTPUT_CAP) -> None:
        super().__init__(daemon=True)
        self.stream, self.cap, self.kept, self.dropped = stream, cap, bytearray(), 0

    def run(self) -> None:
        while chunk := self.stream.read(65536):
            room = self.cap - len(self.kept)
            self.kept += chunk[:room]
            self.dropped += max(0, len(chunk) - room)

    def text(self) -> str:
        tail = f"\n[... {self.dropped} more bytes dropped]" if self.dropped else ""
        return self.kept.decode("utf-8", "replace") + tail


class HarnessProcess:
    """A harness started ahead of time: it imports numpy and the runtime, then waits for ``go``.

    Spawning early overlaps the interpreter's start-up with the host's own work; student code
    only arrives with the job, after ``go``.
    """

    def __init__(self, argv: list[str], workdir: Path, env: dict[str, str],
                 preexec: Callable[[], None] | None = None) -> None:
        self.workdir = workdir
        self.proc = subprocess.Popen(
            argv, cwd=workdir, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=preexec, close_fds=True,
        )
        assert self.proc.stdout is not None
        self.reader = CappedReader(self.proc.stdout)
        self.reader.start()

    def supervise(self, job: Job) -> tuple[str, str | None]:
        """Send ``go``, enforce the import and total deadlines, kill the whole group at the end.

        Returns (captured output, reason the host killed it or None).
        """
        import_deadline, total_deadline = deadlines(job)
        killed: str | None = None
        marker = self.workdir / "out" / "import.json"
        pidfd = os.pidfd_open(self.proc.pid)
        started = time.monotonic()
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(b"go\n")
            self.proc.stdin.close()
        except OSError:
            pass  # it died already: the loop below sees that at once
        try:
            while True:
                elapsed = time.monotonic() - started
                imported = marker.exists()
                if not imported and elapsed > import_deadline:
                    killed = f"importing the module took longer than {import_deadline:g} s"
                    break
                if elapsed > total_deadline:
                    killed = f"the whole run took longer than {total_deadline:g} s"
                    break
                wait = total_deadline - elapsed if imported else min(POLL_S, import_deadline - elapsed)
                if select.select([pidfd], [], [], max(wait, 0.0))[0]:
                    break  # the harness exited
        finally:
            os.close(pidfd)
            self.kill()
        return self.reader.text(), killed

    def kill(self) -> None:
        kill_group(self.proc.pid)
        self.proc.wait()
        self.reader.join(timeout=2)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
