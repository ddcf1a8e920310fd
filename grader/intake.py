"""Intake: load and extract a submission in a worker process bounded in time and memory.

Reading a submission runs parsers on bytes a student wrote: JSON, YAML (jupytext headers), nbformat's
converters, and Python's own ``ast``, ``compile`` and ``symtable``. Each has inputs that cost it
minutes or gigabytes, or crash it (nesting too deep, aliases that expand exponentially). So load and
extract never run in the grading process: they run in a worker forked from it, which reads one file
at a time under an address-space limit, a CPU-time limit and a wall-clock deadline, and answers
with plain JSON. Whatever happens in there costs only that file: a one-line ``SubmissionError``.

A worker that failed, ran out of a limit or grew is replaced by a fresh fork; one that answered
stays for the next file. Forking per file would cost each file about 10 ms of copy-on-write
faults; a warm worker costs what reading in-process did. Each thread has its own worker (batch
grading reads in several threads at once). A worker only parses: no student code runs there.
"""

from __future__ import annotations

import json
import math
import os
import resource
import select
import signal
import struct
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

from .errors import GraderError, SubmissionError
from .extract import extract, extract_unlocked
from .load import LoadLimits, load_submission
from .models import StudentCode, Submission, shown

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
_FORK_LOCK = threading.Lock()
_LOCAL = threading.local()


@dataclass(frozen=True)
class Intake:
    submission: Submission
    code: StudentCode


def read_submission(path: str | os.PathLike[str], targets: Sequence[str],
                    limits: LoadLimits = LoadLimits()) -> Intake:
    """Load and extract ``path`` in this thread's bounded worker; SubmissionError with a one-line
    reason if it cannot be read, GraderError if the grader itself failed on it."""
    if not hasattr(os, "fork"):
        submission = load_submission(path, limits)
        return Intake(submission, extract(submission, targets))
    reply = _request(path, list(targets), limits)
    return Intake(Submission.model_validate(reply["submission"]), StudentCode.model_validate(reply["code"]))


def load_bounded(path: str | os.PathLike[str], limits: LoadLimits = LoadLimits()) -> Submission:
    """Load ``path`` (no extraction) in this thread's bounded worker, as ``read_submission`` does:
    what the service does to an upload before it accepts it."""
    if not hasattr(os, "fork"):
        return load_submission(path, limits)
    return Submission.model_validate(_request(path, None, limits)["submission"])


def _request(path: str | os.PathLike[str], targets: list[str] | None, limits: LoadLimits) -> dict[str, Any]:
    """The worker's answer to one file (``targets`` None: load only), or its refusal raised."""
    name = shown(Path(path).name)
    request = {"path": os.path.abspath(path), "targets": targets, "limits": asdict(limits)}
    reply = _ask(request, limits, name)
    if reply.get("retire"):
        shutdown()
    if "error" in reply:
        raise SubmissionError(str(reply["error"]))
    if reply.get("missing"):  # the entry point says which dependency to install (grader/deps.py)
        raise ModuleNotFoundError(f"No module named {reply['missing']!r}", name=str(reply["missing"]))
    if "internal" in reply:
        raise GraderError(f"{name}: internal grader error while reading it, please report it: {reply['internal']}")
    return reply


def _ask(request: dict[str, Any], limits: LoadLimits, name: str) -> dict[str, Any]:
    """This thread's worker's answer. A warm worker that died (killed from outside since its last
    answer, say) gets one fresh successor before the file is blamed; a file that ran out of time
    is blamed at once."""
    while True:
        worker: _Worker | None = getattr(_LOCAL, "worker", None)
        fresh = worker is None
        if worker is None:
            worker = _LOCAL.worker = _Worker()
        try:
            return worker.ask(request, _wall_seconds(limits))
        except _WorkerGone as gone:
            shutdown()
            if fresh or gone.spent_its_time():
                raise SubmissionError(f"{name}: {gone.reason(limits)}") from None
        except BaseException:  # an answer half read (or not read) leaves the worker out of step: replace it
            shutdown()
            raise


def shutdown() -> None:
    """End this thread's worker (the next read forks a fresh one)."""
    worker: _Worker | None = getattr(_LOCAL, "worker", None)
    _LOCAL.worker = None
    if worker is not None:
        worker.stop()


def _wall_seconds(limits: LoadLimits) -> float:
    """The wall-clock deadline: CPU time is the budget (a worker that spends it gets SIGXCPU); the
    deadline, with room for a machine busy grading a class in parallel, ends a worker that waits."""
    return limits.max_wall_seconds if limits.max_wall_seconds is not None else 3 * limits.max_seconds + 1


class _Deadline(Exception):
    """The wall-clock deadline passed (not TimeoutError: that is an OSError, which means a dead worker)."""


class _WorkerGone(Exception):
    """The worker died, or was killed at the deadline, before it answered."""

    def __init__(self, status: int | None, *, timed_out: bool = False) -> None:
        super().__init__(status)
        self.status, self.timed_out = status, timed_out

    def spent_its_time(self) -> bool:
        return self.timed_out or (self.status is not None and os.WIFSIGNALED(self.status)
                                  and os.WTERMSIG(self.status) == signal.SIGXCPU)

    def reason(self, limits: LoadLimits) -> str:
        hint = "is something in it built to be slow or expensive to parse (YAML aliases, deeply nested code)?"
        status = self.status
        if self.timed_out:
            return f"reading it took more than {_wall_seconds(limits):g} s; {hint}"
        if status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL):
            return f"reading it took more than {max(1, math.ceil(limits.max_seconds))} s of CPU time; {hint}"
        if status is not None and os.WIFSIGNALED(status):
            return f"reading it crashed the parser (signal {os.WTERMSIG(status)}); {hint}"
        return f"reading it failed (the reader ended, status {status}); {hint}"


class _Worker:
    """One forked worker and the two pipes to it; killed and reaped when stopped or dropped."""

    def __init__(self) -> None:
        with _FORK_LOCK:  # no other worker may inherit this worker's ends of the pipes
            req_r, req_w = os.pipe()
            rep_r, rep_w = os.pipe()
            try:
                with warnings.catch_warnings():  # Python 3.12+ warns about forking with threads; the
                    warnings.simplefilter("ignore", DeprecationWarning)  # worker takes no lock they may hold
                    pid = os.fork()
            except BaseException:
                for fd in (req_r, req_w, rep_r, rep_w):
                    os.close(fd)
                raise
            if pid == 0:
                _serve(req_r, rep_w)
            os.close(req_r)
            os.close(rep_w)
        self.pid, self.req, self.rep = pid, req_w, rep_r
        self._state: dict[str, int | None] = {}  # "status" once reaped: its pid may then belong to another process
        self._stop = weakref.finalize(self, _stop_worker, os.getpid(), pid, req_w, rep_r, self._state)

    def ask(self, request: dict[str, Any], wall_seconds: float) -> dict[str, Any]:
        """Send one request and wait for the answer, at most ``wall_seconds``."""
        deadline = time.monotonic() + wall_seconds
        try:
            _send(self.req, request)
            size = struct.unpack(">I", self._read(4, deadline))[0]
            if size > MAX_MESSAGE_BYTES:
                raise GraderError("internal grader error: the intake worker's answer is too large")
            reply = json.loads(self._read(size, deadline))
        except _Deadline:
            raise _WorkerGone(None, timed_out=True) from None
        except (OSError, EOFError):  # it died: collect why
            raise _WorkerGone(_reap(self.pid, self._state)) from None
        if not isinstance(reply, dict):
            raise GraderError("internal grader error: the intake worker sent no result")
        return reply

    def _read(self, n: int, deadline: float) -> bytes:
        chunks, got = [], 0
        poller = select.poll()
        poller.register(self.rep, select.POLLIN)
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Deadline
            if not poller.poll(left * 1000):
                continue
            chunk = os.read(self.rep, min(n - got, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def stop(self) -> None:
        self._stop()


def _stop_worker(owner: int, pid: int, req: int, rep: int, state: dict[str, int | None]) -> None:
    """Close the pipes, then kill and reap the worker unless it was reaped already. Only in the
    process that started it: a worker forked from another thread inherits this object, which
    dies there with that thread, and must then leave its sibling (and descriptor numbers) alone."""
    if os.getpid() != owner:
        return
    for fd in (req, rep):
        try:
            os.close(fd)
        except OSError:
            pass
    if "status" not in state:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _reap(pid, state)


def _reap(pid: int, state: dict[str, int | None]) -> int | None:
    """Wait for the worker to end; its wait status (None if something else reaped it)."""
    if "status" not in state:
        try:
            state["status"] = os.waitpid(pid, 0)[1]
        except ChildProcessError:  # already reaped: SIGCHLD ignored by a program embedding the grader
            state["status"] = None
    return state["status"]


def _send(fd: int, message: dict[str, Any]) -> None:
    data = json.dumps(message).encode()
    data = struct.pack(">I", len(data)) + data
    while data:
        data = data[os.write(fd, data):]


# ---- in the worker ------------------------------------------------------------------------------


def _serve(req: int, rep: int) -> NoReturn:
    """The worker's loop: one request at a time, until the grading process closes the pipe."""
    code = 0
    try:
        _quiet(req, rep)
        start = _address_space()
        with os.fdopen(req, "rb") as requests:
            while True:
                header = requests.read(4)
                if len(header) < 4:
                    break
                request = json.loads(requests.read(struct.unpack(">I", header)[0]))
                limits = LoadLimits(**request["limits"])
                reply = _answer(request["path"], request["targets"], limits)
                size = _address_space()
                if start is not None and size is not None and size - start > limits.max_memory_mb << 19:
                    reply["retire"] = True  # it grew by half its budget: a fresh fork serves the next file
                _send(rep, reply)
                if reply.get("retire"):
                    break
    except BaseException:
        code = 1
    os._exit(code)


def _answer(path: str, targets: Sequence[str] | None, limits: LoadLimits) -> dict[str, Any]:
    """Read one file within this request's limits (``targets`` None: load only); any failure is an
    answer, never an exception. ``retire``: the worker ends after answering (its state after such a
    failure is not trusted)."""
    name = shown(Path(path).name)
    try:
        _limit(limits)
        submission = load_submission(path, limits)
        if targets is None:
            return {"submission": submission.model_dump(mode="json")}
        code = extract_unlocked(submission, targets)
        return {"submission": submission.model_dump(mode="json"), "code": code.model_dump(mode="json")}
    except SubmissionError as e:
        return {"error": str(e)}
    except MemoryError:
        return {"retire": True,
                "error": f"{name}: reading it needs more than the {limits.max_memory_mb} MB the grader allows; "
                         "is something in it built to be expensive to parse?"}
    except RecursionError:
        return {"retire": True, "error": f"{name}: nested too deeply to be read"}
    except ModuleNotFoundError as e:  # the install lacks a dependency: raised again in the grading process
        return {"retire": True, "missing": e.name or "", "internal": f"{type(e).__name__}: {str(e)[:300]}"}
    except Exception as e:  # a fault of the grader on this input: reported as such, never scored
        return {"retire": True, "internal": f"{type(e).__name__}: {str(e)[:300]}"}


def _quiet(*keep: int) -> None:
    """No inherited descriptors but ``keep``, no output, no core dumps."""
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, _max_fd())
    # Another thread of the parent may have held the lock of sys.stderr's buffer when it forked.
    sys.stdout = sys.stderr = None
    sys.unraisablehook = lambda _: None
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _limit(limits: LoadLimits) -> None:
    """This request's budget: ``max_seconds`` more CPU time, ``max_memory_mb`` more address space."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    # Only soft limits move (a process may not raise a hard limit it lowered); SIGXCPU ends the worker.
    _soft_limit(resource.RLIMIT_CPU, math.ceil(usage.ru_utime + usage.ru_stime + max(1.0, limits.max_seconds)))
    size = _address_space()
    if size is not None:
        _soft_limit(resource.RLIMIT_AS, size + limits.max_memory_mb * 1024 * 1024)


def _soft_limit(kind: int, value: int) -> None:
    hard = resource.getrlimit(kind)[1]
    resource.setrlimit(kind, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))


def _max_fd() -> int:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY and soft > 0 else 65536


def _address_space() -> int | None:
    """This process's virtual size in bytes (what RLIMIT_AS counts), or None where unknown."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
