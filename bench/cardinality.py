"""One node sends 100,000 distinct label values: /metrics size and server RSS before and after (issue 21).

    .venv/bin/python bench/cardinality.py [--values 100000] [--kinds xid,dropped,ib,job]

A real `gpuwatch server` process on SQLite in a temporary directory, and one node's token. For each kind,
the node sends ``--values`` distinct values in batches of 1,000 (Xid events with distinct (GPU, code)
pairs, `dropped` maps of distinct keys, InfiniBand ports, GPU series of distinct job names), then
/metrics is fetched and the server's RSS read from /proc. Refused batches (422) are counted: a value the
door refuses never reaches memory.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.helpers import free_port, migrated_sqlite, new_token, start_server

CHUNK = 1000


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _batches(kind: str, values: int, now: float) -> list[dict]:
    out = []
    for start in range(0, values, CHUNK):
        ns = range(start, min(values, start + CHUNK))
        batch: dict = {"batch_id": len(out) + 1_000_000 * (1 + ["xid", "dropped", "ib", "job"].index(kind))}
        if kind == "xid":  # distinct (GPU, code): 1024 GPUs x codes from 200 (not fatal: no incidents)
            xid = {"stream": "kmsg", "ts": now, "kind": "xid"}
            batch["events"] = [{**xid, "seq": n, "gpu": n % 1024, "data": {"xid": 200 + n // 1024}} for n in ns]
        elif kind == "dropped":
            batch["dropped"] = {f"kind{n}": 1 for n in ns}
        elif kind == "ib":
            batch["ib"] = [{"ts": now, "device": f"mlx5_{n // 256}", "port": n % 256} for n in ns]
        else:
            batch["series"] = [
                {"gpu": n % 8, "uuid": f"GPU-{n % 8}", "job": f"job-{n}", "rank": 0, "ts": [now], "util_gpu": [50.0]}
                for n in ns
            ]
        out.append(batch)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--values", type=int, default=100_000)
    ap.add_argument("--kinds", default="xid,dropped,ib,job")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        url = migrated_sqlite(data)
        token = new_token(url, "noisy-node")
        port = free_port()
        env = {"GPUWATCH_RATE_LIMIT_PER_S": "0", "GPUWATCH_INGEST_QUEUE_BYTES": str(256 * 2**20)}
        proc = start_server(data, port, data / "server.log", env)
        try:
            with httpx.Client(
                base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}, timeout=120
            ) as c:

                def measure(what: str, refused: int = 0) -> None:
                    size = len(c.get("/metrics").content)
                    print(
                        f"{what:>8}: /metrics {size / 1024:9.1f} KiB  RSS {_rss_mib(proc.popen.pid):7.1f} MiB"
                        f"  refused batches {refused}",
                        flush=True,
                    )

                measure("start")
                for kind in args.kinds.split(","):
                    refused = 0
                    for batch in _batches(kind, args.values, time.time()):
                        body = gzip.compress(json.dumps(batch).encode())
                        resp = c.post("/api/v1/ingest", content=body, headers={"Content-Encoding": "gzip"})
                        if resp.status_code == 422:
                            refused += 1
                        elif resp.status_code != 200:
                            raise SystemExit(f"{kind}: {resp.status_code} {resp.text[:300]}")
                    measure(kind, refused)
        finally:
            proc.stop()


if __name__ == "__main__":
    main()
