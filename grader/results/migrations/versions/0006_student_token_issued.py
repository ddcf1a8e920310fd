"""when each student's current sign-in token was handed out (None: never, e.g. imported from the
web pages and not yet given a sign-in sheet)

Revision ID: 0006_student_token_issued
Revises: 0005_override_removed
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_student_token_issued"
down_revision = "0005_override_removed"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("students", schema=None) as batch_op:
        batch_op.add_column(sa.Column("token_issued_at", sa.DateTime(), nullable=True))
    # Every student so far got their token in the roster import's answer (or signs in from the LMS).
    op.execute("UPDATE students SET token_issued_at = created_at")


def downgrade() -> None:
    with op.batch_alter_table("students", schema=None) as batch_op:
        batch_op.drop_column("token_issued_at")
