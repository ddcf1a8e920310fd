"""Run the harness as a child process with host-side deadlines and capped output."""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from ..plan import Job

OUTPUT_CAP = 1024 * 1024


class Background:
    """Work that the answer need not wait for (removing a finished job or container, readying the
    next sandbox), on daemon threads; ``wait`` returns once all of it, and what it started, is done.
    A failure there is dropped: a sandbox that could not be readied is made again when needed, and
    what could not be removed is swept at close."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()

    def later(self, fn: Callable[..., object], *args: object) -> None:
        def work() -> None:
            try:
                fn(*args)
            except Exception:
                pass
            finally:
                with self._lock:
                    self._threads.discard(thread)

        thread = threading.Thread(target=work, daemon=True)
        # Started under the lock, so ``wait`` never sees a thread that is not started yet (joining
        # one raises); ``start`` returns before ``work`` runs, so ``work``'s own use of the lock waits.
        with self._lock:
            self._threads.add(thread)
            thread.start()

    def wait(self) -> None:
        while True:
            with self._lock:
                threads = list(self._threads)
            if not threads:
                return
            for thread in threads:
                thread.join()


def deadlines(job: Job) -> tuple[float, float]:
    """(seconds to finish importing, seconds for the whole run), enforced by the host."""
    checks = sum(c.timeout_s + 0.5 for c in job.checks)
    return job.import_timeout_s, min(job.total_timeout_s, job.import_timeout_s + checks + 2.0)


def overdue(imported: bool, elapsed: float, import_deadline: float, total_deadline: float) -> str | None:
    """Why the host must stop a run now, if it must: its import or its whole budget ran out."""
    if not imported and elapsed > import_deadline:
        return f"importing the module took longer than {import_deadline:g} s"
    if elapsed > total_deadline:
        return f"the whole run took longer than {total_deadline:g} s"
    return None


class CappedReader(threading.Thread):
    """Drain a pipe, keeping at most ``cap`` bytes so a flood can neither block nor exhaust us."""

    def __init__(self, stream: IO[bytes], cap: int = OUTPUT_CAP) -> None:
        super().__init__(daemon=True)
        self.stream, self.cap, self.kept, self.dropped = stream, cap, bytearray(), 0
        self._fd = stream.fileno()
        self._lock = threading.Lock()  # held from each read until its bytes are kept

    def run(self) -> None:
        while True:
            select.select([self._fd], [], [])
            with self._lock:
                chunk = os.read(self._fd, 65536)
                if not chunk:
                    return
                room = self.cap - len(self.kept)
                self.kept += chunk[:room]
                self.dropped += max(0, len(chunk) - room)

    def settle(self, timeout: float) -> None:
        """Wait until everything written so far is kept: the writers' end closed, or nothing is
        left in the pipe (for writers known to be done)."""
        end = time.monotonic() + timeout
        while self.is_alive() and time.monotonic() < end:
            with self._lock:
                if _pending(self._fd) == 0:
                    return
            time.sleep(0.0005)

    def text(self) -> str:
        tail = f"\n[... {self.dropped} more bytes dropped]" if self.dropped else ""
        return self.kept.decode("utf-8", "replace") + tail


def _pending(fd: int) -> int:
    """Bytes waiting in a pipe (FIONREAD); -1 when it cannot be told."""
    import fcntl
    import termios

    buf = bytearray(4)
    try:
        fcntl.ioctl(fd, termios.FIONREAD, buf)
    except OSError:
        return -1
    return int.from_bytes(buf, sys.byteorder)


class ForkedWorker:
    """A worker process that is not our child (the local zygote forked it), driven like a
    ``subprocess.Popen`` with text pipes: ``poll``, ``kill``, ``wait`` through its pidfd."""

    def __init__(self, pid: int, pidfd: int, stdin: int, stdout: int, stderr: int) -> None:
        self.pid, self._pidfd = pid, pidfd
        self.stdin: IO[str] | None = os.fdopen(stdin, "w", encoding="utf-8")
        self.stdout: IO[str] | None = os.fdopen(stdout, "r", encoding="utf-8")
        self.stderr: IO[str] | None = os.fdopen(stderr, "r", encoding="utf-8", errors="replace")
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self._pidfd >= 0 and select.select([self._pidfd], [], [], 0)[0]:
            self.returncode = -1  # ended (its status went to its parent, the zygote)
        return self.returncode

    def kill(self) -> None:
        if self._pidfd >= 0 and self.poll() is None:
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def wait(self, timeout: float | None = None) -> int:
        import subprocess

        if self._pidfd >= 0 and not select.select([self._pidfd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired("reference worker", timeout or 0.0)
        self.returncode = -1 if self.returncode is None else self.returncode
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1
        return self.returncode
