"""Intake: load and extract a submission in a child process bounded in time and memory.

Reading a submission runs parsers on bytes a student wrote: JSON, YAML (jupytext headers), nbformat's
converters, and Python's own ``ast``, ``compile`` and ``symtable``. Each has inputs that cost it
minutes or gigabytes, or crash it (nesting too deep, aliases that expand exponentially). So load and
extract run in a forked child with an address-space limit, a CPU-time limit and a wall-clock
deadline, and hand back plain JSON. Whatever happens in there costs only that submission: a one-line
``SubmissionError``. A fork of the warm grading process costs about a millisecond, and the parsers
the child had to import are imported here afterwards, so that the next child inherits them.
"""

from __future__ import annotations

import gc
import importlib
import json
import math
import os
import resource
import select
import signal
import sys
import threading
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from . import nbschema
from .errors import GraderError, SubmissionError
from .extract import extract, extract_unlocked
from .load import LoadLimits, load_submission
from .models import StudentModule, Submission, shown

MAX_REPLY_BYTES = 256 * 1024 * 1024
_LAZY_MODULES = ("jupytext", "nbformat")  # imported by load only for the files that need them
_FORK_LOCK = threading.Lock()


@dataclass(frozen=True)
class Intake:
    submission: Submission
    module: StudentModule


def read_submission(path: str | os.PathLike[str], targets: Sequence[str],
                    limits: LoadLimits = LoadLimits()) -> Intake:
    """Load and extract ``path`` in a bounded child; SubmissionError with a one-line reason if it
    cannot be read, GraderError if the grader itself failed on it."""
    if not hasattr(os, "fork"):
        return Intake(*_read(path, targets, limits, lock=True))
    name = shown(Path(path).name)
    with _FORK_LOCK:  # no other intake child may inherit this pipe's write end
        r, w = os.pipe()
        with warnings.catch_warnings():  # Python 3.12+ warns about forking with threads; the child
            warnings.simplefilter("ignore", DeprecationWarning)  # takes no lock another thread may hold
            pid = os.fork()
        if pid == 0:
            _child(w, path, targets, limits)
        os.close(w)
    try:
        reply = _collect(r, pid, name, limits)
    finally:
        os.close(r)
    if "error" in reply:
        raise SubmissionError(str(reply["error"]))
    if "internal" in reply:
        raise GraderError(f"{name}: internal grader error while reading it, please report it: {reply['internal']}")
    _warm(reply.get("warm", {}))
    return Intake(Submission.model_validate(reply["submission"]), StudentModule.model_validate(reply["module"]))


def _read(path: str | os.PathLike[str], targets: Sequence[str], limits: LoadLimits,
          *, lock: bool) -> tuple[Submission, StudentModule]:
    submission = load_submission(path, limits)
    return submission, (extract if lock else extract_unlocked)(submission, targets)


def _child(w: int, path: str | os.PathLike[str], targets: Sequence[str], limits: LoadLimits) -> NoReturn:
    """Read the submission and write the outcome as JSON to ``w``; never returns."""
    code = 0
    try:
        _quiet_and_bounded(w, limits)
        name = shown(Path(path).name)
        try:
            submission, module = _read(path, targets, limits, lock=False)
            reply: dict[str, Any] = {
                "submission": submission.model_dump(mode="json"), "module": module.model_dump(mode="json"),
                "warm": {"modules": [m for m in _LAZY_MODULES if m in sys.modules],
                         "schemas": sorted(nbschema.compiled())},
            }
        except SubmissionError as e:
            reply = {"error": str(e)}
        except MemoryError:
            reply = {"error": f"{name}: reading it needs more than the {limits.max_memory_mb} MB the grader allows; "
                              "is something in it built to be expensive to parse?"}
        except RecursionError:
            reply = {"error": f"{name}: nested too deeply to be read"}
        except Exception as e:  # a fault of the grader on this input: reported as such, never scored
            reply = {"internal": f"{type(e).__name__}: {str(e)[:300]}"}
        data = json.dumps(reply).encode()
        while data:
            data = data[os.write(w, data):]
    except BaseException:
        code = 1
    os._exit(code)


def _quiet_and_bounded(w: int, limits: LoadLimits) -> None:
    """In the child: no inherited descriptors but ``w``, no output, and the memory and CPU limits."""
    gc.disable()  # a collection would touch, and so copy, every page of the parent's heap
    os.closerange(3, w)
    os.closerange(w + 1, _max_fd())
    # Another thread of the parent may hold the lock of sys.stderr's buffer: never write to it.
    sys.stdout = sys.stderr = None
    sys.unraisablehook = lambda _: None
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    seconds = max(1, math.ceil(limits.max_seconds))
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))  # SIGXCPU, then SIGKILL
    size = _address_space()
    if size is not None:
        cap = size + limits.max_memory_mb * 1024 * 1024
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))


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


def _collect(r: int, pid: int, name: str, limits: LoadLimits) -> dict[str, Any]:
    """The child's reply; SubmissionError if it ran out of time or memory, or died."""
    wall = _wall_seconds(limits)
    deadline = time.monotonic() + wall
    poller = select.poll()
    poller.register(r, select.POLLIN)
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SubmissionError(f"{name}: reading it took more than {wall:g} s; is something in it built "
                                      "to be slow to parse (YAML aliases, deeply nested code)?")
            if not poller.poll(left * 1000):
                continue
            chunk = os.read(r, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_REPLY_BYTES:
                raise SubmissionError(f"{name}: too large once read")
            chunks.append(chunk)
    except BaseException:
        _kill(pid)
        raise
    status = _reap(pid)
    if not chunks:
        raise SubmissionError(f"{name}: {_death(status, limits)}")
    reply = json.loads(b"".join(chunks))
    if not isinstance(reply, dict):
        raise GraderError(f"{name}: internal grader error while reading it: the reader sent no result")
    return reply


def _wall_seconds(limits: LoadLimits) -> float:
    """The wall-clock deadline: CPU time is the budget (a child that spends it gets SIGXCPU); the
    deadline, with room for a machine busy grading a class in parallel, ends a child that waits."""
    return limits.max_wall_seconds if limits.max_wall_seconds is not None else 3 * limits.max_seconds + 1


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _reap(pid)


def _reap(pid: int) -> int:
    """The child's wait status; 0 if something else reaped it (SIGCHLD ignored by an embedding program)."""
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return 0


def _death(status: int, limits: LoadLimits) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig in (signal.SIGXCPU, signal.SIGKILL):  # SIGKILL: the hard CPU limit (the parent's kill raises first)
            return (f"reading it took more than {max(1, math.ceil(limits.max_seconds))} s of CPU time; is something "
                    "in it built to be slow to parse (YAML aliases, deeply nested code)?")
        return (f"reading it crashed the parser (signal {sig}); is something in it nested too deeply "
                "or built to be expensive to parse?")
    return f"reading it failed (exit status {os.WEXITSTATUS(status)}); it may be too large or too deeply nested"


def _warm(warm: dict[str, Any]) -> None:
    """Import here what the child had to import, so that the next child inherits it."""
    for module in warm.get("modules", ()):
        if module in _LAZY_MODULES and module not in sys.modules:
            importlib.import_module(module)
    for minor in warm.get("schemas", ()):
        if isinstance(minor, int):
            nbschema.warm(minor)
