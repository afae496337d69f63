"""recovery: job policies, run keys and nodes, action actors, node exclusions, cluster flags

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 23:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "exclusions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("node_name", sa.String(length=255), nullable=False),
        sa.Column("reason", sa.String(length=64), nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=True),
        sa.Column("executor", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["incident_id"], ["incidents.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("exclusions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_exclusions_node_name"), ["node_name"], unique=False)
    op.create_table(
        "flags",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_by", sa.String(length=255), nullable=True),
        sa.PrimaryKeyConstraint("name"),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("policy", sa.JSON(), nullable=True))
    with op.batch_alter_table("actions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("actor", sa.String(length=64), server_default="server", nullable=False))
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("key", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("node_id", sa.Integer(), nullable=True))
        batch_op.create_unique_constraint(batch_op.f("uq_runs_key"), ["key"])
        batch_op.create_foreign_key(
            batch_op.f("fk_runs_node_id_nodes"), "nodes", ["node_id"], ["id"], ondelete="SET NULL"
        )


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_runs_node_id_nodes"), type_="foreignkey")
        batch_op.drop_constraint(batch_op.f("uq_runs_key"), type_="unique")
        batch_op.drop_column("node_id")
        batch_op.drop_column("key")
    with op.batch_alter_table("actions", schema=None) as batch_op:
        batch_op.drop_column("actor")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("policy")
    op.drop_table("flags")
    with op.batch_alter_table("exclusions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_exclusions_node_name"))
    op.drop_table("exclusions")
