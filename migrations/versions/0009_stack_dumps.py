"""stack_requests, stack_dumps: captures of a job's rank stacks (hang localisation), kept across restarts

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25 18:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "stack_requests",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=True),
        sa.Column("requested_by", sa.String(length=255), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deadline_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("analysis", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["incident_id"], ["incidents.id"], name=op.f("fk_stack_requests_incident_id_incidents"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_stack_requests_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stack_requests")),
    )
    with op.batch_alter_table("stack_requests", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_stack_requests_incident_id"), ["incident_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_stack_requests_job_id"), ["job_id"], unique=False)
    op.create_table(
        "stack_dumps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("ranks", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["node_id"], ["nodes.id"], name=op.f("fk_stack_dumps_node_id_nodes"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["request_id"],
            ["stack_requests.id"],
            name=op.f("fk_stack_dumps_request_id_stack_requests"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stack_dumps")),
    )
    with op.batch_alter_table("stack_dumps", schema=None) as batch_op:
        batch_op.create_index("ix_stack_dumps_node_id_state", ["node_id", "state"], unique=False)
        batch_op.create_index(batch_op.f("ix_stack_dumps_request_id"), ["request_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("stack_dumps", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_stack_dumps_request_id"))
        batch_op.drop_index("ix_stack_dumps_node_id_state")
    op.drop_table("stack_dumps")
    with op.batch_alter_table("stack_requests", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_stack_requests_job_id"))
        batch_op.drop_index(batch_op.f("ix_stack_requests_incident_id"))
    op.drop_table("stack_requests")
