"""The Docker backend's first process, inside the container, as the sandbox user.

``python3 -I -B -c "...; import grader.harness.docker_boot as b; b.main(WORKDIR, MAX_INPUT, MAX_TOTAL)"``.
It imports what every job needs while the host is still sending the job on stdin (``wire.py``:
the visible job, student.json and the hidden checks; the backstop seconds in the header), then hands
over to the supervisor that the local backend uses too (``harness/supervisor.py``): visible checks
first, every process killed before the outputs are streamed on the original stdout. Student output
goes to stderr. ``S`` or EOF on stdin stops the job; the backstop covers a host that vanished.

It must be the container's PID 1 (no ``docker-init``): then, once the supervisor made it
non-dumpable, no process of the container can signal it, ptrace it or open ``/proc/1/fd/*``, the
only other way to the container's stdin (hidden inputs, the stop byte) and stdout (the host's
result stream). Its layer check says whether it is; without ``supervisor-is-init`` nothing runs and
the host refuses the container.
Standard library, numpy and the bundle only.
"""

from __future__ import annotations

import os
import threading


def _read_exact(n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(0, min(1 << 20, n - len(buf)))
        if not chunk:
            os._exit(3)
        buf += chunk
    return bytes(buf)


def _backstop() -> None:
    """The host vanished without a stop: end everything (the stream is then incomplete, never scored)."""
    from .supervisor import kill_everyone

    kill_everyone()
    os._exit(4)


INIT_LAYER = "supervisor-is-init"


def layer_check() -> dict[str, object]:
    """Observed before any student code exists: is this process the container's init?"""
    init = os.getpid() == 1
    return {"mode": "docker", "verified": [INIT_LAYER] if init else [], "ok": init}


def main(workdir: str, max_input: int, max_total: int) -> None:
    from . import run, supervisor, wire
    from .preload import preload

    preload()
    out_fd = os.dup(1)
    os.dup2(2, 1)
    job_size, student_size, hidden_size, backstop = wire.HEADER.unpack(_read_exact(wire.HEADER.size))
    if max(job_size, student_size, hidden_size) > max_input:
        os._exit(3)
    try:
        job = wire.visible_part(_read_exact(job_size))
    except ValueError:
        os._exit(3)
    student = _read_exact(student_size)
    timer = threading.Timer(backstop, _backstop)
    timer.daemon = True
    timer.start()
    os.chdir(workdir)
    supervisor.run(job, student, out_fd, 0, layer_check(),
                   lambda phase_fd: run.main(phase_fd=phase_fd), hidden_from=(0, hidden_size), max_total=max_total)
    os._exit(0)
