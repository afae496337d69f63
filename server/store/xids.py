"""The Xid count per node, GPU and code (`xid_counts`): written with the events it counts, read at start-up.

`gpuwatch_xid_events_total` is a counter the server keeps in memory; Prometheus's alerts read steps in
it. A restarted server that began again at zero, or at a count of the events left after retention
pruned some, would show a counter reset, which `increase()` reads as that many new Xids. So the
count lives here, raised in the transaction that stores the events (never one without the other),
and the counter starts from it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import case, select
from sqlalchemy.orm import Session

from gpuwatch.protocol import Event, xid_code
from server.store.models import Node, XidCount
from server.store.upsert import insert_for

NO_GPU = -1  # an Xid that names no GPU
NO_CODE = -1  # an Xid reported without its code


@dataclass(frozen=True, slots=True)
class StoredXids:
    node: str
    gpu: int | None
    xid: int | None
    count: int


def add_xid_counts(session: Session, node_id: int, events: Iterable[Event], cap: int) -> None:
    """Add the Xid ``events`` just stored for a node to its counts, within ``cap`` distinct (GPU, code)
    pairs per node (as `server.telemetry.labels.LabelBudget` exports them); the rest stay uncounted here.

    ``last_at`` is when a count last grew, the later of the event's time and now: Prometheus sees
    `gpuwatch_xid_events_total` grow when the event arrives, so an Xid replayed late from an agent's spool
    holds its alert (`server.notify.alert_state`) from its arrival, as the rule's does."""
    counts: Counter[tuple[int, int]] = Counter()
    last: dict[tuple[int, int], float] = {}
    arrived = time.time()
    for event in events:
        if event.kind == "xid":
            code = xid_code(event)
            key = (NO_GPU if event.gpu is None else event.gpu, NO_CODE if code is None else code)
            counts[key] += 1
            last[key] = max(last.get(key, arrived), event.ts)
    if not counts:
        return
    known = set(session.execute(select(XidCount.gpu, XidCount.xid).where(XidCount.node_id == node_id)).tuples())
    room = max(0, cap - len(known))
    rows = []
    for key, n in counts.items():
        if key not in known:
            if room == 0:
                continue
            room -= 1
        at = datetime.fromtimestamp(last[key], UTC)
        rows.append({"node_id": node_id, "gpu": key[0], "xid": key[1], "count": n, "last_at": at})
    if not rows:
        return
    table = XidCount.__table__
    stmt = insert_for(session, table)
    ex, c = stmt.excluded, table.c
    stmt = stmt.on_conflict_do_update(
        index_elements=[c.node_id, c.gpu, c.xid],
        set_={"count": c.count + ex.count, "last_at": case((c.last_at >= ex.last_at, c.last_at), else_=ex.last_at)},
    )
    session.execute(stmt, rows)


def stored_xids(session: Session) -> list[StoredXids]:
    """Every count, by node name; what the counter starts from."""
    rows = session.execute(
        select(Node.name, XidCount.gpu, XidCount.xid, XidCount.count)
        .join(Node, Node.id == XidCount.node_id)
        .order_by(Node.name, XidCount.gpu, XidCount.xid)
    ).tuples()
    return [
        StoredXids(name, None if gpu == NO_GPU else gpu, None if xid == NO_CODE else xid, count)
        for name, gpu, xid, count in rows
    ]
