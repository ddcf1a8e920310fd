"""overrides stand through regrades until staff remove them: when and by whom one was removed

Revision ID: 0005_override_removed
Revises: 0004_lti_staff_overrides
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_override_removed"
down_revision = "0004_lti_staff_overrides"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("overrides", schema=None) as batch_op:
        batch_op.add_column(sa.Column("removed_at", sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column("removed_by", sa.String(length=64), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("overrides", schema=None) as batch_op:
        batch_op.drop_column("removed_by")
        batch_op.drop_column("removed_at")
