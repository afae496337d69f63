"""Ingest throughput: a real `gpuwatch server` process, batches POSTed over loopback as an agent would.

For each database it measures, batch by batch, the latency of (a) new batches of 16 GPU samples,
N log lines and one event, gzipped as the agent sends them, and (b) the same batches replayed (the
idempotent path a reconnecting agent takes). Reports medians and the replay/new ratio, measured in
the same run against the same server.

    .venv/bin/python bench/ingest.py [--batches 200] [--lines 400] [--postgres URL]
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuwatch.protocol import Batch, Event, GpuSample, LogLine  # noqa: E402
from server.store.migrate import upgrade  # noqa: E402
from tests.helpers import Proc, free_port, new_token, wait_until  # noqa: E402


def make_batch(i: int, lines: int) -> bytes:
    ts = time.time()
    batch = Batch(
        batch_id=i,
        samples=[
            GpuSample(
                ts=ts,
                gpu=g,
                uuid=f"GPU-{g}",
                util_gpu=93.0,
                util_mem=55.0,
                fb_used_mib=70_000.0,
                power_w=650.0,
                temp_c=76.0,
                sm_clock_mhz=1980.0,
            )
            for g in range(16)
        ],
        logs=[
            LogLine(
                stream="file:/train.log",
                seq=i * lines + n,
                ts=ts,
                text=f"[rank{n % 8}]: step {i} iter {n} loss=2.{n:04d} lr=3e-4 tokens/s=41235",
            )
            for n in range(lines)
        ],
        events=[Event(stream="gpu:nvml", seq=i, ts=ts, kind="xid", gpu=0, message="Xid 13", data={"xid": 13})],
    )
    return gzip.compress(batch.model_dump_json(exclude_none=True).encode(), compresslevel=5)


def run(db_url: str, data_dir: Path, batches: int, lines: int) -> dict[str, float]:
    upgrade(db_url)
    token = new_token(db_url, "bench-node")
    port = free_port()
    server = Proc(
        ["server", "--port", str(port), "--data-dir", str(data_dir), "--database-url", db_url],
        data_dir / "server.log",
        {"GPUWATCH_LOG_LEVEL": "WARNING"},
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200, timeout=30, what="server")
        bodies = [make_batch(i, lines) for i in range(batches)]
        headers = {"Authorization": f"Bearer {token}", "Content-Encoding": "gzip"}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
            for warm in range(5):  # warm-up batches, not counted
                http.post("/api/v1/ingest", content=make_batch(10**9 + warm, 10))

            def timed(body: bytes, duplicate: bool) -> float:
                t0 = time.perf_counter()
                resp = http.post("/api/v1/ingest", content=body)
                dt = time.perf_counter() - t0
                assert resp.status_code == 200 and resp.json()["duplicate"] is duplicate, resp.text
                return dt

            new = [timed(b, False) for b in bodies]
            replay = [timed(b, True) for b in bodies]
    finally:
        server.stop()
    new_ms, replay_ms = statistics.median(new) * 1e3, statistics.median(replay) * 1e3
    return {
        "new_batch_ms": new_ms,
        "new_p90_ms": statistics.quantiles(new, n=10)[-1] * 1e3,
        "lines_per_s": lines / statistics.median(new),
        "replay_batch_ms": replay_ms,
        "replay_over_new": replay_ms / new_ms,
        "bytes_per_batch": statistics.median(len(b) for b in bodies),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--lines", type=int, default=400, help="log lines per batch (200 lines/s, 2 s flush)")
    ap.add_argument(
        "--postgres",
        default=os.environ.get("GPUWATCH_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"),
    )
    args = ap.parse_args()
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        results["sqlite"] = run(f"sqlite:///{tmp}/bench.db", Path(tmp), args.batches, args.lines)
        admin = create_engine(args.postgres, isolation_level="AUTOCOMMIT")
        name = f"gpuwatch_bench_{uuid.uuid4().hex[:8]}"
        try:
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            pg_url = args.postgres.rsplit("/", 1)[0] + f"/{name}"
            results["postgresql"] = run(pg_url, Path(tmp), args.batches, args.lines)
        except Exception as exc:  # report SQLite alone when no PostgreSQL answers
            print(f"postgresql skipped: {exc}", file=sys.stderr)
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()
    print(f"{args.batches} batches of 16 samples + {args.lines} log lines + 1 event, gzipped, one client")
    print("| database | median new batch | p90 new | log lines/s (median) | median replay | replay/new | gzip bytes |")
    print("|---|---|---|---|---|---|---|")
    for db, r in results.items():
        print(
            f"| {db} | {r['new_batch_ms']:.1f} ms | {r['new_p90_ms']:.1f} ms | {r['lines_per_s']:,.0f} | "
            f"{r['replay_batch_ms']:.1f} ms | {r['replay_over_new']:.2f} | {r['bytes_per_batch']:,.0f} |"
        )


if __name__ == "__main__":
    main()
