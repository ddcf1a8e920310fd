"""Backend ``local``: isolation by namespaces, a new root, an unprivileged uid, seccomp and
cgroups, for machines without Docker (SECURITY.md, req. 6; docs/SECURITY.md has the layers).

A zygote process (numpy, the course runtime and the harness already imported) forks one child
per submission (``grader.harness.zygote``); the child isolates itself, checks its layers, and runs the
harness under a supervisor that streams the results back (``grader.harness.supervisor``). The
host keeps every deadline, reads the stream as untrusted input, and in a ``finally`` kills the
job and (without namespaces) every process of its uid, and removes its cgroups (in the background).

Two uses, one mechanism:
- practice (``official=False``, ``grader grade``, ``tito test``): grades with whatever layers the
  machine allows, and the report lists exactly those that the layer check verified;
- official (``official=True``: batch, Gradescope mode): refuses, with the fix, unless every layer
  of its mode was verified.
"""

from __future__ import annotations

import json
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ..errors import SandboxError, SandboxUnavailable
from ..harness import wire
from ..paths import expected_cache_dir, harness_parent
from . import RunResult
from .bundle import ensure_bundle
from .cgroup import CgroupLimits, JobCgroups
from .process import Background, CappedReader, ForkedWorker, deadlines, overdue
from .stream import OutputStream

if TYPE_CHECKING:
    from ..models import BackendInfo, Chunk
    from ..plan import Job

ZYGOTE = "import sys; sys.path[:0] = [{path!r}]; import grader.harness.zygote as z; z.serve({fd})"
FORK_TIMEOUT_S = 10.0
# A new zygote's first answer also waits for its interpreter to boot (numpy, the runtime): on a
# loaded machine that alone can take longer than a fork, so the first answer gets this long.
ZYGOTE_BOOT_S = 90.0
MAX_READY = 4
MAX_JOB_BYTES = 32 * 1024 * 1024
CPU_CEILING_S = 3600  # a ready sandbox's CPU limit until its job lowers it to the job's own
STOP_GRACE_S = 3.0
UID_BASE, UID_SPAN = 1_990_000_000, 1_000_000  # a fresh host uid per job when the grader is root
CGROUP_LAYERS = ("memory-cgroup", "pids-cgroup", "cpu-cgroup")
HOST_LAYERS = ("scrubbed-env", "output-cap", "wall-clock-kill")
NAMESPACES = ("net", "ipc", "uts", "mnt", "pid", "cgroup")


@dataclass(frozen=True)
class LocalLimits:
    memory_mb: int = 1536
    max_processes: int = 256
    max_file_mb: int = 64
    max_open_files: int = 256
    tmp_mb: int = 64
    tmp_inodes: int = 2048


def scrubbed_env(workdir: Path) -> dict[str, str]:
    """Only what Python and numpy need: no tokens, no proxies, no user paths."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(workdir), "TMPDIR": str(workdir),
        "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
        "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
    }


_probe_lock = threading.Lock()


@lru_cache(maxsize=1)
def _namespaces_available() -> bool:
    """Try in a forked child (unshare needs a single-threaded caller; a fork has one thread), which
    runs nothing but the unshare: about a millisecond, where a new interpreter took 20 to 30."""
    import warnings

    from ..harness.isolate import unshare_namespaces

    with warnings.catch_warnings():  # Python 3.12+ warns about forking with threads: the child
        warnings.simplefilter("ignore", DeprecationWarning)  # only unshares and exits
        try:
            pid = os.fork()
        except OSError:
            return False
    if pid == 0:
        code = 1
        try:
            unshare_namespaces()
            code = 0
        finally:
            os._exit(code)
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return False
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def namespaces_available() -> bool:
    """Whether this OS lets us make the sandbox's namespaces (tried once per process, in a child)."""
    with _probe_lock:
        return _namespaces_available()


def isolation_mode() -> str:
    """``namespaces``; else, for root, ``fallback`` (a separate uid per job); else ``none``."""
    from ..settings import settings

    forced = settings().local_mode  # tests of the other modes
    if forced is not None:
        return forced
    if namespaces_available():
        return "namespaces"
    return "fallback" if os.getuid() == 0 else "none"


def required_layers(mode: str) -> tuple[str, ...]:
    """What official grading insists on in each mode (the layer check names, plus the host's)."""
    common = ("non-root-uid", "no-capabilities", "no-new-privileges", "seccomp-filter", "rlimits", "hidden-reference")
    if mode == "namespaces":
        return (*common, *(f"{n}-namespace" for n in NAMESPACES), "no-network", "read-only-filesystem",
                "read-only-proc-sys", "minimal-dev", "capped-tmpfs-workdir", *CGROUP_LAYERS, *HOST_LAYERS)
    return (*common, "separate-uid", "readable-python", "uid-sweep", *HOST_LAYERS)


def _host_namespaces() -> dict[str, str]:
    found = {}
    for name in NAMESPACES:
        try:
            found[name] = os.readlink(f"/proc/self/ns/{name}")
        except OSError:
            pass
    return found


class LocalSandbox:
    """Forks each submission's sandbox from a warm zygote; thread-safe."""

    def __init__(self, limits: LocalLimits = LocalLimits(), official: bool = False, keep_ready: bool = True) -> None:
        self.limits = limits
        self.official = official
        self.keep_ready = keep_ready  # a sandbox made ready after each run, for the next one
        self.mode = isolation_mode()
        self._lock = threading.Lock()
        self._zygote: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._booted = False  # the current zygote has answered once (its interpreter is up)
        self._verified: tuple[str, ...] | None = None
        self._pool = Background()
        self._spares: list[_Box] = []  # sandboxes isolated, layer-checked and waiting for a job
        self._ready = threading.Condition(self._lock)  # a sandbox got ready (or failed to)
        self._making = self._running = self._waiting = 0
        self._target = 1  # sandboxes kept ready: as many as runs seen at once
        self._closed = False

    def info(self) -> BackendInfo:
        from ..models import BackendInfo

        warnings = []
        if not self.official:
            warnings.append("local backend: practice isolation; official grades use --backend docker or batch")
        missing = [layer for layer in required_layers(self.mode) if layer not in (self._verified or ())]
        if self._verified is not None and missing:
            warnings.append(f"isolation layers not in place on this machine: {', '.join(missing)}")
        return BackendInfo(name="local", label="official" if self.official else "practice",
                           isolation=self._verified or (), warnings=tuple(warnings),
                           limits={k: v for k, v in asdict(self.limits).items()})

    def start(self) -> None:
        """Start the zygote now (about 0.2 s of imports) and make a sandbox ready for the first job;
        official grading also proves its layers here."""
        with self._lock:
            if self._closed:
                return
            self._ensure_zygote()
        if self.official and self._verified is None:
            self.verify()
        self._replenish(self._key(()))

    def verify(self) -> tuple[str, ...]:
        """Run an empty job and return the layers it verified; official: refuse if one is missing."""
        from ..plan import Job

        empty = Job(module="layer-check", probes="grader.harness.probes", seed=0, import_timeout_s=10,
                    total_timeout_s=10, checks=())
        self.run(empty, [], Path("/nonexistent"))
        return self._verified or ()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            spares, self._spares = self._spares, []
        for box in spares:
            box.discard()
        self._pool.wait()
        for box in spares:
            box.cleanup()
        with self._lock:
            self._restart()

    def run(self, job: Job, chunks: Sequence[Chunk], workdir: Path, hide: Sequence[Path] = ()) -> RunResult:
        """``workdir`` is not used: the job's files go to the sandbox through its job pipe."""
        started = time.monotonic()
        if self.official and self.mode == "none":
            raise SandboxUnavailable(
                "official grading needs Linux namespaces or root: this machine allows neither for the local backend. "
                "Use --backend docker, run the grader as root, or grade as practice.")
        student_bytes = json.dumps({"chunks": [c.model_dump() for c in chunks]}).encode()
        message = wire.pack(job.model_dump(mode="json"), student_bytes, int(deadlines(job)[1]) + 1)
        if max(wire.HEADER.unpack_from(message)[:3]) > MAX_JOB_BYTES:
            raise SandboxError("the job is too large to send into the sandbox")
        key = self._key(hide)
        with self._lock:
            self._running += 1
            self._target = min(MAX_READY, max(self._target, self._running))
        try:
            box = self._take(key)
            try:
                try:
                    _write_all(box.job_fd, message)
                except OSError:
                    pass  # it died while it waited: the stream says what it could
                killed = _supervise(box.results, box.pidfd, box.control, job)
            finally:
                box.discard()
                if box.uid is not None and self.mode == "fallback":
                    self._sweep(box.uid)
                self._pool.later(box.cleanup)
        finally:
            with self._lock:
                self._running -= 1
            if self.keep_ready:
                self._replenish(key)  # the next job's sandbox gets ready while this answer is judged
        log, stream = box.log, box.stream
        # Every process of the job is dead, or killed before the stream's end: once the log pipe is
        # empty nothing more can come (its end closes when they are gone; cleanup waits for that).
        log.settle(timeout=2)
        layers = self._layers(stream, box.joined)
        complete = stream.ended and not stream.broken  # a broken or cut stream gives no outputs at all
        note = f"\n[sandbox] output stream rejected: {stream.broken}" if stream.broken else ""
        return RunResult(dict(stream.files) if complete else {}, log.text() + note, killed,
                         time.monotonic() - started, isolation=layers, frozen=stream.frozen)

    # ---- sandboxes made ready before their job -------------------------------------------------

    def _key(self, hide: Sequence[Path]) -> tuple[str, ...]:
        """What a ready sandbox was made for besides its job: the paths it hides."""
        return tuple(dict.fromkeys(str(p) for p in (*staff_paths(), expected_cache_dir(), *hide)))

    def _take(self, key: tuple[str, ...]) -> _Box:
        """A ready sandbox made for ``key`` that still waits for its job; else the one being made,
        once it is ready (it is further along than a new one would be); else a new one."""
        end = time.monotonic() + FORK_TIMEOUT_S
        while True:
            with self._ready:
                mine = [b for b in self._spares if b.key == key]
                self._spares = [b for b in self._spares if b.key != key]
                if not mine and self._making > self._waiting and time.monotonic() < end:
                    self._waiting += 1
                    self._ready.wait(end - time.monotonic())
                    self._waiting -= 1
                    continue
            taken = None
            for box in mine:
                if taken is None and box.waiting():
                    taken = box
                else:
                    box.discard()
                    self._pool.later(box.cleanup)
            if taken is not None or not mine:
                return taken or self._prepare(key)

    def _replenish(self, key: tuple[str, ...]) -> None:
        """Ready sandboxes for ``key`` in the background, as many as runs were seen at once."""
        with self._lock:
            if self._closed or sum(1 for b in self._spares if b.key == key) + self._making >= self._target:
                return
            self._making += 1
        self._pool.later(self._make_spare, key)

    def _make_spare(self, key: tuple[str, ...]) -> None:
        box = None
        try:
            box = self._prepare(key)
        finally:
            with self._ready:
                self._making -= 1
                keep = box is not None and not self._closed
                if keep:
                    self._spares.append(box)  # type: ignore[arg-type]
                self._ready.notify_all()
        if box is not None and not keep:
            box.discard()
            box.cleanup()

    def _prepare(self, key: tuple[str, ...]) -> _Box:
        """Fork a sandbox from the zygote: it isolates itself, checks its layers and waits for its job."""
        import tempfile

        workdir = Path(tempfile.mkdtemp(prefix="grader-job-"))
        os.chmod(workdir, 0o700)
        uid = UID_BASE + random.randrange(UID_SPAN) if os.getuid() == 0 and self.mode != "none" else None
        hidden = list(key)
        expected_cache_dir().mkdir(mode=0o700, parents=True, exist_ok=True)  # exists before any sandbox, so it is hidden
        if self.mode == "fallback":
            _protect(hidden)
        checkout = source_checkout()
        if checkout is not None:  # covered with namespaces; never closed behind its owner's back in
            hidden.append(str(checkout))  # fallback mode, where the layer check refuses while it is open
        cgroups = JobCgroups.create(CgroupLimits(self.limits.memory_mb, self.limits.max_processes,
                                                 cpus=float(max(1, min(2, os.cpu_count() or 1)))))
        request = {
            "workdir": str(workdir), "mode": self.mode, "uid": uid, "gid": uid, "strict": self.official,
            "hide": hidden,
            "limits": {**asdict(self.limits), "cpu_s": CPU_CEILING_S},
            "env": scrubbed_env(Path("/tmp/work")), "bundle": str(ensure_bundle()),
            "tmp_mb": self.limits.tmp_mb, "tmp_inodes": self.limits.tmp_inodes, "host_ns": _host_namespaces(),
            "cgroups": cgroups.procs,
        }
        box = _Box(key, workdir, uid, cgroups, OutputStream(max_total=self.limits.tmp_mb * 1024 * 1024))
        try:
            pid, fds, box.joined = self._fork(request)
        except BaseException:
            box.cleanup()
            raise
        box.attach(pid, *fds)
        return box

    def _layers(self, stream: OutputStream, joined: Sequence[str]) -> tuple[str, ...]:
        """What was verified for this run; official grading refuses when something is missing."""
        report = stream.layer_check or {}
        verified = [str(v) for v in report.get("verified", ()) if isinstance(v, str)] if report.get("mode") == self.mode else []
        verified += [f"{c}-cgroup" for c in joined]
        if verified:
            verified += HOST_LAYERS
            if self.mode == "fallback":
                verified.append("uid-sweep")
        layers = tuple(sorted(set(verified)))
        self._verified = layers
        missing = [layer for layer in required_layers(self.mode) if layer not in layers]
        if self.official and missing:
            raise SandboxUnavailable(
                f"official grading refused: these isolation layers could not be verified on this machine: "
                f"{', '.join(missing)}. {_fix(missing)}")
        return layers

    def _fork(self, request: Mapping[str, object]) -> tuple[int, tuple[int, int, int, int, int], list[str]]:
        """(pid, its pidfd and the log, result, control and job descriptors, the cgroups it joined)."""
        with self._lock:
            for _attempt in (1, 2):  # a zygote that died is restarted once
                sock = self._ensure_zygote()
                sock.settimeout(self._answer_timeout())
                try:
                    sock.sendall(json.dumps(request).encode())
                    message, fds, _, _ = socket.recv_fds(sock, 4096, 5)
                    self._booted = True
                    if len(fds) == 5:
                        answer = json.loads(message)
                        return int(answer["pid"]), (fds[0], fds[1], fds[2], fds[3], fds[4]), list(answer["cgroups"])
                    for fd in fds:
                        os.close(fd)
                except OSError:
                    pass
                self._restart()
        raise SandboxError("the local sandbox's zygote process failed twice; see the log above")

    def fork_reference(self, chunks: Path, home: Path) -> ForkedWorker:
        """The trusted reference worker (grader/reference.py), forked by the zygote, which has
        numpy and the runtime imported already: a fork instead of a new interpreter. It runs in
        ``home`` with the scrubbed environment and is never isolated: no student code runs there."""
        request = {"reference": {"chunks": str(chunks), "home": str(home), "env": scrubbed_env(home)}}
        with self._lock:
            sock = self._ensure_zygote()
            try:
                sock.settimeout(self._answer_timeout())
                sock.sendall(json.dumps(request).encode())
                message, fds, _, _ = socket.recv_fds(sock, 4096, 4)
                self._booted = True
            except OSError as e:
                self._restart()
                raise SandboxError(f"the local sandbox's zygote did not fork the reference worker: {e}") from None
        if len(fds) != 4:
            for fd in fds:
                os.close(fd)
            raise SandboxError("the local sandbox's zygote did not fork the reference worker")
        return ForkedWorker(int(json.loads(message)["pid"]), *fds)

    def _sweep(self, uid: int) -> None:
        """Kill every process of the job's uid (fallback mode has no PID namespace to do it)."""
        with self._lock:
            sock = self._ensure_zygote()
            try:
                sock.settimeout(self._answer_timeout())
                sock.sendall(json.dumps({"kill_uid": uid}).encode())
                sock.recv(64)
            except OSError:
                self._restart()

    def _ensure_zygote(self) -> socket.socket:
        if self._closed:
            raise SandboxError("this sandbox is closed")
        if self._sock is not None and self._zygote is not None and self._zygote.poll() is None:
            return self._sock
        self._restart()
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._zygote = subprocess.Popen(
            [sys.executable, "-I", "-B", "-c", ZYGOTE.format(path=str(ensure_bundle()), fd=child.fileno())],
            pass_fds=[child.fileno()], cwd="/", env=scrubbed_env(Path("/nonexistent")),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        child.close()
        self._sock, self._booted = host, False
        return host

    def _answer_timeout(self) -> float:
        """How long the zygote may take to answer: a fork's time, or its boot's before its first answer."""
        return FORK_TIMEOUT_S if self._booted else ZYGOTE_BOOT_S

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


def source_checkout() -> Path | None:
    """The source checkout the grader runs from, if it does: it holds example solutions
    (``submissions/correct_*``), tests and the git history, so no job may read any of it."""
    root = harness_parent().parent
    return root if (root / "pyproject.toml").is_file() and not (harness_parent() / "_data").is_dir() else None


def staff_paths() -> list[Path]:
    """Every installed course module's rubric and reference solution, and the copies of the
    reference and rubrics that older builds of an editable install left in site-packages
    (``grader/_data``): the job must reach none of them."""
    import importlib.metadata

    from .. import modules

    paths = list(modules.staff_paths())
    try:
        stale = Path(str(importlib.metadata.distribution("tinytorch-grader").locate_file("grader/_data")))
        paths += [p for p in (stale / "reference" / "solution", stale / "rubrics") if p.is_dir()]
    except importlib.metadata.PackageNotFoundError:
        pass
    return list(dict.fromkeys(paths))


def _protect(paths: Sequence[str]) -> None:
    """Fallback mode: staff directories closed to other users (the job runs as one of them)."""
    for path in paths:
        try:
            mode = os.stat(path).st_mode
            if mode & 0o077:
                os.chmod(path, mode & 0o700)
        except OSError:
            pass


def _fix(missing: Sequence[str]) -> str:
    if any(layer.endswith("-cgroup") for layer in missing):
        return "Per-submission cgroups need root (cgroup v1 or v2 mounted at /sys/fs/cgroup); or use --backend docker."
    if "hidden-reference" in missing:
        return ("Make the grader's reference and rubric files unreadable to other users (chmod -R go-rwx), "
                "or use --backend docker.")
    if "readable-python" in missing:
        return ("The job's own uid cannot read this Python installation (e.g. under /root, mode 700): install "
                "Python and the grader where every user can read them, or use --backend docker.")
    if "seccomp-filter" in missing:
        return "Install libseccomp2 (Debian: apt-get install libseccomp2), or use --backend docker."
    return "Use --backend docker, or grade as practice."


@dataclass
class _Box:
    """One sandbox: forked, isolating itself or waiting for its job, or done."""

    key: tuple[str, ...]
    workdir: Path
    uid: int | None
    cgroups: JobCgroups
    stream: OutputStream
    joined: list[str] = field(default_factory=list)
    pid: int = -1
    pidfd: int = -1
    job_fd: int = -1
    log: CappedReader = field(init=False)
    results: _StreamReader = field(init=False)
    control: IO[bytes] = field(init=False)

    def attach(self, pid: int, pidfd: int, log_fd: int, res_fd: int, ctl_fd: int, job_fd: int) -> None:
        self.pid, self.pidfd, self.job_fd = pid, pidfd, job_fd
        self.log = CappedReader(os.fdopen(log_fd, "rb"))
        self.results = _StreamReader(os.fdopen(res_fd, "rb", buffering=0), self.stream)
        self.control = os.fdopen(ctl_fd, "wb", buffering=0)
        self.log.start()
        self.results.start()

    def waiting(self) -> bool:
        """Still alive, and nothing went wrong while it got ready."""
        return self.pidfd >= 0 and not select.select([self.pidfd], [], [], 0)[0] and not self.results.done()

    def discard(self) -> None:
        """Kill the sandbox (its PID namespace's init dies with it, and so does everything inside).
        Its process group only while it is alive (after that its number may be another's)."""
        if self.pidfd >= 0:
            if not select.select([self.pidfd], [], [], 0)[0]:
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except (ProcessLookupError, OSError):
                pass
        for fd in (self.pidfd, self.job_fd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.pidfd = self.job_fd = -1
        if self.pid > 0:
            for f in (self.results.source, self.control):
                f.close()

    def cleanup(self) -> None:
        """Remove its cgroups and its directory on the host, once it is dead."""
        try:
            self.cgroups.remove()
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)
            if self.pid > 0:
                self.log.join(timeout=2)
                if not self.log.is_alive():
                    self.log.stream.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class _StreamReader(threading.Thread):
    """Feeds the supervisor's result pipe into an OutputStream (which caps everything)."""

    def __init__(self, source: IO[bytes], stream: OutputStream) -> None:
        super().__init__(daemon=True)
        self.source, self.stream = source, stream
        self.cond = threading.Condition()
        self.eof = False

    def run(self) -> None:
        try:
            while chunk := self.source.read(262144):
                with self.cond:
                    self.stream.feed(chunk)
                    self.cond.notify_all()
        except (OSError, ValueError):
            pass
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def done(self) -> bool:
        return self.eof or self.stream.ended or self.stream.broken is not None

    def wait_done(self, seconds: float) -> None:
        """Wait (holding ``cond``) until the stream is done, for at most ``seconds``."""
        end = time.monotonic() + seconds
        while not self.done() and time.monotonic() < end:
            self.cond.wait(timeout=end - time.monotonic())


def _supervise(reader: _StreamReader, pidfd: int, control: IO[bytes], job: Job) -> str | None:
    """Wait for the stream's end; at a deadline tell the supervisor to stop; return why, if it had to.

    The whole budget is fixed before the job starts; the ``I`` record can only end the import
    deadline early, never extend the total."""
    import_deadline, total_deadline = deadlines(job)
    started = time.monotonic()
    killed = None
    with reader.cond:
        while not reader.done():
            elapsed = time.monotonic() - started
            killed = overdue(reader.stream.imported, elapsed, import_deadline, total_deadline)
            if killed is not None:
                break
            limit = total_deadline if reader.stream.imported else import_deadline
            reader.cond.wait(timeout=max(0.0, min(limit - elapsed, 0.25)))
            if select.select([pidfd], [], [], 0)[0] and not reader.done():
                # The job's process is gone, and with it every writer of the pipe: what it wrote is
                # read to its end now, however loaded the machine (the reader may lag behind).
                reader.wait_done(STOP_GRACE_S)
                break
        if killed is not None:
            try:
                control.write(b"S")
            except OSError:
                pass
            reader.wait_done(STOP_GRACE_S)
    return killed

