"""Storing one ingest batch: all of it in one transaction, or none of it.

Idempotence has two layers. The batch id (per node) makes a retried batch a no-op, which protects
samples and rollups, whose rows have no natural key. (node, stream, seq) on every log line and event
makes each line stored once even when an agent re-batches after a crash.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import case, select, update
from sqlalchemy.orm import Session

from gpuwatch.protocol import Batch, BatchAck, Event, GpuInfo, GpuSample
from server.store.jobs import IDLE_UTIL, store_job_data
from server.store.models import EventRow, Gpu, GpuRollup, IngestBatch, LogLineRow, Node
from server.store.nodes import upsert_gpu
from server.store.upsert import insert_for


@dataclass(slots=True)
class StoreResult:
    ack: BatchAck
    duplicate_logs: int
    duplicate_events: int
    new_events: list[Event] = field(default_factory=list)  # the batch's events stored now (not replays)


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def store_batch(session: Session, node: Node, batch: Batch) -> StoreResult:
    """Write ``batch`` for ``node`` inside the caller's transaction."""
    claimed = session.execute(
        insert_for(session, IngestBatch.__table__)
        .values(
            node_id=node.id,
            batch_id=batch.batch_id,
            received_at=datetime.now(UTC),
            samples=len(batch.samples),
            logs=len(batch.logs),
            events=len(batch.events),
        )
        .on_conflict_do_nothing()
        .returning(IngestBatch.batch_id)
    ).first()
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
    _store_samples(session, node, batch.samples)
    store_job_data(session, node.id, batch.processes, batch.steps, batch.samples, batch.checkpoints)
    values: dict[str, object] = {"last_seen_at": datetime.now(UTC)}
    if batch.dropped:
        values["dropped"] = batch.dropped
    session.execute(update(Node).where(Node.id == node.id).values(**values))
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
    stmt = insert_for(session, model.__table__).on_conflict_do_nothing().returning(model.stream, model.seq)
    return {(stream, seq) for stream, seq in session.execute(stmt, rows).tuples()}


def _store_samples(session: Session, node: Node, samples: list[GpuSample]) -> None:
    if not samples:
        return
    gpu_ids = dict(session.execute(select(Gpu.index, Gpu.id).where(Gpu.node_id == node.id)).tuples().all())
    newest: dict[int, float] = {}
    for s in samples:
        if s.gpu not in gpu_ids:  # sampled before (or without) registration: learn it from the sample
            info = GpuInfo(index=s.gpu, uuid=s.uuid, name="unknown", memory_total_mib=s.fb_total_mib)
            gpu_ids[s.gpu] = upsert_gpu(session, node.id, info, _dt(s.ts)).id
        newest[s.gpu] = max(newest.get(s.gpu, 0.0), s.ts)
    # One executemany per table, not one statement per GPU: on PostgreSQL each statement is a round trip.
    session.execute(update(Gpu), [{"id": gpu_ids[i], "last_seen_at": _dt(ts)} for i, ts in newest.items()])
    _add_rollups(session, {index: gpu_ids[index] for index in newest}, samples)


def _add_rollups(session: Session, gpu_ids: dict[int, int], samples: list[GpuSample]) -> None:
    """Fold samples into per-GPU, per-minute sums; a field the GPU does not report counts as 0."""
    acc: dict[tuple[int, datetime], dict[str, float]] = defaultdict(
        lambda: {
            "samples": 0,
            "util_sum": 0.0,
            "util_max": 0.0,
            "mem_util_sum": 0.0,
            "fb_used_max_mib": 0.0,
            "power_sum_w": 0.0,
            "temp_max_c": 0.0,
            "gpu_seconds": 0.0,
            "idle_seconds": 0.0,
            "unallocated_seconds": 0.0,
            "energy_j": 0.0,
        }
    )
    for s in samples:
        minute = _dt(s.ts - s.ts % 60)
        a = acc[(gpu_ids[s.gpu], minute)]
        a["samples"] += 1
        a["util_sum"] += s.util_gpu or 0.0
        a["util_max"] = max(a["util_max"], s.util_gpu or 0.0)
        a["mem_util_sum"] += s.util_mem or 0.0
        a["fb_used_max_mib"] = max(a["fb_used_max_mib"], s.fb_used_mib or 0.0)
        a["power_sum_w"] += s.power_w or 0.0
        a["temp_max_c"] = max(a["temp_max_c"], s.temp_c or 0.0)
        period = s.period_s or 1.0
        a["gpu_seconds"] += period
        if s.util_gpu is not None and s.util_gpu < IDLE_UTIL:
            a["idle_seconds"] += period
        if s.job is None:
            a["unallocated_seconds"] += period
        a["energy_j"] += (s.power_w or 0.0) * period
    table = GpuRollup.__table__
    stmt = insert_for(session, table)
    ex, c = stmt.excluded, table.c
    upsert = stmt.on_conflict_do_update(
        index_elements=[c.gpu_id, c.minute],
        set_={
            "samples": c.samples + ex.samples,
            "util_sum": c.util_sum + ex.util_sum,
            "util_max": _greatest(c.util_max, ex.util_max),
            "mem_util_sum": c.mem_util_sum + ex.mem_util_sum,
            "fb_used_max_mib": _greatest(c.fb_used_max_mib, ex.fb_used_max_mib),
            "power_sum_w": c.power_sum_w + ex.power_sum_w,
            "temp_max_c": _greatest(c.temp_max_c, ex.temp_max_c),
            "gpu_seconds": c.gpu_seconds + ex.gpu_seconds,
            "idle_seconds": c.idle_seconds + ex.idle_seconds,
            "unallocated_seconds": c.unallocated_seconds + ex.unallocated_seconds,
            "energy_j": c.energy_j + ex.energy_j,
        },
    )
    session.execute(upsert, [{"gpu_id": gpu_id, "minute": minute, **a} for (gpu_id, minute), a in acc.items()])


def _greatest(a: object, b: object) -> object:
    return case((a >= b, a), else_=b)  # type: ignore[operator]
