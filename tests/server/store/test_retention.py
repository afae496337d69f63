"""Retention (server/store/retention.py) on SQLite and PostgreSQL: exactly the expired rows go, in
chunks, never the evidence of an open incident; a dry run only counts; one replica prunes at a time;
the server prunes on its own; `gpuwatch db prune`; and an agent's replay of a forgotten batch."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine, event, func, insert, select, text, update

from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, Event, LogLine
from server.incidents.pipeline import LOOKBACK
from server.store.db import make_engine
from server.store.migrate import upgrade
from server.store.models import EventRow, Gpu, GpuRollup, Incident, IngestBatch, Job, JobRollup, LogLineRow, Node, Run
from server.store.retention import CLOCK_SKEW, EVIDENCE_LOOKBACK, LOCK_KEY, TABLES, PruneResult, Retention, prune
from tests.helpers import CLI, InProcessServer, new_token, wait_until

DAY = timedelta(days=1)
# The defaults of Settings, spelled out: the seed below is built around them.
RETENTION = Retention(
    log_lines=30 * DAY, events=90 * DAY, ingest_batches=7 * DAY, rollups=90 * DAY, incident_snapshots=180 * DAY
)
SNAPSHOT = {"gpus": {"0": [[1.0, 50.0, 1000.0, 300.0, 60.0, 0]]}, "at": 1.0}


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    eng = make_engine(db_url)
    yield eng
    eng.dispose()


@dataclass
class Seeded:
    """The keys of the rows seeded, by table: those past their retention and those within it."""

    old: dict[str, set[tuple[Any, ...]]] = field(default_factory=lambda: {t: set() for t in TABLES})
    new: dict[str, set[tuple[Any, ...]]] = field(default_factory=lambda: {t: set() for t in TABLES})
    nodes: dict[str, int] = field(default_factory=dict)


def _minute(t: datetime) -> datetime:
    return t.replace(second=0, microsecond=0)


def seed(engine: Engine, now: datetime, scale: int = 1) -> Seeded:
    """Two nodes' streams, events, batch ids, GPU and job rollups and incidents, old and new; ``scale``
    multiplies the old rows of the big streams (to outnumber a chunk many times)."""
    s = Seeded()
    with engine.begin() as conn:
        for name in ("n1", "n2"):
            s.nodes[name] = conn.execute(insert(Node).values(name=name, dropped={}).returning(Node.id)).scalar_one()
        gpus = [
            conn.execute(
                insert(Gpu)
                .values(node_id=s.nodes[node], index=i, uuid=f"GPU-{node}-{i}", model="H100")
                .returning(Gpu.id)
            ).scalar_one()
            for node, i in (("n1", 0), ("n1", 1), ("n2", 0))
        ]
        jobs = [conn.execute(insert(Job).values(name=n).returning(Job.id)).scalar_one() for n in ("j1", "j2")]

        def lines(table: str, model: Any, node: str, stream: str, old: int, new: int, age: timedelta) -> None:
            rows = []
            for seq in range(old + new):
                ts = now - age + timedelta(seconds=seq) if seq < old else now - timedelta(hours=1, seconds=-seq)
                rows.append({"node_id": s.nodes[node], "stream": stream, "seq": seq, "ts": ts})
                (s.old if seq < old else s.new)[table].add((s.nodes[node], stream, seq))
            if model is LogLineRow:
                rows = [{**r, "text": f"line {r['seq']}"} for r in rows]
            else:
                rows = [{**r, "kind": "xid", "message": "Xid 79", "data": {"xid": 79}} for r in rows]
            conn.execute(insert(model), rows)

        for node in ("n1", "n2"):
            lines("log_lines", LogLineRow, node, "run/a/rank0", 20 * scale, 5, 40 * DAY)
            lines("log_lines", LogLineRow, node, "kernel", 15, 0, 31 * DAY)
            lines("log_lines", LogLineRow, node, "run/b/rank0", 0, 4, 0 * DAY)
            lines("events", EventRow, node, "gpu:nvml", 12 * scale, 3, 100 * DAY)
            lines("events", EventRow, node, "infiniband", 9, 0, 91 * DAY)

        batches = []
        for node, first, n, age in (
            ("n1", 1, 20, 8 * DAY),  # beyond 7 days and the clock-skew hour
            ("n1", 21, 3, 7 * DAY + CLOCK_SKEW / 2),  # within the skew hour: kept
            ("n1", 24, 3, timedelta(hours=1)),
            ("n2", 1, 10, 30 * DAY),
        ):
            for k in range(n):
                received = now - age + timedelta(seconds=k)
                batches.append({"node_id": s.nodes[node], "batch_id": first + k, "received_at": received})
                old = age > RETENTION.ingest_batches + CLOCK_SKEW  # type: ignore[operator]
                (s.old if old else s.new)["ingest_batches"].add((s.nodes[node], first + k))
        conn.execute(insert(IngestBatch), batches)

        rollups = []
        for gpu in gpus:
            for k in range(20 * scale + 5):
                minute = _minute(now - 100 * DAY if k < 20 * scale else now - DAY) + timedelta(minutes=k)
                zeros = dict.fromkeys(("util_sum", "util_max", "mem_util_sum", "fb_used_max_mib"), 0.0)
                zeros |= dict.fromkeys(("power_sum_w", "temp_max_c"), 0.0)
                rollups.append({"gpu_id": gpu, "minute": minute, "samples": 1, **zeros})
                (s.old if k < 20 * scale else s.new)["gpu_rollups"].add((gpu, minute))
        conn.execute(insert(GpuRollup), rollups)

        job_rows = []
        for job, rank, old, new in ((jobs[0], -1, 10, 3), (jobs[0], 0, 10, 3), (jobs[0], 1, 10, 3), (jobs[1], 0, 9, 0)):
            for k in range(old + new):
                minute = _minute(now - 91 * DAY if k < old else now - DAY) + timedelta(minutes=k)
                job_rows.append({"job_id": job, "rank": rank, "minute": minute})
                (s.old if k < old else s.new)["job_rollups"].add((job, rank, minute))
        conn.execute(insert(JobRollup), job_rows)

        for state, age, snapshot, cleared in (
            ("decided", 200 * DAY, SNAPSHOT, True),
            ("resolved", 181 * DAY, SNAPSHOT, True),
            ("decided", 10 * DAY, SNAPSHOT, False),
            ("resolved", 200 * DAY, None, False),  # no snapshot: nothing to clear
        ):
            values = {"node_id": s.nodes["n1"], "trigger": "xid", "state": state, "opened_at": now - age}
            incident = conn.execute(insert(Incident).values(**values, snapshot=snapshot).returning(Incident.id))
            incident_id = incident.scalar_one()
            if snapshot is not None:
                (s.old if cleared else s.new)["incident_snapshots"].add((incident_id,))
    return s


def stored(engine: Engine) -> dict[str, set[tuple[Any, ...]]]:
    """The keys of every row now stored, by table (incident_snapshots: incidents holding a snapshot)."""
    with engine.connect() as conn:
        keyed = {
            "log_lines": select(LogLineRow.node_id, LogLineRow.stream, LogLineRow.seq),
            "events": select(EventRow.node_id, EventRow.stream, EventRow.seq),
            "ingest_batches": select(IngestBatch.node_id, IngestBatch.batch_id),
            "gpu_rollups": select(GpuRollup.gpu_id, GpuRollup.minute),
            "job_rollups": select(JobRollup.job_id, JobRollup.rank, JobRollup.minute),
        }
        out = {table: {tuple(row) for row in conn.execute(query)} for table, query in keyed.items()}
        incidents = conn.execute(select(Incident.id, Incident.snapshot)).all()
    out["incident_snapshots"] = {(i,) for i, snap in incidents if snap}
    return out


def everything(s: Seeded) -> dict[str, set[tuple[Any, ...]]]:
    return {t: s.old[t] | s.new[t] for t in TABLES}


def test_exactly_the_expired_rows_are_deleted_a_chunk_at_a_time(engine: Engine) -> None:
    now = datetime.now(UTC)
    seeded = seed(engine, now, scale=3)
    assert stored(engine) == everything(seeded)
    deletes: list[int] = []

    def count_deletes(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE"):
            deletes.append(cursor.rowcount)

    event.listen(engine, "after_cursor_execute", count_deletes)
    result = prune(engine, RETENTION, now=now, chunk=7)
    event.remove(engine, "after_cursor_execute", count_deletes)

    assert result.ran and not result.dry_run
    assert result.counts == {t: len(seeded.old[t]) for t in TABLES}
    assert all(n > 0 for n in result.counts.values()), "every table has expired rows in the seed"
    assert stored(engine) == {t: seeded.new[t] for t in TABLES}
    assert max(deletes) <= 7, "no statement deletes more than a chunk"
    assert sum(deletes) == result.total - result.counts["incident_snapshots"]
    assert len(deletes) >= (result.total - result.counts["incident_snapshots"]) // 7
    # Nothing left to do: a second run deletes nothing.
    assert prune(engine, RETENTION, now=now, chunk=7).total == 0


def test_dry_run_counts_and_deletes_nothing(engine: Engine) -> None:
    now = datetime.now(UTC)
    seeded = seed(engine, now, scale=2)
    dry = prune(engine, RETENTION, now=now, chunk=5, dry_run=True)
    assert dry.dry_run and dry.ran
    assert dry.counts == {t: len(seeded.old[t]) for t in TABLES}
    assert stored(engine) == everything(seeded)
    assert prune(engine, RETENTION, now=now, chunk=5).counts == dry.counts


def test_a_retention_of_zero_keeps_the_table(engine: Engine) -> None:
    now = datetime.now(UTC)
    seeded = seed(engine, now)
    settings = Settings(retention_log_lines_days=0, retention_rollups_days=0, retention_incident_snapshots_days=0)
    result = prune(engine, Retention.from_settings(settings.retention), now=now)
    assert result.counts["log_lines"] == result.counts["gpu_rollups"] == result.counts["job_rollups"] == 0
    assert result.counts["events"] == len(seeded.old["events"])  # the others keep their defaults
    after = stored(engine)
    assert after["log_lines"] == everything(seeded)["log_lines"]
    assert after["gpu_rollups"] == everything(seeded)["gpu_rollups"]


def test_the_evidence_of_an_open_incident_is_kept_until_it_is_diagnosed(engine: Engine) -> None:
    """The diagnosis reads the node's lines and Xid events from its run's start (or LOOKBACK before its
    incident opened) on; retention keeps them from EVIDENCE_LOOKBACK before that."""
    assert EVIDENCE_LOOKBACK >= LOOKBACK
    now = datetime.now(UTC)
    seeded = seed(engine, now)
    n1, n2 = seeded.nodes["n1"], seeded.nodes["n2"]
    # n2's run started during the old part of its "run/a/rank0" (line 10 on); n1's 95 days ago, between
    # its "gpu:nvml" events (100 days old) and its "infiniband" ones (91 days).
    starts = {n2: now - 40 * DAY + timedelta(seconds=10) + EVIDENCE_LOOKBACK, n1: now - 95 * DAY}
    incidents = []
    with engine.begin() as conn:
        job = conn.execute(select(Job.id).where(Job.name == "j1")).scalar_one()
        for attempt, (node, started) in enumerate(starts.items(), start=1):
            run = conn.execute(
                insert(Run).values(job_id=job, attempt=attempt, state="failed", started_at=started).returning(Run.id)
            ).scalar_one()
            values = {"node_id": node, "run_id": run, "trigger": "run_failed", "state": "open"}
            incidents.append(conn.execute(insert(Incident).values(**values).returning(Incident.id)).scalar_one())

    prune(engine, RETENTION, now=now)
    kept_lines = {k for k in seeded.old["log_lines"] if k[0] == n2 and (k[1] == "kernel" or k[2] >= 10)}
    kept_lines |= {k for k in seeded.old["log_lines"] if k[0] == n1}
    kept_events = {k for k in seeded.old["events"] if k[0] == n1 and k[1] == "infiniband"}
    after = stored(engine)
    assert after["log_lines"] == seeded.new["log_lines"] | kept_lines
    assert after["events"] == seeded.new["events"] | kept_events

    with engine.begin() as conn:
        conn.execute(update(Incident).where(Incident.id.in_(incidents)).values(state="diagnosed"))
    again = prune(engine, RETENTION, now=now)
    assert (again.counts["log_lines"], again.counts["events"]) == (len(kept_lines), len(kept_events))
    assert stored(engine)["log_lines"] == seeded.new["log_lines"]
    assert stored(engine)["events"] == seeded.new["events"]


def test_a_stream_is_pruned_up_to_its_first_row_within_retention(engine: Engine) -> None:
    """Documented: time follows the sequence within a stream; a row behind a newer one (an agent
    whose clock stepped back) waits for that row to expire."""
    now = datetime.now(UTC)
    with engine.begin() as conn:
        node = conn.execute(insert(Node).values(name="skewed", dropped={}).returning(Node.id)).scalar_one()
        ages = [40, 40, 1, 40, 40]  # days; seq 2 is recent
        conn.execute(
            insert(LogLineRow),
            [{"node_id": node, "stream": "s", "seq": i, "ts": now - d * DAY, "text": "x"} for i, d in enumerate(ages)],
        )
    assert prune(engine, RETENTION, now=now, chunk=1).counts["log_lines"] == 2
    assert stored(engine)["log_lines"] == {(node, "s", 2), (node, "s", 3), (node, "s", 4)}


@pytest.mark.postgres
def test_one_replica_prunes_at_a_time_on_postgresql(postgres_url: str) -> None:
    upgrade(postgres_url)
    engine = make_engine(postgres_url)
    try:
        now = datetime.now(UTC)
        seeded = seed(engine, now, scale=40)
        with engine.connect() as holder:  # another replica in the middle of its run
            assert holder.scalar(text("SELECT pg_try_advisory_lock(hashtextextended(:k, 0))"), {"k": LOCK_KEY})
            skipped = prune(engine, RETENTION, now=now, chunk=50)
            assert not skipped.ran and skipped.total == 0
            assert stored(engine) == everything(seeded)
            holder.execute(text("SELECT pg_advisory_unlock(hashtextextended(:k, 0))"), {"k": LOCK_KEY})

        # Two at the same moment: both finish, neither deadlocks, each row is deleted once in all.
        results: list[PruneResult] = []
        barrier = threading.Barrier(2)

        def run() -> None:
            barrier.wait()
            results.append(prune(engine, RETENTION, now=now, chunk=50))

        threads = [threading.Thread(target=run) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(results) == 2 and not any(t.is_alive() for t in threads)
        assert any(r.ran for r in results)
        assert {t: sum(r.counts[t] for r in results) for t in TABLES} == {t: len(seeded.old[t]) for t in TABLES}
        assert stored(engine) == {t: seeded.new[t] for t in TABLES}
    finally:
        engine.dispose()


def _metric(text_: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(text_):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return None


def test_the_server_prunes_periodically_and_exports_what_it_did(db_url: str, tmp_path: Path) -> None:
    engine = make_engine(db_url)
    try:
        seeded = seed(engine, datetime.now(UTC))
    finally:
        engine.dispose()
    settings = Settings(data_dir=tmp_path, database_url=db_url, retention_interval_s=0.2, retention_chunk_rows=10)
    with InProcessServer(settings) as srv:
        before = httpx.get(f"{srv.url}/metrics").text
        assert _metric(before, "gpuwatch_retention_deleted_rows_total", table="log_lines") == 0
        assert _metric(before, "gpuwatch_retention_last_run_timestamp_seconds") == 0

        def ran() -> str | None:
            body = httpx.get(f"{srv.url}/metrics").text
            return body if (_metric(body, "gpuwatch_retention_last_run_timestamp_seconds") or 0) > 0 else None

        after = wait_until(ran, timeout=30, what="a retention run in /metrics")
        for table in TABLES:
            want = len(seeded.old[table])
            assert _metric(after, "gpuwatch_retention_deleted_rows_total", table=table) == want, table
        assert (_metric(after, "gpuwatch_retention_runs_total", outcome="pruned") or 0) >= 1
        assert _metric(after, "gpuwatch_retention_runs_total", outcome="failed") == 0
        check = make_engine(db_url)
        try:
            assert stored(check) == {t: seeded.new[t] for t in TABLES}
        finally:
            check.dispose()


def test_db_prune_command_dry_run_then_prune(sqlite_url: str, tmp_path: Path) -> None:
    engine = make_engine(sqlite_url)
    seeded = seed(engine, datetime.now(UTC))
    env = {**os.environ, "GPUWATCH_DATABASE_URL": sqlite_url, "GPUWATCH_DATA_DIR": str(tmp_path)}

    def cli(*args: str) -> str:
        out = subprocess.run([*CLI, "db", "prune", *args], capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    dry = cli("--dry-run")
    for table in TABLES:
        assert f"{table}: {len(seeded.old[table])} to delete" in dry
    assert stored(engine) == everything(seeded)
    done = cli()
    for table in TABLES:
        assert f"{table}: {len(seeded.old[table])} deleted" in done
    assert stored(engine) == {t: seeded.new[t] for t in TABLES}
    engine.dispose()


def test_a_replayed_batch_older_than_the_batch_id_retention_doubles_no_line_or_event(
    db_url: str, tmp_path: Path
) -> None:
    """The agent replays a batch the server stored 8 days ago, whose id retention has forgotten:
    it is stored as a new batch, but its log lines and events, keyed by (node, stream, seq), are not
    stored twice; the id is remembered again, so a further retry is a duplicate."""
    settings = Settings(data_dir=tmp_path, database_url=db_url, retention_interval_s=0)
    token = new_token(db_url, "replayer")
    sent = (datetime.now(UTC) - 8 * DAY).timestamp()
    batch_id = int(sent * 1e6)  # what the agent's spool numbers batches by: microseconds since the epoch
    batch = Batch(
        batch_id=batch_id,
        logs=[LogLine(stream="train.log", seq=i, ts=sent + i, text=f"step {i}") for i in range(5)],
        events=[Event(stream="gpu:nvml", seq=0, ts=sent, kind="xid", gpu=0, message="Xid 13", data={"xid": 13})],
    ).model_dump_json()
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    with InProcessServer(settings) as srv:
        first = httpx.post(f"{srv.url}/api/v1/ingest", content=batch, headers=auth, timeout=30).json()
        assert first["duplicate"] is False and first["logs"] == 5 and first["events"] == 1
        with srv.services.engine.begin() as conn:
            conn.execute(update(IngestBatch).values(received_at=datetime.now(UTC) - 8 * DAY))
        assert prune(srv.services.engine, RETENTION).counts["ingest_batches"] == 1

        replay = httpx.post(f"{srv.url}/api/v1/ingest", content=batch, headers=auth, timeout=30).json()
        replay.pop("server_time")
        assert replay == {
            "batch_id": batch_id,
            "duplicate": False,
            "samples": 0,
            "logs": 0,
            "events": 0,
            "stack_tasks": 0,
        }
        again = httpx.post(f"{srv.url}/api/v1/ingest", content=batch, headers=auth, timeout=30).json()
        assert again["duplicate"] is True
        with srv.services.engine.connect() as conn:
            assert conn.scalar(select(func.count()).select_from(LogLineRow)) == 5
            assert conn.scalar(select(func.count()).select_from(EventRow)) == 1
            assert conn.scalar(select(func.count()).select_from(IngestBatch)) == 1
