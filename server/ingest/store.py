"""Storing ingest batches, several at once, inside a transaction the caller holds (server/ingest/writer.py).

Idempotence has two layers. The batch id (per node) makes a retried batch a no-op, which protects
samples and rollups, whose rows have no natural key. (node, stream, seq) on every log line and event
makes each line stored once even when an agent re-batches after a crash.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from gpuwatch.protocol import Batch, BatchAck, Event, sample_count
from server.store.jobs import store_job_data
from server.store.models import EventRow, IngestBatch, LogLineRow, Node
from server.store.upsert import db_time, insert_ignore, insert_new_rows
from server.store.xids import add_xid_counts
from server.telemetry.labels import DEFAULT_CAP

_CLAIM = ("node_id", "batch_id", "received_at", "samples", "logs", "events")
_LOG = ("node_id", "stream", "seq", "ts", "text")


@dataclass(slots=True)
class StoreResult:
    ack: BatchAck
    duplicate_logs: int
    duplicate_events: int
    new_events: list[Event] = field(default_factory=list)  # the batch's events stored now (not replays)
    foreign_jobs: frozenset[str] = frozenset()  # jobs of other nodes whose reports the batch carried: left out


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def store_batches(session: Session, items: Sequence[tuple[Node, Batch]]) -> list[StoreResult]:
    """Write each (node, batch) of ``items`` inside the caller's transaction, one statement per table for
    all of them: everything but the samples, which only feed rollups (`server.store.rollups`) and the
    in-memory telemetry. A batch id already stored, or earlier in ``items``, is a duplicate.

    The claims and log lines, most of what a batch stores, go through the driver (`insert_new_rows`):
    through SQLAlchemy's insertmanyvalues they cost about half of this function's time."""
    ids = [node.id for node, _ in items]  # an ORM attribute costs a descriptor call each time it is read
    counts = [sample_count(batch) for _, batch in items]
    first: dict[tuple[int, int], int] = {}  # (node id, batch id) → the index of its first item
    for n, (_, batch) in enumerate(items):
        if not _empty(batch):  # an empty batch (an agent reading the server's clock) stores nothing
            first.setdefault((ids[n], batch.batch_id), n)
    at = _memo(db_time(session))
    received = at(time.time())
    claims = [
        (node_id, batch_id, received, counts[n], len(items[n][1].logs), len(items[n][1].events))
        for (node_id, batch_id), n in first.items()
    ]
    claimed = set(insert_new_rows(session, IngestBatch.__table__, _CLAIM, claims, ("node_id", "batch_id")))
    new = [n for key, n in first.items() if key in claimed]
    lines = [(ids[n], ln.stream, ln.seq, at(ln.ts), ln.text) for n in new for ln in items[n][1].logs]
    stored_logs = set(insert_new_rows(session, LogLineRow.__table__, _LOG, lines, _LOG[:3]))
    stored_events = _insert_new(
        session,
        EventRow,
        [
            {
                "node_id": ids[n],
                "stream": ev.stream,
                "seq": ev.seq,
                "ts": _dt(ev.ts),
                "kind": ev.kind,
                "gpu_index": ev.gpu,
                "message": ev.message,
                "data": ev.data,
            }
            for n in new
            for ev in items[n][1].events
        ],
    )
    now = time.time()
    results = []
    for _, batch in items:
        if _empty(batch):
            results.append(StoreResult(BatchAck(batch_id=batch.batch_id, server_time=now), 0, 0))
        else:  # a duplicate, unless stored below
            ack = BatchAck(batch_id=batch.batch_id, duplicate=True, server_time=now)
            results.append(StoreResult(ack, len(batch.logs), len(batch.events)))
    for n in new:
        node, batch = items[n]
        node_id = ids[n]
        foreign = store_job_data(session, node, batch.processes, batch.steps, batch.checkpoints)
        if batch.dropped:
            session.execute(update(Node).where(Node.id == node_id).values(dropped=batch.dropped))
        # Each line stored is credited to the first batch that carries it (an agent may re-batch).
        logs = 0
        for ln in batch.logs:
            key = (node_id, ln.stream, ln.seq)
            if key in stored_logs:
                stored_logs.discard(key)
                logs += 1
        new_events: list[Event] = []
        for ev in batch.events:
            if (node_id, ev.stream, ev.seq) in stored_events:
                stored_events.discard((node_id, ev.stream, ev.seq))
                new_events.append(ev)
        add_xid_counts(session, node_id, new_events, cap=DEFAULT_CAP)
        ack = BatchAck(batch_id=batch.batch_id, samples=counts[n], logs=logs, events=len(new_events), server_time=now)
        results[n] = StoreResult(
            ack, len(batch.logs) - logs, len(batch.events) - len(new_events), new_events, foreign_jobs=foreign
        )
    return results


def _memo(convert: Callable[[float], Any]) -> Callable[[float], Any]:
    """``convert`` remembering its answers for one group: a batch's lines share a handful of times."""
    cache: dict[float, Any] = {}

    def at(ts: float) -> Any:
        out = cache.get(ts)
        if out is None:
            out = cache[ts] = convert(ts)
        return out

    return at


def _empty(batch: Batch) -> bool:
    return not (
        batch.series
        or batch.samples
        or batch.logs
        or batch.events
        or batch.processes
        or batch.steps
        or batch.checkpoints
        or batch.ib
        or batch.dropped
    )


def _insert_new(
    session: Session, model: type[LogLineRow] | type[EventRow], rows: list[dict[str, object]]
) -> set[tuple[int, str, int]]:
    """Insert rows whose (node, stream, seq) is not stored yet; return the (node, stream, seq) of those."""
    if not rows:
        return set()
    stmt = insert_ignore(model.__table__).returning(model.node_id, model.stream, model.seq)
    return set(session.execute(stmt, rows).tuples())
