"""Backend ``local``: the harness in a subprocess with rlimits, a scrubbed environment and, where
the OS allows, private network and mount namespaces. Reports from it are labelled "practice".
"""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ..paths import rubrics_dir, solution_dir
from . import RunResult
from .bundle import boot_command, ensure_bundle
from .process import HarnessProcess, deadlines, write_job

if TYPE_CHECKING:
    from ..models import BackendInfo, Chunk
    from ..plan import Job

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 1, 2, 4, 1 << 14, 1 << 18
_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class LocalLimits:
    memory_mb: int = 1536
    max_processes: int = 256
    max_file_mb: int = 64
    max_open_files: int = 256


def scrubbed_env(workdir: Path) -> dict[str, str]:
    """Only what Python and numpy need: no tokens, no proxies, no user paths."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(workdir), "TMPDIR": str(workdir),
        "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
        "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
    }


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _enter_namespaces(hide: Sequence[str]) -> None:
    """Own network namespace (no interfaces but a down loopback) and mounts hiding ``hide``."""
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNET | CLONE_NEWNS | (0 if uid == 0 else CLONE_NEWUSER)
    _check(_libc.unshare(flags), "unshare")
    if uid != 0:
        for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                           ("/proc/self/gid_map", f"{gid} {gid} 1")):
            with open(path, "w") as f:
                f.write(text)
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    for path in hide:
        if os.path.isdir(path):
            _check(_libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, b"size=4k"),
                   f"hide {path}")


def _preexec(limits: LocalLimits, cpu_s: int, hide: Sequence[str] | None) -> Callable[[], None]:
    def apply() -> None:
        if hide is not None:
            _enter_namespaces(hide)
        mb = 1024 * 1024
        for res, value in (
            (resource.RLIMIT_AS, limits.memory_mb * mb),
            (resource.RLIMIT_CPU, cpu_s),
            (resource.RLIMIT_NPROC, limits.max_processes),
            (resource.RLIMIT_FSIZE, limits.max_file_mb * mb),
            (resource.RLIMIT_NOFILE, limits.max_open_files),
            (resource.RLIMIT_CORE, 0),
        ):
            resource.setrlimit(res, (value, value))

    return apply


@lru_cache(maxsize=1)
def namespaces_available() -> bool:
    """Whether this OS lets us make private network and mount namespaces (tried once, on /bin/true)."""
    try:
        subprocess.run(["/bin/true"], preexec_fn=lambda: _enter_namespaces(()), check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return True
    except (subprocess.SubprocessError, OSError):
        return False


class LocalSandbox:
    """Practice-grade isolation for laptops without Docker; see SECURITY.md, requirement 6."""

    def __init__(self, limits: LocalLimits = LocalLimits()) -> None:
        self.limits = limits
        self._ready: dict[Path, HarnessProcess] = {}
        self._claimed: set[Path] = set()

    def info(self) -> BackendInfo:
        from ..models import BackendInfo

        isolation = ["process-group", "rlimits", "scrubbed-env", "private-workdir", "output-cap"]
        warnings = ["local backend: practice isolation only; official grades use --backend docker"]
        if namespaces_available():
            isolation += ["network-namespace", "mount-namespace"]
        else:
            warnings.append("this OS does not allow private network namespaces: student code could reach the network")
        if os.getuid() == 0:
            warnings.append("running as root: the process limit (RLIMIT_NPROC) is not enforced")
        limits = {"memory_mb": self.limits.memory_mb, "max_processes": self.limits.max_processes,
                  "max_file_mb": self.limits.max_file_mb, "max_open_files": self.limits.max_open_files}
        return BackendInfo(name="local", label="practice", isolation=tuple(isolation), warnings=tuple(warnings),
                           limits=limits)

    def prepare(self, hide: Sequence[Path] = ()) -> Path:
        """Start a harness in a fresh workdir now; a later ``run`` there hands it the job."""
        workdir = Path(tempfile.mkdtemp(prefix="grader-"))
        self._spawn(workdir, hide, cpu_s=300)
        return workdir

    def claim_prepared(self) -> Path | None:
        """The oldest prepared workdir not yet claimed, if any."""
        for workdir in self._ready:
            if workdir not in self._claimed:
                self._claimed.add(workdir)
                return workdir
        return None

    def close(self) -> None:
        """Stop every harness that was prepared but not used."""
        for workdir in list(self._ready):
            self._ready.pop(workdir).kill()
            shutil.rmtree(workdir, ignore_errors=True)
        self._claimed.clear()

    def _spawn(self, workdir: Path, hide: Sequence[Path], cpu_s: int) -> None:
        hidden = [str(p) for p in (solution_dir(), rubrics_dir(), *hide)] if namespaces_available() else None
        self._ready[workdir] = HarnessProcess(
            boot_command(sys.executable, str(ensure_bundle())), workdir, scrubbed_env(workdir),
            _preexec(self.limits, cpu_s, hidden),
        )

    def run(self, job: Job, chunks: Sequence[Chunk], workdir: Path, hide: Sequence[Path] = ()) -> RunResult:
        started = time.monotonic()
        write_job(workdir, job, chunks)
        if workdir not in self._ready:
            self._spawn(workdir, hide, cpu_s=int(deadlines(job)[1]) + 1)
        self._claimed.discard(workdir)
        log, killed = self._ready.pop(workdir).supervise(job)
        return RunResult(workdir / "out", log, killed, time.monotonic() - started)
