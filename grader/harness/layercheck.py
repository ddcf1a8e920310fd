"""The sandbox's layer check: which isolation layers are really in place, observed from inside,
after isolation and before any student code. The report lists only what passed here.

Standard library only. Each probe returns True only on positive evidence.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import resource
import socket
from collections.abc import Callable, Sequence
from typing import Any

from .isolate import DEV_ENTRIES, WORK

NAMESPACES = ("net", "ipc", "uts", "mnt", "pid", "cgroup")


def _status() -> dict[str, str]:
    with open("/proc/self/status", "rb") as f:  # bytes: no codec may need importing (fallback mode)
        lines = f.read().decode("utf-8", "replace").splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def _non_root() -> bool:
    s = _status()
    ids = [int(x) for key in ("Uid", "Gid") for x in s[key].split()]
    return 0 not in ids and os.getuid() != 0 and os.geteuid() != 0


def _no_capabilities() -> bool:
    s = _status()
    return all(int(s[k], 16) == 0 for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"))


def _refused(call: Callable[[], Any], *codes: int) -> bool:
    try:
        call()
    except OSError as e:
        return e.errno in codes
    return False


def _keyring_blocked() -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.syscall(250, 0, -4, 0)  # keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0)
    return rc == -1 and ctypes.get_errno() == errno.EPERM


def _sysv_ipc_blocked() -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.syscall(29, 0, 4096, 0o1600)  # shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600)
    if rc >= 0:
        libc.syscall(31, rc, 0, 0)  # shmctl(IPC_RMID): never leave the probe's segment behind
    return rc == -1 and ctypes.get_errno() == errno.EPERM


def _seccomp(mode: str) -> bool:
    families = (socket.AF_INET, socket.AF_UNIX) if mode == "fallback" else (socket.AF_INET,)
    return _status().get("Seccomp") == "2" and _keyring_blocked() and _sysv_ipc_blocked() and all(
        _refused(functools.partial(socket.socket, family, socket.SOCK_STREAM), errno.EAFNOSUPPORT, errno.EPERM)
        for family in families)


def _namespace(name: str, host: dict[str, str]) -> bool:
    try:
        mine = os.readlink(f"/proc/self/ns/{name}")
    except OSError:
        return False
    return bool(host.get(name)) and mine != host[name]


def _only_loopback() -> bool:
    with open("/proc/net/dev", "rb") as f:
        names = {line.split(b":")[0].strip() for line in f.read().splitlines()[2:]}
    return names <= {b"lo"}


def _read_only_mounts(writable: Sequence[str]) -> bool:
    """Every mount except ``writable`` (and /proc itself, whose sys part is checked apart) is ro."""
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f.read().decode("utf-8", "replace").splitlines():
            fields = line.split()
            point, options = fields[4], fields[5].split(",")
            if point in writable or point == "/proc" or (point.startswith("/dev/") and point[5:] in DEV_ENTRIES):
                continue
            if "ro" not in options:
                return False
    return True


def _proc_sys_read_only() -> bool:
    return _refused(lambda: open("/proc/sys/kernel/hostname", "w"), errno.EROFS, errno.EACCES, errno.EPERM) and \
        _refused(lambda: open("/proc/sys/kernel/core_pattern", "w"), errno.EROFS, errno.EACCES, errno.EPERM)


def _minimal_dev() -> bool:
    return set(os.listdir("/dev")) <= DEV_ENTRIES


def _readable_python() -> bool:
    """Student code can import the standard library (an interpreter under /root would not be)."""
    import sys

    stdlib = os.path.dirname(os.__file__)
    return all(os.access(p, os.R_OK | os.X_OK) for p in (sys.executable, stdlib, os.path.join(stdlib, "encodings")))


def _mount_points() -> set[str]:
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            return {line.split()[4] for line in f.read().decode("utf-8", "replace").splitlines()}
    except OSError:
        return set()


def _hidden(paths: Sequence[str]) -> bool:
    """Nothing under a staff path can be read: it is absent or unreadable to us, or it holds only
    directories leading to other mounts (the exact binds of the new root, such as numpy in a
    virtual environment that lives inside a source checkout)."""
    mounts = _mount_points()
    for path in paths:
        if not os.path.isdir(path):  # a staff file (a rubric): nothing may come out of it
            try:
                with open(path, "rb") as f:
                    if f.read(1):
                        return False
            except OSError:
                pass
            continue
        for top, dirs, files in os.walk(path, onerror=lambda e: None):
            if files or any(os.path.islink(os.path.join(top, d)) for d in dirs):
                return False
            dirs[:] = [d for d in dirs if os.path.join(top, d) not in mounts]
    return True


def _capped_tmp(size_mb: int, inodes: int) -> bool:
    st = os.statvfs(WORK)
    return 0 < st.f_blocks * st.f_frsize <= size_mb * 1024 * 1024 and 0 < st.f_files <= inodes


def _rlimits(limits: dict[str, int]) -> bool:
    mb = 1024 * 1024
    want = {resource.RLIMIT_AS: limits["memory_mb"] * mb, resource.RLIMIT_FSIZE: limits["max_file_mb"] * mb,
            resource.RLIMIT_NOFILE: limits["max_open_files"], resource.RLIMIT_CORE: 0}
    return all(resource.getrlimit(r) == (v, v) for r, v in want.items())


def run(request: dict[str, Any]) -> dict[str, Any]:
    """Probe every layer that the request's mode promises; ``ok`` when all required ones hold."""
    mode = request["mode"]
    probes: dict[str, Callable[[], bool]] = {
        "non-root-uid": _non_root,
        "no-capabilities": _no_capabilities,
        "no-new-privileges": lambda: _status().get("NoNewPrivs") == "1",
        "seccomp-filter": lambda: _seccomp(mode),
        "rlimits": lambda: _rlimits(request["limits"]),
        "hidden-reference": lambda: _hidden(request["hide"]),
    }
    if mode == "namespaces":
        host = request.get("host_ns", {})
        for name in NAMESPACES:
            probes[f"{name}-namespace"] = functools.partial(_namespace, name, host)
        probes.update({
            "no-network": _only_loopback,
            "read-only-filesystem": lambda: _read_only_mounts(("/tmp", "/dev/shm")),
            "read-only-proc-sys": _proc_sys_read_only,
            "minimal-dev": _minimal_dev,
            "capped-tmpfs-workdir": lambda: _capped_tmp(request["tmp_mb"], request["tmp_inodes"]),
        })
    else:
        probes["separate-uid"] = lambda: os.getuid() == request.get("uid")
        probes["readable-python"] = _readable_python
    verified: list[str] = []
    failed: list[str] = []
    for name, probe in probes.items():
        try:
            good = probe()
        except Exception:
            good = False
        (verified if good else failed).append(name)
    return {"mode": mode, "verified": verified, "failed": failed, "ok": not failed or not request.get("strict")}
