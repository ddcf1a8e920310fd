"""How a job crosses into a sandbox (the local backend's job pipe, the Docker container's stdin).

``>IIId`` (sizes of the visible job, of student.json and of the hidden checks; then the seconds the
sandbox side needs: CPU budget or backstop), then the three parts in that order.

The supervisor reads the first two before it forks the harness, and the hidden checks only after:
a forked process holds a copy of its parent's memory, so whatever the supervisor had read before
the fork (even freed) student code could find there by walking frames, the garbage collector or
``/proc/self/mem``. So the visible part carries no hidden check and no seed (the seed alone
rebuilds every hidden input); ``visible_part`` refuses one that does.

Standard library only: this runs in the sandbox too.
"""

from __future__ import annotations

import json
import struct
from typing import Any

HEADER = struct.Struct(">IIId")


def pack(job: dict[str, Any], student: bytes, seconds: float) -> bytes:
    """The whole message for ``job`` (a ``Job`` as JSON data): visible part, student, hidden checks."""
    checks = job["checks"]
    visible = json.dumps({**{k: v for k, v in job.items() if k not in ("checks", "seed")},
                          "checks": [c for c in checks if c.get("visible") is True]}).encode()
    hidden = [c for c in checks if c.get("visible") is not True]
    rest = json.dumps(hidden).encode() if hidden else b""
    return HEADER.pack(len(visible), len(student), len(rest), seconds) + visible + student + rest


def visible_part(data: bytes) -> dict[str, Any]:
    """The visible job, refused (ValueError) if anything secret came with it."""
    job = json.loads(data)
    if not isinstance(job, dict) or "seed" in job or not isinstance(job.get("checks"), list) \
            or any(c.get("visible") is not True for c in job["checks"]):
        raise ValueError("the visible part of the job holds the seed or a hidden check")
    return job
