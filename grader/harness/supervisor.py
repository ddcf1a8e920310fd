"""The sandbox's first process after isolation: layer check, run the harness, collect its outputs.

Runs as the job's unprivileged uid, before any student code, and outlives it (in a PID namespace
it is the init, which processes of the namespace cannot signal; it is never dumpable, so they
cannot ptrace it or open its file descriptors either). It speaks one framed stream to the host on
``out_fd`` (parsed on the host by ``grader.sandbox.stream.OutputStream``):

- ``T`` >I json: the layer check, written before the harness starts (so student code never
  wrote it): which isolation layers are in place, observed from inside;
- ``I``: the harness finished importing the student's code (it only ever shortens the host's
  deadline, never extends it);
- ``F`` >H name >I size data: one output file, sent only after every process of the job is
  killed (or, for visible checks, when the hidden phase begins: see below);
- ``H``: the visible checks' files (and import.json) were all sent before this, and are frozen:
  the host judges visible checks from them alone, whatever happens to the rest of the run;
- ``E``: the end.

Hidden inputs never meet visible feedback: the harness first gets a job with only the visible
checks. When it asks for the rest (or exits), the visible checks' outputs are sent and frozen:
nothing written for them later is ever read. Only then are the hidden checks' inputs written.
They are not even in the harness's memory before that: the supervisor reads them from the host
(``harness/wire.py``) only after it forked the harness, which never holds that descriptor.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import stat
import struct
import time
from collections.abc import Callable
from typing import Any

from .isolate import hide_from_siblings

NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")
MAX_FILE, MAX_TOTAL, MAX_FILES = 32 * 1024 * 1024, 64 * 1024 * 1024, 4096
POLL_S = 0.01


def _put(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    if kind == b"T":
        return kind + struct.pack(">I", len(payload)) + payload
    return kind + payload


def _valid(name: str) -> bool:
    return 0 < len(name) <= 128 and name[0] != "." and set(name) <= NAME_OK


def _read_regular(path: str, limit: int) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        data = bytearray()
        while len(data) <= st.st_size:
            chunk = os.read(fd, st.st_size + 1 - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    return bytes(data) if len(data) == st.st_size else None


class Outbox:
    """Sends the files of ``out/`` that belong to the current phase, each at most once."""

    def __init__(self, fd: int, max_total: int = MAX_TOTAL) -> None:
        self.fd, self.budget, self.count = fd, max_total, 0
        self.sent: set[str] = set()

    def send(self, owners: set[str]) -> None:
        """Every regular file ``out/<name>`` or ``out/<check>/<name>`` whose check is in ``owners``."""
        try:
            top = sorted(os.listdir("out"))[:MAX_FILES]
        except OSError:
            return
        for entry in top:
            if not _valid(entry) or entry.split(".")[0] not in owners:
                continue
            try:
                is_dir = stat.S_ISDIR(os.lstat("out/" + entry).st_mode)
                names = ([f"{entry}/{n}" for n in sorted(os.listdir("out/" + entry))[:MAX_FILES] if _valid(n)]
                         if is_dir else [entry])
            except OSError:
                continue
            for rel in names:
                if self.count >= MAX_FILES or rel in self.sent:
                    continue
                data = _read_regular("out/" + rel, min(MAX_FILE, self.budget))
                if data is None:
                    continue
                name = rel.encode()
                _put(self.fd, b"F" + struct.pack(">H", len(name)) + name + struct.pack(">I", len(data)))
                _put(self.fd, data)
                self.sent.add(rel)
                self.budget -= len(data)
                self.count += 1


def run(job: dict[str, Any], student: bytes, out_fd: int, control_fd: int, layers: dict[str, Any],
        harness: Callable[[int], None], hidden_from: tuple[int, int], max_total: int = MAX_TOTAL) -> None:
    """Write the phase-1 job, start ``harness(phase_fd)`` in a child, serve it, then collect.

    ``job`` holds only the visible checks (``wire.visible_part``); the hidden ones are read from
    ``hidden_from`` (descriptor, size) once the harness exists, and the harness never holds that
    descriptor (when it is ``control_fd``, /dev/null replaces it there)."""
    visible = job["checks"]
    if any(c.get("visible") is not True for c in visible) or "seed" in job:
        raise ValueError("hidden checks or the seed must not reach the sandbox before the harness is forked")
    base = {k: v for k, v in job.items() if k != "checks"}
    hidden_fd, hidden_size = hidden_from
    _put(out_fd, frame(b"T", json.dumps(layers).encode()))
    if not layers.get("ok", False):
        _put(out_fd, b"E")
        return
    _write("student.json", student)
    _write("job.json", json.dumps({**base, "checks": visible, "more": hidden_size > 0}).encode())
    os.mkdir("out", 0o755)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    hide_from_siblings()  # before the harness exists: no window in which it could open our /proc files
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a job's SIGINT must not end us (we are its init)
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.close(out_fd)
        for fd in {control_fd, hidden_fd}:
            if fd > 2:
                os.close(fd)
            else:  # the host's stdin (Docker): the harness gets /dev/null instead
                os.dup2(os.open(os.devnull, os.O_RDONLY), fd)
        ours.close()
        _raise_oom_score()
        harness(theirs.detach())
        os._exit(0)
    theirs.close()
    pidfd = os.pidfd_open(pid)
    hidden = _read_hidden(hidden_fd, hidden_size)  # only now: the harness's memory never held them
    outbox = Outbox(out_fd, max_total)
    phase = {"import"} | {c["id"] for c in visible}
    imported = False
    while True:
        if not imported and os.path.exists("out/import.json"):
            imported = True
            _put(out_fd, b"I")
        ready = select.select([pidfd, control_fd, ours.fileno()], [], [], None if imported else POLL_S)[0]
        if pidfd in ready or (control_fd in ready and os.read(control_fd, 64)[:1] in (b"", b"S")):
            break
        if ours.fileno() in ready:
            if ours.recv(1) != b"H" or hidden is None or not phase.isdisjoint({c["id"] for c in hidden}):
                break
            outbox.send(phase)  # the visible phase ends here: later writes for it are never read
            _put(out_fd, b"H")
            phase = {c["id"] for c in hidden}
            _write("job-hidden.json", json.dumps({**base, "checks": hidden, "more": False}).encode())
            ours.sendall(b"G")
    kill_everyone(session_only=layers.get("mode") == "none")
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    if not imported and os.path.exists("out/import.json"):
        _put(out_fd, b"I")
    outbox.send(phase)
    _put(out_fd, b"E")


def _read_hidden(fd: int, size: int) -> list[dict[str, Any]] | None:
    """The hidden checks from the host (None if they did not arrive whole: they then never run)."""
    data = bytearray()
    while len(data) < size:
        try:
            chunk = os.read(fd, min(1 << 20, size - len(data)))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    if not size:
        return []
    try:
        checks = json.loads(bytes(data))
    except ValueError:
        return None
    return checks if isinstance(checks, list) and all(isinstance(c, dict) for c in checks) else None


def _raise_oom_score() -> None:
    """Under memory pressure the kernel kills the harness and student code, never the supervisor."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass


def _write(name: str, data: bytes) -> None:
    with open(name, "wb") as f:
        f.write(data)
    os.chmod(name, 0o444)


def _kill_session() -> None:
    me, session = os.getpid(), os.getsid(0)
    for _ in range(100):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                if int(fields[3]) == session and fields[0] != b"Z":
                    os.kill(int(entry), signal.SIGKILL)
                    found = True
            except (OSError, IndexError, ValueError):
                continue
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        if not found:
            return
        time.sleep(0.001)


def kill_everyone(session_only: bool = False) -> None:
    """Every process this uid can signal (in a PID namespace: all of the job's), except us.

    ``session_only`` (mode ``none``: the job shares the grader's uid and PID namespace, where that
    would include the grader itself): only the processes of our own session."""
    if session_only:
        _kill_session()
        return
    for _ in range(100):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return
        except PermissionError:
            return
        time.sleep(0.001)
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
