"""The results record: one student's stored result (``StoredResult``), its statuses, and the rules
that read it (lateness, cache keys, times). ``grader batch`` writes records, the service builds them
from its tables, and the exports, feedback pages and Gradescope mode read them; none of this needs
SQLAlchemy (the store that keeps them is ``grader.results.store``).

A result is keyed by (submission sha256, rubric hash, sandbox image, grader version), so a rerun
regrades only what changed.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from ..models import GradeReport, clean, map_strings, shown

ResultStatus = Literal["graded", "invalid", "failed_to_grade"]
UNREADABLE = ("its stored report cannot be read (written by another version of the grader, or damaged); "
              "run `grader batch` again to grade it anew")


@dataclass(frozen=True)
class StoredResult:
    """One student's row; ``report`` is None unless the submission was graded."""

    student_id: str
    cache_key: str
    sha256: str
    file_name: str
    name: str
    email: str
    submitted_at: str
    status: ResultStatus
    reason: str
    score: float | None
    max_score: float | None
    report: GradeReport | None
    graded_at: str

    def __post_init__(self) -> None:
        # Ids, names, dates and reasons come from students' files, file names and metadata: each one
        # is made storable (UTF-8, SQLite, JSON, CSV) and printable here, once.
        for name in ("student_id", "file_name", "name", "email", "submitted_at", "reason"):
            object.__setattr__(self, name, shown(getattr(self, name)))
        if self.report is not None:
            object.__setattr__(self, "report", _storable(self.report))


def is_late(result: StoredResult, due: datetime | None, flagged: Collection[str] = ()) -> bool:
    """The one rule of lateness: the LMS flagged the submission (``flagged``: student ids), or it
    was handed in after ``due``."""
    return result.student_id in flagged or submitted_late(result.submitted_at, due)


def submitted_late(submitted_at: str, due: datetime | None) -> bool:
    """Handed in after ``due``, by the time its LMS, nbgrader or the upload recorded (a time that
    cannot be read, or no due date, is not late: lateness is only ever shown, never guessed)."""
    if due is None or not submitted_at:
        return False
    try:
        at = datetime.fromisoformat(submitted_at.strip().removesuffix(" UTC").replace("Z", "+00:00"))  # nbgrader: " UTC"
    except ValueError:
        return False
    return (at if at.tzinfo is not None else at.replace(tzinfo=UTC)) > due


def flagged_late(meta: dict[str, str]) -> frozenset[str]:
    """The student ids whose LMS download marked the submission late (Canvas's ``_LATE_``)."""
    import json

    try:
        downloaded = json.loads(meta.get("lms_ids") or "{}")
    except ValueError:
        return frozenset()
    return frozenset(sid for sid, info in downloaded.items() if isinstance(info, dict) and info.get("late"))


def cache_key(sha256: str, rubric_hash: str, image: str, grader_version: str) -> str:
    return f"{sha256}:{rubric_hash[:16]}:{image}:{grader_version}"


def _storable(report: GradeReport) -> GradeReport:
    """``report``, or a copy whose strings every encoder accepts. Student text is made safe where it
    enters a report; should a lone surrogate still get in, it is escaped here, once, rather than
    stop the store, the report files and the exports of the whole class."""
    try:
        report.model_dump_json()
        return report
    except ValueError:  # pydantic's serialization error: not UTF-8
        return GradeReport.model_validate(map_strings(report.model_dump(), clean))


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
