"""incident_labels: an admin's verdict on an incident's diagnosis (confirmed or corrected), kept beside it

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "incident_labels",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=False),
        sa.Column("diagnosis_id", sa.Integer(), nullable=True),
        sa.Column("diagnosed", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.String(length=64), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("actor", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["diagnosis_id"],
            ["diagnoses.id"],
            name=op.f("fk_incident_labels_diagnosis_id_diagnoses"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
            name=op.f("fk_incident_labels_incident_id_incidents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incident_labels")),
    )
    with op.batch_alter_table("incident_labels", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_incident_labels_created_at"), ["created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_incident_labels_incident_id"), ["incident_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("incident_labels", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_incident_labels_incident_id"))
        batch_op.drop_index(batch_op.f("ix_incident_labels_created_at"))
    op.drop_table("incident_labels")
