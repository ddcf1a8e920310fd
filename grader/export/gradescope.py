"""Gradescope autograder ``results.json``: one per submission (docs/FORMATS.md, "Gradescope").

Each rubric check is a test with the check's own visibility, which Gradescope enforces: it shows
students nothing of a ``hidden`` test and nothing of an ``after_due_date`` or ``after_published``
one before then. So a visible test's ``output`` is its student message, and any other test's is
the full staff diagnosis (``detail``), which staff see in Gradescope and students only once the
test is released. The top-level ``output`` is visible to students at once, so it is built from
the student view (visible checks only). The top-level ``score`` is the stored score, so
Gradescope does not re-add the tests. A submission the grader failed on gets no results.json:
a score of 0 would overwrite the student's grade.
Every text in it goes through ``shown``: file names, ids and messages can come from students, and
Gradescope shows this file to them and to staff.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any

from ..feedback.view import NOT_GRADED_BY_US, StudentView, student_view, summary_text
from ..models import CheckResult, shown
from ..results.record import StoredResult
from ..rubric import Rubric
from .base import ExportFile, Gradebook


def results_json(result: StoredResult, rubric: Rubric | None, *, practice_note: bool = True) -> dict[str, Any]:
    """The results.json object of one submission (``practice_note``: say so when the local
    backend graded it; off inside Gradescope, whose container is the official environment)."""
    view = student_view(result, rubric)
    tests = [_test(i, c, view) for i, c in enumerate(_checks(result, rubric), start=1)]
    data: dict[str, Any] = _safe({
        "score": float(result.score) if result.status == "graded" and result.score is not None else 0.0,
        "output": summary_text(view, practice_note=practice_note),
        "output_format": "text",
        "test_output_format": "text",
        "test_name_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": {"student_id": result.student_id, "status": result.status,
                       "grader_version": result.report.grader_version if result.report else "",
                       "rubric_id": result.report.rubric_id if result.report else (rubric.id if rubric else "")},
        "tests": tests,
    })
    return data


def _safe(value: Any) -> Any:
    """``value`` with every string made safe to show (``shown``); numbers and structure unchanged."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, dict):
        return {k: _safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_safe(v) for v in value]
    return value


def _checks(result: StoredResult, rubric: Rubric | None) -> list[CheckResult]:
    """Every check, with its staff diagnosis where Gradescope withholds it from students."""
    if result.report is not None:
        return [c if c.visibility == "visible" else c.model_copy(update={"message": c.detail})
                for c in result.report.checks]
    return [CheckResult(id=c.id, title=c.title, status="not_gradable", score=0.0, max_score=c.points,
                        visibility=c.visibility, message="") for c in (rubric.checks if rubric is not None else ())]


def _test(number: int, check: CheckResult, view: StudentView) -> dict[str, Any]:
    if view.score is None:
        output = ("not graded: the submission is invalid" if view.status == "invalid"
                  else f"not graded: {NOT_GRADED_BY_US}")
    else:
        output = check.message
    return {
        "score": float(check.score), "max_score": float(check.max_score),
        "status": "passed" if check.status == "passed" else "failed",
        "name": f"{check.id}: {check.title}", "name_format": "text", "number": str(number),
        "output": output, "output_format": "text", "tags": [check.id], "visibility": check.visibility,
    }


class GradescopeExporter:
    name = "gradescope"
    default_name = "gradescope"
    per_submission = True

    def render(self, book: Gradebook) -> list[ExportFile]:
        """One ``<student_id>/results.json`` per graded or invalid submission (none for a roster
        student without one, none for a submission the grader failed on)."""
        return [ExportFile(PurePosixPath(row.student_id, "results.json"),
                           json.dumps(results_json(row.result, book.rubric), indent=2, ensure_ascii=False) + "\n")
                for row in book.rows if row.result is not None and not row.blank]
