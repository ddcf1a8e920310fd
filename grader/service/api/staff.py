"""Staff actions on submissions: regrades (one upload, or an assignment's latest uploads) and
score overrides; and the audit log of every staff change."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from ...results.tables import Audit, Student
from .. import actions, deps, ops
from ..auth import own_submission
from ..bodies import CheckedRoute
from ..deps import Slug, StaffOnly, SubmissionId
from ..schemas import OverrideIn
from ..views import staff_result

router = APIRouter(tags=["staff"], route_class=CheckedRoute)


@router.post("/api/submissions/{submission_id}/regrade", status_code=202)
def regrade(request: Request, submission_id: SubmissionId, principal: StaffOnly) -> dict[str, Any]:
    return actions.regrade_one(request, principal, submission_id)


@router.post("/api/courses/{course}/assignments/{assignment}/regrade", status_code=202)
def regrade_all(request: Request, course: Slug, assignment: Slug, principal: StaffOnly) -> dict[str, Any]:
    """Regrade each student's latest upload (after a rubric change); earlier results stay in
    the history."""
    return {"regrading": actions.regrade_every(request, principal, course, assignment)}


@router.post("/api/submissions/{submission_id}/override", status_code=201)
def override(request: Request, submission_id: SubmissionId, body: OverrideIn, principal: StaffOnly) -> dict[str, Any]:
    def work(s: Session) -> dict[str, Any]:
        sub = own_submission(s, principal, submission_id)
        ops.add_override(s, sub, body.score, body.reason, principal.name)
        gradings, overrides = ops.history(s, sub)
        return staff_result(sub, s.get_one(Student, sub.student_pk), gradings, overrides)

    return deps.run(request, work)


@router.delete("/api/submissions/{submission_id}/override")
def remove_override(request: Request, submission_id: SubmissionId, principal: StaffOnly) -> dict[str, Any]:
    """Take back the standing override: the automatic score counts again (404 when none stands)."""
    def work(s: Session) -> dict[str, Any]:
        sub = own_submission(s, principal, submission_id)
        if ops.remove_override(s, sub, principal.name) is None:
            raise ops.NotFound("this upload has no standing override")
        gradings, overrides = ops.history(s, sub)
        return staff_result(sub, s.get_one(Student, sub.student_pk), gradings, overrides)

    return deps.run(request, work)


@router.get("/api/audit")
def audit_log(request: Request, principal: StaffOnly,
              limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[dict[str, Any]]:
    return deps.run(request, lambda s: [{"at": a.at.isoformat(), "actor": a.actor, "action": a.action,
                                         "target": a.target, "detail": a.detail}
                                        for a in s.scalars(select(Audit).order_by(Audit.id.desc()).limit(limit))])
