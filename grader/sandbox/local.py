"""Backend ``local``: practice-grade isolation for laptops without Docker (SECURITY.md, req. 6).

A zygote process (numpy, the course runtime and the harness already imported) forks one child
per submission. The child enters a new session and, where the OS allows, private network and
mount namespaces: no network, every mount read-only, private size-capped /tmp, /var/tmp and
/dev/shm, its workdir at /tmp/work, and the reference, rubrics and expected-output cache hidden.
It gets rlimits and a scrubbed environment, and only then runs student code. The host supervises it through a pidfd,
reads its output through a 1 MiB cap, and kills its whole process group at the end.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import SandboxError
from ..harness.isolate import unshare_namespaces
from ..paths import expected_cache_dir, rubrics_dir, solution_dir
from . import RunResult
from .bundle import ensure_bundle
from .cgroup import PidsCgroup
from .process import CappedReader, deadlines, kill_group, write_job

if TYPE_CHECKING:
    from ..models import BackendInfo, Chunk
    from ..plan import Job

ZYGOTE = "import sys; sys.path[:0] = [{path!r}]; import harness.zygote as z; z.serve({fd})"
POLL_S = 0.01
FORK_TIMEOUT_S = 10.0


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


@lru_cache(maxsize=1)
def _cgroups_available() -> bool:
    cgroup = PidsCgroup.create(1)
    if cgroup is None:
        return False
    cgroup.remove()
    return True


@lru_cache(maxsize=1)
def namespaces_available() -> bool:
    """Whether this OS lets us make private network and mount namespaces (tried once, on /bin/true)."""
    try:
        subprocess.run(["/bin/true"], preexec_fn=unshare_namespaces, check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return True
    except (subprocess.SubprocessError, OSError):
        return False


class LocalSandbox:
    """Forks each submission's harness from a warm zygote; thread-safe."""

    def __init__(self, limits: LocalLimits = LocalLimits()) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._zygote: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None

    def info(self) -> BackendInfo:
        from ..models import BackendInfo

        isolation = ["process-group", "rlimits", "scrubbed-env", "private-workdir", "output-cap"]
        warnings = ["local backend: practice isolation only; official grades use --backend docker"]
        if namespaces_available():
            isolation += ["network-namespace", "mount-namespace", "read-only-filesystem", "private-tmp",
                          "hidden-reference"]
        else:
            warnings.append("this OS does not allow private network namespaces: student code could reach the network")
        if os.getuid() == 0:
            if _cgroups_available():
                isolation.append("pids-cgroup")
            else:
                warnings.append("running as root without a pids cgroup: the process limit is not enforced")
        return BackendInfo(name="local", label="practice", isolation=tuple(isolation), warnings=tuple(warnings),
                           limits={k: v for k, v in asdict(self.limits).items()})

    def start(self) -> None:
        """Start the zygote now (about 0.2 s of imports), so that the first run does not wait."""
        with self._lock:
            self._ensure_zygote()

    def close(self) -> None:
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            if self._zygote is not None:
                self._zygote.kill()
                self._zygote.wait()
                self._zygote = None

    def run(self, job: Job, chunks: Sequence[Chunk], workdir: Path, hide: Sequence[Path] = ()) -> RunResult:
        started = time.monotonic()
        write_job(workdir, job, chunks)
        os.chmod(workdir, 0o700)
        hidden = [str(p) for p in (solution_dir(), rubrics_dir(), expected_cache_dir(), *hide)]
        limits = {**asdict(self.limits), "cpu_s": int(deadlines(job)[1]) + 1}
        cgroup = PidsCgroup.create(self.limits.max_processes)
        request = {"workdir": str(workdir), "hide": hidden, "limits": limits, "namespaces": namespaces_available(),
                   "cgroup": str(cgroup.path / "cgroup.procs") if cgroup else None}
        try:
            pid, pidfd, out_fd = self._fork(request)
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            raise
        reader = CappedReader(os.fdopen(out_fd, "rb"))
        reader.start()
        try:
            killed = _supervise(pidfd, workdir, job)
        finally:
            kill_group(pid)  # its PID namespace's init dies with it, and so does everything inside
            os.close(pidfd)
            if cgroup is not None:
                cgroup.remove()
            reader.join(timeout=2)
            if not reader.is_alive():  # a writer that somehow survived must not block us here
                reader.stream.close()
        return RunResult(workdir / "out", reader.text(), killed, time.monotonic() - started)

    def _fork(self, request: dict[str, object]) -> tuple[int, int, int]:
        with self._lock:
            for _attempt in (1, 2):  # a zygote that died is restarted once
                sock = self._ensure_zygote()
                sock.settimeout(FORK_TIMEOUT_S)
                try:
                    sock.sendall(json.dumps(request).encode())
                    message, fds, _, _ = socket.recv_fds(sock, 4096, 2)
                    if len(fds) == 2:
                        return int(json.loads(message)["pid"]), fds[0], fds[1]
                except OSError:
                    pass
                self._restart()
        raise SandboxError("the local sandbox's zygote process failed twice; see the log above")

    def _ensure_zygote(self) -> socket.socket:
        if self._sock is not None and self._zygote is not None and self._zygote.poll() is None:
            return self._sock
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._zygote = subprocess.Popen(
            [sys.executable, "-I", "-B", "-c", ZYGOTE.format(path=str(ensure_bundle()), fd=child.fileno())],
            pass_fds=[child.fileno()], cwd="/", env=scrubbed_env(Path("/nonexistent")),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        child.close()
        self._sock = host
        return host

    def _restart(self) -> None:
        if self._zygote is not None:
            self._zygote.kill()
            self._zygote.wait()
        self._zygote = None
        if self._sock is not None:
            self._sock.close()
        self._sock = None

    def __del__(self) -> None:
        self.close()


def _supervise(pidfd: int, workdir: Path, job: Job) -> str | None:
    """Wait for the child to exit; return why the host had to stop it, if it did."""
    import_deadline, total_deadline = deadlines(job)
    marker = workdir / "out" / "import.json"
    started = time.monotonic()
    while True:
        elapsed = time.monotonic() - started
        imported = marker.exists()
        if not imported and elapsed > import_deadline:
            return f"importing the module took longer than {import_deadline:g} s"
        if elapsed > total_deadline:
            return f"the whole run took longer than {total_deadline:g} s"
        wait = total_deadline - elapsed if imported else min(POLL_S, import_deadline - elapsed)
        if select.select([pidfd], [], [], max(wait, 0.0))[0]:
            return None
