"""Submissions: an upload, the uploads of an assignment, one upload's status (at once, as a long
poll, or as server-sent events) and its result."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Query, Request, UploadFile
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse
from sqlalchemy import select
from sqlalchemy.orm import Session

from ...results.tables import Assignment, Student, Submission, utcnow
from .. import actions, deps, ops
from ..auth import own_submission, require_course
from ..bodies import CheckedRoute
from ..deps import Slug, SubmissionId, Token, Who
from ..views import staff_result, status_view, student_result

router = APIRouter(tags=["submissions"], route_class=CheckedRoute)


@router.post("/api/courses/{course}/assignments/{assignment}/submissions", status_code=202)
async def upload(course: Slug, assignment: Slug, principal: Who, request: Request,
                 file: Annotated[UploadFile, File(description=".ipynb notebook or jupytext percent .py")],
                 student_id: Annotated[str | None, Form(description="staff only: submit for this student")] = None,
                 ) -> JSONResponse:
    """Upload a submission: 202 and its id, once it is committed to the store. The same file
    from the same student again returns the same id (and does not count against the limit)."""
    view = await actions.accept_upload(request, principal, course, assignment, file, student_id)
    return JSONResponse(view, status_code=202, headers={"Location": view["links"]["self"]})


@router.get("/api/courses/{course}/assignments/{assignment}/submissions")
def list_submissions(request: Request, course: Slug, assignment: Slug, principal: Who) -> list[dict[str, Any]]:
    """Staff: every roster student, by student id, with their latest upload (or ``status``
    ``no_submission`` and ``id`` null). A student: their own uploads, newest first."""
    def work(s: Session) -> list[dict[str, Any]]:
        c = ops.course_by_slug(s, course)
        require_course(principal, c.id)
        a = ops.assignment_by_slug(s, c, assignment)
        if principal.staff:
            uploaded = [status_view(sub) | {"student_id": st.student_id, "name": st.name}
                        for sub, st in ops.latest_submissions(s, a)]
            absent = [{"id": None, "student_id": st.student_id, "name": st.name, "status": "no_submission",
                       "final": True} for st in ops.students_without_upload(s, a)]
            return sorted(uploaded + absent, key=lambda row: row["student_id"])
        mine = s.scalars(select(Submission).where(Submission.assignment_id == a.id,
                                                  Submission.student_pk == principal.student_pk)
                         .order_by(Submission.submitted_at.desc()))
        return [status_view(sub) for sub in mine]

    return deps.run(request, work)


@router.get("/api/submissions/{submission_id}")
async def get_status(request: Request, submission_id: SubmissionId, token: Token,
                     wait: Annotated[float, Query(ge=0, le=600, description="long poll: wait up to this many "
                                                  "seconds for a final status")] = 0) -> dict[str, Any]:
    """The status at once, or (``wait``) once final; signed in with the same transaction as the read."""
    if wait <= 0:
        return (await run_in_threadpool(actions.signed_in_status, request, token, submission_id))[1]
    return await actions.long_poll(request, token, submission_id, wait)


@router.get("/api/submissions/{submission_id}/events")
async def events(request: Request, submission_id: SubmissionId, principal: Who) -> StreamingResponse:
    """Server-sent events: one ``status`` event per change, until the status is final."""
    return await actions.status_events(request, principal, submission_id)


@router.get("/api/submissions/{submission_id}/result")
def result(request: Request, submission_id: SubmissionId, principal: Who) -> dict[str, Any]:
    """A student gets their own result filtered by the release policy; staff get everything."""
    def work(s: Session) -> dict[str, Any]:
        sub = own_submission(s, principal, submission_id)
        gradings, overrides = ops.history(s, sub)
        if principal.staff:
            return staff_result(sub, s.get_one(Student, sub.student_pk), gradings, overrides)
        return student_result(sub, s.get_one(Assignment, sub.assignment_id), gradings, overrides, utcnow())

    return deps.run(request, work)
