"""The local sandbox's syscall filter, compiled and loaded by libseccomp (through ctypes).

Default allow, with a deny list close to Docker's default profile and nsjail's: nothing that
reaches the kernel's keyrings, another process's memory, mounts, namespaces, kernel modules,
the clock, BPF, io_uring, perf or SysV IPC; sockets only of the Unix family (none in fallback mode); no terminal injection.
Denied calls fail with EPERM (``clone3`` with ENOSYS, so that the C library falls back to
``clone``, whose namespace flags are filtered). Standard library only: it runs in the sandbox.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno

DENIED = (
    "add_key", "request_key", "keyctl", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "fsopen", "fsconfig", "fsmount",
    "fspick", "move_mount", "open_tree", "mount_setattr", "bpf", "perf_event_open", "userfaultfd",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "swapon", "swapoff",
    "reboot", "syslog", "acct", "quotactl", "open_by_handle_at", "name_to_handle_at", "lookup_dcookie",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "iopl", "ioperm", "vhangup", "uselib",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname",
    "personality", "pidfd_getfd",
    # SysV IPC: without an IPC namespace (fallback mode) its objects outlive the job and pin host memory
    "shmget", "shmat", "shmdt", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop",
    "semtimedop", "semctl",
)
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
AF_UNIX = 1
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_NE, SCMP_CMP_EQ, SCMP_CMP_MASKED_EQ = 1, 4, 7


def _errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _Arg(ctypes.Structure):
    _fields_ = (("arg", ctypes.c_uint), ("op", ctypes.c_int), ("a", ctypes.c_uint64), ("b", ctypes.c_uint64))


_loaded: list[ctypes.CDLL] = []


def library() -> ctypes.CDLL:
    """libseccomp, loaded once per process (the zygote loads it before it forks any job)."""
    if not _loaded:
        try:  # by its soname first: find_library runs ldconfig, a process start per zygote
            _loaded.append(ctypes.CDLL("libseccomp.so.2", use_errno=True))
        except OSError:
            path = ctypes.util.find_library("seccomp")
            try:
                _loaded.append(ctypes.CDLL(path or "libseccomp.so.2", use_errno=True))
            except OSError as e:
                raise OSError(f"libseccomp is not installed ({e}); install the libseccomp2 package") from e
    return _loaded[0]


def install(unix_sockets: bool = True) -> None:
    """Load the filter into this process (inherited by every child); OSError when it cannot be.

    Without ``unix_sockets`` (fallback mode, which shares the host's file system and network
    namespace) no socket can be made at all: the host's Unix-socket services (D-Bus, syslog,
    databases, abstract sockets such as X11's) stay out of reach. ``socketpair`` still works."""
    lib = library()
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_rule_add_array.argtypes = (ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_Arg))
    lib.seccomp_load.argtypes = lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise OSError("seccomp_init failed")
    try:
        def rule(name: str, action: int, *args: tuple[int, int, int, int]) -> None:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:
                return  # not a syscall on this architecture
            array = (_Arg * max(1, len(args)))(*(_Arg(*a) for a in args))
            rc = lib.seccomp_rule_add_array(ctx, action, nr, len(args), array)
            if rc != 0:
                raise OSError(-rc, f"seccomp rule for {name}: {errno.errorcode.get(-rc, rc)}")

        eperm = _errno(errno.EPERM)
        for name in dict.fromkeys(DENIED):
            rule(name, eperm)
        rule("clone3", _errno(errno.ENOSYS))
        for flag in NAMESPACE_FLAGS:
            rule("clone", eperm, (0, SCMP_CMP_MASKED_EQ, flag, flag))
        if unix_sockets:
            rule("socket", _errno(errno.EAFNOSUPPORT), (0, SCMP_CMP_NE, AF_UNIX, 0))
        else:
            rule("socket", _errno(errno.EAFNOSUPPORT))
        for request in (TIOCSTI, TIOCLINUX):
            rule("ioctl", eperm, (1, SCMP_CMP_MASKED_EQ, 0xFFFFFFFF, request))
        rc = lib.seccomp_load(ctx)
        if rc != 0:
            raise OSError(-rc, f"seccomp_load: {errno.errorcode.get(-rc, rc)}")
    finally:
        lib.seccomp_release(ctx)
