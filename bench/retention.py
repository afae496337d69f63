"""How fast retention prunes, and how long one of its statements holds the database.

    .venv/bin/python bench/retention.py [--rows 200000] [--chunk 5000] [--postgres URL]

Seeds a fresh SQLite file (and a fresh PostgreSQL database, when one answers) with ``--rows`` log
lines, the same number of events, GPU rollup minutes and ingest batch ids, half of each past its
retention (log lines over 40 (node, stream) pairs, as agents and runs write them), then prunes once
and reports, per table, rows deleted per second, and the longest single statement (how long ingest
can be made to wait); then prunes again with nothing left to delete (the cost of a run that finds
nothing, what every periodic run after the first mostly is).
"""

from __future__ import annotations

import argparse
import secrets
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, insert, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from server.store.db import make_engine
from server.store.migrate import upgrade
from server.store.models import EventRow, Gpu, GpuRollup, IngestBatch, LogLineRow, Node
from server.store.retention import Retention, prune

DAY = timedelta(days=1)
RETENTION = Retention(log_lines=30 * DAY, events=90 * DAY, ingest_batches=7 * DAY, rollups=90 * DAY)
NODES, STREAMS, GPUS = 4, 10, 8


def seed(engine: Engine, rows: int, now: datetime) -> None:
    half = rows // 2
    with engine.begin() as conn:
        nodes = [
            conn.execute(insert(Node).values(name=f"n{i}", dropped={}).returning(Node.id)).scalar_one()
            for i in range(NODES)
        ]
        gpus = [
            conn.execute(
                insert(Gpu).values(node_id=n, index=g, uuid=f"GPU-{n}-{g}", model="H100").returning(Gpu.id)
            ).scalar_one()
            for n in nodes
            for g in range(GPUS)
        ]
    per_stream = rows // (NODES * STREAMS)
    for model, age in ((LogLineRow, 40 * DAY), (EventRow, 100 * DAY)):
        batch: list[dict[str, Any]] = []
        for n in nodes:
            for s in range(STREAMS):
                for seq in range(per_stream):
                    old = seq < per_stream // 2
                    ts = now - (age if old else DAY) + timedelta(seconds=seq)
                    row = {"node_id": n, "stream": f"run/{s}/rank0", "seq": seq, "ts": ts}
                    row |= {"text": f"step {seq} loss=0.1"} if model is LogLineRow else {"kind": "xid", "data": {}}
                    batch.append(row)
                    if len(batch) == 20_000:
                        _insert(engine, model, batch)
        _insert(engine, model, batch)
    per_gpu = rows // len(gpus)
    minute0 = now.replace(second=0, microsecond=0)
    zeros = dict.fromkeys(("util_sum", "util_max", "mem_util_sum", "fb_used_max_mib", "power_sum_w", "temp_max_c"), 0.0)
    batch = []
    for g in gpus:
        for k in range(per_gpu):
            minute = minute0 - (200 * DAY if k < per_gpu // 2 else DAY) + timedelta(minutes=k)
            batch.append({"gpu_id": g, "minute": minute, "samples": 1, **zeros})
            if len(batch) == 20_000:
                _insert(engine, GpuRollup, batch)
    _insert(engine, GpuRollup, batch)
    batch = []
    for k in range(rows):
        received = now - (8 * DAY if k < half else timedelta(hours=1)) + timedelta(microseconds=k)
        batch.append({"node_id": nodes[k % NODES], "batch_id": k, "received_at": received})
        if len(batch) == 20_000:
            _insert(engine, IngestBatch, batch)
    _insert(engine, IngestBatch, batch)


def _insert(engine: Engine, model: Any, rows: list[dict[str, Any]]) -> None:
    if rows:
        with engine.begin() as conn:
            conn.execute(insert(model), rows)
        rows.clear()


def measure(engine: Engine, rows: int, chunk: int) -> dict[str, Any]:
    now = datetime.now(UTC)
    seed(engine, rows, now)
    longest = {"any": 0.0, "delete": 0.0}

    @event.listens_for(engine, "before_cursor_execute")
    def _start(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        conn.info["t0"] = time.perf_counter()

    @event.listens_for(engine, "after_cursor_execute")
    def _end(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        took = time.perf_counter() - conn.info["t0"]
        longest["any"] = max(longest["any"], took)
        if statement.lstrip().upper().startswith("DELETE"):
            longest["delete"] = max(longest["delete"], took)

    first = prune(engine, RETENTION, now=now, chunk=chunk)
    second = prune(engine, RETENTION, now=now, chunk=chunk)
    return {
        "deleted": first.total,
        "seconds": first.seconds,
        "rows_per_s": first.total / first.seconds,
        "counts": {k: v for k, v in first.counts.items() if v},
        "longest_statement_ms": round(longest["any"] * 1000, 1),
        "longest_delete_ms": round(longest["delete"] * 1000, 1),
        "idle_run_s": second.seconds,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000, help="rows per table, half expired")
    ap.add_argument("--chunk", type=int, default=5000)
    ap.add_argument("--postgres", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        upgrade(url)
        engine = make_engine(url)
        print("sqlite", measure(engine, args.rows, args.chunk))
        engine.dispose()
    base = make_url(args.postgres)
    name = f"gpuwatch_bench_{secrets.token_hex(4)}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # no PostgreSQL here: SQLite only
        print(f"postgresql skipped: {str(exc).splitlines()[0]}")
        return
    try:
        url = base.set(database=name).render_as_string(hide_password=False)
        upgrade(url)
        engine = make_engine(url)
        print("postgresql", measure(engine, args.rows, args.chunk))
        engine.dispose()
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


if __name__ == "__main__":
    main()
