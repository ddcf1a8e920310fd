"""An assignment's gradebook in every ``grader export`` format, and its checks' statistics (staff)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from .. import deps, ops
from ..bodies import CheckedRoute
from ..deps import Slug, StaffOnly
from ..exports import check_stats, export

router = APIRouter(tags=["staff"], route_class=CheckedRoute)


@router.get("/api/courses/{course}/assignments/{assignment}/export/{fmt}")
def export_gradebook(request: Request, course: Slug, assignment: Slug, fmt: Slug, principal: StaffOnly,
                     assignment_name: str = "",
                     canvas_assignment_id: Annotated[str, Query(pattern=r"^([1-9]\d{0,17})?$")] = "") -> Response:
    """A gradebook in any ``grader export`` format (gradescope: a zip of results.json files).
    Problems are listed in the ``X-Grader-Problems`` header (JSON)."""
    def work(s: Session) -> tuple[str, bytes, str, list[str]]:
        a = ops.assignment_by_slug(s, ops.course_by_slug(s, course), assignment)
        return export(s, a, fmt, assignment_name=assignment_name, canvas_assignment_id=canvas_assignment_id)

    name, content, media, problems = deps.run(request, work)
    return Response(content, media_type=media, headers={
        "Content-Disposition": f'attachment; filename="{name}"',
        "X-Grader-Problems": json.dumps(problems, ensure_ascii=True)[:8000]})


@router.get("/api/courses/{course}/assignments/{assignment}/stats")
def stats(request: Request, course: Slug, assignment: Slug, principal: StaffOnly) -> dict[str, Any]:
    return deps.run(request, lambda s: check_stats(s, ops.assignment_by_slug(s, ops.course_by_slug(s, course),
                                                                              assignment)))
