"""Gradebook exports and per-check statistics of an assignment, from the service's rows.

Each student's latest upload that has a result becomes one ``StoredResult`` (with the score that
counts: an override newer than the grading wins), and the batch exporters render it, so every
``grader export`` format is available and no score is recomputed.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections import Counter
from typing import Any, cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..export import exporters
from ..export.base import build_gradebook
from ..models import GradeReport
from ..results.names import is_safe
from ..results.record import ResultStatus, StoredResult
from ..results.roster import Roster, RosterEntry
from ..results.tables import Assignment, Grading, Override, Student, Submission
from .ops import Conflict, Invalid, effective, history, latest_submissions, rubric_of
from .views import iso


def stored_results(session: Session, assignment: Assignment) -> tuple[list[StoredResult], list[str]]:
    """(results, problems): the current result of each student's latest upload."""
    results, pending = [], []
    for sub, student in latest_submissions(session, assignment):
        gradings, overrides = history(session, sub)
        if not gradings:
            pending.append(student.student_id)
            continue
        results.append(stored_result(sub, student, gradings, overrides))
    problems = [f"{len(pending)} student(s) have a latest upload still being graded, not exported: {', '.join(pending)}"
                ] if pending else []
    return results, problems


def stored_result(sub: Submission, student: Student, gradings: list[Grading], overrides: list[Override]
                  ) -> StoredResult:
    """The current result of one upload that has at least one grading."""
    g = gradings[-1]
    score, _ = effective(gradings, overrides)
    return StoredResult(
        student_id=student.student_id, cache_key=f"{sub.sha256}:{g.rubric_hash[:16]}", sha256=sub.sha256,
        file_name=sub.file_name, name=student.name, email=student.email, submitted_at=iso(sub.submitted_at) or "",
        status=cast(ResultStatus, g.status), reason=g.reason, score=score, max_score=g.max_score,
        report=GradeReport.model_validate_json(g.report) if g.report else None, graded_at=iso(g.finished_at) or "")


def roster(session: Session, assignment: Assignment) -> Roster:
    students = session.scalars(select(Student).where(Student.course_id == assignment.course_id)
                               .order_by(Student.student_id))
    entries = tuple(RosterEntry(**json.loads(s.roster_json)) if s.roster_json != "{}" else RosterEntry(s.student_id)
                    for s in students)
    return Roster(entries, source="the course roster")


def export(session: Session, assignment: Assignment, fmt: str, **names: str) -> tuple[str, bytes, str, list[str]]:
    """(file name, content, media type, problems) of one export format."""
    found = exporters()
    if fmt not in found:
        raise Invalid(f"unknown export format {fmt!r}; one of {', '.join(found)}")
    results, problems = stored_results(session, assignment)
    book = build_gradebook(results, rubric=rubric_of(assignment), roster=roster(session, assignment),
                           assignment=names.get("assignment_name") or assignment.title,
                           canvas_assignment_id=names.get("canvas_assignment_id", ""),
                           due_date=iso(assignment.due_at) or "")
    if book.conflicts:
        raise Conflict("; ".join(book.conflicts))
    exporter = found[fmt]
    files = exporter.render(book)
    problems += list(book.problems)
    if not exporter.per_submission:
        (only,) = files
        return exporter.default_name, only.text.encode("utf-8"), "text/csv; charset=utf-8", problems
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for f in files:
            if all(is_safe(part) for part in f.path.parts):
                archive.writestr(str(f.path), f.text)
    return f"{exporter.default_name}.zip", buffer.getvalue(), "application/zip", problems


def check_stats(session: Session, assignment: Assignment) -> dict[str, Any]:
    """Per check, over each student's current result: how many ran, passed, and each status."""
    results, problems = stored_results(session, assignment)
    reports = [r.report for r in results if r.report is not None]
    checks = []
    for spec in rubric_of(assignment).checks:
        mine = [c for report in reports for c in report.checks if c.id == spec.id]
        statuses = Counter(c.status for c in mine)
        checks.append({"id": spec.id, "title": spec.title, "points": spec.points, "visibility": spec.visibility,
                       "graded": len(mine), "passed": statuses.get("passed", 0),
                       "pass_rate": round(statuses.get("passed", 0) / len(mine), 4) if mine else None,
                       "mean_score": round(sum(c.score for c in mine) / len(mine), 4) if mine else None,
                       "statuses": dict(sorted(statuses.items()))})
    scores = [r.score for r in results if r.score is not None]
    return {"students": len(results), "graded": len(reports),
            "mean_score": round(sum(scores) / len(scores), 4) if scores else None, "checks": checks,
            "problems": problems}
