"""A fork server for the local backend: import numpy, the runtime and the harness once, then
fork one isolated child per submission. The zygote itself never runs student code.

Protocol on a Unix socket (one request at a time):
- ``{"kill_uid": N}``: kill every process of host uid N (root only; the fallback mode's sweep);
  answered ``{"killed": true}``.
- ``{"reference": {"chunks", "home", "env"}}``: fork the trusted reference worker (the host's
  ``grader.reference``; ``harness.run.serve`` on the reference solution, in ``home`` with ``env``,
  never isolated: it runs no student code), which so costs a fork instead of an interpreter that
  imports numpy; answered ``{"pid"}`` with four descriptors: a pidfd of the worker and the ends of
  its stdin, stdout and stderr pipes.
- a sandbox request (see ``grader.sandbox.local``): the zygote forks the job's first process, moves
  it into the job's cgroups, lets it go, and answers ``{"pid", "cgroups"}`` with five descriptors:
  a pidfd of the child, the read ends of its log pipe and of its result stream, and the write ends
  of its control pipe (``S`` or EOF stops the job) and of its job pipe. The child isolates itself
  and checks its layers at once, then waits for its one job on the job pipe (``harness/wire.py``: the
  visible job, student.json, then the hidden checks, which the supervisor reads only after forking
  the harness), so a sandbox can be made ready before its job exists; EOF there ends it.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import stat
import sys
import time
from typing import Any

from . import wire


def serve(fd: int) -> None:
    from .preload import preload

    preload()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    sock = socket.socket(fileno=fd)
    while True:
        data = sock.recv(1 << 20)
        if not data:
            os._exit(0)
        request = json.loads(data)
        if "kill_uid" in request:
            _sweep(int(request["kill_uid"]))
            sock.send(b'{"killed": true}')
            continue
        if "reference" in request:
            _reference(sock, request["reference"])
            continue
        pipes = [os.pipe() for _ in range(5)]  # log, result, control, go, job
        (log_r, log_w), (res_r, res_w), (ctl_r, ctl_w), (go_r, go_w), (job_r, job_w) = pipes
        pid = os.fork()
        if pid == 0:
            try:  # never return into this loop, whatever escapes
                sock.close()
                for fd_ in (log_r, res_r, ctl_w, go_w, job_w):
                    os.close(fd_)
                _child(request, log_w, res_w, ctl_r, go_r, job_r)
            finally:
                os._exit(70)
        for fd_ in (log_w, res_w, ctl_r, go_r, job_r):
            os.close(fd_)
        joined = _join_cgroups(pid, request.get("cgroups", {}))
        os.write(go_w, b"g")
        os.close(go_w)
        pidfd = os.pidfd_open(pid)
        answer = json.dumps({"pid": pid, "cgroups": joined}).encode()
        socket.send_fds(sock, [answer], [pidfd, log_r, res_r, ctl_w, job_w])
        for fd_ in (pidfd, log_r, res_r, ctl_w, job_w):
            os.close(fd_)


def _reference(sock: socket.socket, spec: dict[str, Any]) -> None:
    """Fork the reference worker: stdin, stdout and stderr are pipes whose other ends go back."""
    (in_r, in_w), (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 70
        try:  # never return into the zygote's loop, whatever escapes
            sock.close()
            for theirs, mine in ((in_r, 0), (out_w, 1), (err_w, 2)):
                os.dup2(theirs, mine)
            for fd_ in (in_r, in_w, out_r, out_w, err_r, err_w):
                os.close(fd_)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.chdir(spec["home"])
            os.environ.clear()
            os.environ.update(spec["env"])
            from .run import serve as serve_reference

            serve_reference(spec["chunks"])
            code = 0
        except BaseException:
            import traceback

            traceback.print_exc()  # what the host reports when the worker fails
            code = 1
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:
                    pass
            os._exit(code)
    for fd_ in (in_r, out_w, err_w):
        os.close(fd_)
    pidfd = os.pidfd_open(pid)
    socket.send_fds(sock, [json.dumps({"pid": pid}).encode()], [pidfd, in_w, out_r, err_r])
    for fd_ in (pidfd, in_w, out_r, err_r):
        os.close(fd_)


def _join_cgroups(pid: int, cgroups: dict[str, str]) -> list[str]:
    """Move the job into each of its cgroups (before it runs anything); the names that worked."""
    joined = []
    for name, procs in cgroups.items():
        try:
            with open(procs, "w") as f:
                f.write(str(pid))
            joined.append(name)
        except OSError:
            pass
    return joined


SHARED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")  # where any uid can leave files behind (fallback mode)


def _sweep(uid: int) -> None:
    """Fork, become ``uid``, SIGKILL every process of it until none is left, then delete what it
    left in the shared writable directories (it could fill them for every later job)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            for _ in range(1000):
                os.kill(-1, signal.SIGKILL)
                if not _live_processes(uid, exclude=os.getpid()):
                    break  # zombies may remain until their new parent reaps them; they run nothing
                time.sleep(0.001)
        except OSError:
            pass
        if os.getuid() == uid != 0:
            for top in SHARED_DIRS:
                _purge_owned(top, uid)
        os._exit(0)
    for _ in range(5000):  # SIGCHLD is ignored: wait for the sweeper by polling its pid
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.001)


def _live_processes(uid: int, exclude: int) -> list[int]:
    """Processes of ``uid`` that are not zombies, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == exclude:
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as f:
                fields = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
        except OSError:
            continue
        if int(fields[b"Uid"].split()[0]) == uid and not fields[b"State"].strip().startswith(b"Z"):
            found.append(int(entry))
    return found


def _purge_owned(top: str, uid: int, budget: list[int] | None = None) -> None:
    """Delete every entry owned by ``uid`` under ``top``, through directory descriptors, never
    following a symbolic link (we run as ``uid``: nothing it could not delete itself is touched)."""
    budget = [200_000] if budget is None else budget
    try:
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        _purge_dir(fd, uid, budget, 0)
    finally:
        os.close(fd)


def _purge_dir(dir_fd: int, uid: int, budget: list[int], depth: int) -> None:
    try:
        names = os.listdir(dir_fd)
    except OSError:
        return
    for name in names:
        budget[0] -= 1
        if budget[0] < 0:
            return
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                if st.st_uid == uid:
                    os.unlink(name, dir_fd=dir_fd)
                continue
            if depth >= 64 or not (st.st_uid == uid or st.st_mode & 0o002):
                continue
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
            try:
                _purge_dir(sub, uid, budget, depth + 1)
            finally:
                os.close(sub)
            if st.st_uid == uid:
                os.rmdir(name, dir_fd=dir_fd)
        except OSError:
            continue


def _child(request: dict[str, Any], log_fd: int, out_fd: int, control_fd: int, go_fd: int, job_fd: int) -> None:
    """The job's first process: isolate, layer check, wait for the job, then supervise the harness."""
    from . import isolate, layercheck, seccomp, supervisor

    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the supervisor waits for its own children
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        keep = {0, 1, 2, out_fd, control_fd, go_fd, job_fd}
        for fd in range(3, 1024):
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        if os.read(go_fd, 1) != b"g":
            os._exit(70)
        os.close(go_fd)
        workdir, mode = request["workdir"], request["mode"]
        uid, gid = request.get("uid"), request.get("gid")
        if mode == "namespaces":
            isolate.unshare_namespaces()
            init = os.fork()  # the first child of a new PID namespace is its pid 1
            if init != 0:
                _wait_and_exit(init)
            isolate.become_init()
            binds, covers = isolate.python_paths()
            binds.append(request["bundle"])
            owner = (uid, gid) if uid is not None and gid is not None else (isolate.SANDBOX_ID, isolate.SANDBOX_ID)
            os.mkdir(os.path.join(workdir, "root"), 0o700)
            isolate.build_root(os.path.join(workdir, "root"), binds, covers, request["hide"],
                               request["tmp_mb"], request["tmp_inodes"], owner)
            workdir = isolate.WORK
        elif mode == "fallback" and uid is not None and gid is not None:
            workdir = isolate.fallback_workdir(workdir, uid, gid)
            supervisor_subreaper()
        os.chdir(workdir)
        isolate.drop_privileges(uid, gid)
        seccomp.install(unix_sockets=mode != "fallback")
        isolate.apply_limits(request["limits"])
        os.environ.clear()
        os.environ.update(request["env"], HOME=workdir, TMPDIR=workdir)
        report = layercheck.run(request)
        job, student, hidden_size, cpu_s = _receive_job(job_fd)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))  # the job's own budget, below the ceiling
    except BaseException as e:  # isolation failed: never run the job without it
        os.write(2, f"sandbox setup failed: {type(e).__name__}: {e}\n".encode())
        os._exit(70)
    from .run import main

    try:  # never return into the zygote's loop, whatever escapes (the harness child passes here too)
        supervisor.run(job, student, out_fd, control_fd, report, lambda phase_fd: main(phase_fd=phase_fd),
                       hidden_from=(job_fd, hidden_size))
    except BaseException as e:
        os.write(2, f"sandbox supervisor failed: {type(e).__name__}: {e}\n".encode())
        os._exit(71)
    os._exit(0)


def supervisor_subreaper() -> None:
    """Orphans of the job come to us (PR_SET_CHILD_SUBREAPER), not to the host's init."""
    from .isolate import become_subreaper

    become_subreaper()


MAX_JOB_BYTES = 32 * 1024 * 1024


def _receive_job(fd: int) -> tuple[dict[str, Any], bytes, int, int]:
    """(the visible job, student.json, the hidden checks' size, CPU seconds) from the host; EOF (a
    sandbox never used) ends us. The hidden checks stay in the pipe: the supervisor reads them once
    the harness is forked (``harness/wire.py``)."""
    job_size, student_size, hidden_size, cpu_s = wire.HEADER.unpack(_read_exactly(fd, wire.HEADER.size))
    if max(job_size, student_size, hidden_size) > MAX_JOB_BYTES:
        os._exit(70)
    job, student = wire.visible_part(_read_exactly(fd, job_size)), _read_exactly(fd, student_size)
    return job, student, hidden_size, max(1, int(cpu_s))


def _read_exactly(fd: int, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = os.read(fd, min(1 << 20, n - len(data)))
        if not chunk:
            os._exit(0)
        data += chunk
    return bytes(data)


def _wait_and_exit(pid: int) -> None:
    """Outside the PID namespace: wait for its init; when the host kills us, init dies too."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
