"""A per-user grading daemon that keeps the grader warm between runs.

A student runs ``tito test --module NAME`` (or ``grader grade``) dozens of times. Each cold
run pays ~250 ms of host imports (numpy, pydantic, rich) plus a sandbox zygote and a reference
worker. The first run starts this daemon in the background; later runs hand their command line to
it over a Unix socket and print what it answers, so they pay only for Python's start and the
grading itself. Nothing changes in what is graded or printed.

- The socket lives in the user's cache directory (grader/paths.py; mode 0700 directory, 0600
  socket; reached through /proc/self/fd when that path is too long for AF_UNIX); its name is a hash of
  the grader's code, the interpreter and the GRADER_* environment, so a changed grader or
  setting gets a fresh daemon.
- The daemon exits after IDLE_S seconds without a request (``GRADER_DAEMON_IDLE_S``), or on
  ``grader daemon stop``. Requests are served one at a time.
- ``GRADER_NO_DAEMON=1`` turns it off; any failure to talk to it falls back to running in-process.
- Sandboxes never see the socket: the local backend covers the cache with an empty tmpfs, and
  Docker containers have no host paths at all.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import select
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from .paths import cache_root

if TYPE_CHECKING:
    from .session import Session

IDLE_S = 900.0
CONNECT_TIMEOUT_S = 0.2
REPLY_TIMEOUT_S = 3600.0
MAX_MESSAGE = 64 * 1024 * 1024
_PACKAGE = Path(__file__).resolve().parent


def enabled() -> bool:
    from .paths import cache_is_temporary
    from .settings import settings

    return settings().daemon and not cache_is_temporary()  # a socket in a temporary cache is never found again


def socket_path() -> Path:
    """Where this grader's daemon listens (short enough for AF_UNIX's 108-byte limit)."""
    h = hashlib.sha256(os.path.realpath(sys.executable).encode())
    for f in sorted((*_PACKAGE.rglob("*.py"), *(_PACKAGE.parent / "reference").rglob("*.py"))):
        st = f.stat()  # size and mtime: cheap, and any edit or reinstall changes them
        h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    for key in sorted(k for k in os.environ if k.startswith("GRADER_")):
        h.update(f"{key}={os.environ[key]}".encode())
    return cache_root() / "daemon" / f"{h.hexdigest()[:16]}.sock"


@contextlib.contextmanager
def _address(path: Path) -> Iterator[str]:
    """A name for ``path`` that fits AF_UNIX's 108 bytes: the path itself, or for a deep cache
    directory the same file through an open descriptor of its folder (/proc/self/fd/N/NAME)."""
    if len(os.fsencode(path)) < 100 or not Path("/proc/self/fd").is_dir():
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def run(request: dict[str, object]) -> int | None:
    """Ask the daemon to execute a grading request (``grader.commands.GradeRequest`` as plain
    data); None if it cannot: the caller then runs the request itself and calls ``spawn`` after
    its answer is printed, so that the next run finds a warm daemon."""
    path = socket_path()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(CONNECT_TIMEOUT_S)
            with _address(path) as address:
                sock.connect(address)
            sock.settimeout(REPLY_TIMEOUT_S)
            _send(sock, {"kind": "grade", "request": request})
            reply = _receive(sock)
    except (OSError, ValueError):
        return None
    from .terminal import write_out

    write_out(str(reply["stdout"]), sys.stdout)
    write_out(str(reply["stderr"]), sys.stderr)
    sys.stdout.flush()
    code = reply["exit"]
    return code if isinstance(code, int) else 2


def stop() -> bool:
    """Ask this configuration's daemon to exit; False if none was running."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            with _address(socket_path()) as address:
                sock.connect(address)
            _send(sock, {"kind": "stop"})
            _receive(sock)
        return True
    except (OSError, ValueError):
        return False


def serve(path: Path, backends: tuple[str, ...] = ("local",)) -> None:
    """Listen on ``path`` until IDLE_S seconds pass without a request; one session serves them all.
    ``backends`` are warmed before the first request (the others on their first request)."""
    from .session import Session

    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)
        try:
            with _address(path) as address:
                listener.bind(address)
        finally:
            os.umask(old)
    except OSError:
        return  # another daemon got there first
    listener.listen(8)
    mine = os.stat(path).st_ino  # the socket file this daemon bound (another may replace it later)
    session = Session()
    _warm_up(session, backends)
    from .settings import settings

    idle = settings().daemon_idle_s
    try:
        while select.select([listener], [], [], idle)[0]:
            conn, _ = listener.accept()
            with conn:
                try:
                    message = _receive(conn)
                    if message.get("kind") == "stop":
                        _send(conn, {"exit": 0, "stdout": "", "stderr": ""})
                        break
                    _send(conn, _handle_safely(message.get("request"), session))
                except (OSError, ValueError):
                    continue
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == mine:  # never delete another daemon's socket
                path.unlink()
        session.close()


def _warm_up(session: Session, backends: tuple[str, ...]) -> None:
    """Pay the imports and start the sandboxes and the reference worker before the first request."""
    import rich.console
    import rich.table  # noqa: F401

    from . import commands, pipeline, report  # noqa: F401

    for backend in dict.fromkeys(backends):
        session.warm(backend, None)


def _handle_safely(request: object, session: Session) -> dict[str, object]:
    """Execute one request; any failure of it is answered as its error: one request (one notebook)
    never ends the daemon for the others."""
    from .commands import GradeRequest, execute

    out, err = io.StringIO(), io.StringIO()
    try:
        code = execute(GradeRequest.model_validate(request), session, out, err)
    except Exception as e:
        from .models import shown

        err.write(f"error: internal grader error, please report it: {type(e).__name__}: {shown(str(e))[:300]}\n")
        code = 2
    return {"exit": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def spawn(backend: str = "local") -> None:
    """Start a daemon in the background (detached, silent) for the next run, with ``backend``
    warm too."""
    from .sandbox import BACKENDS

    path = socket_path()
    warm = ["local"] + ([backend] if backend in BACKENDS and backend != "local" else [])
    with contextlib.suppress(OSError):
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        subprocess.Popen(
            [sys.executable, "-m", "grader.daemon", str(path), *warm], start_new_session=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
        )


def _send(sock: socket.socket, message: dict[str, object]) -> None:
    data = json.dumps(message).encode()
    sock.sendall(struct.pack(">I", len(data)) + data)


def _receive(sock: socket.socket) -> dict[str, object]:
    (size,) = struct.unpack(">I", _exactly(sock, 4))
    if size > MAX_MESSAGE:
        raise ValueError("message too large")
    message = json.loads(_exactly(sock, size))
    if not isinstance(message, dict):
        raise ValueError("not a message")
    return message


def _exactly(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise ValueError("connection closed early")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


if __name__ == "__main__":
    serve(Path(sys.argv[1]), tuple(sys.argv[2:]) or ("local",))
