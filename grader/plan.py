"""Plan stage: rubric + seed → the Job the sandbox runs (probe names and concrete inputs).

Visible checks use fixed inputs, so a student sees the same feedback every run. Other checks draw
their inputs from a per-submission seed that the student cannot predict when the course sets
``GRADER_SEED_SECRET``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import zlib
from typing import Any

import numpy as np
from pydantic import Field

from .harness.probes import Inputs, encode_inputs
from .models import Record
from .rubric import CheckSpec, Rubric

PUBLIC_SEED = 112024


class PlannedCheck(Record):
    id: str
    probe: str
    timeout_s: float
    inputs: dict[str, Any]
    visible: bool = True  # hidden checks' inputs reach the sandbox only after the visible ones ran

    def decoded(self) -> Inputs:
        from .harness.probes import decode_inputs

        return decode_inputs(self.inputs)


class Job(Record):
    """What crosses into the sandbox, besides the student's code: no expected values."""

    module: str
    probes: str  # the unit's probes package, imported by the harness (grader.modules.<name>.probes)
    # Its source files (path inside the package → text): the sandbox bundle holds no unit, so a job
    # brings its own (grader/harness/unitfiles.py). Empty: the package is importable as it is.
    probe_files: dict[str, str] = Field(default_factory=dict)
    seed: int
    numpy_seed: int = 0  # seeds unseeded student initialisations; reveals nothing about ``seed``
    parallel: int = 2
    import_timeout_s: float
    total_timeout_s: float
    checks: tuple[PlannedCheck, ...]


def submission_seed(sha256: str, secret: bytes) -> int:
    """A seed the student cannot predict without the course's secret (``GRADER_SEED_SECRET``)."""
    return submission_seeds(sha256, secret)[0]


def submission_seeds(sha256: str, secret: bytes) -> tuple[int, int]:
    """The submission's seed and its numpy seed, both drawn from the course's secret: the numpy
    seed, which student code can observe, is no function of the seed (which is only 32 bits, so a
    function of it could be inverted offline and the hidden inputs rebuilt)."""
    digest = hmac.new(secret, sha256.encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:4], "big"), int.from_bytes(digest[4:8], "big")


def plan(rubric: Rubric, checks: tuple[CheckSpec, ...], seed: int, numpy_seed: int | None = None) -> Job:
    """The job for ``checks``: inputs from ``seed`` (the visible checks' from a public seed).
    ``numpy_seed`` (default: derived from ``seed``, for a seed given by hand) seeds the sandbox's
    numpy for unseeded student initialisations."""
    from . import modules

    unit = modules.get(rubric.module)
    probes = unit.load_probes()
    planned = []
    for check in checks:
        base = PUBLIC_SEED if check.public else seed
        rng = np.random.default_rng([base, zlib.crc32(check.id.encode())])
        inputs = probes[check.probe].make_inputs(rng)
        planned.append(PlannedCheck(id=check.id, probe=check.probe, timeout_s=check.timeout_s,
                                    inputs=encode_inputs(inputs), visible=check.public))
    if numpy_seed is None:
        numpy_seed = int.from_bytes(hashlib.sha256(f"numpy:{seed}".encode()).digest()[:4], "big")
    return Job(module=rubric.module, probes=unit.probes_package, probe_files=unit.probe_files(), seed=seed, numpy_seed=numpy_seed,
               parallel=min(2, os.cpu_count() or 1), import_timeout_s=rubric.import_timeout_s,
               total_timeout_s=rubric.total_timeout_s, checks=tuple(planned))
