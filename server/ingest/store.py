"""Storing ingest batches, several at once, inside a transaction the caller holds (server/ingest/writer.py).

Idempotence has two layers. The batch id (per node) makes a retried batch a no-op, which protects
samples and rollups, whose rows have no natural key. (node, stream, seq) on every log line and event
makes each line stored once even when an agent re-batches after a crash.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import update
from sqlalchemy.orm import Session

from gpuwatch.protocol import Batch, BatchAck, Event, sample_count
from server.store.jobs import store_job_data
from server.store.models import EventRow, IngestBatch, LogLineRow, Node
from server.store.upsert import insert_ignore
from server.store.xids import add_xid_counts
from server.telemetry.labels import DEFAULT_CAP


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
    in-memory telemetry. A batch id already stored, or earlier in ``items``, is a duplicate."""
    now = datetime.now(UTC)
    first: dict[tuple[int, int], int] = {}  # (node id, batch id) → the index of its first item
    for n, (node, batch) in enumerate(items):
        if not _empty(batch):  # an empty batch (an agent reading the server's clock) stores nothing
            first.setdefault((node.id, batch.batch_id), n)
    claim = insert_ignore(IngestBatch.__table__).returning(IngestBatch.node_id, IngestBatch.batch_id)
    rows = [
        {
            "node_id": node_id,
            "batch_id": batch_id,
            "received_at": now,
            "samples": sample_count(items[n][1]),
            "logs": len(items[n][1].logs),
            "events": len(items[n][1].events),
        }
        for (node_id, batch_id), n in first.items()
    ]
    claimed = set(session.execute(claim, rows).tuples()) if rows else set()
    new = [n for key, n in first.items() if key in claimed]
    stored_logs = _insert_new(
        session,
        LogLineRow,
        [
            {"node_id": node.id, "stream": ln.stream, "seq": ln.seq, "ts": _dt(ln.ts), "text": ln.text}
            for node, batch in (items[n] for n in new)
            for ln in batch.logs
        ],
    )
    stored_events = _insert_new(
        session,
        EventRow,
        [
            {
                "node_id": node.id,
                "stream": ev.stream,
                "seq": ev.seq,
                "ts": _dt(ev.ts),
                "kind": ev.kind,
                "gpu_index": ev.gpu,
                "message": ev.message,
                "data": ev.data,
            }
            for node, batch in (items[n] for n in new)
            for ev in batch.events
        ],
    )
    results = [
        StoreResult(
            BatchAck(batch_id=batch.batch_id, duplicate=True, server_time=time.time()),
            len(batch.logs),
            len(batch.events),
        )
        for _, batch in items
    ]
    for n, (_, batch) in enumerate(items):
        if _empty(batch):
            results[n] = StoreResult(BatchAck(batch_id=batch.batch_id, server_time=time.time()), 0, 0)
    for n in new:
        node, batch = items[n]
        foreign = store_job_data(session, node, batch.processes, batch.steps, batch.checkpoints)
        if batch.dropped:
            session.execute(update(Node).where(Node.id == node.id).values(dropped=batch.dropped))
        # Each line stored is credited to the first batch that carries it (an agent may re-batch).
        logs = 0
        for ln in batch.logs:
            if (node.id, ln.stream, ln.seq) in stored_logs:
                stored_logs.discard((node.id, ln.stream, ln.seq))
                logs += 1
        new_events: list[Event] = []
        for ev in batch.events:
            if (node.id, ev.stream, ev.seq) in stored_events:
                stored_events.discard((node.id, ev.stream, ev.seq))
                new_events.append(ev)
        add_xid_counts(session, node.id, new_events, cap=DEFAULT_CAP)
        ack = BatchAck(
            batch_id=batch.batch_id,
            samples=sample_count(batch),
            logs=logs,
            events=len(new_events),
            server_time=time.time(),
        )
        results[n] = StoreResult(
            ack, len(batch.logs) - logs, len(batch.events) - len(new_events), new_events, foreign_jobs=foreign
        )
    return results


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
