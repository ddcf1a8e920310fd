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


def serve(fd: int) -> None:
    import numpy
    import numpy.random  # noqa: F401

    from . import probes, run  # noqa: F401
    from .isolate import apply_limits, enter_namespaces

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
            _child(request, write_end, apply_limits, enter_namespaces)
        os.close(write_end)
        pidfd = os.pidfd_open(pid)
        socket.send_fds(sock, [json.dumps({"pid": pid}).encode()], [pidfd, read_end])
        os.close(pidfd)
        os.close(read_end)


def _child(request: dict, out_fd: int, apply_limits, enter_namespaces) -> None:  # type: ignore[no-untyped-def]
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the harness waits for its own children
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.closerange(3, 1 << 16)
        workdir = request["workdir"]
        if request["namespaces"]:
            carry = [os.path.realpath(p) for p in (*sys.path, sys.prefix, sys.base_prefix) if p]
            workdir = enter_namespaces(request["hide"], workdir, carry) or workdir
        os.chdir(workdir)
        os.environ["HOME"] = os.environ["TMPDIR"] = workdir
        apply_limits(request["limits"])
    except BaseException as e:  # isolation failed: never run the job without it
        os.write(2, f"sandbox setup failed: {e}\n".encode())
        os._exit(70)
    from .run import main

    main()
    os._exit(0)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
