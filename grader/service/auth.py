"""Credentials: ``Authorization: Bearer <token>``. Staff and student tokens live in different
tables, are stored only as hashes, and a student token never passes a staff check."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

from fastapi import HTTPException, Request
from sqlalchemy import Select, String, bindparam, select
from sqlalchemy.orm import Session

from ..results.tables import Staff, Student, Submission
from .ops import NotFound, token_hash


@dataclass(frozen=True)
class Principal:
    kind: Literal["staff", "student"]
    name: str  # the staff member's name, or the student id
    student_pk: int | None = None
    course_id: int | None = None

    @property
    def staff(self) -> bool:
        return self.kind == "staff"


def bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip() or len(token) > 200:
        raise HTTPException(401, "sign in: send 'Authorization: Bearer <token>' (staff token, or your student token)",
                            headers={"WWW-Authenticate": "Bearer"})
    return token.strip()


@functools.cache
def _lookups() -> tuple[Select[str], Select[str, int, int]]:
    """The token look-ups, built once (every request makes one; building it cost more than running it)."""
    digest = bindparam("digest", type_=String)
    return (select(Staff.name).where(Staff.token_hash == digest),
            select(Student.student_id, Student.id, Student.course_id).where(Student.token_hash == digest))


def authenticate(session: Session, token: str) -> Principal:
    staff, students = _lookups()
    if token.startswith("staff_"):
        name = session.execute(staff, {"digest": token_hash(token)}).scalar()
        if name is not None:
            return Principal("staff", name)
    elif token.startswith("student_"):
        row = session.execute(students, {"digest": token_hash(token)}).first()
        if row is not None:
            return Principal("student", row.student_id, row.id, row.course_id)
    raise HTTPException(401, "unknown or revoked token", headers={"WWW-Authenticate": "Bearer"})


def require_staff(who: Principal) -> None:
    if not who.staff:
        raise HTTPException(403, "staff only")


def require_course(who: Principal, course_id: int) -> None:
    """Staff, or a student enrolled in this course (others get 404: no course is revealed)."""
    if not who.staff and who.course_id != course_id:
        raise NotFound("no such course")


def own_submission(session: Session, who: Principal, submission_id: str) -> Submission:
    """The submission, if ``who`` may see it: staff any, a student only their own. Anything else
    is 404, the same answer as an id that does not exist."""
    sub = session.get(Submission, submission_id)
    if sub is None or (not who.staff and sub.student_pk != who.student_pk):
        raise NotFound(f"no submission {submission_id}")
    return sub
