"""The ingest path through the real server on PostgreSQL, and the same on SQLite to show they agree.

The store's idempotence rests on INSERT … ON CONFLICT, whose SQL differs per dialect: a retried batch
stores nothing, a log line or event re-sent in another batch is stored once, and per-minute rollups
add up samples from several batches (ON CONFLICT DO UPDATE). A NUL, which a PostgreSQL string cannot
hold, never leaves the agent."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from agent.agent import Agent
from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, Event, GpuInfo, GpuSample, LogLine, RegisterRequest
from server.store.db import make_engine
from server.store.models import EventRow, Gpu, GpuRollup, IngestBatch, LogLineRow, Node
from tests.helpers import InProcessServer, new_token, wait_until

NODE = "pg-node"
STREAM = "train.log"
T0 = float(int(time.time()) // 3600 * 3600 - 3600)  # a whole hour (and minute), inside the ingest window
ROLLUP_FIELDS = ("samples", "util_sum", "util_max", "mem_util_sum", "fb_used_max_mib", "power_sum_w", "temp_max_c")
GPUS = [GpuInfo(index=i, uuid=f"GPU-pg-{i}", name="NVIDIA H100 80GB HBM3", memory_total_mib=81559.0) for i in (0, 1)]


@pytest.fixture
def server(db_url: str, tmp_path: Path) -> Iterator[InProcessServer]:
    # Rollups written with each batch (flush 0): exactly-once with the batch id, on both databases.
    with InProcessServer(Settings(data_dir=tmp_path, database_url=db_url, rollup_flush_s=0)) as srv:
        yield srv


@pytest.fixture
def client(server: InProcessServer, db_url: str) -> Iterator[httpx.Client]:
    token = new_token(db_url, NODE)
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
        yield c


def sample(gpu: int, ts: float) -> GpuSample:
    k = int(ts - T0)
    return GpuSample(
        ts=ts,
        gpu=gpu,
        uuid=GPUS[gpu].uuid,
        util_gpu=float((k * 7 + gpu) % 101),
        util_mem=float((k * 3) % 50),
        fb_used_mib=1000.0 + k,
        fb_total_mib=81559.0,
        power_w=300.0 + (k % 17),
        temp_c=50.0 + (k % 23) + gpu,
    )


def log_lines(seqs: range) -> list[LogLine]:
    return [LogLine(stream=STREAM, seq=s, ts=T0 + s * 0.5, text=f"step {s} loss={1 / (s + 1):.4f}") for s in seqs]


def events() -> list[Event]:
    return [
        Event(stream="nvml", seq=0, ts=T0 + 10, kind="xid", gpu=1, message="Xid 79", data={"xid": 79}),
        Event(stream="nvml", seq=1, ts=T0 + 20, kind="ecc_dbe", gpu=0, message="DBE +1", data={"count": 1}),
    ]


def expected_rollups(samples: list[GpuSample]) -> dict[tuple[str, datetime], dict[str, float]]:
    """The rollups computed here, independently of the store: by (GPU uuid, minute)."""
    acc: dict[tuple[str, datetime], dict[str, float]] = defaultdict(lambda: dict.fromkeys(ROLLUP_FIELDS, 0.0))
    for s in samples:
        a = acc[(s.uuid, datetime.fromtimestamp(s.ts // 60 * 60, UTC))]
        a["samples"] += 1
        a["util_sum"] += s.util_gpu or 0.0
        a["util_max"] = max(a["util_max"], s.util_gpu or 0.0)
        a["mem_util_sum"] += s.util_mem or 0.0
        a["fb_used_max_mib"] = max(a["fb_used_max_mib"], s.fb_used_mib or 0.0)
        a["power_sum_w"] += s.power_w or 0.0
        a["temp_max_c"] = max(a["temp_max_c"], s.temp_c or 0.0)
    return dict(acc)


def post_batch(client: httpx.Client, batch: Batch) -> dict[str, Any]:
    r = client.post("/api/v1/ingest", content=batch.model_dump_json())
    assert r.status_code == 200, r.text
    return r.json()


def stored(db_url: str) -> tuple[dict[str, int], dict[tuple[str, datetime], dict[str, float]]]:
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            counts = {
                model.__tablename__: conn.scalar(select(func.count()).select_from(model))
                for model in (Node, Gpu, IngestBatch, LogLineRow, EventRow, GpuRollup)
            }
            rollup = GpuRollup.__table__
            rows = conn.execute(select(Gpu.uuid, rollup).join(Gpu, Gpu.id == rollup.c.gpu_id)).mappings().all()
    finally:
        engine.dispose()
    rollups = {(r["uuid"], r["minute"]): {k: float(r[k]) for k in ROLLUP_FIELDS} for r in rows}
    return counts, rollups


def test_ingest_is_idempotent_and_rolls_up(client: httpx.Client, db_url: str) -> None:
    reg = RegisterRequest(hostname=NODE, agent_version="test", collector="simulated", gpus=GPUS)
    r = client.post("/api/v1/nodes/register", content=reg.model_dump_json())
    assert r.status_code == 200, r.text
    assert r.json()["node"] == NODE

    # 150 s of 1 Hz samples on both GPUs: minutes 0 and 1 whole, minute 2 half.
    first_samples = [sample(g, T0 + k) for k in range(150) for g in (0, 1)]
    batch = Batch(batch_id=1, samples=first_samples, logs=log_lines(range(100)), events=events())
    ack = post_batch(client, batch)
    ack.pop("server_time")
    assert ack == {"batch_id": 1, "duplicate": False, "samples": 300, "logs": 100, "events": 2, "stack_tasks": 0}

    # The same batch again (a retry after a lost response): acknowledged, nothing stored.
    assert post_batch(client, batch)["duplicate"] is True

    # Another batch re-sending the same lines and events (an agent re-batching after a crash).
    ack = post_batch(client, Batch(batch_id=2, logs=log_lines(range(100)), events=events()))
    ack.pop("server_time")
    assert ack == {"batch_id": 2, "duplicate": False, "samples": 0, "logs": 0, "events": 0, "stack_tasks": 0}

    # Overlapping lines (50 old, 50 new), and samples that finish minute 2 and start minute 3:
    # the existing rollup row of minute 2 is updated (ON CONFLICT DO UPDATE), minute 3 is new.
    more_samples = [sample(g, T0 + k) for k in range(150, 200) for g in (0, 1)]
    ack = post_batch(client, Batch(batch_id=3, samples=more_samples, logs=log_lines(range(50, 150))))
    ack.pop("server_time")
    assert ack == {"batch_id": 3, "duplicate": False, "samples": 100, "logs": 50, "events": 0, "stack_tasks": 0}

    counts, rollups = stored(db_url)
    assert counts == {
        "nodes": 1,
        "gpus": 2,
        "ingest_batches": 3,
        "log_lines": 150,
        "events": 2,
        "gpu_rollups": 2 * 4,
    }
    want = expected_rollups(first_samples + more_samples)
    assert set(rollups) == set(want)
    for key, values in want.items():
        assert rollups[key] == pytest.approx(values), key
    assert sum(v["samples"] for v in rollups.values()) == 400  # the retried batch counted once

    r = client.get("/api/v1/logs", params={"node": NODE, "limit": 10_000})
    assert r.status_code == 200, r.text
    lines = r.json()
    assert [ln["seq"] for ln in lines] == list(range(150))
    assert [ln["text"] for ln in lines] == [ln.text for ln in log_lines(range(150))]
    assert {ln["stream"] for ln in lines} == {STREAM}
    assert datetime.fromisoformat(lines[0]["ts"]) == datetime.fromtimestamp(T0, UTC)

    r = client.get("/api/v1/logs", params={"node": NODE, "after_seq": 139})
    assert [ln["seq"] for ln in r.json()] == list(range(140, 150))

    r = client.get("/api/v1/events", params={"node": NODE})
    assert r.status_code == 200, r.text
    assert [(e["kind"], e["gpu_index"]) for e in r.json()] == [("ecc_dbe", 0), ("xid", 1)]  # newest first


def test_a_job_log_line_with_a_nul_is_shipped_and_stored(server: InProcessServer, db_url: str, tmp_path: Path) -> None:
    """The agent reads a NUL as U+FFFD: on PostgreSQL the line would get its whole batch refused (422)
    and set aside."""
    job_log = tmp_path / "train.log"
    job_log.write_bytes(b"step 1\nloss=\x00nan\n")
    settings = Settings(
        data_dir=tmp_path / "agent",
        server_url=server.url,
        token=new_token(db_url, NODE),
        node=NODE,
        client_port=0,
        flush_s=0.1,
        log_files=[job_log],
        simulate=1,
    )
    agent = Agent(settings)
    running = threading.Thread(target=agent.run, daemon=True)
    running.start()

    def texts() -> list[str]:
        with server.services.sessions() as s:
            return list(s.scalars(select(LogLineRow.text).where(LogLineRow.stream == f"file:{job_log}")))

    try:
        stored = wait_until(lambda: len(texts()) == 2 and texts(), what="the job's two lines stored")
    finally:
        agent.stop.set()
        running.join(timeout=10)
    assert sorted(stored) == ["loss=\ufffdnan", "step 1"]
