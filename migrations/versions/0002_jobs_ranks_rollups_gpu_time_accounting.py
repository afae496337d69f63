"""jobs: ranks, rollups, gpu time accounting

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 20:14:17.125157
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "job_ranks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("local_rank", sa.Integer(), nullable=True),
        sa.Column("gpu_index", sa.Integer(), nullable=True),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_ranks_job_id_jobs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"], name=op.f("fk_job_ranks_node_id_nodes"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_ranks")),
        sa.UniqueConstraint("job_id", "rank", name=op.f("uq_job_ranks_job_id_rank")),
    )
    op.create_table(
        "job_rollups",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("rank", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("minute", sa.DateTime(timezone=True), nullable=False),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("step_seconds", sa.Float(), nullable=False),
        sa.Column("comm_seconds", sa.Float(), nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("samples", sa.Float(), nullable=False),
        sa.Column("gpu_seconds", sa.Float(), nullable=False),
        sa.Column("idle_gpu_seconds", sa.Float(), nullable=False),
        sa.Column("util_gpu_seconds", sa.Float(), nullable=False),
        sa.Column("energy_j", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_rollups_job_id_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "rank", "minute", name=op.f("pk_job_rollups")),
    )
    with op.batch_alter_table("gpu_rollups", schema=None) as batch_op:
        batch_op.add_column(sa.Column("gpu_seconds", sa.Float(), server_default="0", nullable=False))
        batch_op.add_column(sa.Column("idle_seconds", sa.Float(), server_default="0", nullable=False))
        batch_op.add_column(sa.Column("unallocated_seconds", sa.Float(), server_default="0", nullable=False))
        batch_op.add_column(sa.Column("energy_j", sa.Float(), server_default="0", nullable=False))

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("hang_timeout_s", sa.Float(), nullable=True))


def downgrade() -> None:

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("hang_timeout_s")

    with op.batch_alter_table("gpu_rollups", schema=None) as batch_op:
        batch_op.drop_column("energy_j")
        batch_op.drop_column("unallocated_seconds")
        batch_op.drop_column("idle_seconds")
        batch_op.drop_column("gpu_seconds")

    op.drop_table("job_rollups")
    op.drop_table("job_ranks")
