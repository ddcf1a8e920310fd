"""Backend ``docker``: the official sandbox. One fresh, locked-down container per submission.

Transfer design. The container's root filesystem is read-only and ``/work`` is a size-capped
tmpfs, which the engine's archive API (``put_archive``/``get_archive``) cannot reach: it sees the
image layer under the mount, not the tmpfs. So nothing is copied with it. Instead the host attaches
to the container's stdio before starting it and speaks a tiny framed protocol with a bootstrap
program (``harness/docker_boot.py``, started with ``python3 -I -B -c``; the image holds only the
harness and the runtime):

- host → stdin: the job (``harness/wire.py``: the visible checks, student.json, then the hidden
  checks, which the supervisor reads only after forking the harness; backstop seconds in the
  header). Only this one submission ever enters the container; no environment variable, bind
  mount, volume or archive carries anything else.
- the bootstrap hands them to the supervisor (``harness/supervisor.py``, shared with the local
  backend), which writes the visible checks' job into ``/work``, forks the harness with student
  output on the container's stderr, reports ``b"I"`` once ``out/import.json`` exists, and gives the
  harness the hidden checks' inputs only after the visible checks' outputs are sent and frozen.
- the host enforces the same deadlines as the local backend (``process.deadlines``). At a deadline
  it sends ``b"S"``; the supervisor then (and also when the harness exits, or at the backstop)
  SIGKILLs every process it can signal, so nothing can rewrite ``out/`` any more, and sends each
  regular file of ``out/`` and ``out/<check>/`` as ``b"F" >H name >I size data``, then ``b"E"``
  (``grader/sandbox/stream.py`` has the records).
- the bootstrap is the container's PID 1 (no ``docker-init``) and the supervisor makes it
  non-dumpable before the harness exists: no process of the job can signal it or open
  ``/proc/1/fd/*``, so nothing but the supervisor reads the container's stdin or writes its stdout.
  Its layer check (``T``, first on stdout) says so; a container without it is refused, and a stream
  that does not start with it gives no outputs.
- the host reads the multiplexed attach stream: stderr goes into the log through a 1 MiB cap,
  stdout is parsed by ``OutputStream`` with caps on names, sizes, file count and total bytes, and
  the files are returned only after a complete, well-formed stream ends with ``E`` (names are
  checked against a whitelist; no links, no absolute paths, no ``..``, no overwrites). Everything
  in that stream is untrusted all the same (the files it carries are the ones student code could
  write in ``out/``); ``grader.channel`` validates every byte before anything is scored.

Containers are started ahead of their job (a small pool, as many as runs were seen at once, made in
the background after each run): the bootstrap imports numpy and the harness, then waits on stdin,
so a job pays neither the engine's create and start nor Python's and numpy's. Each container still
gets exactly one submission and is then removed; it holds nothing before its job arrives.

If the bootstrap does not answer ``S`` within ``STOP_GRACE_S`` the container is killed. In every
case (success, deadline, error, Ctrl-C) the container is force-removed, by a background thread that
starts in a ``finally`` (the answer does not wait for the engine; ``close`` waits for it, retried
through a second Ctrl-C). If the grader itself dies (SIGKILL), the attach connection closes, the
bootstrap reads EOF on stdin and ends everything, and ``auto_remove`` deletes the container (under a
second in practice); the bootstrap's backstop (``total deadline + BACKSTOP_GRACE_S``) covers a lost
stop signal. Anything still left carries the ``tinytorch-grader`` label and ``cleanup()`` removes it.

Why not stdin-free alternatives: environment variables are visible in ``docker inspect`` and to
every process in the container; a bind mount would put a host folder in the sandbox; a writable
root filesystem for ``put_archive`` would drop the read-only root and the tmpfs size cap.
"""

from __future__ import annotations

import atexit
import json
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SandboxError
from ..harness import wire
from ..harness.docker_boot import INIT_LAYER
from ..models import BackendInfo, Chunk
from ..plan import Job
from . import RunResult
from .local import scrubbed_env
from .process import OUTPUT_CAP, Background, deadlines, overdue
from .stream import OutputStream

LABEL = "tinytorch-grader"
RUN_LABEL = "grader.run"
WORKDIR = "/work"
BUNDLE = "/opt/grader"
USER = "65534:65534"
STOP_GRACE_S = 3.0
BACKSTOP_GRACE_S = 5.0
MAX_INPUT_BYTES = 32 * 1024 * 1024
MAX_SPARES = 4
SPARE_WAIT_S = 20.0  # a run waits this long for the container being started for it

@dataclass(frozen=True)
class DockerLimits:
    memory_mb: int = 1024
    cpus: float = 2.0  # the harness runs up to Job.parallel (2) checks at once
    pids: int = 128
    tmpfs_mb: int = 64
    tmpfs_inodes: int = 4096
    max_open_files: int = 256
    max_file_mb: int = 64

    def as_dict(self) -> dict[str, float | int | str]:
        return {"memory_mb": self.memory_mb, "memory_swap_mb": self.memory_mb, "cpus": self.cpus,
                "pids": self.pids, "tmpfs_mb": self.tmpfs_mb, "max_open_files": self.max_open_files,
                "max_file_mb": self.max_file_mb, "output_cap_bytes": OUTPUT_CAP}


def bootstrap_source(limits: DockerLimits = DockerLimits()) -> str:
    """The container's command line program: start ``harness/docker_boot.py`` from the bundle."""
    return (f"import sys; sys.path[:0] = [{BUNDLE!r}]; import grader.harness.docker_boot as b; "
            f"b.main({WORKDIR!r}, {MAX_INPUT_BYTES}, {limits.tmpfs_mb * 1024 * 1024})")


def container_env() -> dict[str, str]:
    """The local backend's scrubbed environment with container paths; nothing from the host."""
    env = scrubbed_env(Path(WORKDIR))
    env["TMPDIR"] = "/tmp"
    return env


def container_config(image: str, limits: DockerLimits = DockerLimits(), run_id: str | None = None,
                     labels: dict[str, str] | None = None) -> dict[str, Any]:
    """Keyword arguments for ``client.containers.create``: every isolation setting in one place."""
    from docker.types import LogConfig, Ulimit  # type: ignore[import-untyped,unused-ignore]

    run_id = run_id or uuid.uuid4().hex
    mb = 1024 * 1024
    tmpfs = (f"rw,noexec,nosuid,nodev,size={limits.tmpfs_mb}m,nr_inodes={limits.tmpfs_inodes}")
    return {
        "image": image,
        "command": ["python3", "-I", "-B", "-c", bootstrap_source(limits)],
        "name": f"{LABEL}-{run_id}",
        "labels": {**(labels or {}), LABEL: "1", RUN_LABEL: run_id},
        "user": USER,
        "working_dir": WORKDIR,
        "environment": container_env(),
        "hostname": "sandbox",
        "network_mode": "none",
        "read_only": True,
        "tmpfs": {WORKDIR: f"{tmpfs},mode=0700,uid=65534,gid=65534", "/tmp": f"{tmpfs},mode=1777"},
        "ipc_mode": "none",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "privileged": False,
        "pids_limit": limits.pids,
        "mem_limit": limits.memory_mb * mb,
        "memswap_limit": limits.memory_mb * mb,
        "mem_swappiness": 0,
        "nano_cpus": int(limits.cpus * 1e9),
        "ulimits": [
            Ulimit(name="nofile", soft=limits.max_open_files, hard=limits.max_open_files),
            Ulimit(name="fsize", soft=limits.max_file_mb * mb, hard=limits.max_file_mb * mb),
            Ulimit(name="core", soft=0, hard=0),
        ],
        # No docker-init: the bootstrap itself is PID 1, as the supervisor is on the local backend.
        # An init of Docker's would run as the sandbox user, dumpable, holding the container's stdin
        # and stdout: any process could open /proc/1/fd/1 and write into the host's result stream
        # (hiding the real freeze inside a forged record and freezing its own visible results once
        # it had read the hidden checks' inputs), or read /proc/1/fd/0. And the supervisor, not
        # being the init, could be stopped or killed. As PID 1 and not dumpable it can be neither
        # signalled nor opened by any process of the container; it reaps what it kills.
        "init": False,
        "log_config": LogConfig(type="none"),
        "stdin_open": True,
        "tty": False,
        "auto_remove": True,  # an orphan (host process killed) removes itself at its backstop
    }


class _Attach(threading.Thread):
    """Drains the attach socket: stderr into a capped log, stdout into an OutputStream."""

    def __init__(self, sock: socket.socket, max_total: int) -> None:
        super().__init__(daemon=True)
        self.sock = sock
        self.cond = threading.Condition()
        self.stream = OutputStream(max_total)
        self.log, self.dropped = bytearray(), 0
        self.eof = False

    def run(self) -> None:
        pending = bytearray()
        try:
            while True:
                data = self.sock.recv(262144)
                if not data:
                    break
                pending += data
                pos, out, err = 0, bytearray(), bytearray()
                while len(pending) - pos >= 8:  # docker's multiplexed frames: kind, 0, 0, 0, >I size
                    (size,) = struct.unpack_from(">I", pending, pos + 4)
                    if len(pending) - pos < 8 + size:
                        break
                    payload = memoryview(pending)[pos + 8:pos + 8 + size]
                    if pending[pos] == 1:
                        out += payload
                    elif len(self.log) + len(err) < OUTPUT_CAP:
                        err += payload
                    else:
                        self.dropped += size
                    payload.release()
                    pos += 8 + size
                del pending[:pos]
                with self.cond:
                    if out:
                        self.stream.feed(bytes(out))
                    if err:
                        room = OUTPUT_CAP - len(self.log)
                        self.log += err[:room]
                        self.dropped += max(0, len(err) - room)
                    self.cond.notify_all()
        except OSError:
            pass
        finally:
            with self.cond:
                self.eof = True
                self.cond.notify_all()

    def finished(self) -> bool:
        s = self.stream
        return self.eof or s.ended or s.broken is not None

    def text(self) -> str:
        tail = f"\n[... {self.dropped} more bytes dropped]" if self.dropped else ""
        return self.log.decode("utf-8", "replace") + tail


# Containers of this process not yet removed: removed at interpreter exit if something skipped the finally.
_live: dict[str, int] = {}  # container name -> id() of the DockerSandbox that made it
_live_lock = threading.Lock()


def _remove(client: Any, ref: str) -> None:
    """Kill and remove a container, retrying through Ctrl-C so that nothing is left running."""
    import docker  # type: ignore[import-untyped,unused-ignore]

    interrupted = False
    for _ in range(5):
        try:
            client.api.remove_container(ref, force=True, v=True)
            break
        except KeyboardInterrupt:
            interrupted = True
        except docker.errors.NotFound:
            break
        except docker.errors.APIError as e:
            if "already in progress" in str(e):  # auto_remove got there first: wait until it is gone
                interrupted |= _wait_gone(client, ref, 10.0)
                break
            time.sleep(0.2)
    with _live_lock:
        _live.pop(ref, None)
    if interrupted:
        raise KeyboardInterrupt


def _wait_gone(client: Any, ref: str, timeout: float) -> bool:
    """Poll until the container no longer exists; True if Ctrl-C came meanwhile."""
    import docker  # type: ignore[import-untyped,unused-ignore]

    interrupted = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            client.api.inspect_container(ref)
            time.sleep(0.05)
        except KeyboardInterrupt:
            interrupted = True
        except docker.errors.NotFound:
            break
        except docker.errors.APIError:
            time.sleep(0.05)
    return interrupted


_exiting = False  # set at interpreter exit: no container is started after the sweep


@atexit.register
def _remove_live() -> None:
    global _exiting
    with _live_lock:
        _exiting = True
    if not _live:
        return
    try:
        from .image import docker_client

        client = docker_client(timeout=30)
    except Exception:
        return
    for ref in list(_live):
        try:
            _remove(client, ref)
        except BaseException:
            pass


def cleanup(client: Any = None, *, older_than_s: float = 0.0, labels: dict[str, str] | None = None) -> int:
    """Remove the containers carrying the grader's label; returns how many.

    They are leftovers of a grader that was killed hard. With ``older_than_s`` only those created
    that long ago are removed, sparing the live containers of graders running right now; ``labels``
    narrows the choice further (tests use it to touch only their own containers).
    """
    import docker  # type: ignore[import-untyped,unused-ignore]

    if client is None:
        from .image import docker_client

        client = docker_client()
    removed = 0
    now = time.time()
    wanted = [f"{LABEL}=1", *(f"{k}={v}" for k, v in (labels or {}).items())]
    for c in client.api.containers(all=True, filters={"label": wanted}):
        if older_than_s and now - float(c.get("Created", 0)) < older_than_s:
            continue
        try:
            client.api.remove_container(c["Id"], force=True, v=True)
            removed += 1
        except docker.errors.NotFound:
            pass
    return removed


class DockerSandbox:
    """Official isolation: see SECURITY.md, requirement 5, and the module docstring."""

    def __init__(self, image: str | None = None, limits: DockerLimits = DockerLimits(),
                 progress: Callable[[str], None] | None = None, client: Any = None,
                 labels: dict[str, str] | None = None, keep_ready: bool = True) -> None:
        from .image import build_image, docker_client

        self.keep_ready = keep_ready  # a container started after each run, for the next one
        self.client = client or docker_client()
        self.limits = limits
        self.labels = dict(labels or {})  # extra container labels, e.g. to tell a test's containers apart
        self.tag = image or build_image(progress=progress)
        try:
            self.image_id: str = self.client.images.get(self.tag).id
        except Exception as e:
            raise SandboxError(f"the sandbox image {self.tag} is not available: {e}") from None
        self._warnings = self._engine_warnings()
        self._pool_lock = threading.Lock()
        self._pool_ready = threading.Condition(self._pool_lock)  # a spare was added (or failed)
        self._spares: list[_Started] = []
        self._pool = Background()  # removals and starts the answer need not wait for
        self._making = self._running = self._waiting = 0
        self._target = 1  # containers kept waiting: as many as runs seen at once
        self._closed = False

    def _engine_warnings(self) -> tuple[str, ...]:
        try:
            info = self.client.info()
        except Exception:
            return ("could not query the engine's capabilities",)
        warnings = []
        for key, what in (("MemoryLimit", "memory limit"), ("SwapLimit", "swap limit"),
                          ("PidsLimit", "pids limit"), ("CpuCfsQuota", "CPU quota")):
            if info.get(key) is False:
                warnings.append(f"this Docker engine cannot enforce the {what}")
        if not any("seccomp" in str(o) for o in info.get("SecurityOptions") or ()):
            warnings.append("this Docker engine runs without seccomp")
        return tuple(warnings)

    def info(self) -> BackendInfo:
        isolation = ("container", "network-none", "read-only-rootfs", "tmpfs-workdir", "non-root-user",
                     "cap-drop-all", "no-new-privileges", "seccomp-default", "pids-limit", "memory-limit",
                     "cpu-quota", "ulimits", "supervisor-is-init", "no-logs", "output-cap", "wall-deadline")
        return BackendInfo(name="docker", label="official", image=self.image_id, isolation=isolation,
                           warnings=self._warnings, limits=self.limits.as_dict())

    def start(self) -> None:
        """Start a container ahead of the first job (in the background)."""
        self._replenish()

    def close(self) -> None:
        """Remove the waiting containers and any container of this process that a run could not
        remove (normally none), after the removals still under way."""
        with self._pool_lock:
            self._closed = True
            spares, self._spares = self._spares, []
        for spare in spares:
            spare.discard(self.client)
        self._pool.wait()
        with _live_lock:
            refs = [ref for ref, owner in _live.items() if owner == id(self)]
        for ref in refs:
            _remove(self.client, ref)

    def container_config(self, run_id: str | None = None) -> dict[str, Any]:
        return container_config(self.image_id, self.limits, run_id, self.labels)

    def waiting(self) -> list[str]:
        """The names of the containers started ahead of a job and still waiting for it (none of
        them has run anything but the bootstrap)."""
        with self._pool_lock:
            return [spare.name for spare in self._spares]

    def settle(self) -> None:
        """Wait for the work done in the background: used containers removed, waiting ones started."""
        self._pool.wait()

    # ---- the pool: containers started ahead of their job -----------------------------------------

    def _launch(self) -> _Started:
        """Create, attach and start one container; its bootstrap imports numpy and the harness and
        then waits for a job on stdin."""
        import docker  # type: ignore[import-untyped,unused-ignore]

        config = self.container_config()
        name = config["name"]
        with _live_lock:
            if _exiting:
                raise SandboxError("the grader is exiting")
            _live[name] = id(self)
        sock: Any = None
        try:
            container = self.client.containers.create(**config)
            sock = self.client.api.attach_socket(container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            raw = getattr(sock, "_sock", sock)
            assert raw is not None
            raw.settimeout(None)
            reader = _Attach(raw, self.limits.tmpfs_mb * 1024 * 1024)
            reader.start()
            container.start()
            return _Started(name, sock, raw, reader)
        except BaseException as e:
            if sock is not None:
                _close(getattr(sock, "_sock", sock), sock)
            _remove(self.client, name)
            if isinstance(e, docker.errors.APIError):
                raise SandboxError(f"could not start the sandbox container: {e}") from None
            raise

    def _take(self) -> _Started:
        """A waiting container that is still alive; else the one being started, once it is ready
        (it is further along than a new one would be); else a new one."""
        with self._pool_ready:
            self._running += 1
            self._target = min(MAX_SPARES, max(self._target, self._running))
            end = time.monotonic() + SPARE_WAIT_S
            while True:
                while self._spares:
                    spare = self._spares.pop(0)
                    if not spare.reader.finished():
                        return spare
                    self._pool.later(spare.discard, self.client)
                if self._making <= self._waiting or time.monotonic() >= end:
                    break
                self._waiting += 1
                self._pool_ready.wait(end - time.monotonic())
                self._waiting -= 1
        return self._launch()

    def _replenish(self) -> None:
        """Start containers in the background until as many wait as runs were seen at once."""
        with self._pool_lock:
            if self._closed or len(self._spares) + self._making >= self._target:
                return
            self._making += 1
        self._pool.later(self._make_spare)

    def _make_spare(self) -> None:
        try:
            spare = self._launch()
        except BaseException:  # the next run starts its own container and reports the problem
            with self._pool_ready:
                self._making -= 1
                self._pool_ready.notify_all()
            return
        with self._pool_ready:
            self._making -= 1
            keep = not self._closed
            if keep:
                self._spares.append(spare)
            self._pool_ready.notify_all()
        if not keep:
            spare.discard(self.client)
        self._replenish()

    # ---- one job -------------------------------------------------------------------------------

    def run(self, job: Job, chunks: Sequence[Chunk], workdir: Path, hide: Sequence[Path] = ()) -> RunResult:
        """``hide`` is moot here: no host path is visible inside the container."""
        started = time.monotonic()
        import_deadline, total_deadline = deadlines(job)
        backstop = total_deadline + BACKSTOP_GRACE_S
        student_bytes = json.dumps({"chunks": [c.model_dump() for c in chunks]}).encode()
        message = wire.pack(job.model_dump(mode="json"), student_bytes, backstop)
        if max(wire.HEADER.unpack_from(message)[:3]) > MAX_INPUT_BYTES:
            raise SandboxError("the job is too large to send into the sandbox")
        box: _Started | None = None
        killed: str | None = None
        try:
            box = self._take()
            reader = box.reader
            try:
                box.raw.sendall(message)
            except OSError as e:
                raise SandboxError(f"lost the connection to the sandbox container: {e}") from None
            t0 = time.monotonic()
            with reader.cond:
                while not reader.finished():
                    elapsed = time.monotonic() - t0
                    killed = overdue(reader.stream.imported, elapsed, import_deadline, total_deadline)
                    if killed is not None:
                        break
                    limit = total_deadline if reader.stream.imported else import_deadline
                    reader.cond.wait(max(limit - elapsed, 0.0) + 0.005)
            if killed:
                try:
                    box.raw.sendall(b"S")
                except OSError:
                    pass
                with reader.cond:
                    reader.cond.wait_for(reader.finished, timeout=STOP_GRACE_S)
            outputs, frozen, log = _collected(reader)
        finally:
            with self._pool_lock:
                self._running -= 1
            if box is not None:  # killed and removed whatever happened; the answer need not wait for it
                self._pool.later(box.discard, self.client)
            if self.keep_ready:
                self._replenish()  # the next job's container starts while this answer is judged
        return RunResult(outputs, log, killed, time.monotonic() - started, frozen=frozen)


@dataclass
class _Started:
    """A started container, its attach connection and the thread reading it."""

    name: str
    sock: Any
    raw: socket.socket
    reader: _Attach

    def discard(self, client: Any) -> None:
        """Kill and remove the container, then close the connection."""
        try:
            _remove(client, self.name)
        finally:
            _close(self.raw, self.sock)
            self.reader.join(timeout=2)


def _collected(reader: _Attach) -> tuple[dict[str, bytes], dict[str, bytes] | None, str]:
    """The outputs of a complete, well-formed stream (else none, with a note why), the visible
    phase's frozen files, and the log."""
    notes = []
    outputs: dict[str, bytes] = {}
    with reader.cond:
        stream = reader.stream
        verified = (stream.layer_check or {}).get("verified")
        if stream.layer_check is not None and not (isinstance(verified, list) and INIT_LAYER in verified):
            raise SandboxError(
                "the sandbox container's bootstrap is not its PID 1, so the container's other processes "
                "could reach its stdin and stdout; start it without an init process (container_config "
                "sets init=False) and with the bundle's bootstrap as its command")
        frozen = stream.frozen if stream.layer_check is not None else None
        if stream.layer_check is None and (stream.ended or stream.broken or stream.files):
            notes.append("[sandbox] output stream rejected: it does not start with the bootstrap's layer check")
        elif stream.ended and not stream.broken:
            outputs = dict(stream.files)
        elif stream.broken:
            notes.append(f"[sandbox] output stream rejected: {stream.broken}")
        else:
            notes.append("[sandbox] the container ended without sending its outputs")
        log = reader.text()
    if notes:
        log = (log + "\n" if log else "") + "\n".join(notes)
    return outputs, frozen, log


def _close(raw: socket.socket, wrapper: Any) -> None:
    """Shut the attach connection (waking the reader thread) and close it and its file wrapper."""
    try:
        raw.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    for obj in (wrapper, raw):
        try:
            obj.close()
        except OSError:
            pass


__all__ = ["DockerLimits", "DockerSandbox", "bootstrap_source", "cleanup", "container_config", "container_env"]
