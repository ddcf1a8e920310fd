"""Process-level isolation for the local backend, applied to a fresh child before student code.

Standard library only: this runs inside the sandbox's own interpreter (the zygote's children).

The view of the machine a job gets (where the OS allows namespaces):
- its own network namespace (only a down loopback) and PID namespace, with a fresh /proc, so no
  host process (the grader, the reference worker) can be seen, signalled or read via /proc;
- every mount read-only; every top-level directory except the system ones (/usr, /etc, /lib...)
  covered by an empty tmpfs, so home directories, checkouts, caches, /run (and any Docker
  socket there) are gone; only the interpreter, numpy and the sandbox bundle are carried back in,
  read-only, at their own paths; the job's workdir is bound read-write at /tmp/work;
- no capabilities at all (bounding set emptied, no-new-privs), so none of the above can be undone
  by mount, umount, ptrace or exec of a setuid or root-owned binary.
"""

from __future__ import annotations

import ctypes
import os
import resource
from collections.abc import Sequence

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 32, 1 << 12, 1 << 13, 1 << 14, 1 << 18
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 1, 24, 38, 47, 4
SYSTEM_DIRS = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "dev", "proc", "sys"}
WORK = "/tmp/work"
_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> int:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    return int(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)))


def unshare_namespaces() -> None:
    """New network, mount and PID namespaces (the PID one applies to the next child), inside a
    user namespace that maps only our own uid when we are not root. Single-threaded callers only."""
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | (0 if uid == 0 else CLONE_NEWUSER)
    _check(_libc.unshare(flags), "unshare")
    if uid != 0:
        for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                           ("/proc/self/gid_map", f"{gid} {gid} 1")):
            with open(path, "w") as f:
                f.write(text)
    _check(_mount(None, "/", None, MS_REC | MS_PRIVATE), "mount --make-rprivate /")


def build_view(workdir: str, carry: Sequence[str], hide: Sequence[str] = ()) -> str:
    """Reshape this mount namespace as described in the module docstring; return the workdir's
    new path. ``carry`` are paths (interpreter, numpy, bundle) to keep visible, read-only."""
    covered = [f"/{name}" for name in sorted(os.listdir("/"))
               if name not in SYSTEM_DIRS and os.path.isdir(f"/{name}") and not os.path.islink(f"/{name}")]
    under_cover = lambda p: any(p == c or p.startswith(c + "/") for c in covered)  # noqa: E731
    kept = [p for p in sorted({os.path.realpath(p) for p in carry if p}, key=len) if os.path.isdir(p) and under_cover(p)]
    # 1. Park binds of what must survive while their mounts are still writable (a bind copies the
    #    read-only flag) on a fresh /dev/shm.
    _check(_mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777"), "tmpfs /dev/shm")
    moves = [(workdir, WORK, False), *((p, p, True) for p in kept)]
    for n, (source, _, _) in enumerate(moves):
        os.mkdir(f"/dev/shm/park{n}", 0o700)
        _check(_mount(source, f"/dev/shm/park{n}", None, MS_BIND), f"bind {source}")
    # 2. Every existing mount read-only (best effort: one that refuses is covered below anyway).
    with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
        points = {line.split()[1].encode().decode("unicode_escape") for line in f if len(line.split()) > 1}
    for point in sorted(points, key=len):
        if not point.startswith("/dev/shm"):
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    # 3. Cover every non-system top-level directory; /tmp is the job's scratch space.
    for root in covered:
        size = "size=64m,mode=1777" if root == "/tmp" else "size=16m,mode=755"
        _check(_mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, size), f"cover {root}")
    # 4. Put the parked binds in place; carried paths become read-only.
    for n, (_, target, read_only) in enumerate(moves):
        os.makedirs(target, 0o755, exist_ok=True)
        _check(_mount(f"/dev/shm/park{n}", target, None, MS_MOVE), f"move {target}")
        if read_only:
            _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.rmdir(f"/dev/shm/park{n}")
    for path in hide:  # anything secret that lives inside a system directory
        if os.path.isdir(path) and not under_cover(path):
            _check(_mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k"), f"hide {path}")
    return WORK


def become_init() -> None:
    """In the new PID namespace's first process: die with our parent, and get our own /proc."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0), "prctl(PDEATHSIG)")
    _check(_mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC), "mount /proc")


def drop_privileges() -> None:
    """No capabilities now or after any exec; nothing set up above can be undone."""
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:
            break  # EINVAL: past the last capability this kernel knows
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable (x2): all zero
    _check(_libc.capset(header, data), "capset")


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
