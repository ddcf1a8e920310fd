"""Helpers of the red-team suite (imported by conftest.py and the tests): running the grader out of
process, baselines, and the host-side tripwires."""

from __future__ import annotations

import functools
import glob
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tt_hostile

HERE = Path(__file__).resolve().parent
RUNNER = HERE / "tt_runner.py"
SEED = 11
SEED2 = 12
GRADING_LIMIT_S = 60.0


# ---- backends ------------------------------------------------------------------------------------


@functools.cache
def docker_unavailable() -> str | None:
    """None when the docker backend can run here, else why not."""
    if importlib.util.find_spec("grader.sandbox.docker") is None:
        return "grader.sandbox.docker does not exist yet"
    try:
        done = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True,
                              text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"no docker engine answers ({e})"
    if done.returncode != 0 or not done.stdout.strip():
        return f"no docker engine answers ({done.stderr.strip()[:200]})"
    return None


# ---- running the grader out of process ------------------------------------------------------------


@dataclass
class Run:
    returncode: int
    results: list[dict[str, Any]]
    stderr: str
    seconds: float

    def report(self, n: int) -> dict[str, Any] | None:
        return self.results[n].get("report") if n < len(self.results) else None

    def describe(self) -> str:
        return f"exit {self.returncode} after {self.seconds:.1f} s; stderr tail:\n{self.stderr[-3000:]}"


def run_grader(paths: list[Path], *, backend: str, rubric: Path, seed: int, cwd: Path, token: str, cache: Path,
               timeout: float = 180.0) -> Run:
    """Grade ``paths`` as one batch in a fresh grader process whose command line carries ``token``."""
    out = cwd / f"results-{uuid.uuid4().hex[:8]}.json"
    spec = cwd / f"spec-{uuid.uuid4().hex[:8]}.json"
    spec.write_text(json.dumps({"backend": backend, "rubric": str(rubric), "seed": seed,
                                "paths": [str(p) for p in paths], "out": str(out)}), encoding="utf-8")
    env = dict(os.environ, GRADER_CACHE=str(cache), TT_CANARY_SECRET=canary(token))
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(RUNNER), str(spec), token], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:  # a stopped or hung grader: end it (our own child, by pid)
        proc.kill()
        _, err = proc.communicate()
        err += b"\n[the grader process did not finish within the test's limit and was killed]"
    seconds = time.monotonic() - started
    results = json.loads(out.read_text(encoding="utf-8"))["results"] if out.exists() else []
    return Run(proc.returncode, results, err.decode("utf-8", "replace"), seconds)


def canary(token: str) -> str:
    return f"tt-canary-{token}-secret"


def private_cache(where: Path, token: str, template: Path) -> Path:
    """A cache dir whose path holds ``token`` (payloads only touch caches that do), seeded from the template."""
    cache = where / f"cache-{token}"
    cache.mkdir()
    for entry in template.iterdir():
        if entry.name.startswith("bundle-") or entry.name == "nbschema":
            shutil.copytree(entry, cache / entry.name, symlinks=False)
    return cache


class Baselines:
    """Scores of the unattacked implementations, per (backend, base, seed), graded out of process."""

    def __init__(self, rubric: Path, root: Path, template: Path) -> None:
        self.rubric, self.root, self.template = rubric, root, template
        self._seen: dict[tuple[str, str, int], dict[str, Any]] = {}

    def get(self, backend: str, base: str, seed: int = SEED) -> dict[str, Any]:
        key = (backend, base, seed)
        if key not in self._seen:
            token = uuid.uuid4().hex[:12]
            work = self.root / f"{backend}-{base}-{seed}"
            work.mkdir(parents=True)
            path = tt_hostile.write(work / "clean.ipynb", tt_hostile.build(base))
            first = not any(self.template.iterdir())
            cache = self.template if first else private_cache(work, token, self.template)
            run = run_grader([path], backend=backend, rubric=self.rubric, seed=seed, cwd=work, token=token,
                             cache=cache)
            report = run.report(0)
            assert run.returncode == 0 and report is not None, f"baseline failed: {run.describe()}"
            if first:  # keep only what every case may reuse
                shutil.rmtree(self.template / "expected", ignore_errors=True)
            got = statuses(report)
            if base == "correct":  # otherwise "no gain over the baseline" would prove nothing
                assert set(got.values()) == {"passed"}, f"the correct base does not pass everything: {got}"
            else:
                assert got["grad_accumulate"] == "failed", f"the buggy base passes grad_accumulate: {got}"
            self._seen[key] = report
        return self._seen[key]


def statuses(report: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["status"] for c in report["checks"]}


def passed(report: dict[str, Any]) -> set[str]:
    return {c["id"] for c in report["checks"] if c["status"] == "passed"}


# ---- host checks -----------------------------------------------------------------------------------


def processes_with(token: str) -> list[tuple[int, str]]:
    """Live processes (not zombies) whose command line holds ``token``, except this one."""
    found = []
    needle = token.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmd:
            found.append((int(entry), cmd.replace(b"\0", b" ").decode("utf-8", "replace")[:200]))
    return found


def leftover_processes(token: str, grace_s: float = 2.0) -> list[tuple[int, str]]:
    deadline = time.monotonic() + grace_s
    while True:
        found = processes_with(token)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def kill_pids(pids: list[int]) -> None:
    """End processes this test's hostile notebook started (identified by its unique token), by pid."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def marker_files(token: str, *roots: Path) -> list[str]:
    names = [f"/tmp/tt_pwned_{token}*", f"/tmp/grader-*/tt_pwned_{token}*", f"/tmp/grader-*/tt_fill_{token}*"]
    found = [p for pattern in names for p in glob.glob(pattern)]
    for root in roots:
        found += [str(p) for p in root.rglob(f"tt_pwned_{token}*")]
    return sorted(set(found))


def remove_markers(paths: list[str]) -> None:
    for p in paths:
        try:
            os.remove(p)
        except OSError:
            pass


@dataclass
class Host:
    """Per-test identity and tripwires: a token, a marker prefix, a loopback listener, a victim dir."""

    token: str
    mark: str
    listener: socket.socket
    victim: Path

    @property
    def port(self) -> int:
        return int(self.listener.getsockname()[1])

    def connections(self) -> int:
        import select

        count = 0
        while select.select([self.listener], [], [], 0)[0]:
            conn, _ = self.listener.accept()
            conn.close()
            count += 1
        return count
