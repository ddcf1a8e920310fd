"""Expected outputs: the same probes run on the reference solution, in a trusted worker process.

The worker imports the reference once and then serves job after job, so a batch pays its start-up
once. A job's visible checks (fixed inputs, the same for every submission) and its seeded ones
are two separate entries of a cache by content (inputs, probes, runtime, reference): on disk, and
the last few in memory. So the visible checks never run twice, and a submission costs only its
seeded checks. The cache lives outside every sandbox.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeAlias

from .errors import HarnessProtocolError
from .paths import expected_cache_dir
from .sandbox.bundle import bundle_hash, ensure_bundle
from .sandbox.local import scrubbed_env
from .sandbox.process import ForkedWorker, deadlines

if TYPE_CHECKING:  # imported lazily: the CLI starts the worker before the heavy imports
    from .channel import CheckOutput
    from .plan import Job

MEMORY_ENTRIES = 8
Worker: TypeAlias = "subprocess.Popen[str] | ForkedWorker"
Spawner = Callable[[Path, Path], ForkedWorker]  # (reference.json, home) -> a worker serving it there


class Oracle(Protocol):
    """Where expected outputs come from: the reference worker (staff) or the shipped outputs (student)."""

    official: bool  # False: a practice grade, which front ends say comes second to the staff's

    def start(self) -> None: ...

    def expected(self, job: Job) -> dict[str, CheckOutput]: ...

    def close(self) -> None: ...


def oracle_for(module: str, cached: bool = True) -> Oracle:
    """The reference worker where the module's reference solution is installed (the staff package),
    else the public checks' expected outputs shipped with the student package (grader/shipped.py).
    Made by a ``Session`` only (grader/session.py)."""
    from .shipped import ShippedOracle, has_reference

    return ReferenceOracle(module, cached=cached) if has_reference(module) else ShippedOracle(module)


SERVE = "import sys; sys.path[:0] = [{path!r}]; import grader.harness.run as r; r.serve({chunks!r})"


class ReferenceOracle:
    """Expected outputs per job, from a persistent trusted worker; thread-safe. ``spawner``
    (a session's local sandbox) forks the worker from a warm process instead of starting one."""

    official = True

    def __init__(self, module: str, spawner: Spawner | None = None, cached: bool = True) -> None:
        """``cached=False``: every output is computed now, from nothing any earlier run left (the
        shared cache's entries hold draws from whichever numpy seed computed them first)."""
        from . import modules

        self.module = module
        self.source = modules.get(module).reference_path.read_text(encoding="utf-8")
        self.spawner = spawner
        self.cached = cached
        self._lock = threading.Lock()
        self._proc: Worker | None = None
        self._home: Path | None = None
        # this unit's own bundle: another unit's probes or runtime do not move this cache
        self._version = hashlib.sha256((bundle_hash(module) + self.source).encode()).hexdigest()[:16]
        self._memory: dict[str, dict[str, CheckOutput]] = {}  # least recently used first

    def start(self) -> None:
        """Spawn the worker now (it takes ~0.2 s to import), so that it is ready when needed."""
        with self._lock:
            self._ensure_worker()

    def expected(self, job: Job) -> dict[str, CheckOutput]:
        """The reference's outputs for every check of ``job``."""
        expected: dict[str, CheckOutput] = {}
        for visible in (True, False):
            part = tuple(c for c in job.checks if c.visible is visible)
            if part:
                expected.update(self._expected_part(job.model_copy(update={"checks": part})))
        return {c.id: expected[c.id] for c in job.checks}

    def _expected_part(self, job: Job) -> dict[str, CheckOutput]:
        # The seed only seeds numpy's global RNG for unseeded initialisations, which no comparison
        # uses from the reference; leaving it out lets every run of the public checks share a key.
        inputs = job.model_dump_json(exclude={"seed", "numpy_seed", "parallel"})
        key = hashlib.sha256((self._version + inputs).encode()).hexdigest()[:32]
        with self._lock:
            remembered = self._memory.pop(key, None)
            if remembered is not None:  # the most recently used entry goes last: evicted last
                self._memory[key] = remembered
        if remembered is not None:
            return remembered
        expected = self._cached_or_computed(job, key)
        with self._lock:
            self._memory[key] = expected
            while len(self._memory) > MEMORY_ENTRIES:
                self._memory.pop(next(iter(self._memory)))
        return expected

    def _cached_or_computed(self, job: Job, key: str) -> dict[str, CheckOutput]:
        cached = expected_cache_dir() / key
        if self.cached and (cached / "out").is_dir():
            return self._read(job, cached / "out")
        work = self._compute(job)
        if not self.cached:
            try:
                return self._read(job, work / "out")
            finally:
                shutil.rmtree(work, ignore_errors=True)
        try:
            expected = self._read(job, work / "out")
        except BaseException:  # a failed reference run is never cached
            shutil.rmtree(work, ignore_errors=True)
            raise
        try:
            work.rename(cached)
        except OSError:  # a concurrent grader cached the same job first
            shutil.rmtree(work, ignore_errors=True)
        return expected

    def close(self) -> None:
        with self._lock:
            if self._proc is not None:
                _stop(self._proc)
                self._proc = None
            if self._home is not None:
                shutil.rmtree(self._home, ignore_errors=True)
                self._home = None

    def __del__(self) -> None:
        self.close()

    def _ensure_worker(self) -> Worker:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if self._proc is not None:  # it ended: its pipes are closed before a successor starts
            _stop(self._proc)
            self._proc = None
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
        self._home = Path(tempfile.mkdtemp(prefix="grader-ref-"))
        chunks = self._home / "reference.json"
        chunks.write_text(json.dumps({"chunks": [{"cell": 0, "line": 1, "source": self.source}]}), encoding="utf-8")
        if self.spawner is not None:
            from .errors import GraderError

            try:
                self._proc = self.spawner(chunks, self._home)
                return self._proc
            except (GraderError, OSError):
                pass  # started the ordinary way instead
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-B", "-c", SERVE.format(path=str(ensure_bundle(self.module)), chunks=str(chunks))],
            cwd=self._home, env=scrubbed_env(self._home), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
        return self._proc

    def _compute(self, job: Job) -> Path:
        """Run ``job`` on the reference; the directory that holds its ``out``."""
        expected_cache_dir().mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(expected_cache_dir(), 0o700)
        work = Path(tempfile.mkdtemp(prefix=".job-", dir=expected_cache_dir()))
        (work / "job.json").write_text(job.model_dump_json(), encoding="utf-8")
        with self._lock:
            proc = self._ensure_worker()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(f"{work}\n")
                proc.stdin.flush()
                answer = _readline_within(proc, deadlines(job)[1])
            except (BrokenPipeError, TimeoutError) as e:
                answer = f"<{type(e).__name__}>"
            if answer.strip() != "done":
                if answer in ("", "<BrokenPipeError>"):  # it is exiting (or gone): let it finish its stderr
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=2)
                stderr = ""
                if proc.poll() is not None and proc.stderr is not None:
                    stderr = proc.stderr.read()[-2000:]
                self._proc = None
                _stop(proc)
                shutil.rmtree(work, ignore_errors=True)
                raise HarnessProtocolError(f"the reference worker failed ({answer.strip() or 'no answer'}): {stderr}")
        return work

    def _read(self, job: Job, out: Path) -> dict[str, CheckOutput]:
        from .channel import outputs_from_dir, read_check

        files = outputs_from_dir(out)  # once: every check's outputs come from this one folder
        expected = {}
        for check in job.checks:
            result = read_check(files, check.id, None)
            if result.outcome != "ok":
                detail = result.error.text() if result.error else result.note
                raise HarnessProtocolError(
                    f"the reference solution failed check {check.id!r} ({result.outcome}): {detail}")
            expected[check.id] = result
        return expected


def _readline_within(proc: Worker, seconds: float) -> str:
    import select

    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], seconds)
    if not ready:
        raise TimeoutError
    return proc.stdout.readline()


def _stop(proc: Worker) -> None:
    proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):  # stdin's unsent request, to a worker that died: a broken pipe
                stream.close()
