"""State that alerts and decisions need, kept across restarts: each GPU's last known fault counts (ECC,
retired pages, row-remap failure), each node's agent's last word apart from its supervisors', and the
Xid count per node, GPU and code that `gpuwatch_xid_events_total` continues from (backfilled from the
stored Xid events).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26 10:00:00
"""

from collections import Counter
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: server.telemetry.labels.DEFAULT_CAP: distinct (GPU, code) Xid series a node may have.
_CAP = 64


def upgrade() -> None:
    with op.batch_alter_table("gpus", schema=None) as batch_op:
        batch_op.add_column(sa.Column("ecc_sbe_volatile", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("ecc_dbe_volatile", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("retired_pages_sbe", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("retired_pages_dbe", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("remap_failure", sa.Boolean(), nullable=True))
        batch_op.add_column(sa.Column("faults_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("agent_seen_at", sa.DateTime(timezone=True), nullable=True))
    xid_counts = op.create_table(
        "xid_counts",
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("gpu", sa.Integer(), nullable=False),
        sa.Column("xid", sa.Integer(), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("last_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("node_id", "gpu", "xid"),
    )
    _backfill(xid_counts)


def _backfill(xid_counts: sa.Table) -> None:
    """The counts of the Xid events stored so far, each node's first `_CAP` (GPU, code) pairs."""
    events = sa.table(
        "events",
        sa.column("node_id", sa.Integer),
        sa.column("gpu_index", sa.Integer),
        sa.column("kind", sa.String),
        sa.column("ts", sa.DateTime(timezone=True)),
        sa.column("data", sa.JSON),
    )
    counts: Counter[tuple[int, int, int]] = Counter()
    last: dict[tuple[int, int, int], object] = {}
    per_node: dict[int, set[tuple[int, int]]] = {}
    query = sa.select(events.c.node_id, events.c.gpu_index, events.c.ts, events.c.data).where(events.c.kind == "xid")
    for node_id, gpu, ts, data in op.get_bind().execute(query.order_by(events.c.ts)):
        xid = (data or {}).get("xid")
        if not isinstance(xid, int):
            continue
        key = (node_id, -1 if gpu is None else gpu, xid)
        seen = per_node.setdefault(node_id, set())
        if key[1:] not in seen and len(seen) >= _CAP:
            continue
        seen.add(key[1:])
        counts[key] += 1
        last[key] = ts
    if counts:
        op.bulk_insert(
            xid_counts,
            [
                {"node_id": n, "gpu": g, "xid": x, "count": c, "last_at": last[(n, g, x)]}
                for (n, g, x), c in counts.items()
            ],
        )


def downgrade() -> None:
    op.drop_table("xid_counts")
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.drop_column("agent_seen_at")
    with op.batch_alter_table("gpus", schema=None) as batch_op:
        for column in ("faults_at", "remap_failure", "retired_pages_dbe", "retired_pages_sbe"):
            batch_op.drop_column(column)
        batch_op.drop_column("ecc_dbe_volatile")
        batch_op.drop_column("ecc_sbe_volatile")
