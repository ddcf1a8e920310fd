"""The trusted reference run: the same harness and probes on the reference solution.

It runs in its own process (never the grader's), with no student code anywhere near it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ..models import BackendInfo, Chunk
from ..plan import Job
from . import RunResult
from .bundle import boot_command, ensure_bundle
from .local import scrubbed_env
from .process import run_harness, write_job


class TrustedRunner:
    """Runs reference code only; a Sandbox in shape, not in purpose."""

    def info(self) -> BackendInfo:
        return BackendInfo(name="inprocess", label="trusted")

    def run(self, job: Job, chunks: Sequence[Chunk], workdir: Path, hide: Sequence[Path] = ()) -> RunResult:
        started = time.monotonic()
        write_job(workdir, job, chunks)
        log, killed = run_harness(boot_command(sys.executable, str(ensure_bundle())), workdir, job,
                                  scrubbed_env(workdir))
        return RunResult(workdir / "out", log, killed, time.monotonic() - started)
