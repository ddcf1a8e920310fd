"""lti: instructors linked to staff accounts; overrides sent to the LMS; superseded passbacks;
platforms registered dynamically

Revision ID: 0004_lti_staff_overrides
Revises: 0003_lti
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_lti_staff_overrides"
down_revision = "0003_lti"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("lti_platforms",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("registration_id", sa.String(length=64), nullable=False),
    sa.Column("issuer", sa.String(length=255), nullable=False),
    sa.Column("client_id", sa.String(length=255), nullable=False),
    sa.Column("deployment_ids_json", sa.Text(), nullable=False),
    sa.Column("auth_login_url", sa.Text(), nullable=False),
    sa.Column("auth_token_url", sa.Text(), nullable=False),
    sa.Column("jwks_url", sa.Text(), nullable=False),
    sa.Column("product", sa.String(length=200), nullable=False),
    sa.Column("registered_by", sa.String(length=64), nullable=False),
    sa.Column("created_at", sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("issuer", "client_id", name="lti_platforms_once"),
    sa.UniqueConstraint("registration_id")
    )
    with op.batch_alter_table("lti_users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("staff_pk", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_lti_users_staff_pk"), ["staff_pk"], unique=False)
        batch_op.create_foreign_key("lti_users_staff_pk_fkey", "staff", ["staff_pk"], ["id"], ondelete="SET NULL")

    with op.batch_alter_table("lti_passbacks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("override_id", sa.Integer(), nullable=True))
        batch_op.alter_column("grading_id", existing_type=sa.Integer(), nullable=True)
        batch_op.create_index(batch_op.f("ix_lti_passbacks_override_id"), ["override_id"], unique=False)
        batch_op.create_foreign_key("lti_passbacks_override_id_fkey", "overrides", ["override_id"], ["id"],
                                    ondelete="CASCADE")
        batch_op.create_unique_constraint("lti_passbacks_override_once", ["override_id", "link_pk", "user_pk"])
        batch_op.drop_constraint("lti_passbacks_state", type_="check")
        batch_op.create_check_constraint("lti_passbacks_state",
                                         "state IN ('pending', 'held', 'sent', 'failed', 'superseded')")
        batch_op.create_check_constraint("lti_passbacks_one_source", "(grading_id IS NULL) <> (override_id IS NULL)")


def downgrade() -> None:
    with op.batch_alter_table("lti_passbacks", schema=None) as batch_op:
        batch_op.drop_constraint("lti_passbacks_one_source", type_="check")
        batch_op.drop_constraint("lti_passbacks_state", type_="check")
        batch_op.create_check_constraint("lti_passbacks_state", "state IN ('pending', 'held', 'sent', 'failed')")
        batch_op.drop_constraint("lti_passbacks_override_once", type_="unique")
        batch_op.drop_constraint("lti_passbacks_override_id_fkey", type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_lti_passbacks_override_id"))
        batch_op.alter_column("grading_id", existing_type=sa.Integer(), nullable=False)
        batch_op.drop_column("override_id")

    with op.batch_alter_table("lti_users", schema=None) as batch_op:
        batch_op.drop_constraint("lti_users_staff_pk_fkey", type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_lti_users_staff_pk"))
        batch_op.drop_column("staff_pk")

    op.drop_table("lti_platforms")
