"""Buffered rollups (GPUWATCH_ROLLUP_FLUSH_S > 0) store what rollups written with each batch store.

The same batches go through two real servers over HTTP, one writing rollups with each batch (0) and
one buffering them; after the buffer's flush both databases hold the same GPU and job rollups. A
replayed batch adds nothing, a clean shutdown flushes, and a failed flush loses nothing.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, GpuSample, GpuSeries, StepReport, to_series
from server.store.db import make_engine, make_sessionmaker, transaction
from server.store.migrate import upgrade
from server.store.models import Node
from server.store.rollups import RollupBuffer
from tests.helpers import InProcessServer, migrated_sqlite, new_token, wait_until

T0 = float(int(time.time()) // 3600 * 3600 - 3600)  # a whole hour (and minute), inside the ingest window


def _batches() -> list[Batch]:
    """Three minutes of 2 GPUs at 2 Hz: GPU 0 runs a job (idle for a while), GPU 1 changes hands."""
    out = []
    for b in range(6):
        samples = []
        for k in range(60):
            ts = T0 + b * 30 + k / 2
            samples.append(
                GpuSample(
                    ts=ts, gpu=0, uuid="GPU-0", util_gpu=1.0 if 40 <= k < 50 else 90.0, power_w=500, job="j", rank=0
                ).model_copy(update={"period_s": 0.5, "fb_used_mib": 100.0 + k, "temp_c": 50 + b})
            )
            owner = {"job": "j", "rank": 1} if k % 20 < 10 else {}
            samples.append(GpuSample(ts=ts, gpu=1, uuid="GPU-1", util_gpu=30.0, power_w=200, period_s=0.5, **owner))
        out.append(Batch(batch_id=b, samples=samples))
    return out


def _rollups(url: str) -> dict[str, list[tuple[Any, ...]]]:
    engine = create_engine(url)
    with engine.connect() as conn:
        gpu = conn.execute(
            text(
                "SELECT g.uuid, r.minute, r.samples, r.util_sum, r.util_max, r.mem_util_sum, r.fb_used_max_mib, "
                "r.power_sum_w, r.temp_max_c, r.gpu_seconds, r.idle_seconds, r.unallocated_seconds, r.energy_j "
                "FROM gpu_rollups r JOIN gpus g ON g.id = r.gpu_id ORDER BY 1, 2"
            )
        ).all()
        job = conn.execute(
            text(
                "SELECT j.name, r.rank, r.minute, r.gpu_seconds, r.idle_gpu_seconds, r.util_gpu_seconds, r.energy_j "
                "FROM job_rollups r JOIN jobs j ON j.id = r.job_id ORDER BY 1, 2, 3"
            )
        ).all()
    engine.dispose()
    return {"gpu": [tuple(r) for r in gpu], "job": [tuple(r) for r in job]}


def _post_all(srv: InProcessServer, url: str, batches: list[Batch]) -> None:
    token = new_token(url, "n1")
    with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}) as http:
        for batch in [*batches, batches[-1]]:  # and one replay
            resp = http.post("/api/v1/ingest", content=batch.model_dump_json())
            assert resp.status_code == 200, resp.text


def test_buffered_rollups_equal_rollups_written_with_each_batch(tmp_path: Path) -> None:
    batches = _batches()
    exact_url = migrated_sqlite(tmp_path / "exact")
    with InProcessServer(Settings(data_dir=tmp_path / "exact", database_url=exact_url, rollup_flush_s=0)) as srv:
        _post_all(srv, exact_url, batches)
        assert _rollups(exact_url)["gpu"], "rollups written with each batch are there at once"
    buffered_url = migrated_sqlite(tmp_path / "buffered")
    with InProcessServer(
        Settings(data_dir=tmp_path / "buffered", database_url=buffered_url, rollup_flush_s=3600)
    ) as srv:
        _post_all(srv, buffered_url, batches)
        assert _rollups(buffered_url) == {"gpu": [], "job": []}, "buffered: nothing written before the flush"
        srv.services.writer.flush_rollups()
        assert _rollups(buffered_url) == _rollups(exact_url)
        assert srv.services.rollups.flush(srv.services.sessions()) == 0  # nothing left pending
    exact = _rollups(exact_url)
    assert sum(r[2] for r in exact["gpu"]) == 6 * 120  # the replay counted once
    assert {r[1] for r in exact["job"]} == {0, 1}  # GPU 1's job share, sample by sample


def test_a_clean_shutdown_flushes(tmp_path: Path) -> None:
    url = migrated_sqlite(tmp_path)
    with InProcessServer(Settings(data_dir=tmp_path, database_url=url, rollup_flush_s=3600)) as srv:
        _post_all(srv, url, _batches()[:2])
        assert _rollups(url)["gpu"] == []
    assert sum(r[2] for r in _rollups(url)["gpu"]) == 2 * 120


def test_a_failed_flush_loses_nothing(tmp_path: Path) -> None:
    url = migrated_sqlite(tmp_path)
    sessions = make_sessionmaker(make_engine(url))
    with transaction(sessions) as session:
        node = Node(name="n1")
        session.add(node)
        session.flush()
        node_id = node.id
    buffer = RollupBuffer(3600)
    buffer.add(node_id, to_series(_batches()[0].samples, GpuSeries))

    other = make_sessionmaker(make_engine(migrated_sqlite(tmp_path / "other")))  # the node is not in that one
    with pytest.raises(DBAPIError), transaction(other) as session:
        buffer.flush(session)

    with transaction(sessions) as session:
        assert buffer.flush(session) > 0  # the sums were put back, and land now
    assert sum(r[2] for r in _rollups(url)["gpu"]) == 120


def test_a_flush_in_slices_writes_the_same_and_a_failed_slice_loses_nothing(tmp_path: Path) -> None:
    """The writer flushes a few rows between groups of batches (`max_rows`): sliced, with a slice failing
    on the way, the rollups come out as rollups written with each batch."""
    batches = _batches()
    exact_url = migrated_sqlite(tmp_path / "exact")
    with InProcessServer(Settings(data_dir=tmp_path / "exact", database_url=exact_url, rollup_flush_s=0)) as srv:
        _post_all(srv, exact_url, batches)
    url = migrated_sqlite(tmp_path / "sliced")
    with InProcessServer(Settings(data_dir=tmp_path / "sliced", database_url=url, rollup_flush_s=3600)) as srv:
        _post_all(srv, url, batches)
        rollups, sessions = srv.services.rollups, srv.services.sessions
        other = make_sessionmaker(make_engine(migrated_sqlite(tmp_path / "other")))  # n1 is not there
        written = []
        while True:
            with transaction(sessions) as session:
                written.append(rollups.flush(session, max_rows=1))
            if len(written) == 2:
                with pytest.raises(DBAPIError), transaction(other) as session:
                    rollups.flush(session, max_rows=1)  # this slice is put back with what is pending
            if not rollups.due():
                break
        assert len(written) > 4 and max(written) <= 2  # one GPU row and one job row at a time
        srv.services.writer.flush_rollups()  # the failed slice, put back with what is pending
    assert _rollups(url) == _rollups(exact_url)


def test_on_sqlite_the_watchdog_flushes_only_once_batches_stop(tmp_path: Path) -> None:
    """While batches arrive the writer flushes between its groups, in slices; a whole flush from the
    watchdog's thread would hold SQLite's one write lock for all 10,000 GPUs of a large cluster."""
    url = migrated_sqlite(tmp_path)
    with InProcessServer(Settings(data_dir=tmp_path, database_url=url, rollup_flush_s=0.5)) as srv:
        svc = srv.services
        svc.rollups.flush_s = 3600  # nothing due until the test says so
        _post_all(srv, url, _batches()[:2])
        svc.rollups.flush_s = 0.5
        wait_until(svc.rollups.due, timeout=10, what="a flush to come due", every=0.01)
        assert svc.writer.flushes_rollups()
        svc.writer.flush_rollups(due_only=True)
        assert _rollups(url)["gpu"] == [], "the watchdog left the flush to the writer"
        wait_until(lambda: not svc.writer.flushes_rollups(), timeout=10, what="the writer to stop flushing")
        svc.writer.flush_rollups(due_only=True)
        assert sum(r[2] for r in _rollups(url)["gpu"]) == 2 * 120


def test_flushed_rows_and_step_rows_of_a_minute_are_one_row(tmp_path: Path, db_url: str) -> None:
    """A flush writes through the driver (SQLite: executemany; PostgreSQL: one statement over arrays),
    step reports through SQLAlchemy: both must spell the minute the same way, or a job's minute splits in
    two rows and range queries over minutes miss one of them."""
    step = StepReport(job="j", rank=0, step=1, ts=T0 + 10, duration_s=1.0, comm_s=0.25)
    samples = [GpuSample(ts=T0 + k, gpu=0, uuid="GPU-0", util_gpu=50.0, job="j", rank=0) for k in range(10)]
    with InProcessServer(Settings(data_dir=tmp_path, database_url=db_url, rollup_flush_s=3600)) as srv:
        _post_all(
            srv, db_url, [Batch(batch_id=0, samples=samples[:5], steps=[step]), Batch(batch_id=1, samples=samples[5:])]
        )
        srv.services.writer.flush_rollups()
        _post_all(srv, db_url, [Batch(batch_id=2, samples=[s.model_copy(update={"ts": s.ts + 0.5}) for s in samples])])
        srv.services.writer.flush_rollups()  # the same minute again: added to the same rows
    engine = create_engine(db_url)
    with engine.connect() as conn:
        jobs = conn.execute(text("SELECT minute, steps, gpu_seconds FROM job_rollups")).all()
        gpus = conn.execute(text("SELECT minute, samples, util_sum, util_max FROM gpu_rollups")).all()
    engine.dispose()
    minute = (
        datetime.fromtimestamp(T0, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        if db_url.startswith("sqlite")
        else datetime.fromtimestamp(T0, UTC)
    )
    assert [tuple(r) for r in jobs] == [(minute, 1, 20.0)]
    assert [tuple(r) for r in gpus] == [(minute, 20, 1000.0, 50.0)]


@pytest.mark.postgres
def test_on_postgresql_flushes_add_up_as_rollups_written_with_each_batch(tmp_path: Path, postgres_url: str) -> None:
    """The flush's one statement over arrays (unnest) adds to rows already there as per-batch upserts do:
    the same batches, flushed in three parts, give SQLite's rows written with each batch."""
    batches = _batches()
    exact_url = migrated_sqlite(tmp_path / "exact")
    with InProcessServer(Settings(data_dir=tmp_path / "exact", database_url=exact_url, rollup_flush_s=0)) as srv:
        _post_all(srv, exact_url, batches)
    upgrade(postgres_url)
    with InProcessServer(Settings(data_dir=tmp_path / "pg", database_url=postgres_url, rollup_flush_s=3600)) as srv:
        token = new_token(postgres_url, "n1")
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}) as http:
            for part in (batches[:1], batches[1:4], [*batches[4:], batches[-1]]):  # minutes split across flushes
                for batch in part:
                    assert http.post("/api/v1/ingest", content=batch.model_dump_json()).status_code == 200
                srv.services.writer.flush_rollups()
    pg, exact = _rollups(postgres_url), _rollups(exact_url)
    assert len(pg["gpu"]) == len(exact["gpu"]) > 0 and len(pg["job"]) == len(exact["job"]) > 0
    for mine, want in zip(pg["gpu"] + pg["job"], exact["gpu"] + exact["job"], strict=True):
        assert _as_sqlite(mine) == pytest.approx(want)


def _as_sqlite(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A PostgreSQL row with its datetimes as SQLite stores them."""
    return tuple(v.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f") if isinstance(v, datetime) else v for v in row)
