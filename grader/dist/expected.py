"""Compute, write and check the public checks' expected outputs that the student package ships.

For each course module with a reference solution: plan the public checks (their inputs are fixed),
run them on the reference, and write ``public_expected/`` (grader/shipped.py reads it) with a
manifest holding each check's input hash, each file's sha256 and a fingerprint of everything the
outputs depend on: the public checks as planned, the reference solution, and the sandbox bundle
(harness, probes, runtime). A fingerprint that differs from the tree's means the outputs are stale.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

from .. import modules
from ..channel import ProbeRecord
from ..errors import GraderError
from ..harness.records import SCHEMA
from ..plan import Job, plan
from ..reference import ReferenceOracle
from ..rubric import load_rubric
from ..sandbox.bundle import bundle_hash
from ..session import Session
from ..shipped import MANIFEST, SCHEMA_VERSION, check_key, file_digest

PUBLIC_PLAN_SEED = 0  # seeds only non-public checks' inputs, of which there are none here


def public_job(module: str) -> Job:
    rubric = load_rubric(module=module)
    return plan(rubric, rubric.select(public_only=True), PUBLIC_PLAN_SEED)


def fingerprint(module: str) -> str:
    """A hash of everything the module's public expected outputs depend on."""
    unit = modules.get(module)
    job = public_job(module)
    h = hashlib.sha256(bundle_hash(module).encode())  # this unit's probes and runtime, not the others'
    h.update(unit.reference_path.read_bytes())
    for check in job.checks:
        h.update(f"{check.id}\0{check_key(check)}\0".encode())
    return h.hexdigest()


def refresh(module: str) -> Path:
    """Recompute the module's shipped expected outputs from its reference; the folder written."""
    unit = modules.get(module)
    job = public_job(module)
    with Session(cached_reference=False) as session:  # the same files whatever ran on this machine before
        oracle = session.oracle(module)
        if not isinstance(oracle, ReferenceOracle):
            raise GraderError(f"{module}: the shipped expected outputs are made from the reference solution, which "
                              "this install does not have (the staff package has it)")
        expected = oracle.expected(job)
    work = Path(tempfile.mkdtemp(prefix=".public_expected-", dir=unit.root))
    try:
        out = work / "out"
        out.mkdir()
        for check in job.checks:
            result = expected[check.id]
            record = ProbeRecord.model_validate({"schema": SCHEMA, "check": check.id, "status": "ok",
                                                 "facts": result.facts, "arrays": tuple(sorted(result.arrays))})
            (out / f"{check.id}.json").write_text(record.model_dump_json(by_alias=True), encoding="utf-8")
            if result.arrays:
                (out / check.id).mkdir()
                for name, array in sorted(result.arrays.items()):
                    _save(out / check.id / f"{name}.npy", np.ascontiguousarray(array, dtype=np.float64),
                          unit.expected_dir / "out" / check.id / f"{name}.npy")
        files = {f.relative_to(work).as_posix(): file_digest(f) for f in sorted(out.rglob("*")) if f.is_file()}
        manifest = {"schema_version": SCHEMA_VERSION, "module": module, "fingerprint": fingerprint(module),
                    "checks": {c.id: {"probe": c.probe, "key": check_key(c)} for c in job.checks}, "files": files}
        (work / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        shutil.rmtree(unit.expected_dir, ignore_errors=True)
        work.rename(unit.expected_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return unit.expected_dir


SAME_RTOL, SAME_ATOL = 1e-6, 1e-9  # float rounding (BLAS, another machine): far inside every check's tolerance


def _save(path: Path, array: np.ndarray, shipped: Path) -> None:
    """Write ``array``, or keep the shipped file when it holds the same values up to float
    rounding: a refresh on another machine does not churn files that did not change."""
    try:
        old = np.load(shipped, allow_pickle=False)
    except (OSError, ValueError):
        old = None
    if old is not None and old.shape == array.shape and old.dtype == array.dtype \
            and np.allclose(old, array, rtol=SAME_RTOL, atol=SAME_ATOL, equal_nan=True):
        shutil.copyfile(shipped, path)
    else:
        np.save(path, array)


def staff_modules() -> list[str]:
    """The installed course modules that have a reference solution here."""
    return sorted(name for name, unit in modules.installed().items() if unit.reference_path.is_file())


def stale(module: str) -> str | None:
    """Why the module's shipped expected outputs are out of date, or None if they are current."""
    path = modules.get(module).expected_dir / MANIFEST
    try:
        recorded = json.loads(path.read_text(encoding="utf-8")).get("fingerprint")
    except (OSError, ValueError):
        return f"{path} is missing or unreadable"
    if recorded != fingerprint(module):
        return f"{path} was made from another rubric, reference, probes or runtime"
    return None
