"""The harness: ``main(phase_fd)``, called by the supervisor in a forked child, in a job directory.

The job directory holds ``job.json`` (checks with inputs) and ``student.json`` (code chunks).
Results go to ``out/``: ``import.json``, then per check ``<id>.json``, ``<id>/<name>.npy`` and,
when the check's runner did not report it, ``<id>.status.json`` written by this parent
(``harness/runners.py`` runs the checks).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
import types
from typing import Any

from .npyio import write_arrays
from .probes.common import RAISED, take_caught
from .records import stamped, status_file
from .runners import Runners
from .unitfiles import install

# Bound before any student code runs, so that rebinding os.* later cannot reach the harness.
_exit, _replace, _monotonic = os._exit, os.replace, time.monotonic

MAX_MESSAGE = 600
OUT = "out"


def main(phase_fd: int | None = None) -> None:
    """Sandbox mode: one job in the current directory; each check runs in its own process forked
    after the import (``harness/runners.py``).

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
    runners = run_checks(job["checks"], probes, namespace, int(job.get("parallel", 1)))
    if phase_fd is not None and job.get("more"):
        _write_all(phase_fd, b"H")
        if os.read(phase_fd, 1) == b"G":
            run_checks(_read_json("job-hidden.json")["checks"], probes, namespace, int(job.get("parallel", 1)), runners)
    runners.close()
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

    install(job["probes"], job.get("probe_files") or {})  # before any student code: the unit comes with the job
    return load_probes(job["probes"])


def import_student(chunks: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Execute each kept statement on its own; a failing one is recorded and skipped."""
    program = types.ModuleType("submission")
    sys.modules["submission"] = program
    namespace = program.__dict__
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
               parallel: int, runners: Runners | None = None) -> Runners:
    """Run every check from the post-import state, at most ``parallel`` at a time, each with its own
    wall-clock timeout; whatever one check does, the others still run (``harness/runners.py``).
    Pass the returned ``Runners`` to the next call to keep its blocked functions."""
    if runners is None:
        runners = Runners(
            parallel,
            execute=lambda check: execute_probe(check, probes[check["probe"]], namespace),
            write=lambda check_id, record, arrays: write_result(OUT, check_id, record, arrays),
            report=lambda check_id, status: _write_json(os.path.join(OUT, status_file(check_id)),
                                                        {"check": check_id, **status}),
            clock=_monotonic)
    runners.run(checks)
    return runners


def execute_probe(check: dict[str, Any], probe: Any, namespace: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run one probe, turning every exception into data: (record, arrays)."""
    started = _monotonic()
    record: dict[str, Any] = {"check": check["id"]}
    arrays: dict[str, Any] = {}
    take_caught()
    try:
        outputs = probe.run(namespace, probe.decode(check["inputs"]))
        facts, arrays = probe.split(outputs)
        if raised := take_caught():
            facts[RAISED] = raised
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
    path = getattr(e, "path", None) if isinstance(e, ImportError) else None
    if isinstance(path, str) and message.endswith(f" ({path})"):
        message = message[: -len(path) - 3]  # the module is named already; where the bundle lies is ours
    return {"type": type(e).__name__[:80], "message": message[:MAX_MESSAGE], "where": where}


def _read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _write_json(path: str, data: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(stamped(data), f, default=str)
    _replace(tmp, path)
