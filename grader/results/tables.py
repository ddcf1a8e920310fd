"""The one store's tables (SQLAlchemy): batch grading's content-hash cache and the service's data.

Every table is created and changed only by the Alembic migrations in ``migrations/``; this module
must stay importable with SQLAlchemy alone (``grader batch`` uses it without the service extra).

    results, meta           ``grader batch``'s cache: one row per student, keyed by content hash
    staff, courses, assignments, students
    submissions             one row per (assignment, student, content): uploads are idempotent
    gradings                one row per grading of a submission; UNIQUE (submission, generation)
                            makes "exactly one result per grading request" a database rule
    overrides, audit        staff changes, with who, when and why
    web_sessions            one row per signed-in browser: signing out, or staff, delete it
    workers                 the grading workers seen, with their last heartbeat
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

# The Alembic revision these tables correspond to: a store at this revision needs no migration
# (tests/service/test_store.py checks it against the migration scripts).
HEAD_REVISION = "0007_sessions_invitations"

RESULT_STATUSES = ("graded", "invalid", "failed_to_grade")
SUBMISSION_STATUSES = ("queued", "grading", *RESULT_STATUSES)


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend (SQLite keeps no zone: stored as naive UTC)."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use an aware UTC datetime")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


class Base(DeclarativeBase):
    pass


# ---- grader batch ----------------------------------------------------------------------------


class BatchResult(Base):
    """``grader batch``'s row per student (the columns of the original hand-written SQLite schema)."""

    __tablename__ = "results"
    __table_args__ = (CheckConstraint("status IN ('graded', 'invalid', 'failed_to_grade')", name="results_status"),)

    student_id: Mapped[str] = mapped_column(Text, primary_key=True)
    cache_key: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(Text)
    file_name: Mapped[str] = mapped_column(Text)
    name: Mapped[str] = mapped_column(Text, default="", server_default="")
    email: Mapped[str] = mapped_column(Text, default="", server_default="")
    submitted_at: Mapped[str] = mapped_column(Text, default="", server_default="")
    status: Mapped[str] = mapped_column(Text)
    reason: Mapped[str] = mapped_column(Text, default="", server_default="")
    score: Mapped[float | None] = mapped_column(Float)
    max_score: Mapped[float | None] = mapped_column(Float)
    report: Mapped[str | None] = mapped_column(Text)
    graded_at: Mapped[str] = mapped_column(Text)


class Meta(Base):
    __tablename__ = "meta"

    key: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[str] = mapped_column(Text)


# ---- the service -----------------------------------------------------------------------------


class Staff(Base):
    __tablename__ = "staff"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Course(Base):
    __tablename__ = "courses"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slug: Mapped[str] = mapped_column(String(64), unique=True)
    title: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Assignment(Base):
    """An assignment: its rubric (JSON of ``grader.rubric.Rubric``), due date and release policy."""

    __tablename__ = "assignments"
    __table_args__ = (UniqueConstraint("course_id", "slug", name="assignments_course_slug"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"), index=True)
    slug: Mapped[str] = mapped_column(String(64))
    title: Mapped[str] = mapped_column(String(200))
    rubric_json: Mapped[str] = mapped_column(Text)
    rubric_hash: Mapped[str] = mapped_column(String(64))
    due_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    published: Mapped[bool] = mapped_column(Boolean, default=False)
    policy_json: Mapped[str] = mapped_column(Text, default="{}")  # grader.service.schemas.Policy
    rate_limit_count: Mapped[int] = mapped_column(Integer, default=10)
    rate_limit_window_s: Mapped[int] = mapped_column(Integer, default=3600)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Student(Base):
    """A roster entry of a course (every roster column in ``roster_json``) and its credential."""

    __tablename__ = "students"
    __table_args__ = (UniqueConstraint("course_id", "student_id", name="students_course_student"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"), index=True)
    student_id: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(200), default="")
    email: Mapped[str] = mapped_column(String(320), default="")
    roster_json: Mapped[str] = mapped_column(Text, default="{}")
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # when the current token was handed out; None: nobody has seen it (a sign-in sheet issues one)
    token_issued_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True, default=None)


class Submission(Base):
    """One uploaded file. ``generation`` counts grading requests (1 + regrades); the grading of the
    highest generation is the one that counts."""

    __tablename__ = "submissions"
    __table_args__ = (
        UniqueConstraint("assignment_id", "student_pk", "sha256", name="submissions_idempotent"),
        CheckConstraint("status IN ('queued', 'grading', 'graded', 'invalid', 'failed_to_grade')",
                        name="submissions_status"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id", ondelete="CASCADE"), index=True)
    student_pk: Mapped[int] = mapped_column(ForeignKey("students.id", ondelete="CASCADE"), index=True)
    sha256: Mapped[str] = mapped_column(String(64))
    file_name: Mapped[str] = mapped_column(String(255))
    content: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)  # read when grading or shown, not for a status
    status: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    generation: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    submitted_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)  # last upload of this content
    requested_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)  # of the current generation
    enqueued_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    worker: Mapped[str] = mapped_column(String(200), default="")
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Grading(Base):
    """The result of one grading of a submission: kept forever, so regrades have a history."""

    __tablename__ = "gradings"
    __table_args__ = (
        UniqueConstraint("submission_id", "generation", name="gradings_once"),
        CheckConstraint("status IN ('graded', 'invalid', 'failed_to_grade')", name="gradings_status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[str] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    generation: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    score: Mapped[float | None] = mapped_column(Float)
    max_score: Mapped[float | None] = mapped_column(Float)
    report: Mapped[str | None] = mapped_column(Text)  # GradeReport JSON
    rubric_hash: Mapped[str] = mapped_column(String(64))
    worker: Mapped[str] = mapped_column(String(200), default="")
    requested_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    latency_s: Mapped[float] = mapped_column(Float)  # from the request (upload or regrade) to this row


class Override(Base):
    __tablename__ = "overrides"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[str] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    score: Mapped[float] = mapped_column(Float)
    reason: Mapped[str] = mapped_column(Text)
    staff: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # an override stands through every regrade until staff remove it (then it stays in the history)
    removed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True, default=None)
    removed_by: Mapped[str] = mapped_column(String(64), default="", server_default="")


class Audit(Base):
    __tablename__ = "audit"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(200))
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str] = mapped_column(String(200))
    detail: Mapped[str] = mapped_column(Text, default="")


class WebSession(Base):
    """A browser's sign-in. The session cookie names it (this keeps only the id's hash); signing
    out deletes it, "sign out everywhere" and a new token delete every one of that person's."""

    __tablename__ = "web_sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # sha256 of the cookie's session id
    kind: Mapped[str] = mapped_column(String(16))  # staff | student
    principal_pk: Mapped[int] = mapped_column(Integer, index=True)  # staff.id or students.id
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class Worker(Base):
    __tablename__ = "workers"

    hostname: Mapped[str] = mapped_column(String(200), primary_key=True)
    last_seen: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    backend: Mapped[str] = mapped_column(String(32), default="")
    graded: Mapped[int] = mapped_column(Integer, default=0)
