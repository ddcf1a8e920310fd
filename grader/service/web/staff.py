"""The staff pages: the course list's home, an assignment's dashboard (filters, regrade all,
exports, the LMS gradebook panel), one submission with its history, its regrade and overrides."""

from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from .. import actions, deps, ops
from ..auth import own_submission
from ..deps import Csrf, Slug, SubmissionId
from ..exports import export
from . import data
from .pages import page, redirect

router = APIRouter(include_in_schema=False)


@router.get("/staff")
def staff_home(request: Request) -> Response:
    who = deps.signed_in(request, staff=True)
    return page(request, "staff_home.html", who, **deps.run(request, data.staff_home))


@router.get("/staff/c/{course}/{assignment}")
def dashboard(request: Request, course: Slug, assignment: Slug, status: str = "", min_score: str = "",
              max_score: str = "", check: str = "", late: str = "",
              regrading: Annotated[int | None, Query(ge=0)] = None) -> Response:
    who = deps.signed_in(request, staff=True)
    filters = data.Filters(status=status[:32], min_score=_number(min_score), max_score=_number(max_score),
                           check=check[:64], late=late if late in ("yes", "no") else "")
    lms_panel = deps.lms_panel(request)

    def work(s: Session) -> dict[str, Any]:
        found = data.dashboard(s, course, assignment, filters)
        return found | {"lms": lms_panel(s, found["assignment"].id)}

    return page(request, "dashboard.html", who, regrading=regrading, **deps.run(request, work))


@router.post("/staff/c/{course}/{assignment}/regrade")
def regrade_all(request: Request, course: Slug, assignment: Slug, csrf: Csrf) -> Response:
    deps.check_csrf(request, csrf)
    who = deps.signed_in(request, staff=True)
    count = actions.regrade_every(request, who, course, assignment)
    return redirect(f"/staff/c/{course}/{assignment}?regrading={count}")


@router.get("/staff/c/{course}/{assignment}/export/{fmt}")
def export_file(request: Request, course: Slug, assignment: Slug, fmt: Slug) -> Response:
    deps.signed_in(request, staff=True)

    def work(s: Session) -> tuple[str, bytes, str, list[str]]:
        return export(s, ops.assignment_by_slug(s, ops.course_by_slug(s, course), assignment), fmt)

    name, content, media, _problems = deps.run(request, work)
    return Response(content, media_type=media, headers={"Content-Disposition": f'attachment; filename="{name}"',
                                                        "Cache-Control": "no-store"})


@router.get("/staff/s/{submission_id}")
def staff_submission(request: Request, submission_id: SubmissionId) -> Response:
    who = deps.signed_in(request, staff=True)
    found = deps.run(request, lambda s: data.staff_submission(s, submission_id, who))
    return page(request, "staff_submission.html", who, **found)


@router.post("/staff/s/{submission_id}/regrade")
def regrade(request: Request, submission_id: SubmissionId, csrf: Csrf) -> Response:
    deps.check_csrf(request, csrf)
    who = deps.signed_in(request, staff=True)
    actions.regrade_one(request, who, submission_id)
    return redirect(f"/staff/s/{submission_id}")


@router.post("/staff/s/{submission_id}/override")
def override(request: Request, submission_id: SubmissionId, csrf: Csrf,
             score: Annotated[float, Form(ge=0, le=1_000_000)],
             reason: Annotated[str, Form(min_length=3, max_length=2000)]) -> Response:
    deps.check_csrf(request, csrf)
    who = deps.signed_in(request, staff=True)

    def work(s: Session) -> None:
        ops.add_override(s, own_submission(s, who, submission_id), score, reason.strip(), who.name)

    deps.run(request, work)
    return redirect(f"/staff/s/{submission_id}")


@router.post("/staff/s/{submission_id}/override/remove")
def remove_override(request: Request, submission_id: SubmissionId, csrf: Csrf) -> Response:
    deps.check_csrf(request, csrf)
    who = deps.signed_in(request, staff=True)
    deps.run(request, lambda s: ops.remove_override(s, own_submission(s, who, submission_id), who.name))
    return redirect(f"/staff/s/{submission_id}")


def _number(text: str) -> float | None:
    try:
        value = float(text) if text.strip() else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None
