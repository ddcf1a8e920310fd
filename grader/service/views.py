"""What the API returns: plain dicts made from rows. The student view is the only place where a
result is filtered for a student, by the assignment's release policy."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..feedback.view import NOT_GRADED_BY_US, RELEASE
from ..models import GradeReport
from ..results.tables import Assignment, Course, Grading, Override, Student, Submission
from .ops import active_override, effective, policy_of, released, rubric_of

FINAL = ("graded", "invalid", "failed_to_grade")


def iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def course_view(course: Course) -> dict[str, Any]:
    return {"slug": course.slug, "title": course.title, "created_at": iso(course.created_at)}


def assignment_view(course: Course, a: Assignment) -> dict[str, Any]:
    rubric = rubric_of(a)
    return {
        "course": course.slug, "slug": a.slug, "title": a.title, "module": rubric.module, "rubric_id": rubric.id,
        "rubric_hash": a.rubric_hash, "max_score": rubric.max_score, "due_at": iso(a.due_at), "published": a.published,
        "policy": policy_of(a).model_dump(), "rate_limit": {"count": a.rate_limit_count, "window_s": a.rate_limit_window_s},
        "checks": [{"id": c.id, "title": c.title, "points": c.points, "visibility": c.visibility} for c in rubric.checks],
    }


def status_view(sub: Submission) -> dict[str, Any]:
    """The status a student or staff member polls; "queued" also while the broker is down."""
    return {
        "id": sub.id, "status": sub.status, "final": sub.status in FINAL, "generation": sub.generation,
        "file_name": sub.file_name, "sha256": sub.sha256, "created_at": iso(sub.created_at),
        "submitted_at": iso(sub.submitted_at), "finished_at": iso(sub.finished_at),
        "links": {"self": f"/api/submissions/{sub.id}", "result": f"/api/submissions/{sub.id}/result",
                  "events": f"/api/submissions/{sub.id}/events"},
    }


def student_result(sub: Submission, assignment: Assignment, gradings: list[Grading], overrides: list[Override],
                   now: datetime) -> dict[str, Any]:
    """A student's own result: released checks in full; unreleased ones by id, title and points
    only; the total only when the policy releases it; never a staff detail or an override reason."""
    view = status_view(sub)
    grading = _current(sub, gradings)
    if grading is None:
        return view | {"result": None}
    policy, rubric = policy_of(assignment), rubric_of(assignment)
    total_released = released(policy.total, assignment, now)
    score, source = effective(gradings, overrides)
    result: dict[str, Any] = {"status": grading.status, "max_score": rubric.max_score,
                              "score": score if total_released else None,
                              "score_released": "shown now" if total_released else _release_text(policy.total),
                              "overridden": source == "override" and total_released}
    if grading.status == "invalid":
        result["message"] = f"Your submission could not be graded: {grading.reason}"
    elif grading.status == "failed_to_grade":
        result["message"] = NOT_GRADED_BY_US
    report = GradeReport.model_validate_json(grading.report) if grading.report else None
    result["checks"] = [] if report is None else [_student_check(c, policy.checks.get(c.id, c.visibility),
                                                                 assignment, now) for c in report.checks]
    result["practice"] = report is not None and report.backend.label == "practice"
    return view | {"result": result}


def _student_check(check: Any, visibility: str, assignment: Assignment, now: datetime) -> dict[str, Any]:
    shown_now = released(visibility, assignment, now)
    base = {"id": check.id, "title": check.title, "max_score": check.max_score, "visibility": visibility,
            "released": shown_now}
    if not shown_now:
        return base | {"release": _release_text(visibility)}
    # Pictures only of checks graded as visible: a hidden check's message is withheld, so are its numbers.
    figures = [f.model_dump(mode="json") for f in check.figures] if check.visibility == "visible" else []
    return base | {"status": check.status, "score": check.score, "message": check.message, "figures": figures}


def staff_result(sub: Submission, student: Student, gradings: list[Grading], overrides: list[Override]
                 ) -> dict[str, Any]:
    """Everything: the full report of the current grading (staff details included), every earlier
    grading, every override with its reason, and the score that counts."""
    score, source = effective(gradings, overrides)
    current = _current(sub, gradings)
    return status_view(sub) | {
        "student_id": student.student_id, "name": student.name, "email": student.email,
        "score": score, "score_source": source, "worker": sub.worker,
        "report": GradeReport.model_validate_json(current.report).model_dump(mode="json")
        if current is not None and current.report else None,
        "reason": current.reason if current is not None else "",
        "history": [{"generation": g.generation, "status": g.status, "score": g.score, "max_score": g.max_score,
                     "reason": g.reason, "rubric_hash": g.rubric_hash, "worker": g.worker,
                     "requested_at": iso(g.requested_at), "finished_at": iso(g.finished_at),
                     "latency_s": round(g.latency_s, 4)} for g in gradings],
        "automatic": _automatic(gradings, overrides),
        "overrides": [{"score": o.score, "reason": o.reason, "staff": o.staff, "at": iso(o.created_at),
                       "removed_at": iso(o.removed_at) if o.removed_at else None, "removed_by": o.removed_by}
                      for o in overrides],
    }


def _automatic(gradings: list[Grading], overrides: list[Override]) -> dict[str, Any] | None:
    """Beside a standing override: the automatic score now, and what it was when staff decided
    ("override 90; automatic 86 → 88 after the regrade")."""
    standing = active_override(overrides)
    graded = [g for g in gradings if g.status == "graded"]
    if standing is None or not graded:
        return None
    before = [g for g in graded if g.finished_at is not None and g.finished_at <= standing.created_at]
    return {"now": graded[-1].score, "max_score": graded[-1].max_score,
            "at_override": before[-1].score if before else None}


def _current(sub: Submission, gradings: list[Grading]) -> Grading | None:
    """The newest grading; while a regrade runs, the previous one stays the current result."""
    return gradings[-1] if gradings else None


def _release_text(visibility: str) -> str:
    """When something held back reaches students, in words (a hidden check: never)."""
    texts = {str(k): f"released {v}" for k, v in RELEASE.items()}
    return texts.get(visibility, "never released to students")
