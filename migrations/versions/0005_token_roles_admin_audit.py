"""security: token roles (node or admin, an admin token bound to no node) and the admin audit log

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 01:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.alter_column("node_id", existing_type=sa.Integer(), nullable=True)
        batch_op.add_column(sa.Column("role", sa.String(length=16), server_default="node", nullable=False))
        batch_op.add_column(sa.Column("name", sa.String(length=255), nullable=True))
    op.create_table(
        "admin_audit",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=255), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("target", sa.String(length=255), nullable=True),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_admin_audit")),
    )
    with op.batch_alter_table("admin_audit", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_admin_audit_at"), ["at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("admin_audit", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_admin_audit_at"))
    op.drop_table("admin_audit")
    # Admin tokens belong to no node: the old schema cannot hold them.
    op.execute(sa.text("DELETE FROM api_tokens WHERE node_id IS NULL"))
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_column("name")
        batch_op.drop_column("role")
        batch_op.alter_column("node_id", existing_type=sa.Integer(), nullable=False)
