"""Courses, and a course's roster and students (staff only)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, File, Request, UploadFile
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import select
from sqlalchemy.orm import Session

from ...results.roster import RosterError, parse_roster
from ...results.tables import Course, Student
from .. import deps, ops
from ..bodies import CheckedRoute
from ..deps import Slug, StaffOnly
from ..schemas import CourseIn
from ..views import course_view

router = APIRouter(tags=["courses"], route_class=CheckedRoute)


@router.post("/api/courses", status_code=201)
def create_course(request: Request, body: CourseIn, principal: StaffOnly) -> dict[str, Any]:
    return course_view(deps.run(request, lambda s: ops.create_course(s, body, principal.name)))


@router.get("/api/courses")
def list_courses(request: Request, principal: StaffOnly) -> list[dict[str, Any]]:
    return deps.run(request, lambda s: [course_view(c) for c in s.scalars(select(Course).order_by(Course.slug))])


@router.post("/api/courses/{course}/roster")
async def import_roster(request: Request, course: Slug, principal: StaffOnly, roster: Annotated[UploadFile, File()],
                        rotate: bool = False) -> dict[str, Any]:
    """Add the students of a roster CSV (the same columns as ``grader batch --roster``). New
    students get a credential, returned here once; ``rotate=true`` issues new ones to all."""
    raw = await roster.read(20 * 2**20 + 1)
    try:
        parsed = parse_roster(raw.decode("utf-8-sig"), source=roster.filename or "roster")
    except (RosterError, UnicodeDecodeError) as e:
        raise ops.Invalid(f"roster not usable: {e}") from None

    def work(s: Session) -> dict[str, Any]:
        issued, problems = ops.import_roster(s, ops.course_by_slug(s, course), parsed, principal.name, rotate=rotate)
        return {"credentials": issued, "problems": problems, "students": len(parsed.entries)}

    return await run_in_threadpool(deps.run, request, work)


@router.get("/api/courses/{course}/students")
def list_students(request: Request, course: Slug, principal: StaffOnly) -> list[dict[str, str]]:
    def work(s: Session) -> list[dict[str, str]]:
        c = ops.course_by_slug(s, course)
        return [{"student_id": st.student_id, "name": st.name, "email": st.email}
                for st in s.scalars(select(Student).where(Student.course_id == c.id).order_by(Student.student_id))]

    return deps.run(request, work)
