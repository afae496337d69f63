"""reports: incident snapshots and cost, a run's first step

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 23:55:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("incidents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("snapshot", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("cost", sa.JSON(), nullable=True))
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("first_step_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("first_step_at")
    with op.batch_alter_table("incidents", schema=None) as batch_op:
        batch_op.drop_column("cost")
        batch_op.drop_column("snapshot")
