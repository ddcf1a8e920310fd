"""The harness: ``main(phase_fd)``, called by the supervisor in a forked child, in a job directory.

The job directory holds ``job.json`` (checks with inputs) and ``student.json`` (code chunks).
Results go to ``out/``: ``import.json``, then per check ``<id>.json``, ``<id>/<name>.npy`` and,
when the child did not report itself, ``<id>.status.json`` written by this parent.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
import traceback
import types
from typing import Any

from .npyio import write_arrays

# Bound before any student code runs, so that rebinding os.* later cannot reach the harness.
_fork, _exit, _waitpid, _kill, _killpg = os.fork, os._exit, os.waitpid, os.kill, os.killpg
_pidfd_open, _replace, _monotonic = os.pidfd_open, os.replace, time.monotonic

MAX_MESSAGE = 600
OUT = "out"


def main(phase_fd: int | None = None) -> None:
    """Sandbox mode: one job in the current directory, one forked child per check.

    With ``phase_fd`` (the supervisor, harness/supervisor.py), ``job.json`` holds only the visible
    checks; once they are done the harness asks for the rest (``H``), and after ``G`` reads
    ``job-hidden.json``.
    """
    job = _read_json("job.json")
    chunks = _read_json("student.json")["chunks"]
    os.makedirs(OUT, exist_ok=True)
    probes = _prepare(job)
    namespace, chunk_errors = import_student(chunks)
    _write_json(
        os.path.join(OUT, "import.json"),
        {"chunk_errors": chunk_errors, "defined": sorted(k for k in namespace if not k.startswith("__"))},
    )
    run_checks(job["checks"], probes, namespace, int(job.get("parallel", 1)))
    if phase_fd is not None and job.get("more"):
        _write_all(phase_fd, b"H")
        if os.read(phase_fd, 1) == b"G":
            run_checks(_read_json("job-hidden.json")["checks"], probes, namespace, int(job.get("parallel", 1)))
    _exit(0)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


def serve(chunks_file: str) -> None:
    """Trusted mode, for the reference solution only: import it once, then run each job directory
    named on stdin in-process (no fork, no limits) and answer ``done`` on stdout."""
    namespace, chunk_errors = import_student(_read_json(chunks_file)["chunks"])
    if chunk_errors:
        raise RuntimeError(f"the reference solution does not import: {chunk_errors}")
    for line in sys.stdin:
        job_dir = line.strip()
        job = _read_json(os.path.join(job_dir, "job.json"))
        probes = _prepare(job)
        out = os.path.join(job_dir, OUT)
        os.makedirs(out, exist_ok=True)
        for check in job["checks"]:
            record, arrays = execute_probe(check, probes[check["probe"]], namespace)
            write_result(out, check["id"], record, arrays)
        sys.stdout.write("done\n")
        sys.stdout.flush()


def _prepare(job: dict[str, Any]) -> dict[str, Any]:
    sys.setrecursionlimit(3000)
    import resource  # noqa: F401  (imported once here, not in every forked child)

    import numpy as np

    # numpy.random initialises lazily (about 15 ms); do it once before forking, seeded so that
    # unseeded student initialisations are reproducible from run to run.
    np.random.seed(int(job.get("numpy_seed", job.get("seed", 0))) % 2**32)
    from .probes import load_probes

    return load_probes(job["probes"])


def import_student(chunks: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Execute each kept statement on its own; a failing one is recorded and skipped."""
    module = types.ModuleType("submission")
    sys.modules["submission"] = module
    namespace = module.__dict__
    errors = []
    for chunk in chunks:
        filename = f"<cell {chunk['cell']}>"
        try:
            code = compile("\n" * (chunk["line"] - 1) + chunk["source"], filename, "exec")
            exec(code, namespace)
        except BaseException as e:  # student code: anything may escape, even SystemExit
            errors.append(
                {"cell": chunk["cell"], "line": chunk["line"], "defines": chunk.get("defines", []),
                 "error": describe_exception(e)}
            )
    return namespace, errors


def run_checks(checks: list[dict[str, Any]], probes: dict[str, Any], namespace: dict[str, Any],
               parallel: int) -> None:
    """Run every check in its own forked child, at most ``parallel`` at a time, each with its own
    wall-clock timeout; whatever one child does, the others still run."""
    pending = list(checks)
    running: dict[int, tuple[dict[str, Any], int, float]] = {}  # pidfd -> (check, pid, started)
    while pending or running:
        while pending and len(running) < max(1, parallel):
            check = pending.pop(0)
            started = _monotonic()
            try:
                pid = _fork()
            except OSError as e:  # e.g. the job's own processes fill its process limit
                _write_json(os.path.join(OUT, f"{check['id']}.status.json"),
                            {"check": check["id"], "status": "crashed", "duration_ms": 0.0,
                             "reason": f"the check could not start: {e.strerror} (too many processes?)"})
                continue
            if pid == 0:
                _child(check, probes[check["probe"]], namespace, float(check["timeout_s"]))
            running[_pidfd_open(pid)] = (check, pid, started)
        if not running:
            continue
        now = _monotonic()
        next_deadline = min(started + float(check["timeout_s"]) for check, _, started in running.values())
        ready, _, _ = select.select(list(running), [], [], max(0.0, next_deadline - now))
        now = _monotonic()
        for fd in list(running):
            check, pid, started = running[fd]
            timed_out = fd not in ready and now >= started + float(check["timeout_s"])
            if fd in ready or timed_out:
                del running[fd]
                os.close(fd)
                _finish(check, pid, started, timed_out)


def _finish(check: dict[str, Any], pid: int, started: float, timed_out: bool) -> None:
    """Reap one check's child (killing its group) and, if it did not report, record why."""
    for kill in (_killpg, _kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        _, wait_status = _waitpid(pid, 0)
    except ChildProcessError:
        wait_status = 0
    status: dict[str, Any] = {"check": check["id"]}
    if timed_out:
        status["status"] = "timeout"
    elif os.WIFSIGNALED(wait_status):
        sig = os.WTERMSIG(wait_status)
        status["signal"] = sig
        status["status"] = {int(signal.SIGXCPU): "timeout", int(signal.SIGKILL): "oom"}.get(sig, "crashed")
    else:
        status["exit_code"] = os.WEXITSTATUS(wait_status)
        status["status"] = "crashed"
    status["duration_ms"] = round((_monotonic() - started) * 1000, 1)
    if timed_out or not os.path.exists(os.path.join(OUT, f"{check['id']}.json")):
        _write_json(os.path.join(OUT, f"{check['id']}.status.json"), status)


def _child(check: dict[str, Any], probe: Any, namespace: dict[str, Any], timeout: float) -> None:
    import resource

    try:
        os.setpgid(0, 0)
        cpu = int(timeout) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    except (OSError, ValueError):
        pass
    record, arrays = execute_probe(check, probe, namespace)
    try:
        write_result(OUT, check["id"], record, arrays)
    except BaseException:
        _exit(3)
    _exit(0)


def execute_probe(check: dict[str, Any], probe: Any, namespace: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run one probe, turning every exception into data: (record, arrays)."""
    started = _monotonic()
    record: dict[str, Any] = {"check": check["id"]}
    arrays: dict[str, Any] = {}
    try:
        outputs = probe.run(namespace, probe.decode(check["inputs"]))
        facts, arrays = probe.split(outputs)
        record.update(status="ok", facts=facts, arrays=sorted(arrays))
    except MemoryError as e:
        record.update(status="oom", error=describe_exception(e))
    except BaseException as e:  # student code under test: report every escape as data
        record.update(status="error", error=describe_exception(e))
    record["duration_ms"] = round((_monotonic() - started) * 1000, 1)
    return record, arrays


def write_result(out: str, check_id: str, record: dict[str, Any], arrays: dict[str, Any]) -> None:
    write_arrays(os.path.join(out, check_id), arrays)
    _write_json(os.path.join(out, f"{check_id}.json"), record)


def describe_exception(e: BaseException) -> dict[str, Any]:
    """Exception class, message and the innermost student-code location, all truncated."""
    where = None
    for frame in traceback.extract_tb(e.__traceback__):
        if frame.filename.startswith("<cell "):
            where = f"{frame.filename[1:-1]}, line {frame.lineno}, in {frame.name}"
    try:
        message = str(e)
    except BaseException:
        message = "<unprintable>"
    return {"type": type(e).__name__[:80], "message": message[:MAX_MESSAGE], "where": where}


def _read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _write_json(path: str, data: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, default=str)
    _replace(tmp, path)
