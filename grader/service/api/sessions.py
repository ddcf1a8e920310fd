"""Who a token signs in, and signing out everywhere: a staff member's browser sessions, or, by
staff, one student's (the same operations as the pages' buttons: ``ops.sign_out_staff`` and
``ops.sign_out_student``). A bearer token is not a session: it stays good until it is rotated."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from sqlalchemy.orm import Session

from .. import deps, ops
from ..bodies import CheckedRoute
from ..deps import Slug, StaffOnly, Who

router = APIRouter(tags=["auth"], route_class=CheckedRoute)
StudentId = Annotated[str, Path(min_length=1, max_length=128)]


@router.get("/api/me")
def me(principal: Who) -> dict[str, Any]:
    return {"kind": principal.kind, "name": principal.name}


@router.delete("/api/me/sessions")
def sign_out_everywhere(request: Request, principal: StaffOnly) -> dict[str, int]:
    """End every browser session of yours (staff), in every browser; your token stays good."""
    return {"ended": deps.run(request, lambda s: ops.sign_out_staff(s, principal.name))}


@router.delete("/api/courses/{course}/students/{student_id}/sessions")
def sign_out_student(request: Request, course: Slug, student_id: StudentId, principal: StaffOnly) -> dict[str, Any]:
    """End every browser session of one student (their sign-in token stays good; rotate it to
    take it back)."""
    def work(s: Session) -> dict[str, Any]:
        student, ended = ops.sign_out_student(s, ops.course_by_slug(s, course), student_id, principal.name)
        return {"student_id": student.student_id, "ended": ended}

    return deps.run(request, work)
