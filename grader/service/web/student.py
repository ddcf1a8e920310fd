"""A student's pages: their assignments, an assignment's uploads (and the upload form), one
upload's feedback with its live status, and two attempts compared. Staff are sent to their own
pages."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Query, Request, UploadFile
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from ...errors import Forbidden
from ...results.tables import utcnow
from .. import actions, deps
from ..deps import Csrf, Slug, SubmissionId
from ..schemas import SUBMISSION_ID
from . import data
from .pages import page, redirect

router = APIRouter(include_in_schema=False)


@router.get("/home")
def student_home(request: Request) -> Response:
    who = deps.signed_in(request)
    if who.staff:
        return redirect("/staff")
    course, assignments = deps.run(request, lambda s: data.student_course(s, who))
    return page(request, "home.html", who, course=course, assignments=assignments)


@router.get("/c/{course}/{assignment}")
def assignment_page(request: Request, course: Slug, assignment: Slug) -> Response:
    who = deps.signed_in(request)
    if who.staff:
        return redirect(f"/staff/c/{course}/{assignment}")
    c, a, attempts = deps.run(request, lambda s: data.attempts(s, who, course, assignment, utcnow()))
    return page(request, "assignment.html", who, course=c, assignment=a, attempts=attempts,
                accept=".ipynb,.py", max_kib=deps.settings(request).max_upload_bytes // 1024)


@router.post("/c/{course}/{assignment}/upload")
async def upload(request: Request, course: Slug, assignment: Slug, csrf: Csrf,
                 file: Annotated[UploadFile, File()]) -> Response:
    deps.check_csrf(request, csrf)
    who = await run_in_threadpool(deps.signed_in, request)
    if who.staff:
        raise Forbidden("staff submit for a student through the API (form field student_id)")
    view = await actions.accept_upload(request, who, course, assignment, file)
    url = f"/s/{view['id']}"
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse({"url": url, "id": view["id"], "created": view["created"]}, status_code=202)
    return redirect(url)


@router.get("/c/{course}/{assignment}/compare")
def compare(request: Request, course: Slug, assignment: Slug,
            a: Annotated[str, Query(pattern=SUBMISSION_ID)], b: Annotated[str, Query(pattern=SUBMISSION_ID)]
            ) -> Response:
    who = deps.signed_in(request)
    if who.staff:
        raise Forbidden("the comparison is a student's page; staff see every attempt on the submission page")
    found = deps.run(request, lambda s: data.compare(s, who, course, assignment, a, b, utcnow()))
    return page(request, "compare.html", who, **found)


@router.get("/s/{submission_id}")
def submission(request: Request, submission_id: SubmissionId) -> Response:
    who = deps.signed_in(request)
    if who.staff:
        return redirect(f"/staff/s/{submission_id}")
    found = deps.run(request, lambda s: data.student_submission(s, who, submission_id, utcnow()))
    return page(request, "submission.html", who, **found)


@router.get("/s/{submission_id}/events")
async def events(request: Request, submission_id: SubmissionId) -> Response:
    who = await run_in_threadpool(deps.signed_in, request)
    return await actions.status_events(request, who, submission_id)
