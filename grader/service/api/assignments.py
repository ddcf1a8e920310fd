"""A course's assignments: staff create and change them; its students may read them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from ...results.tables import Assignment
from .. import deps, ops
from ..auth import require_course
from ..bodies import CheckedRoute
from ..deps import Slug, StaffOnly, Who
from ..schemas import AssignmentIn, AssignmentPatch
from ..views import assignment_view

router = APIRouter(tags=["courses"], route_class=CheckedRoute)


@router.post("/api/courses/{course}/assignments", status_code=201)
def create_assignment(request: Request, course: Slug, body: AssignmentIn, principal: StaffOnly) -> dict[str, Any]:
    def work(s: Session) -> dict[str, Any]:
        c = ops.course_by_slug(s, course)
        return assignment_view(c, ops.create_assignment(s, c, body, principal.name))

    return deps.run(request, work)


@router.get("/api/courses/{course}/assignments")
def list_assignments(request: Request, course: Slug, principal: Who) -> list[dict[str, Any]]:
    def work(s: Session) -> list[dict[str, Any]]:
        c = ops.course_by_slug(s, course)
        require_course(principal, c.id)
        return [assignment_view(c, a) for a in s.scalars(select(Assignment).where(Assignment.course_id == c.id)
                                                         .order_by(Assignment.slug))]

    return deps.run(request, work)


@router.get("/api/courses/{course}/assignments/{assignment}")
def get_assignment(request: Request, course: Slug, assignment: Slug, principal: Who) -> dict[str, Any]:
    def work(s: Session) -> dict[str, Any]:
        c = ops.course_by_slug(s, course)
        require_course(principal, c.id)
        return assignment_view(c, ops.assignment_by_slug(s, c, assignment))

    return deps.run(request, work)


@router.patch("/api/courses/{course}/assignments/{assignment}")
def update_assignment(request: Request, course: Slug, assignment: Slug, body: AssignmentPatch,
                      principal: StaffOnly) -> dict[str, Any]:
    def work(s: Session) -> dict[str, Any]:
        c = ops.course_by_slug(s, course)
        return assignment_view(c, ops.update_assignment(s, ops.assignment_by_slug(s, c, assignment), body,
                                                        principal.name))

    return deps.run(request, work)
