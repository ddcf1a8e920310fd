"""the grading service: courses, assignments, students, submissions, gradings, overrides, audit, workers

Revision ID: 0002_service
Revises: 0001_batch_store
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_service"
down_revision = "0001_batch_store"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("audit",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("at", sa.DateTime(), nullable=False),
    sa.Column("actor", sa.String(length=200), nullable=False),
    sa.Column("action", sa.String(length=64), nullable=False),
    sa.Column("target", sa.String(length=200), nullable=False),
    sa.Column("detail", sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint("id")
    )
    with op.batch_alter_table("audit", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_at"), ["at"], unique=False)

    op.create_table("courses",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("slug", sa.String(length=64), nullable=False),
    sa.Column("title", sa.String(length=200), nullable=False),
    sa.Column("created_at", sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("slug")
    )
    op.create_table("staff",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("name", sa.String(length=64), nullable=False),
    sa.Column("token_hash", sa.String(length=64), nullable=False),
    sa.Column("created_at", sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("name"),
    sa.UniqueConstraint("token_hash")
    )
    op.create_table("workers",
    sa.Column("hostname", sa.String(length=200), nullable=False),
    sa.Column("last_seen", sa.DateTime(), nullable=False),
    sa.Column("backend", sa.String(length=32), nullable=False),
    sa.Column("graded", sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint("hostname")
    )
    op.create_table("assignments",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("course_id", sa.Integer(), nullable=False),
    sa.Column("slug", sa.String(length=64), nullable=False),
    sa.Column("title", sa.String(length=200), nullable=False),
    sa.Column("rubric_json", sa.Text(), nullable=False),
    sa.Column("rubric_hash", sa.String(length=64), nullable=False),
    sa.Column("due_at", sa.DateTime(), nullable=True),
    sa.Column("published", sa.Boolean(), nullable=False),
    sa.Column("policy_json", sa.Text(), nullable=False),
    sa.Column("rate_limit_count", sa.Integer(), nullable=False),
    sa.Column("rate_limit_window_s", sa.Integer(), nullable=False),
    sa.Column("created_at", sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(["course_id"], ["courses.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("course_id", "slug", name="assignments_course_slug")
    )
    with op.batch_alter_table("assignments", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_assignments_course_id"), ["course_id"], unique=False)

    op.create_table("students",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("course_id", sa.Integer(), nullable=False),
    sa.Column("student_id", sa.String(length=128), nullable=False),
    sa.Column("name", sa.String(length=200), nullable=False),
    sa.Column("email", sa.String(length=320), nullable=False),
    sa.Column("roster_json", sa.Text(), nullable=False),
    sa.Column("token_hash", sa.String(length=64), nullable=False),
    sa.Column("created_at", sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(["course_id"], ["courses.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("course_id", "student_id", name="students_course_student"),
    sa.UniqueConstraint("token_hash")
    )
    with op.batch_alter_table("students", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_students_course_id"), ["course_id"], unique=False)

    op.create_table("submissions",
    sa.Column("id", sa.String(length=32), nullable=False),
    sa.Column("assignment_id", sa.Integer(), nullable=False),
    sa.Column("student_pk", sa.Integer(), nullable=False),
    sa.Column("sha256", sa.String(length=64), nullable=False),
    sa.Column("file_name", sa.String(length=255), nullable=False),
    sa.Column("content", sa.LargeBinary(), nullable=False),
    sa.Column("status", sa.String(length=16), nullable=False),
    sa.Column("generation", sa.Integer(), nullable=False),
    sa.Column("created_at", sa.DateTime(), nullable=False),
    sa.Column("submitted_at", sa.DateTime(), nullable=False),
    sa.Column("requested_at", sa.DateTime(), nullable=False),
    sa.Column("enqueued_at", sa.DateTime(), nullable=True),
    sa.Column("started_at", sa.DateTime(), nullable=True),
    sa.Column("worker", sa.String(length=200), nullable=False),
    sa.Column("finished_at", sa.DateTime(), nullable=True),
    sa.CheckConstraint("status IN ('queued', 'grading', 'graded', 'invalid', 'failed_to_grade')", name="submissions_status"),
    sa.ForeignKeyConstraint(["assignment_id"], ["assignments.id"], ondelete="CASCADE"),
    sa.ForeignKeyConstraint(["student_pk"], ["students.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("assignment_id", "student_pk", "sha256", name="submissions_idempotent")
    )
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_submissions_assignment_id"), ["assignment_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_submissions_created_at"), ["created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_submissions_status"), ["status"], unique=False)
        batch_op.create_index(batch_op.f("ix_submissions_student_pk"), ["student_pk"], unique=False)

    op.create_table("gradings",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("submission_id", sa.String(length=32), nullable=False),
    sa.Column("generation", sa.Integer(), nullable=False),
    sa.Column("status", sa.String(length=16), nullable=False),
    sa.Column("reason", sa.Text(), nullable=False),
    sa.Column("score", sa.Float(), nullable=True),
    sa.Column("max_score", sa.Float(), nullable=True),
    sa.Column("report", sa.Text(), nullable=True),
    sa.Column("rubric_hash", sa.String(length=64), nullable=False),
    sa.Column("worker", sa.String(length=200), nullable=False),
    sa.Column("requested_at", sa.DateTime(), nullable=False),
    sa.Column("finished_at", sa.DateTime(), nullable=False),
    sa.Column("latency_s", sa.Float(), nullable=False),
    sa.CheckConstraint("status IN ('graded', 'invalid', 'failed_to_grade')", name="gradings_status"),
    sa.ForeignKeyConstraint(["submission_id"], ["submissions.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("submission_id", "generation", name="gradings_once")
    )
    with op.batch_alter_table("gradings", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_gradings_submission_id"), ["submission_id"], unique=False)

    op.create_table("overrides",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("submission_id", sa.String(length=32), nullable=False),
    sa.Column("score", sa.Float(), nullable=False),
    sa.Column("reason", sa.Text(), nullable=False),
    sa.Column("staff", sa.String(length=64), nullable=False),
    sa.Column("created_at", sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(["submission_id"], ["submissions.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id")
    )
    with op.batch_alter_table("overrides", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_overrides_submission_id"), ["submission_id"], unique=False)



def downgrade() -> None:
    with op.batch_alter_table("overrides", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_overrides_submission_id"))

    op.drop_table("overrides")
    with op.batch_alter_table("gradings", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_gradings_submission_id"))

    op.drop_table("gradings")
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_submissions_student_pk"))
        batch_op.drop_index(batch_op.f("ix_submissions_status"))
        batch_op.drop_index(batch_op.f("ix_submissions_created_at"))
        batch_op.drop_index(batch_op.f("ix_submissions_assignment_id"))

    op.drop_table("submissions")
    with op.batch_alter_table("students", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_students_course_id"))

    op.drop_table("students")
    with op.batch_alter_table("assignments", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_assignments_course_id"))

    op.drop_table("assignments")
    op.drop_table("workers")
    op.drop_table("staff")
    op.drop_table("courses")
    with op.batch_alter_table("audit", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_at"))

    op.drop_table("audit")
