"""Expected outputs shipped with the student package: practice grading without the reference.

The student package has no reference solution and no hidden checks. Its course modules carry
``public_expected/``: the public checks' expected outputs, computed by the staff from the reference
when the package is built (``python -m grader.dist refresh``), in the format the reference worker
writes (``out/<check>.json`` and ``out/<check>/<array>.npy``), with a manifest that records, per
check, the probe and a hash of its inputs, and the sha256 of every file.

``ShippedOracle`` stands where the staff package runs its ``ReferenceOracle``. It answers a check
only if the check's planned inputs hash to what the manifest recorded and the files are the ones
shipped: a changed rubric or a modified file is an error that says the official grade comes from
the staff, never a silently wrong comparison.
"""

from __future__ import annotations

import hashlib
import json
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import RubricError

if TYPE_CHECKING:
    from .channel import CheckOutput
    from .plan import Job, PlannedCheck

MANIFEST = "manifest.json"
SCHEMA_VERSION = 1
OFFICIAL = "your official grade comes from the course staff"


def check_key(check: PlannedCheck) -> str:
    """What determines a check's expected output: its probe and its inputs."""
    return hashlib.sha256(json.dumps({"probe": check.probe, "inputs": check.inputs}, sort_keys=True).encode()).hexdigest()


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class ShippedOracle:
    """Expected outputs of the public checks, read from a course module's ``public_expected/``."""

    official = False  # front ends say so: practice against shipped outputs, not the official grade

    def __init__(self, module: str) -> None:
        from . import modules

        self.module = module
        self.root = modules.get(module).expected_dir

    @cached_property
    def manifest(self) -> dict[str, Any]:
        """The manifest, after checking every shipped file against it."""
        path = self.root / MANIFEST
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise RubricError(f"course module {self.module!r}: no readable {path} ({e}); this install has neither "
                              f"the reference solution nor the shipped expected outputs: reinstall the student package "
                              f"the course gave you; {OFFICIAL}") from None
        if data.get("schema_version") != SCHEMA_VERSION:
            raise RubricError(f"{path}: schema_version {data.get('schema_version')!r}, this grader reads {SCHEMA_VERSION}; "
                              "reinstall the student package")
        for name, digest in data["files"].items():
            shipped = self.root / name
            if not shipped.is_file() or file_digest(shipped) != digest:
                raise RubricError(f"{shipped}: not the file the course shipped (missing or changed); reinstall the "
                                  f"student package; {OFFICIAL}")
        return dict(data)

    def start(self) -> None:
        """Nothing to start: there is no reference worker."""

    def close(self) -> None:
        """Nothing to close."""

    def expected(self, job: Job) -> dict[str, CheckOutput]:
        from .channel import read_check
        from .errors import HarnessProtocolError

        checks = self.manifest["checks"]
        expected = {}
        for check in job.checks:
            shipped = checks.get(check.id)
            if shipped is None or shipped["key"] != check_key(check):
                what = "is not a public check of the course" if shipped is None else "has other inputs than the course's"
                raise RubricError(f"check {check.id!r} {what}: the student package can only run the course's own public "
                                  f"checks against their shipped expected outputs; {OFFICIAL}")
            result = read_check(self.root / "out", check.id, None)
            if result.outcome != "ok":
                raise HarnessProtocolError(f"the shipped expected output of check {check.id!r} is unreadable "
                                           f"({result.outcome}); reinstall the student package")
            expected[check.id] = result
        return expected


def has_reference(module: str) -> bool:
    from . import modules

    return modules.get(module).reference_path.is_file()
