"""Attacks on the local sandbox's own layers, in each way it runs: as root with namespaces, as root
without them (fallback: a separate uid per job), and as an ordinary user (uid 65534).

Each test runs hostile code as an import-only job in a fresh driver process (``tt_modes``) and
checks what a student could reach, what the report claims (``backend.isolation`` lists a layer
only when it held), and what the run left on the host. Payloads only probe: they open files
without writing, write only in their own directories or ``/tmp/tt_pwned_<token>*``, allocate at
most 768 MiB and fork at most a handful of processes, so they are harmless even unsandboxed.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import tt_modes
from tt_modes import MODES, Mode

NAMESPACED = [m for m in MODES if m.local_mode != "fallback"]
ROOT_OWNED_DEVICES = ("/dev/loop0", "/dev/loop-control", "/dev/sda", "/dev/vda", "/dev/nvme0n1", "/dev/vcs",
                      "/dev/vcsa", "/dev/vcs1", "/dev/tty1", "/dev/tty0", "/dev/console", "/dev/kvm", "/dev/fuse",
                      "/dev/userfaultfd", "/dev/mem", "/dev/kmem", "/dev/port", "/dev/net/tun", "/dev/kmsg",
                      "/dev/mapper/control", "/dev/btrfs-control", "/dev/hwrng", "/dev/cpu/0/msr")
MINIMAL_DEV = {"null", "zero", "full", "random", "urandom", "shm", "fd", "stdin", "stdout", "stderr"}


def _modes(modes: list[Mode] | tuple[Mode, ...]) -> list[Any]:
    return [pytest.param(m, id=m.id) for m in modes]


@pytest.fixture
def token() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
def where(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A private directory that the job's users can reach (pytest's own tmp root is mode 700)."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="tt-sandbox-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _run(mode: Mode, where: Path, codes: list[str], **options: Any) -> tt_modes.Outcome:
    reason = tt_modes.unavailable(mode)
    if reason:
        pytest.skip(reason)
    outcome = tt_modes.run(mode, codes, where, **options)
    refused = [j["refused"] for j in outcome.jobs if "refused" in j]
    assert not refused or options.get("official"), refused
    return outcome


def _sysv_ipc() -> set[str]:
    """SysV IPC objects on the host whose creator could be a job: a job uid, or 65534."""
    from grader.sandbox.local import UID_BASE, UID_SPAN

    found = set()
    for kind in ("shm", "msg", "sem"):
        try:
            head, *lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except (OSError, ValueError):
            continue
        cuid = head.split().index("cuid")
        for line in lines:
            fields = line.split()
            if int(fields[cuid]) == tt_modes.NOBODY or UID_BASE <= int(fields[cuid]) < UID_BASE + UID_SPAN:
                found.add(f"{kind} {' '.join(fields[:2])} created by uid {fields[cuid]}")
    return found


# ---- (1) /proc/sys and other root-owned kernel knobs ---------------------------------------------

SYSCTL = r'''
import os, ctypes
writable, walked = [], 0
for top, dirs, files in os.walk("/proc/sys"):
    for name in files:
        walked += 1
        path = os.path.join(top, name)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        os.close(fd)
        if os.getuid() != 0 and name not in ("drop_caches", "compact_memory"):
            try:   # some files open for anyone and check rights on write: write back what is there
                with open(path, "rb") as f:
                    value = f.read(4096)
                if not value:
                    continue
                with open(path, "wb", buffering=0) as f:
                    f.write(value)
            except OSError:
                continue
        writable.append(path)
    if walked > 5000:
        break
for path in ("/proc/sysrq-trigger", "/proc/sys/kernel/core_pattern", "/proc/sys/kernel/hostname"):
    try:
        os.close(os.open(path, os.O_WRONLY))
        writable.append(path)
    except OSError:
        pass
tt("walked", walked)
tt("writable", writable[:20])
tt("uid", [os.getuid(), os.geteuid()])
'''


@pytest.mark.parametrize("mode", _modes(MODES))
def test_no_sysctl_is_writable(mode: Mode, where: Path) -> None:
    """The job is never uid 0 and /proc/sys is read-only: kernel.core_pattern (a pipe to a helper
    that the kernel runs as host root), the hostname and every other sysctl stay out of reach."""
    hostname = socket.gethostname()
    outcome = _run(mode, where, [SYSCTL])
    facts = outcome.facts()
    assert facts.get("walked", 0) > 50, f"the payload did not run: {outcome.jobs[0]['log'][-2000:]}"
    assert facts["writable"] == [], f"{mode.id}: the job can write {facts['writable']}"
    assert 0 not in facts["uid"]
    assert socket.gethostname() == hostname
    assert "non-root-uid" in outcome.layers()
    if mode.local_mode != "fallback":
        assert "read-only-proc-sys" in outcome.layers()


# ---- (2) device nodes -----------------------------------------------------------------------------

DEVICES = r'''
import os, stat
wanted = list(WANTED)
try:
    wanted += ["/dev/" + n for n in os.listdir("/dev") if stat.S_ISBLK(os.lstat("/dev/" + n).st_mode)]
    tt("dev", sorted(os.listdir("/dev")))
except OSError as e:
    tt("dev", str(e))
opened = []
for path in dict.fromkeys(wanted):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)   # opened, never read
    except OSError:
        continue
    os.close(fd)
    opened.append(path)
tt("opened", opened)
try:
    os.mknod("tt-loop0", 0o600 | stat.S_IFBLK, os.makedev(7, 0))
    os.unlink("tt-loop0")
    tt("mknod", True)
except OSError:
    tt("mknod", False)
'''


@pytest.mark.parametrize("mode", _modes(MODES))
def test_no_root_owned_device_node_opens(mode: Mode, where: Path) -> None:
    """Loop and block devices, the consoles, kvm, fuse and userfaultfd cannot be opened or made;
    with namespaces /dev holds only the minimal set."""
    outcome = _run(mode, where, [DEVICES.replace("WANTED", repr(ROOT_OWNED_DEVICES))])
    facts = outcome.facts()
    assert "opened" in facts, outcome.jobs[0]["log"][-2000:]
    opened = facts["opened"]
    if mode.local_mode == "fallback":  # no private /dev: what the host opens to every user stays open
        opened = [p for p in opened if os.stat(p).st_mode & 0o006 != 0o006]
    assert opened == [], f"{mode.id}: the job opened {opened}"
    assert facts["mknod"] is False
    if mode.local_mode != "fallback":
        assert set(facts["dev"]) <= MINIMAL_DEV, facts["dev"]
        assert "minimal-dev" in outcome.layers()


# ---- (3) staff data: the reference solution, rubrics, example solutions, expected outputs ----------

STEAL = r'''
import glob, os, sys
candidates = set(STAFF)
for entry in sys.path + ["/usr/local/lib", "/usr/lib", "/opt", "/srv", "/autograder/source", os.getcwd()]:
    base = entry
    for _ in range(5):
        for rel in ("grader/modules/embeddings/reference/solution.py", "modules/embeddings/reference/solution.py",
                    "grader/modules/embeddings/rubric.toml", "grader/_data/reference/solution/embeddings.py",
                    "reference/solution/embeddings.py", "submissions/correct_tinytorch.ipynb",
                    "rubrics/embeddings.toml", "grader/_data/rubrics/embeddings.toml"):
            candidates.add(os.path.join(base, rel))
        base = os.path.dirname(base)
for pattern in ("/usr/lib/python3*/*-packages/grader/modules/*/reference/*.py",
                "/usr/local/lib/python3*/*-packages/grader/modules/*/reference/*.py",
                "/opt/*/lib/python3*/site-packages/grader/modules/*/reference/*.py",
                "/opt/*/lib/python3*/site-packages/grader/_data/reference/solution/*.py",
                "/root/.cache/tinytorch-grader/expected/*/*"):
    candidates.update(glob.glob(pattern))
read = []
for path in sorted(candidates):
    try:
        with open(path, "rb") as f:
            if f.read(64):
                read.append(path)
    except OSError:
        pass
tt("tried", len(candidates))
tt("read", read)
'''


def _staff_files() -> list[str]:
    from grader.sandbox.local import source_checkout, staff_paths

    files = [str(f) for p in staff_paths() for f in ([p] if p.is_file() else p.iterdir()) if f.is_file()]
    checkout = source_checkout()
    if checkout is not None:
        files += [str(p) for p in checkout.glob("submissions/correct_*")]
    return files


@pytest.mark.parametrize("mode", _modes(MODES))
def test_staff_files_unreadable_or_not_claimed(mode: Mode, where: Path) -> None:
    """With namespaces no staff file can be named from inside. Without them (fallback) the staff
    files are only as hidden as their permissions: the report claims ``hidden-reference`` only
    when none could be read, and official grading refuses otherwise."""
    code = STEAL.replace("STAFF", repr(_staff_files()))
    outcome = _run(mode, where, [code])
    facts = outcome.facts()
    assert facts.get("tried", 0) > 10, outcome.jobs[0]["log"][-2000:]
    claimed = "hidden-reference" in outcome.layers()
    if mode.local_mode != "fallback":
        assert facts["read"] == [] and claimed, f"{mode.id}: the job read {facts['read']}"
    else:
        assert claimed == (facts["read"] == []), f"hidden-reference claimed={claimed}, read {facts['read']}"
        if not claimed:
            official = _run(mode, where / "official", ["x = 1"], official=True)
            assert "hidden-reference" in official.jobs[0].get("refused", ""), official.jobs[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="writes a staff checkout under /usr/local/src (root only)")
def test_checkout_inside_a_bound_system_directory_is_hidden(where: Path, token: str) -> None:
    """A source checkout under /usr (bound read-only into the sandbox) is covered as a whole: its
    reference, rubrics and example solutions (submissions/correct_*) cannot be read."""
    root = next(m for m in MODES if m.id == "root")
    src = Path(__file__).resolve().parents[2]
    staff = Path("/usr/local/src") / f"tt-staff-{token}"
    try:
        for name in ("grader", "reference", "submissions"):
            shutil.copytree(src / name, staff / name, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(src / "pyproject.toml", staff / "pyproject.toml")
        unit = staff / "grader" / "modules" / "embeddings"
        wanted = [str(unit / "reference" / "solution.py"), str(unit / "rubric.toml"),
                  str(staff / "submissions/correct_tinytorch.ipynb"), str(staff / "grader/paths.py")]
        outcome = _run(root, where, [STEAL.replace("STAFF", repr(wanted))], env={"PYTHONPATH": str(staff)})
    finally:
        shutil.rmtree(staff, ignore_errors=True)
    facts = outcome.facts()
    assert facts.get("tried", 0) > 10, outcome.jobs[0]["log"][-2000:]
    assert facts["read"] == [], f"the job read {facts['read']}"
    assert "hidden-reference" in outcome.layers()


# ---- (4) processes left behind, rewriting results after the grader wrote them ----------------------

LINGER = r'''
import os, time, ctypes
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(15, b"ttd-TOKEN", 0, 0, 0)   # PR_SET_NAME: the host finds us by it
        end = time.monotonic() + 20
        while time.monotonic() < end:
            for name in ("out/import.json", "out/forged.json", "/tmp/tt_pwned_TOKEN_linger"):
                try:
                    with open(name + ".x", "w") as f:
                        f.write('{"chunk_errors": [], "defined": ["TT-LATE"]}')
                    os.replace(name + ".x", name)
                except OSError:
                    pass
            time.sleep(0.01)
    os._exit(0)
time.sleep(0.3)
'''


def _named(comm: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == comm:
                found.append(int(pid))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("mode", _modes(MODES))
def test_no_process_outlives_the_job(mode: Mode, where: Path, token: str) -> None:
    """A setsid'ed grandchild that keeps rewriting results is dead before the outputs are sent (the
    host keeps them in memory: nothing on disk to rewrite), and nothing of the job is left running."""
    outcome = _run(mode, where, [LINGER.replace("TOKEN", token)])
    job = outcome.jobs[0]
    assert "import.json" in job["out"], job["log"][-2000:]
    time.sleep(1.0)
    assert _named(f"ttd-{token}") == [], "a process of the job is still running"
    assert not Path(f"/tmp/tt_pwned_{token}_linger").exists()


# ---- (7) per-submission limits, IPC, keyrings, leftovers ------------------------------------------

MEMORY = r'''
import os, mmap, time
SIZE = 256 << 20
pipes, pids = [], []
for _ in range(3):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        ok = b"n"
        try:
            m = mmap.mmap(-1, SIZE)
            for i in range(0, SIZE, 4096):
                m[i] = 1
            ok = b"y"
        except BaseException:
            pass
        os.write(w, ok)
        time.sleep(3)
        os._exit(0)
    os.close(w)
    pipes.append(r)
    pids.append(pid)
filled = [os.read(r, 1).decode() or "k" for r in pipes]
time.sleep(1.0)  # all three hold their memory now, unless a limit killed one (even one that had filled)
held = ["y" if f == "y" and os.waitpid(pid, os.WNOHANG) == (0, 0) else "n" for f, pid in zip(filled, pids)]
tt("filled", held)
'''


@pytest.mark.parametrize("mode", _modes(MODES))
def test_memory_limit_is_per_submission(mode: Mode, where: Path) -> None:
    """Three children of 256 MiB each, under a 512 MiB limit: each is within a per-process limit, so
    only a per-submission cgroup stops them all succeeding. Where no cgroup can be made (an
    ordinary user) the report must not claim one and official grading refuses."""
    limits = {"memory_mb": 512}
    outcome = _run(mode, where, [MEMORY], limits=limits)
    filled = outcome.facts().get("filled")
    if "memory-cgroup" in outcome.layers():
        assert filled != ["y", "y", "y"], "3 x 256 MiB were held at once under a 512 MiB per-submission limit"
    else:
        assert mode.user != "root", "root can make memory cgroups: the layer should be there"
        official = _run(mode, where / "official", ["x = 1"], official=True, limits=limits)
        assert "memory-cgroup" in official.jobs[0].get("refused", ""), official.jobs[0]


FILL = r'''
import os
mb = inodes = 0
for i in range(100):
    try:
        with open(f"tt-fill-{i}", "wb") as f:
            f.write(b"x" * (1 << 20))
        mb += 1
    except OSError:
        break
for i in range(3000):
    try:
        open(f"tt-ino-{i}", "w").close()
        inodes += 1
    except OSError:
        break
tt("mb", mb)
tt("inodes", inodes)
'''


@pytest.mark.parametrize("mode", _modes(NAMESPACED))
def test_workdir_is_capped_in_size_and_inodes(mode: Mode, where: Path) -> None:
    outcome = _run(mode, where, [FILL], limits={"tmp_mb": 16, "tmp_inodes": 512})
    facts = outcome.facts()
    assert "mb" in facts, outcome.jobs[0]["log"][-2000:]
    assert facts["mb"] <= 16 and facts["inodes"] <= 512, facts
    assert "capped-tmpfs-workdir" in outcome.layers()


SHARED = r'''
import os
left = []
for where in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock"):
    try:
        os.makedirs(f"{where}/tt_pwned_TOKEN_dir/sub", exist_ok=True)
        with open(f"{where}/tt_pwned_TOKEN_file", "wb") as f:
            f.write(b"x" * 4096)
        left.append(where)
    except OSError:
        pass
tt("left", left)
'''


@pytest.mark.parametrize("mode", _modes(MODES))
def test_nothing_left_in_shared_directories(mode: Mode, where: Path, token: str) -> None:
    """Files a job leaves in /tmp, /var/tmp, /dev/shm or /run/lock are gone after it (private tmpfs with
    namespaces; deleted by the uid sweep in fallback mode)."""
    outcome = _run(mode, where, [SHARED.replace("TOKEN", token)])
    assert "left" in outcome.facts(), outcome.jobs[0]["log"][-2000:]
    found = [f"{d}/{n}" for d in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock") if os.path.isdir(d)
             for n in os.listdir(d) if token in n]
    for path in found:  # ours (the token is unique): remove before failing
        shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.unlink(path)
    assert found == [], f"left on the host: {found}"


IPC = r'''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
got = {}
for name, nr, args in (("shmget", 29, (0, 1 << 20, 0o1666)), ("msgget", 68, (0, 0o1666)),
                       ("semget", 64, (0, 1, 0o1666))):
    rc = libc.syscall(nr, *args)
    got[name] = rc if rc >= 0 else -ctypes.get_errno()
tt("ipc", got)
'''


@pytest.mark.parametrize("mode", _modes(MODES))
def test_sysv_ipc_refused_and_nothing_survives(mode: Mode, where: Path) -> None:
    before = _sysv_ipc()
    outcome = _run(mode, where, [IPC])
    got = outcome.facts().get("ipc")
    assert got is not None, outcome.jobs[0]["log"][-2000:]
    assert all(v < 0 for v in got.values()), f"{mode.id}: SysV IPC objects were created: {got}"
    assert _sysv_ipc() - before == set()


KEYS = r'''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    rc = libc.syscall(nr, *args)
    return rc if rc >= 0 else -ctypes.get_errno()
if PHASE == 1:   # add a key to the user and session keyrings
    tt("add_key", [call(248, b"user", b"tt-TOKEN", b"carried", 7, ring) for ring in (-4, -3, -5)])
else:            # the next submission from the same zygote looks for it
    tt("request_key", call(249, b"user", b"tt-TOKEN", None, 0))
    tt("search", [call(250, 10, ring, b"user", b"tt-TOKEN", 0) for ring in (-4, -3, -5)])
    try:
        tt("proc_keys", "tt-TOKEN" in open("/proc/keys").read())
    except OSError:
        tt("proc_keys", False)
'''


@pytest.mark.parametrize("mode", _modes(MODES))
def test_no_keyring_access_and_nothing_carried_to_the_next_job(mode: Mode, where: Path, token: str) -> None:
    code = KEYS.replace("TOKEN", token)
    outcome = _run(mode, where, [code.replace("PHASE", "1"), code.replace("PHASE", "2")])
    first, second = outcome.facts(0), outcome.facts(1)
    assert "add_key" in first and "search" in second, outcome.jobs[1]["log"][-2000:]
    assert all(rc < 0 for rc in first["add_key"]), f"add_key succeeded: {first}"
    assert second["request_key"] < 0 and all(rc < 0 for rc in second["search"]) and not second["proc_keys"], second
    assert token not in Path("/proc/keys").read_text()


def test_nothing_left_on_the_host_after_many_jobs(where: Path) -> None:
    """Cgroups, mounts and grader temp dirs, counted before and after five jobs (one of them
    killed at its deadline) and the sandbox's close()."""
    from grader.sandbox.cgroup import leftovers

    root = next(m for m in MODES if m.id == "root")
    before = set(leftovers())
    busy = "import time\nwhile True:\n    time.sleep(0.05)"
    outcome = _run(root, where, ["x = 1", busy, "import os\nos._exit(3)", "x = 2", "x = 3"],
                   import_timeout_s=2, total_timeout_s=3)
    assert outcome.jobs[1]["killed"], outcome.jobs[1]
    assert outcome.leftovers() == []
    new = set(leftovers()) - before
    assert not [p for p in new if str(p) in outcome.raw["cgroups_left"]]


# ---- the sandbox's own machinery: supervisor, seccomp, outputs -------------------------------------

SUPERVISOR = r'''
import os, signal, ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
sup = os.getppid()
def call(nr, *args):
    rc = libc.syscall(nr, *args)
    return rc if rc >= 0 else -ctypes.get_errno()
seen = {"ptrace": call(101, 16, sup, 0, 0)}            # PTRACE_ATTACH
pidfd = call(434, sup, 0)
seen["pidfd_getfd"] = [call(438, pidfd, n, 0) for n in range(3, 8)] if pidfd >= 0 else []
seen["fds"] = []
for n in range(12):
    try:
        seen["fds"].append(os.readlink(f"/proc/{sup}/fd/{n}"))
    except OSError:
        pass
for name in ("mem", "environ", "maps"):
    try:
        with open(f"/proc/{sup}/{name}", "rb") as f:
            f.read(16)
        seen[name] = "read"
    except OSError:
        seen[name] = "denied"
tt("supervisor", seen)
for sig in SIGNALS:
    try:
        os.kill(sup, sig)
    except OSError:
        pass
time.sleep(0.3)
'''


@pytest.mark.parametrize("mode", _modes(MODES))
def test_supervisor_cannot_be_read_or_stopped(mode: Mode, where: Path) -> None:
    """The job cannot ptrace the supervisor, take its descriptors (the result stream) or read its
    memory; with namespaces it is the PID namespace's init, and no signal from the job ends it.
    (In fallback mode it shares the job's uid: SIGKILL ends it, and the run then has no results.)"""
    signals = "(2, 1, 3, 10, 15, 19, 9)" if mode.local_mode != "fallback" else "(2,)"
    outcome = _run(mode, where, [SUPERVISOR.replace("SIGNALS", signals)])
    job = outcome.jobs[0]
    seen = outcome.facts().get("supervisor")
    assert seen is not None, job["log"][-2000:]
    assert seen["ptrace"] < 0 and all(fd < 0 for fd in seen["pidfd_getfd"]), seen
    assert seen["fds"] == [] and seen["mem"] == seen["environ"] == "denied", seen
    assert "import.json" in job["out"], f"the supervisor did not survive the signals: {job['log'][-2000:]}"


SECCOMP = r'''
import os, ctypes, mmap, socket
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    rc = libc.syscall(nr, *args)
    if rc == 0 and nr in (56,):
        os._exit(0)                      # a clone that worked: the child leaves at once
    return rc if rc >= 0 else -ctypes.get_errno()
got = {
    "clone3": call(435, 0, 0), "clone_newuser": call(56, 0x10000000 | 17, 0, 0, 0, 0),
    "unshare_user": call(272, 0x10000000), "unshare_net": call(272, 0x40000000),
    "io_uring_setup": call(425, 1, 0), "personality": call(135, 0xFFFFFFFF), "bpf": call(321, 0, 0, 0),
    "perf_event_open": call(298, 0, 0, -1, -1, 0), "userfaultfd": call(323, 0), "keyctl": call(250, 0, -4, 0),
    "mount": call(165, b"none", b"/tmp", b"tmpfs", 0, 0), "fsopen": call(430, b"tmpfs", 0),
    "open_tree": call(428, -100, b"/", 0), "setns": call(308, 0, 0), "chroot": call(161, b"/tmp"),
}
# (family, type): inet, inet6, netlink, packet, vsock, alg
for fam, kind in ((2, 2), (10, 2), (16, 3), (17, 3), (40, 1), (38, 5)):
    try:
        socket.socket(fam, kind).close()
        got[f"socket{fam}"] = 0
    except OSError as e:
        got[f"socket{fam}"] = -e.errno
try:
    socket.socketpair(socket.AF_INET).close()
    got["socketpair_inet"] = 0
except OSError as e:
    got["socketpair_inet"] = -e.errno
tt("calls", {k: v for k, v in got.items() if v >= 0})

def in_child(fn):
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if fn() < 0 else 42)
        except BaseException:
            os._exit(0)
    status = os.waitpid(pid, 0)[1]
    return "ok" if os.WIFSIGNALED(status) or os.WEXITSTATUS(status) == 0 else "bypassed"

def x32():
    return libc.syscall(0x40000000 + 250, 0, -4, 0)      # keyctl through the x32 ABI

def int80():   # keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING) through the 32-bit ABI
    code = (b"\xb8" + (288).to_bytes(4, "little") + b"\xbb\x00\x00\x00\x00\xb9" + (0xFFFFFFFC).to_bytes(4, "little")
            + b"\x31\xd2\xcd\x80\xc3")
    m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(code)
    return ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))()

tt("other_abis", {"x32": in_child(x32), "int80": in_child(int80)})
'''


@pytest.mark.parametrize("mode", _modes(MODES))
def test_seccomp_has_no_bypass(mode: Mode, where: Path) -> None:
    """clone3, namespaces through clone/unshare, io_uring, personality, BPF, perf, userfaultfd,
    keyrings, mounts, non-Unix sockets, and the x32 and 32-bit system call ABIs are all refused."""
    outcome = _run(mode, where, [SECCOMP])
    facts = outcome.facts()
    assert "other_abis" in facts, outcome.jobs[0]["log"][-2000:]
    assert facts["calls"] == {}, f"{mode.id}: these calls worked: {facts['calls']}"
    assert facts["other_abis"] == {"x32": "ok", "int80": "ok"}, facts["other_abis"]
    assert "seccomp-filter" in outcome.layers()


OUT_LINKS = r'''
import os
os.makedirs("out", exist_ok=True)
for name, target in (("import.passwd", "/etc/passwd"), ("import", "/etc"), ("import.self", "/proc/self/environ")):
    try:
        os.symlink(target, "out/" + name)
    except OSError:
        pass
try:
    os.mkfifo("out/import.fifo")
except OSError:
    pass
'''


@pytest.mark.parametrize("mode", _modes(MODES))
def test_symlinks_and_fifos_in_out_are_not_followed(mode: Mode, where: Path) -> None:
    outcome = _run(mode, where, [OUT_LINKS])
    job = outcome.jobs[0]
    assert "import.json" in job["out"], job["log"][-2000:]
    assert set(job["out"]) == {"import.json"}, sorted(job["out"])
    assert not any("root:" in text for text in job["out"].values())


@pytest.mark.parametrize("mode", _modes([m for m in MODES if m.local_mode == "fallback"]))
def test_fallback_job_can_read_its_harness_under_a_private_home(mode: Mode, where: Path) -> None:
    """Root's cache usually sits under /root (mode 700), where a job uid cannot read the harness:
    without a readable copy every check of every student crashed."""
    private = where / "private"
    private.mkdir(mode=0o700)
    outcome = _run(mode, where, ["x = 1"], env={"GRADER_CACHE": str(private / "cache")})
    job = outcome.jobs[0]
    assert "import.json" in job["out"], f"the harness could not start: {job['log'][-2000:]}"
    assert outcome.leftovers() == []


def test_without_namespaces_or_root_official_grading_refuses(where: Path) -> None:
    """An ordinary user on a machine without user namespaces has no isolation to offer: official
    grading refuses with the fix; a practice run claims none of the missing layers."""
    plain = Mode("none", "nobody", "none")
    official = _run(plain, where / "official", ["x = 1"], official=True)
    refused = official.jobs[0].get("refused", "")
    assert "docker" in refused.lower() and "namespaces" in refused, official.jobs[0]
    practice = _run(plain, where / "practice", ["x = 1"])
    claimed = practice.layers()
    assert not claimed & {"pid-namespace", "separate-uid", "memory-cgroup", "hidden-reference"}, claimed


UNIX_CONNECT = r'''
import socket
reached = []
for address in (PATH, "\0tt-abstract-TOKEN"):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(1)
        s.connect(address)
        s.sendall(b"hello from a job")
        reached.append(address.replace("\0", "@"))
        s.close()
    except OSError:
        pass
tt("reached", reached)
'''


@pytest.mark.parametrize("mode", _modes(MODES))
def test_host_unix_sockets_are_out_of_reach(mode: Mode, where: Path, token: str) -> None:
    """Services on the host's Unix sockets (D-Bus, syslog, databases, X11's abstract socket): a
    world-connectable path socket and an abstract one on the host are never reached. Without
    namespaces (fallback) the job cannot make a socket at all."""
    path = where / "host.sock"
    listeners = []
    for address in (str(path), f"\0tt-abstract-{token}"):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(address)
        listener.listen(4)
        listener.setblocking(False)
        listeners.append(listener)
    os.chmod(path, 0o777)
    try:
        outcome = _run(mode, where, [UNIX_CONNECT.replace("PATH", repr(str(path))).replace("TOKEN", token)])
        accepted = 0
        for listener in listeners:
            try:
                while True:
                    listener.accept()[0].close()
                    accepted += 1
            except BlockingIOError:
                pass
    finally:
        for listener in listeners:
            listener.close()
    facts = outcome.facts()
    assert "reached" in facts, outcome.jobs[0]["log"][-2000:]
    assert facts["reached"] == [] and accepted == 0, f"{mode.id}: the job reached {facts['reached']}"


@pytest.mark.skipif(os.geteuid() != 0, reason="per-job cgroups are made by a root grader")
def test_groups_left_by_a_killed_grader_are_reaped(token: str) -> None:
    """A grader killed with SIGKILL never runs its finally: the next one deletes the empty job
    groups it left (old enough that no grader can still be about to use them), never a fresh one."""
    from grader.sandbox.cgroup import PREFIX, ROOT, CgroupLimits, JobCgroups

    bases = [ROOT / c / PREFIX for c in ("memory", "pids", "cpu")] + [ROOT / PREFIX, ROOT / "unified" / PREFIX]
    bases = [b for b in bases if b.is_dir()]
    if not bases:
        pytest.skip("no job cgroups on this machine")
    stale = [b / f"tt-stale-{token}" for b in bases]
    fresh = [b / f"tt-fresh-{token}" for b in bases]
    try:
        for group in stale + fresh:
            group.mkdir()
        for group in stale:
            os.utime(group, (time.time() - 3600, time.time() - 3600))
        JobCgroups.create(CgroupLimits(64, 8, 1.0)).remove()
        assert [g for g in stale if g.exists()] == []
        assert all(g.exists() for g in fresh)
    finally:
        for group in stale + fresh:
            if group.exists():
                group.rmdir()


@pytest.mark.skipif(os.geteuid() != 0, reason="writes a staff file under /usr/local/src (root only)")
def test_a_staff_file_inside_a_bound_directory_is_blanked(where: Path, token: str) -> None:
    """A unit's rubric is a single file: where a bind shows it, the job reads nothing from it, and
    the layer check checks files too (an unreadable or empty file, never a readable one)."""
    root = next(m for m in MODES if m.id == "root")
    staff = Path("/usr/local/src") / f"tt-staff-{token}"
    rubric = staff / "rubric.toml"
    try:
        staff.mkdir(parents=True)
        rubric.write_text("secret = 'TT-RUBRIC'\n")
        outcome = _run(root, where, [STEAL.replace("STAFF", repr([str(rubric)]))], hide=(str(rubric),))
    finally:
        shutil.rmtree(staff, ignore_errors=True)
    facts = outcome.facts()
    assert facts.get("tried", 0) > 10, outcome.jobs[0]["log"][-2000:]
    assert str(rubric) not in facts["read"], facts["read"]
    assert "hidden-reference" in outcome.layers()
