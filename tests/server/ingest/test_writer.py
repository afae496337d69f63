"""The ingest writer (server/ingest/writer.py): batches queued together are stored in one transaction,
a batch that fails fails alone, and a full queue refuses with 503 and Retry-After instead of growing.

The writer is held by taking the SQLite writer lock it needs, so that the batches queued meanwhile
form one group when it is let go: real SQLite, a real writer thread, no timing assumptions.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, GpuSample, LogLine
from server.app import create_app
from server.ingest import writer
from server.ingest.writer import BatchWriter, QueueFull
from server.services import Services
from server.store.db import _SQLITE_WRITERS
from server.store.models import LogLineRow, Node
from server.store.nodes import LastSeen
from tests.helpers import migrated_sqlite, new_token

T0 = float(int(time.time()) // 3600 * 3600 - 3600)  # a whole hour, inside the ingest window


def _services(tmp_path: Path, **settings: object) -> tuple[Services, list[Node]]:
    url = migrated_sqlite(tmp_path)
    for name in ("a", "b", "c"):
        new_token(url, name)
    svc: Services = create_app(Settings(data_dir=tmp_path, database_url=url, **settings)).state.services
    with svc.sessions() as session:
        nodes = list(session.scalars(select(Node).order_by(Node.name)))
        session.expunge_all()
    return svc, nodes


def _body(batch_id: int, lines: int = 3) -> bytes:
    samples = [GpuSample(ts=T0 + k, gpu=0, uuid="GPU-0", util_gpu=50.0) for k in range(5)]
    logs = [LogLine(stream="file:/train.log", seq=batch_id * lines + n, ts=T0, text=f"line {n}") for n in range(lines)]
    return Batch(batch_id=batch_id, samples=samples, logs=logs).model_dump_json().encode()


async def _queued_while_held(svc: Services, items: list[tuple[Node, bytes]]) -> list[object]:
    """Submit ``items`` while the writer cannot write; let it go once all are queued; their outcomes."""
    lock = _SQLITE_WRITERS[svc.engine]
    lock.acquire()
    try:
        tasks = [asyncio.ensure_future(svc.writer.submit(node, raw)) for node, raw in items]
        total = sum(len(raw) for _, raw in items)
        for _ in range(1000):  # every submit has run up to its wait (no thread involved: a few loop turns)
            if svc.writer.queued_bytes() == total:
                break
            await asyncio.sleep(0)
        assert svc.writer.queued_bytes() == total
    finally:
        lock.release()
    return await asyncio.gather(*tasks, return_exceptions=True)


def test_a_batch_failing_in_the_database_fails_alone_and_the_rest_of_its_group_is_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    svc, (a, b, c) = _services(tmp_path)
    ghost = Node(id=9999, name="ghost")  # deleted while its batch waited: the claim breaks a foreign key
    caplog.set_level(logging.WARNING, "gpuwatch.server.ingest")
    outcomes = asyncio.run(
        _queued_while_held(svc, [(a, _body(0)), (b, _body(0)), (ghost, _body(0)), (c, _body(0)), (c, _body(1))])
    )
    svc.writer.stop()
    assert isinstance(outcomes[2], IntegrityError)
    good = [o for n, o in enumerate(outcomes) if n != 2]
    assert all(isinstance(o, tuple) and not o[1].ack.duplicate and o[1].ack.logs == 3 for o in good), outcomes
    assert "storing each alone" in caplog.text  # they were one group, and it failed on the ghost's batch
    with svc.sessions() as session:
        per_node = dict(session.execute(select(LogLineRow.node_id, func.count()).group_by(LogLineRow.node_id)).all())
    assert per_node == {a.id: 3, b.id: 3, c.id: 6}
    assert {s.node for s in svc.telemetry.gpus()} == {"a", "b", "c"}  # in-memory state only for what was stored


def test_an_invalid_batch_in_a_group_gets_its_422_and_a_replay_is_a_duplicate(tmp_path: Path) -> None:
    svc, (a, b, _) = _services(tmp_path)
    bad = b'{"batch_id": 1, "samples": [{"ts": 1, "gpu": -1, "uuid": "GPU-0"}]}'
    outcomes = asyncio.run(_queued_while_held(svc, [(a, _body(0)), (b, bad), (a, _body(0)), (b, _body(1))]))
    svc.writer.stop()
    assert isinstance(outcomes[1], ValidationError)  # the API's 422
    assert [e["loc"] for e in outcomes[1].errors()] == [("samples", 0, "gpu")]
    first, replay, other = outcomes[0], outcomes[2], outcomes[3]
    assert isinstance(first, tuple) and not first[1].ack.duplicate
    assert isinstance(replay, tuple) and replay[1].ack.duplicate  # same batch id in the same group: once
    assert isinstance(other, tuple) and other[1].ack.logs == 3


def test_a_refused_batch_is_freed_when_its_request_is_answered_not_at_the_next_garbage_collection(
    tmp_path: Path,
) -> None:
    """An error handed from the writer thread to its request carried a traceback whose frames held the
    whole group (bodies and decoded batches): a cycle only the garbage collector frees. Under a flood of
    refusals (an agent with a clock a day ahead, 250 refusals a second) the server's RSS rose from 214 to
    354 MiB in three minutes (bench/README.md). Answered, a batch must be gone by reference counting."""
    svc, (a, b, c) = _services(tmp_path)
    ghost = Node(id=9999, name="ghost")
    invalid = b'{"batch_id": 1, "samples": [{"ts": 1, "gpu": -1, "uuid": "GPU-0"}]}'
    gc.collect()
    gc.disable()
    try:
        items = [(a, _body(0)), (b, invalid), (ghost, _body(0)), (c, _body(0))]
        outcomes = asyncio.run(_queued_while_held(svc, items))
        assert isinstance(outcomes[1], ValidationError) and isinstance(outcomes[2], IntegrityError)
        del outcomes, items
        # The requests may be answered while the writer is still leaving the group's frame (it answers from
        # there): let it end, which a cycle would survive, with the collector still off.
        svc.writer.stop()
        alive = [o for o in gc.get_objects() if type(o).__name__ == "_Item" and type(o).__module__ == writer.__name__]
    finally:
        gc.enable()
    assert alive == []


def test_a_full_queue_refuses_with_503_and_retry_after_and_drops_nothing_queued(tmp_path: Path) -> None:
    svc, (a, b, _) = _services(tmp_path)
    body = _body(0)
    svc.writer = BatchWriter(
        sessions=svc.sessions,
        rollups=svc.rollups,
        fold=svc.folder.apply_batch,
        metrics=svc.ingest_metrics,
        seen=LastSeen(5.0),
        max_queued_bytes=len(body),
        flush_between_groups=True,
    )
    lock = _SQLITE_WRITERS[svc.engine]

    async def main() -> tuple[object, QueueFull, QueueFull]:
        lock.acquire()
        try:
            first = asyncio.ensure_future(svc.writer.submit(a, body))
            while svc.writer.queued_bytes() == 0:
                await asyncio.sleep(0)
            with pytest.raises(QueueFull) as refused:
                await svc.writer.submit(b, _body(0))
            with pytest.raises(QueueFull) as early:
                svc.writer.check_room()  # before reading a body at all
        finally:
            lock.release()
        return await first, refused.value, early.value

    stored, refused, early = asyncio.run(main())
    assert isinstance(stored, tuple) and stored[1].ack.logs == 3
    for exc in (refused, early):
        assert exc.retry_after_s == 1  # the API's 503 with Retry-After: 1 (test_ingest_api)
        assert "queue full" in str(exc)
    assert svc.writer.queued_bytes() == 0
    svc.writer.check_room()  # room again once stored
    svc.writer.stop()


def test_a_line_in_two_batches_of_one_group_is_stored_once_and_credited_to_the_first(tmp_path: Path) -> None:
    svc, (a, _, _) = _services(tmp_path)
    line = LogLine(stream="file:/train.log", seq=7, ts=T0, text="shared")  # re-batched by an agent after a crash
    first = Batch(batch_id=0, logs=[line, LogLine(stream="file:/train.log", seq=8, ts=T0, text="x")])
    second = Batch(batch_id=1, logs=[line, LogLine(stream="file:/train.log", seq=9, ts=T0, text="y")])
    outcomes = asyncio.run(
        _queued_while_held(svc, [(a, _body(5)), *((a, b.model_dump_json().encode()) for b in (first, second))])
    )
    svc.writer.stop()
    acks = [o[1] for o in outcomes if isinstance(o, tuple)]
    assert [(r.ack.logs, r.duplicate_logs) for r in acks] == [(3, 0), (2, 0), (1, 1)]
    with svc.sessions() as session:
        seqs = sorted(session.scalars(select(LogLineRow.seq).where(LogLineRow.node_id == a.id)))
    assert seqs == [7, 8, 9, 15, 16, 17]


def test_the_writers_utilisation_and_group_sizes_are_exported(tmp_path: Path) -> None:
    """`gpuwatch_ingest_writer_busy_seconds_total` counts the writer's time on groups (held behind the
    database here, which is its time too) and `gpuwatch_ingest_groups_total` its groups: batches queued
    together are one group."""
    svc, (a, b, c) = _services(tmp_path)
    value = svc.registry.get_sample_value
    assert (value("gpuwatch_ingest_groups_total"), value("gpuwatch_ingest_writer_busy_seconds_total")) == (0, 0)
    held = time.perf_counter()
    outcomes = asyncio.run(_queued_while_held(svc, [(a, _body(0)), (b, _body(0)), (c, _body(0)), (c, _body(1))]))
    waited = time.perf_counter() - held
    svc.writer.stop()
    assert all(isinstance(o, tuple) for o in outcomes), outcomes
    # the thread may take the first batch before the others are queued; the rest wait for it as one group
    assert value("gpuwatch_ingest_groups_total") in (1, 2)
    assert value("gpuwatch_ingest_batches_total", {"outcome": "stored"}) == 4
    assert 0 < value("gpuwatch_ingest_writer_busy_seconds_total") <= waited
