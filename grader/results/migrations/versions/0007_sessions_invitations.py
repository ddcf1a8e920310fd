"""web sessions kept in the store (signing out ends one; staff end all of a person's), and the
LTI registration invitations already used (one attempt each)

Revision ID: 0007_sessions_invitations
Revises: 0006_student_token_issued
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_sessions_invitations"
down_revision = "0006_student_token_issued"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("web_sessions",
    sa.Column("id", sa.String(length=64), nullable=False),
    sa.Column("kind", sa.String(length=16), nullable=False),
    sa.Column("principal_pk", sa.Integer(), nullable=False),
    sa.Column("created_at", sa.DateTime(), nullable=False),
    sa.Column("expires_at", sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint("id")
    )
    with op.batch_alter_table("web_sessions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_web_sessions_principal_pk"), ["principal_pk"], unique=False)
        batch_op.create_index(batch_op.f("ix_web_sessions_expires_at"), ["expires_at"], unique=False)

    op.create_table("lti_invitations",
    sa.Column("id", sa.String(length=64), nullable=False),
    sa.Column("used_at", sa.DateTime(), nullable=False),
    sa.Column("made_by", sa.String(length=64), nullable=False),
    sa.PrimaryKeyConstraint("id")
    )
    # Sessions signed before this revision are not in the table: those browsers sign in again.


def downgrade() -> None:
    op.drop_table("lti_invitations")
    with op.batch_alter_table("web_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_web_sessions_expires_at"))
        batch_op.drop_index(batch_op.f("ix_web_sessions_principal_pk"))
    op.drop_table("web_sessions")
