"""A fork server for the local backend: import numpy, the runtime and the harness once, then
fork one isolated child per submission.

Protocol on a Unix socket (one request at a time): the host sends a JSON request
``{"workdir", "hide", "limits", "namespaces"}``; the zygote forks, and answers ``ok`` with two
file descriptors attached: a pidfd of the child and the read end of the child's output pipe.
The zygote itself never runs student code.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from typing import Any


def serve(fd: int) -> None:
    import numpy
    import numpy.random  # noqa: F401

    from . import isolate, probes, run  # noqa: F401

    try:
        import tinytorch.core.autograd
        import tinytorch.core.tensor  # noqa: F401
    except ImportError:
        pass
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    sock = socket.socket(fileno=fd)
    while True:
        data = sock.recv(65536)
        if not data:
            os._exit(0)
        request = json.loads(data)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            sock.close()
            os.close(read_end)
            _child(request, write_end)
        os.close(write_end)
        pidfd = os.pidfd_open(pid)
        socket.send_fds(sock, [json.dumps({"pid": pid}).encode()], [pidfd, read_end])
        os.close(pidfd)
        os.close(read_end)


def _child(request: dict[str, Any], out_fd: int) -> None:
    """The job's first process: isolate, then run the harness (as init of its own PID namespace)."""
    from . import isolate

    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the harness waits for its own children
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.closerange(3, 1 << 16)
        if request.get("cgroup"):  # join the job's pids cgroup first: every descendant inherits it
            with open(request["cgroup"], "w") as f:
                f.write("0")
        workdir = request["workdir"]
        if request["namespaces"]:
            isolate.unshare_namespaces()
            workdir = isolate.build_view(workdir, _carry(), request["hide"])
            init = os.fork()  # the first child of a new PID namespace is its pid 1
            if init != 0:
                _wait_and_exit(init)
            isolate.become_init()
            isolate.drop_privileges()
        os.chdir(workdir)
        os.environ["HOME"] = os.environ["TMPDIR"] = workdir
        isolate.apply_limits(request["limits"])
    except BaseException as e:  # isolation failed: never run the job without it
        os.write(2, f"sandbox setup failed: {e}\n".encode())
        os._exit(70)
    from .run import main

    main()
    os._exit(0)


def _carry() -> list[str]:
    """What the job's interpreter needs to see: its prefixes, numpy's site-packages, the bundle."""
    import numpy

    bundle = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    site = os.path.dirname(os.path.dirname(os.path.abspath(numpy.__file__)))
    return [sys.prefix, sys.base_prefix, site, bundle]


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
