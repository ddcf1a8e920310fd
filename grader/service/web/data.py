"""What each page shows, read from the store (no HTTP here).

Student pages are built only from ``views.student_result``, the API's one filter by the release
policy, so a page can show no more than the API would. Staff pages read everything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ...export import exporters
from ...feedback.html import FigureView, figure_view
from ...feedback.pictures import histogram
from ...feedback.summary import build_summary
from ...feedback.view import message_parts
from ...models import Figure
from ...results.record import StoredResult
from ...results.tables import Assignment, Course, Student, Submission, Worker, utcnow
from .. import ops
from ..auth import Principal, own_submission, require_course
from ..exports import stored_result
from ..metrics import WORKER_SEEN_S
from ..views import staff_result, status_view, student_result
from .code import Excerpt, code_cells, excerpts_for


@dataclass(frozen=True)
class Section:
    """A check that did not pass, as a page explains it: labelled parts of its message (or, for
    staff, its detail), its pictures, and the student's code it points at."""

    check: dict[str, Any]
    parts: list[tuple[str, str]]
    figures: tuple[FigureView, ...]
    excerpts: tuple[Excerpt, ...] = ()


def _figures(raw: list[Any]) -> tuple[FigureView, ...]:
    return tuple(figure_view(f if isinstance(f, Figure) else Figure.model_validate(f)) for f in raw)


def _sections(checks: list[dict[str, Any]], text_key: str, sub: Submission, targets: tuple[str, ...]
              ) -> list[Section]:
    failing = [c for c in checks if c.get("status") not in (None, "passed")]
    cells = code_cells(sub.sha256, sub.file_name, sub.content) if failing else ()
    return [Section(c, message_parts(c[text_key] or c["message"], c["status"]), _figures(c.get("figures", [])),
                    tuple(excerpts_for(c[text_key] or c["message"], targets, cells))) for c in failing]


# ---- student pages ---------------------------------------------------------------------------------


def student_course(session: Session, who: Principal) -> tuple[Course, list[Assignment]]:
    course = session.get_one(Course, who.course_id)
    assignments = list(session.scalars(select(Assignment).where(Assignment.course_id == course.id)
                                       .order_by(Assignment.slug)))
    return course, assignments


def _own_assignment(session: Session, who: Principal, course: str, assignment: str) -> tuple[Course, Assignment]:
    c = ops.course_by_slug(session, course)
    require_course(who, c.id)
    return c, ops.assignment_by_slug(session, c, assignment)


def attempts(session: Session, who: Principal, course: str, assignment: str, now: datetime
             ) -> tuple[Course, Assignment, list[dict[str, Any]]]:
    """The student's uploads of an assignment, newest first, each as the API shows it."""
    c, a = _own_assignment(session, who, course, assignment)
    mine = session.scalars(select(Submission).where(Submission.assignment_id == a.id,
                                                    Submission.student_pk == who.student_pk)
                           .order_by(Submission.created_at.desc()))
    return c, a, [_result(session, sub, a, now) for sub in mine]


def _result(session: Session, sub: Submission, a: Assignment, now: datetime) -> dict[str, Any]:
    gradings, overrides = ops.history(session, sub)
    return student_result(sub, a, gradings, overrides, now)


def student_submission(session: Session, who: Principal, submission_id: str, now: datetime) -> dict[str, Any]:
    """A student's own feedback page: the API's filtered result, its sections and the context."""
    sub = own_submission(session, who, submission_id)
    a = session.get_one(Assignment, sub.assignment_id)
    view = _result(session, sub, a, now) | {"queue_place": ops.queue_place(session, sub)}
    result = view["result"]
    sections = _sections(result["checks"], "message", sub, ops.rubric_of(a).targets) if result else []
    return {"view": view, "result": result, "sections": sections, "assignment": a,
            "course": session.get_one(Course, a.course_id)}


def compare(session: Session, who: Principal, course: str, assignment: str, first: str, second: str,
            now: datetime) -> dict[str, Any]:
    """Two of the student's attempts side by side, check by check (only what each shows)."""
    c, a = _own_assignment(session, who, course, assignment)
    views = []
    for submission_id in (first, second):
        sub = own_submission(session, who, submission_id)
        if sub.assignment_id != a.id:
            raise ops.NotFound(f"no submission {submission_id} in this assignment")
        views.append(_result(session, sub, a, now))
    old, new = views
    rows = []
    by_id = [{ch["id"]: ch for ch in (v["result"] or {}).get("checks", [])} for v in views]
    for spec in ops.rubric_of(a).checks:
        before, after = by_id[0].get(spec.id), by_id[1].get(spec.id)
        rows.append({"id": spec.id, "title": spec.title, "before": before, "after": after,
                     "changed": _outcome(before) != _outcome(after)})
    return {"course": c, "assignment": a, "old": old, "new": new, "rows": rows}


def _outcome(check: dict[str, Any] | None) -> tuple[Any, Any]:
    return (None, None) if check is None else (check.get("status"), check.get("score"))


# ---- staff pages -----------------------------------------------------------------------------------


def health(session: Session) -> dict[str, Any]:
    """Queue depth by state and the workers with their last heartbeat."""
    by_status = dict(session.execute(select(Submission.status, func.count()).group_by(Submission.status)).all())
    seen_after = utcnow() - timedelta(seconds=WORKER_SEEN_S)
    workers = [{"hostname": w.hostname, "backend": w.backend, "graded": w.graded, "last_seen": w.last_seen,
                "alive": w.last_seen >= seen_after}
               for w in session.scalars(select(Worker).order_by(Worker.hostname))]
    return {"queued": by_status.get("queued", 0), "grading": by_status.get("grading", 0),
            "total": sum(by_status.values()), "workers": workers, "alive": sum(w["alive"] for w in workers),
            "seen_s": WORKER_SEEN_S}


def staff_home(session: Session) -> dict[str, Any]:
    courses = list(session.scalars(select(Course).order_by(Course.slug)))
    assignments = {c.id: list(session.scalars(select(Assignment).where(Assignment.course_id == c.id)
                                              .order_by(Assignment.slug))) for c in courses}
    return {"courses": courses, "assignments": assignments, "health": health(session)}


@dataclass(frozen=True)
class Filters:
    """The dashboard's filters, as given in the query string (empty: no filter)."""

    status: str = ""
    min_score: float | None = None
    max_score: float | None = None
    check: str = ""
    late: str = ""  # "", "yes" or "no"

    @property
    def active(self) -> bool:
        return bool(self.status or self.check or self.late) or self.min_score is not None or self.max_score is not None


@dataclass
class Row:
    sub: Submission | None  # None: a roster student who uploaded nothing
    student: Student
    stored: StoredResult | None  # None while the first grading runs (or with nothing uploaded)
    late: bool
    failed: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.sub is None:
            return "missing"
        return self.stored.status if self.stored is not None else self.sub.status


def _keep(row: Row, f: Filters) -> bool:
    score = row.stored.score if row.stored is not None else None
    return ((not f.status or row.status == f.status or (row.sub is not None and row.sub.status == f.status))
            and (f.min_score is None or (score is not None and score >= f.min_score))
            and (f.max_score is None or (score is not None and score <= f.max_score))
            and (not f.check or f.check in row.failed)
            and (not f.late or row.late == (f.late == "yes")))


def dashboard(session: Session, course: str, assignment: str, filters: Filters) -> dict[str, Any]:
    """One assignment for staff: every student's latest upload (filtered), the class histogram,
    pass rates per check, the most common failure causes with who has them, export formats."""
    c = ops.course_by_slug(session, course)
    a = ops.assignment_by_slug(session, c, assignment)
    rubric = ops.rubric_of(a)
    rows = []
    for sub, student in ops.latest_submissions(session, a):
        gradings, overrides = ops.history(session, sub)
        stored = stored_result(sub, student, gradings, overrides) if gradings else None
        failed = [ch.id for ch in stored.report.checks if ch.status != "passed"] \
            if stored is not None and stored.report is not None else []
        rows.append(Row(sub, student, stored, a.due_at is not None and sub.submitted_at > a.due_at, failed))
    results = [r.stored for r in rows if r.stored is not None]
    absent = ops.students_without_upload(session, a)
    summary = build_summary(results, rubric, missing=[st.student_id for st in absent],
                            names={r.student.student_id: r.student.name for r in rows}
                            | {st.student_id: st.name for st in absent},
                            late={r.student.student_id: r.late for r in rows})
    ids = {r.student.student_id: r.sub.id for r in rows if r.sub is not None}
    rows += [Row(None, st, None, False) for st in absent]
    rows.sort(key=lambda r: r.student.student_id)
    chart = histogram(summary["histogram"]["counts"], summary["histogram"]["edges"],
                      title=f"Scores of {summary['counts']['graded']} graded submissions",
                      x_label="score, % of the maximum")
    return {"course": c, "assignment": a, "rubric": rubric, "rows": [r for r in rows if _keep(r, filters)],
            "all": len(rows), "uploads": sum(r.sub is not None for r in rows),
            "filters": filters, "summary": summary, "chart": chart, "ids": ids,
            "formats": list(exporters()), "health": health(session)}


def staff_submission(session: Session, submission_id: str, who: Principal) -> dict[str, Any]:
    """One upload with everything: the full report (hidden checks' detail too), its history,
    overrides, and the student's other uploads of the assignment."""
    sub = own_submission(session, who, submission_id)
    student = session.get_one(Student, sub.student_pk)
    a = session.get_one(Assignment, sub.assignment_id)
    gradings, overrides = ops.history(session, sub)
    view = staff_result(sub, student, gradings, overrides) | {"queue_place": ops.queue_place(session, sub)}
    report = view["report"]
    sections = _sections(report["checks"], "detail", sub, ops.rubric_of(a).targets) if report else []
    others = [status_view(o) for o in session.scalars(
        select(Submission).where(Submission.assignment_id == a.id, Submission.student_pk == student.id)
        .order_by(Submission.created_at.desc()))]
    return {"view": view, "sections": sections, "assignment": a, "course": session.get_one(Course, a.course_id),
            "student": student, "others": others, "late": a.due_at is not None and sub.submitted_at > a.due_at}

