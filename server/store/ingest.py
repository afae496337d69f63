"""Storing one ingest batch, inside a transaction the caller holds (server/api/writer.py groups several).

Idempotence has two layers. The batch id (per node) makes a retried batch a no-op, which protects
samples and rollups, whose rows have no natural key. (node, stream, seq) on every log line and event
makes each line stored once even when an agent re-batches after a crash.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import update
from sqlalchemy.orm import Session

from gpuwatch.protocol import Batch, BatchAck, Event
from server.store.jobs import store_job_data
from server.store.models import EventRow, IngestBatch, LogLineRow, Node
from server.store.upsert import insert_ignore


@dataclass(slots=True)
class StoreResult:
    ack: BatchAck
    duplicate_logs: int
    duplicate_events: int
    new_events: list[Event] = field(default_factory=list)  # the batch's events stored now (not replays)


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def store_batch(session: Session, node: Node, batch: Batch) -> StoreResult:
    """Write ``batch`` for ``node`` inside the caller's transaction: everything but its samples, which
    only feed rollups (`server.store.rollups`) and the in-memory telemetry."""
    claim = insert_ignore(IngestBatch.__table__).returning(IngestBatch.batch_id)
    row = {
        "node_id": node.id,
        "batch_id": batch.batch_id,
        "received_at": datetime.now(UTC),
        "samples": len(batch.samples),
        "logs": len(batch.logs),
        "events": len(batch.events),
    }
    claimed = session.execute(claim, row).first()
    if claimed is None:
        return StoreResult(BatchAck(batch_id=batch.batch_id, duplicate=True), len(batch.logs), len(batch.events))

    logs = _insert_new(
        session,
        LogLineRow,
        [
            {"node_id": node.id, "stream": ln.stream, "seq": ln.seq, "ts": _dt(ln.ts), "text": ln.text}
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
            for ev in batch.events
        ],
    )
    store_job_data(session, node.id, batch.processes, batch.steps, batch.checkpoints)
    if batch.dropped:
        session.execute(update(Node).where(Node.id == node.id).values(dropped=batch.dropped))
    new_events: list[Event] = []
    for ev in batch.events:  # the first of the batch's events with a (stream, seq) is the one stored
        if (ev.stream, ev.seq) in stored_events:
            stored_events.discard((ev.stream, ev.seq))
            new_events.append(ev)
    ack = BatchAck(batch_id=batch.batch_id, samples=len(batch.samples), logs=len(logs), events=len(new_events))
    return StoreResult(ack, len(batch.logs) - len(logs), len(batch.events) - len(new_events), new_events)


def _insert_new(
    session: Session, model: type[LogLineRow] | type[EventRow], rows: list[dict[str, object]]
) -> set[tuple[str, int]]:
    """Insert rows whose (node, stream, seq) is not stored yet; return the (stream, seq) of those."""
    if not rows:
        return set()
    stmt = insert_ignore(model.__table__).returning(model.stream, model.seq)
    return {(stream, seq) for stream, seq in session.execute(stmt, rows).tuples()}
