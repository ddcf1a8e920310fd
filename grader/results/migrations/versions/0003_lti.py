"""lti: keys, logins, nonces, contexts, links, users, passbacks, events

Revision ID: 0003_lti
Revises: 0002_service
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_lti"
down_revision = "0002_service"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("lti_events",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("at", sa.DateTime(), nullable=False),
    sa.Column("kind", sa.String(length=32), nullable=False),
    sa.Column("issuer", sa.String(length=255), nullable=False),
    sa.Column("detail", sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint("id")
    )
    with op.batch_alter_table("lti_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lti_events_at"), ["at"], unique=False)

    op.create_table("lti_keys",
    sa.Column("kid", sa.String(length=64), nullable=False),
    sa.Column("private_pem", sa.Text(), nullable=False),
    sa.Column("created_at", sa.DateTime(), nullable=False),
    sa.Column("retired_at", sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint("kid")
    )
    op.create_table("lti_logins",
    sa.Column("state", sa.String(length=64), nullable=False),
    sa.Column("nonce", sa.String(length=64), nullable=False),
    sa.Column("issuer", sa.String(length=255), nullable=False),
    sa.Column("client_id", sa.String(length=255), nullable=False),
    sa.Column("created_at", sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint("state")
    )
    with op.batch_alter_table("lti_logins", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lti_logins_created_at"), ["created_at"], unique=False)

    op.create_table("lti_nonces",
    sa.Column("issuer", sa.String(length=255), nullable=False),
    sa.Column("nonce", sa.String(length=255), nullable=False),
    sa.Column("seen_at", sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint("issuer", "nonce")
    )
    with op.batch_alter_table("lti_nonces", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lti_nonces_seen_at"), ["seen_at"], unique=False)

    op.create_table("lti_contexts",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("issuer", sa.String(length=255), nullable=False),
    sa.Column("client_id", sa.String(length=255), nullable=False),
    sa.Column("deployment_id", sa.String(length=255), nullable=False),
    sa.Column("context_id", sa.String(length=255), nullable=False),
    sa.Column("course_id", sa.Integer(), nullable=False),
    sa.Column("memberships_url", sa.Text(), nullable=False),
    sa.Column("lineitems_url", sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(["course_id"], ["courses.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("issuer", "deployment_id", "context_id", name="lti_contexts_once")
    )
    with op.batch_alter_table("lti_contexts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lti_contexts_course_id"), ["course_id"], unique=False)

    op.create_table("lti_links",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("context_pk", sa.Integer(), nullable=False),
    sa.Column("resource_link_id", sa.String(length=255), nullable=False),
    sa.Column("assignment_id", sa.Integer(), nullable=False),
    sa.Column("lineitem_url", sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(["assignment_id"], ["assignments.id"], ondelete="CASCADE"),
    sa.ForeignKeyConstraint(["context_pk"], ["lti_contexts.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("context_pk", "resource_link_id", name="lti_links_once")
    )
    with op.batch_alter_table("lti_links", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lti_links_assignment_id"), ["assignment_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_lti_links_context_pk"), ["context_pk"], unique=False)

    op.create_table("lti_users",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("context_pk", sa.Integer(), nullable=False),
    sa.Column("sub", sa.String(length=255), nullable=False),
    sa.Column("role", sa.String(length=16), nullable=False),
    sa.Column("student_pk", sa.Integer(), nullable=True),
    sa.Column("name", sa.String(length=200), nullable=False),
    sa.Column("email", sa.String(length=320), nullable=False),
    sa.ForeignKeyConstraint(["context_pk"], ["lti_contexts.id"], ondelete="CASCADE"),
    sa.ForeignKeyConstraint(["student_pk"], ["students.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("context_pk", "sub", name="lti_users_once")
    )
    with op.batch_alter_table("lti_users", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lti_users_context_pk"), ["context_pk"], unique=False)
        batch_op.create_index(batch_op.f("ix_lti_users_student_pk"), ["student_pk"], unique=False)

    op.create_table("lti_passbacks",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("grading_id", sa.Integer(), nullable=False),
    sa.Column("link_pk", sa.Integer(), nullable=False),
    sa.Column("user_pk", sa.Integer(), nullable=False),
    sa.Column("state", sa.String(length=16), nullable=False),
    sa.Column("score_given", sa.Double(), nullable=True),
    sa.Column("score_maximum", sa.Double(), nullable=True),
    sa.Column("timestamp", sa.DateTime(), nullable=False),
    sa.Column("attempts", sa.Integer(), nullable=False),
    sa.Column("next_attempt_at", sa.DateTime(), nullable=False),
    sa.Column("last_error", sa.Text(), nullable=False),
    sa.Column("sent_at", sa.DateTime(), nullable=True),
    sa.CheckConstraint("state IN ('pending', 'held', 'sent', 'failed')", name="lti_passbacks_state"),
    sa.ForeignKeyConstraint(["grading_id"], ["gradings.id"], ondelete="CASCADE"),
    sa.ForeignKeyConstraint(["link_pk"], ["lti_links.id"], ondelete="CASCADE"),
    sa.ForeignKeyConstraint(["user_pk"], ["lti_users.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("grading_id", "link_pk", "user_pk", name="lti_passbacks_once")
    )
    with op.batch_alter_table("lti_passbacks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lti_passbacks_grading_id"), ["grading_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_lti_passbacks_link_pk"), ["link_pk"], unique=False)
        batch_op.create_index(batch_op.f("ix_lti_passbacks_state"), ["state"], unique=False)
        batch_op.create_index(batch_op.f("ix_lti_passbacks_user_pk"), ["user_pk"], unique=False)



def downgrade() -> None:
    with op.batch_alter_table("lti_passbacks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lti_passbacks_user_pk"))
        batch_op.drop_index(batch_op.f("ix_lti_passbacks_state"))
        batch_op.drop_index(batch_op.f("ix_lti_passbacks_link_pk"))
        batch_op.drop_index(batch_op.f("ix_lti_passbacks_grading_id"))

    op.drop_table("lti_passbacks")
    with op.batch_alter_table("lti_users", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lti_users_student_pk"))
        batch_op.drop_index(batch_op.f("ix_lti_users_context_pk"))

    op.drop_table("lti_users")
    with op.batch_alter_table("lti_links", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lti_links_context_pk"))
        batch_op.drop_index(batch_op.f("ix_lti_links_assignment_id"))

    op.drop_table("lti_links")
    with op.batch_alter_table("lti_contexts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lti_contexts_course_id"))

    op.drop_table("lti_contexts")
    with op.batch_alter_table("lti_nonces", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lti_nonces_seen_at"))

    op.drop_table("lti_nonces")
    with op.batch_alter_table("lti_logins", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lti_logins_created_at"))

    op.drop_table("lti_logins")
    op.drop_table("lti_keys")
    with op.batch_alter_table("lti_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lti_events_at"))

    op.drop_table("lti_events")
