"""Process isolation for the local backend, applied to a fresh child before any student code.

Standard library only: this runs inside the sandbox's own interpreter (the zygote's children).
See docs/SECURITY.md for what each layer stops. In order, a job's first process:

1. ``unshare``: new mount, PID, network, IPC, UTS and cgroup namespaces (plus a user namespace
   when the grader is not root, mapping the host uid to 65534 inside);
2. forks the PID namespace's init, which builds a new root filesystem on an empty tmpfs
   (``build_root``): read-only binds of the system directories with every Python package
   directory covered, then exactly the interpreter's standard library, the numpy package and the
   sandbox bundle; a minimal ``/dev``; a fresh ``/proc`` with ``/proc/sys`` read-only; a
   size- and inode-capped tmpfs ``/tmp`` holding the job; then ``pivot_root`` into it;
3. ``drop_privileges``: root switches to an unprivileged host uid (never uid 0, so no sysctl or
   root-owned device node is reachable), every capability is dropped, no-new-privs is set;
4. ``seccomp.install``: the syscall filter (no keyrings, ptrace, mounts, namespaces, non-Unix
   sockets...);
5. ``apply_limits``: rlimits.

Where namespaces are not available (a container such as Gradescope's, running as root), only 3-5
apply, with a separate random uid per job (``fallback_workdir``): the PrairieLearn/Autolab model.
"""

from __future__ import annotations

import ctypes
import glob
import os
import resource
import sys
from collections.abc import Iterable, Sequence

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 1 << 12, 1 << 14, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER = 1, 4, 24, 36
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
SANDBOX_ID = 65534  # the uid and gid student code has inside a user namespace
WORK = "/tmp/work"
DEVICES = ("null", "zero", "full", "random", "urandom")
DEV_ENTRIES = frozenset((*DEVICES, "shm", "fd", "stdin", "stdout", "stderr"))
# Kernel files a job has no business reading; covered by /dev/null (as Docker does).
PROC_MASKED = ("kcore", "keys", "timer_list", "sched_debug", "latency_stats", "kallsyms", "sysrq-trigger")
PROC_READ_ONLY = ("sys", "irq", "bus", "fs")
COVER = "size=64k,nr_inodes=256,mode=755"
SYSTEM_BINDS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(int(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data))), f"mount {target}")


def _bind(source: str, target: str, read_only: bool = True) -> None:
    _mount(source, target, None, MS_BIND)
    if read_only:
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def unshare_namespaces() -> None:
    """New mount, PID (for the next child), network, IPC, UTS and cgroup namespaces; as an ordinary
    user inside a user namespace mapping only our own uid (to 65534). Single-threaded callers only."""
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP
    _check(_libc.unshare(flags | (0 if uid == 0 else CLONE_NEWUSER)), "unshare")
    if uid != 0:
        for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{SANDBOX_ID} {uid} 1"),
                           ("/proc/self/gid_map", f"{SANDBOX_ID} {gid} 1")):
            with open(path, "w") as f:
                f.write(text)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    name = b"sandbox"
    _check(_libc.sethostname(name, len(name)), "sethostname")


def python_paths() -> tuple[list[str], list[str]]:
    """(directories to bind, package directories to cover) for this interpreter.

    Bound: the standard library and lib-dynload, the numpy package (and its bundled libraries).
    Covered: every site-packages / dist-packages directory a bound directory contains, so that no
    installed package (the grader's own data among them) can be named from inside."""
    import numpy

    stdlib = os.path.dirname(os.__file__)
    numpy_dir = os.path.dirname(os.path.realpath(numpy.__file__))
    binds = [os.path.realpath(stdlib), numpy_dir]
    binds += [p for p in (numpy_dir + ".libs", os.path.join(os.path.dirname(numpy_dir), "numpy.libs")) if os.path.isdir(p)]
    dynload = os.path.join(stdlib, "lib-dynload")
    if os.path.isdir(dynload):
        binds.append(os.path.realpath(dynload))
    binds.append(os.path.dirname(os.path.realpath(sys.executable)))
    covers: set[str] = set()
    for pattern in ("/usr/lib/python3*/*-packages", "/usr/local/lib/python3*/*-packages",
                    "/usr/lib/python3/dist-packages", os.path.join(os.path.realpath(stdlib), "*-packages")):
        covers.update(os.path.realpath(p) for p in glob.glob(pattern))
    covers.update(os.path.realpath(p) for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    return sorted(set(binds)), sorted(c for c in covers if os.path.isdir(c))


def build_root(newroot: str, binds: Sequence[str], covers: Sequence[str], hide: Iterable[str],
               tmp_size_mb: int, tmp_inodes: int, owner: tuple[int, int]) -> None:
    """Make ``newroot`` the root of this mount namespace; see the module docstring.

    Must run in the new PID namespace's init (``/proc`` is mounted for it) while the old root is
    still attached. ``binds`` keep their own paths, read-only; ``covers`` become empty and
    read-only; ``hide`` (staff data) is covered too, wherever it is, before any bind below it, so that
    only those exact binds show through."""
    _mount("tmpfs", newroot, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=755")
    entries: list[tuple[str, str, str]] = [("/tmp", "tmp", "")]  # (path, kind, source)
    for system in SYSTEM_BINDS:
        if os.path.islink(system):
            entries.append((system, "link", os.readlink(system)))
        elif os.path.isdir(system):
            entries.append((system, "bind", system))
    hidden = {os.path.realpath(p) for p in hide} - {"/"}
    entries += [(p, "bind", p) for p in binds] + [(p, "cover", "") for p in sorted({*covers, *hidden}) if os.path.isdir(p)]
    entries += [(p, "blank", "") for p in sorted(hidden) if os.path.isfile(p)]  # a staff file (a rubric)
    covered = []
    for path, kind, source in sorted(entries, key=lambda e: (e[0].count("/"), e[1] != "cover", e[0])):
        target = newroot + path
        if kind == "link":
            if not os.path.lexists(target):
                os.symlink(source, target)
            continue
        if kind == "blank":  # where a bind above shows it, an empty read-only file takes its place
            if os.path.isfile(target):
                _bind("/dev/null", target)
            continue
        os.makedirs(target, 0o755, exist_ok=True)
        if kind == "tmp":  # the job's only writable space besides /dev/shm
            _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmp_size_mb}m,nr_inodes={tmp_inodes},mode=1777")
        elif kind == "cover":
            _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, COVER)
            covered.append(target)
        else:
            _bind(source, target)
    for target in covered:  # read-only once whatever they hold again is bound in
        _mount(None, target, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, COVER)
    _make_dev(newroot)
    _make_proc(newroot)
    os.mkdir(newroot + WORK, 0o700)
    os.chown(newroot + WORK, *owner)
    os.mkdir(newroot + "/.old", 0o700)
    _check(_libc.syscall(155, newroot.encode(), (newroot + "/.old").encode()), "pivot_root")  # SYS_pivot_root
    os.chdir("/")
    _check(_libc.umount2(b"/.old", MNT_DETACH), "detach the old root")
    os.rmdir("/.old")
    _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=755")


def _make_dev(newroot: str) -> None:
    dev = newroot + "/dev"
    os.mkdir(dev, 0o755)
    _mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=755")
    for name in DEVICES:
        with open(f"{dev}/{name}", "w"):
            pass
        _mount(f"/dev/{name}", f"{dev}/{name}", None, MS_BIND)
        _mount(None, f"{dev}/{name}", None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC)
    os.mkdir(f"{dev}/shm", 0o1777)
    _mount("tmpfs", f"{dev}/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=16m,nr_inodes=256,mode=1777")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{dev}/{name}")
    _mount(None, dev, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=755")


def _make_proc(newroot: str) -> None:
    proc = newroot + "/proc"
    os.mkdir(proc, 0o555)
    _mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in PROC_READ_ONLY:
        if os.path.isdir(f"{proc}/{name}"):
            _bind(f"{proc}/{name}", f"{proc}/{name}")
    for name in PROC_MASKED:
        if os.path.exists(f"{proc}/{name}"):
            _bind(f"{newroot}/dev/null", f"{proc}/{name}")


def become_init() -> None:
    """In the new PID namespace's first process: die with our parent."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0), "prctl(PDEATHSIG)")


def fallback_workdir(workdir: str, uid: int, gid: int) -> str:
    """Without namespaces (root only): a work dir that only the job's own uid can write."""
    os.chmod(workdir, 0o711)
    work = os.path.join(workdir, "work")
    os.mkdir(work, 0o700)
    os.chown(work, uid, gid)
    return work


def drop_privileges(uid: int | None, gid: int | None) -> None:
    """Never uid 0, no capabilities now or after any exec. ``uid`` is the host uid a root grader
    switches to (None inside a user namespace, where we already are 65534)."""
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:
            break  # EINVAL: past the last capability this kernel knows
    if uid is not None and gid is not None:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable (x2): all zero
    _check(_libc.capset(header, data), "capset")
    if os.getuid() == 0 or os.geteuid() == 0:
        raise OSError("the sandbox is still uid 0")


def hide_from_siblings() -> None:
    """Processes of the same uid may not ptrace us or open our /proc files (the result pipe)."""
    _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(DUMPABLE)")


def become_subreaper() -> None:
    """Orphaned descendants are re-parented to this process, which then reaps (and can kill) them."""
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(CHILD_SUBREAPER)")


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
        (resource.RLIMIT_MSGQUEUE, 0),
        (resource.RLIMIT_MEMLOCK, 0),
    ):
        resource.setrlimit(res, (value, value))
