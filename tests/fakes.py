"""An in-process sandbox, for tests only: the harness runs in the test's own interpreter, with no
isolation at all, so that probes and judges can be tested fast and debugged with a debugger.
The real sandboxes (grader/sandbox) keep their own tests; nothing outside tests/ may use this."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from grader.channel import outputs_from_dir
from grader.harness import run as harness
from grader.harness.records import IMPORT, stamped
from grader.models import BackendInfo, Chunk
from grader.paths import runtime_dir
from grader.plan import Job
from grader.sandbox import RunResult


class InProcessSandbox:
    """Runs each job's checks one after another in this process (student code included!)."""

    def info(self) -> BackendInfo:
        return BackendInfo(name="inprocess", label="trusted", warnings=("tests only: no isolation",))

    def run(self, job: Job, chunks: Sequence[Chunk], workdir: Path, hide: Sequence[Path] = ()) -> RunResult:
        started = time.monotonic()
        if str(runtime_dir()) not in sys.path:
            sys.path.insert(0, str(runtime_dir()))
        out = workdir / "out"
        out.mkdir(parents=True, exist_ok=True)
        data = json.loads(job.model_dump_json())
        probes = harness._prepare(data)
        namespace, errors = harness.import_student([c.model_dump() for c in chunks])
        (out / IMPORT).write_text(json.dumps(stamped(
            {"chunk_errors": errors, "defined": sorted(k for k in namespace if not k.startswith("__"))})))
        for check in data["checks"]:
            record, arrays = harness.execute_probe(check, probes[check["probe"]], namespace)
            harness.write_result(os.fspath(out), check["id"], record, arrays)
        return RunResult(outputs_from_dir(out), "", None, time.monotonic() - started)
