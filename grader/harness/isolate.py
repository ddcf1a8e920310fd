"""Process-level isolation for the local backend, applied to a fresh child before student code.

Standard library only: this runs inside the sandbox's own interpreter (the zygote's children).
"""

from __future__ import annotations

import ctypes
import os
import resource
from collections.abc import Sequence

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 1, 2, 4, 1 << 14, 1 << 18
_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


MS_BIND, MS_REMOUNT, MS_MOVE = 1 << 12, 32, 1 << 13
TMP_SIZE = b"size=64m,mode=1777"


PRIVATE = ("/tmp/", "/var/tmp/", "/dev/shm/")


def enter_namespaces(hide: Sequence[str], workdir: str | None = None, carry: Sequence[str] = ()) -> str | None:
    """Private network and mount namespaces; return the workdir's path inside them.

    Inside: only a down loopback; every existing mount read-only; fresh size-capped tmpfs on
    /tmp, /var/tmp and /dev/shm (so other jobs' files and the host's temp files are invisible);
    ``workdir`` bound read-write at /tmp/work; each ``carry`` path that lives in a temp dir (the
    bundle, a virtualenv) bound read-only at its own path; each ``hide`` path covered by an
    empty tmpfs.
    Root uses the namespaces directly; other users get them inside a user namespace mapping only
    their own uid. The caller must be single-threaded.
    """
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNET | CLONE_NEWNS | (0 if uid == 0 else CLONE_NEWUSER)
    _check(_libc.unshare(flags), "unshare")
    if uid != 0:
        for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                           ("/proc/self/gid_map", f"{gid} {gid} 1")):
            with open(path, "w") as f:
                f.write(text)
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    inside = None
    if workdir is not None and os.path.isdir("/dev/shm"):
        # Bind what must stay reachable while its mount is still writable (a bind copies the
        # read-only flag), park it on a fresh /dev/shm, make every other mount read-only, put
        # fresh tmpfs on the temp dirs, then move each parked bind to its place inside them.
        _tmpfs("/dev/shm")
        moves = [(workdir, "/tmp/work", False)] + [
            (path, path, True) for path in sorted(set(carry), key=len)  # parents before children
            if path.startswith(PRIVATE) and os.path.isdir(path)]
        for n, (source, _, _) in enumerate(moves):
            os.mkdir(f"/dev/shm/park{n}", 0o700)
            _check(_libc.mount(source.encode(), f"/dev/shm/park{n}".encode(), None, MS_BIND, None), f"bind {source}")
        for mountpoint in _mountpoints():
            if not mountpoint.startswith("/dev/shm"):
                # Best effort: a mount that refuses stays as it was; nothing below depends on it.
                _libc.mount(None, mountpoint.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
        for path in ("/tmp", "/var/tmp"):
            if os.path.isdir(path):
                _tmpfs(path)
        for n, (_, target, read_only) in enumerate(moves):
            os.makedirs(target, 0o700, exist_ok=True)
            _check(_libc.mount(f"/dev/shm/park{n}".encode(), target.encode(), None, MS_MOVE, None), f"move {target}")
            if read_only:
                _libc.mount(None, target.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
            os.rmdir(f"/dev/shm/park{n}")
        inside = "/tmp/work"
    for path in hide:
        if os.path.isdir(path) and not (path + "/").startswith(PRIVATE):
            _check(_libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, b"size=4k"),
                   f"hide {path}")
    return inside


def _tmpfs(path: str) -> None:
    _check(_libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, TMP_SIZE), f"tmpfs {path}")


def _mkdir(path: str) -> bool:
    os.mkdir(path, 0o700)
    return True


def _mountpoints() -> list[str]:
    """Mount points of this namespace, deepest last (octal escapes in /proc/self/mounts decoded)."""
    with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
        points = [line.split()[1].encode().decode("unicode_escape") for line in f if len(line.split()) > 1]
    return sorted(set(points), key=len)


def apply_limits(limits: dict[str, int]) -> None:
    """rlimits: memory (address space), CPU seconds, processes, file size, open files, no core."""
    mb = 1024 * 1024
    for res, value in (
        (resource.RLIMIT_AS, limits["memory_mb"] * mb),
        (resource.RLIMIT_CPU, limits["cpu_s"]),
        (resource.RLIMIT_NPROC, limits["max_processes"]),
        (resource.RLIMIT_FSIZE, limits["max_file_mb"] * mb),
        (resource.RLIMIT_NOFILE, limits["max_open_files"]),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(res, (value, value))
