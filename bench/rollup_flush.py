"""What a rollup flush of a large cluster costs: the driver path against SQLAlchemy's own executemany.

Every `rollup_flush_s` (5 s) the server upserts one row per GPU and per job rank for the current minute:
20,000 rows for 1,250 nodes of 8 GPUs in 32-GPU jobs. This folds 5 s of such a cluster's samples (10 Hz,
the bench's simulated values) into a `RollupBuffer`, then flushes alternately through the server's path
(`_DriverUpsert`, compiled once: SQLite takes tuples through executemany, PostgreSQL one statement over
an array per column, in binary) and the reference, the same upserts through
``session.execute(statement, dicts)`` (the path before), and reports the median time of each on the same
database. The server's path also writes the nodes' and GPUs' last-seen times, which the reference leaves
out: the ratio understates the gain.

    .venv/bin/python bench/rollup_flush.py [--nodes 1250] [--flushes 8] [--database-url URL]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.collectors.simulated import SimulatedCollector  # noqa: E402
from bench.ingest import Load, _series, _templates  # noqa: E402
from server.ingest.decode import decode_batch  # noqa: E402
from server.store import rollups  # noqa: E402
from server.store.db import make_engine, make_sessionmaker, transaction  # noqa: E402
from server.store.jobs import job_ids  # noqa: E402
from server.store.migrate import upgrade  # noqa: E402
from server.store.models import Node  # noqa: E402
from server.store.nodes import upsert_gpus  # noqa: E402


def _through_sqlalchemy(buffer: rollups.RollupBuffer, session: Any, p: Any) -> int:
    """The reference: the same rows as dicts through SQLAlchemy's execute (parameter processing per row)."""
    gpu_ids = buffer._ids(session, p)
    rows = [
        {"gpu_id": gpu_ids[(node, index)], "minute": minute, **dict(zip(rollups._GPU_KEYS[2:], acc, strict=True))}
        for (node, index, minute), acc in p.gpus.items()
    ]
    session.execute(rollups._gpu_upsert(session), rows)
    ids = job_ids(session, {name for name, _, _ in p.jobs}, [])
    job_rows = [
        {"job_id": ids[name], "rank": rank, "minute": minute, **dict(zip(rollups._JOB_SUMS, acc, strict=True))}
        for (name, rank, minute), acc in p.jobs.items()
    ]
    session.execute(rollups._job_upsert(session), job_rows)
    return len(rows) + len(job_rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1250)
    ap.add_argument("--flushes", type=int, default=8, help="of each kind, alternating")
    ap.add_argument("--database-url", help="default: a new SQLite file")
    args = ap.parse_args()
    url = args.database_url or f"sqlite:///{tempfile.mkdtemp()}/rollups.db"
    upgrade(url)
    sessions = make_sessionmaker(make_engine(url))
    load = Load(nodes=args.nodes, gpus=8, hz=10, flush=5, duration=60, warmup=0)
    nodes = []
    now = datetime.now(UTC)
    with transaction(sessions) as session:
        for i in range(args.nodes):
            node = Node(name=f"node-{i:05d}")
            session.add(node)
            session.flush()
            upsert_gpus(session, node.id, SimulatedCollector(node.name, load.gpus, seed=i).inventory(), now)
            nodes.append((node.id, _series(_templates(node.name, i, load))))
    gc.collect()
    gc.freeze()  # as the server does: what was built so far is never scanned again
    gc.set_threshold(50_000, *gc.get_threshold()[1:])
    buffer = rollups.RollupBuffer(5.0)
    times: dict[str, list[float]] = {"driver (the server's path)": [], "SQLAlchemy execute (reference)": []}
    start = 1.8e9  # a minute boundary: every flush but the 12th of a minute writes one row per GPU and rank
    rows = 0
    for k in range(2 * args.flushes):
        for node_id, series in nodes:
            body = {"batch_id": k, "series": [{**s, "ts": [start + 5 * k + t for t in s["ts"]]} for s in series]}
            buffer.add(node_id, decode_batch(msgspec.json.encode(body)).series)
        pending, buffer._pending = buffer._pending, rollups._Pending()
        label = list(times)[k % 2]
        t0 = time.perf_counter()
        with transaction(sessions) as session:
            rows = buffer._write(session, pending) if k % 2 == 0 else _through_sqlalchemy(buffer, session, pending)
        if k >= 2:  # the first of each: GPU ids looked up, statements compiled
            times[label].append(time.perf_counter() - t0)
    print(f"{args.nodes} nodes x 8 GPUs: {rows:,} rollup rows a flush; median of {args.flushes - 1} flushes each")
    base = statistics.median(times["SQLAlchemy execute (reference)"])
    for label, ts in times.items():
        med = statistics.median(ts)
        print(f"| {label} | {med * 1e3:.0f} ms | {med / rows * 1e6:.1f} µs a row | {base / med:.2f}x |")


if __name__ == "__main__":
    main()
