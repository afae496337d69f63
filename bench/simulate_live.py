"""Detection and restart-decision latency of a live server under a simulated cluster's telemetry (issue 10).

Starts `gpuwatch server` (its own process, SQLite unless --database-url), gives every simulated node a
token, and runs `simulate.live`: every node ships its GPUs' samples every --flush seconds
while the first --failures failures of the seeded trace that strike jobs are replayed over --duration
seconds (runs registered, Xid kernel lines, the runs' output, exits, decisions; node failures as
agents that stop). Prints the latencies (p50/p99) and what the server diagnosed, as JSON.

    .venv/bin/python bench/simulate_live.py [--nodes 500] [--gpus 8] [--flush 5] [--duration 90] [--failures 30]
        [--agent-processes N] [--database-url URL]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere: the tests' helpers

from server.store.db import make_engine, make_sessionmaker, transaction
from server.store.migrate import upgrade
from server.store.nodes import create_token
from simulate.cluster import load_config
from simulate.live import LiveSettings, replay
from simulate.trace import node_name
from tests.helpers import free_port, new_admin_token, start_server


def tokens_for(url: str, nodes: tuple[str, ...]) -> dict[str, str]:
    engine = make_engine(url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            return {node: create_token(session, node) for node in nodes}
    finally:
        engine.dispose()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--flush", type=float, default=5.0, help="seconds between an agent's batches")
    ap.add_argument("--duration", type=float, default=90.0, help="seconds the failures are spread over")
    ap.add_argument("--failures", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--agent-processes",
        type=int,
        default=max(1, min(8, (os.cpu_count() or 1) // 2)),
        help="worker processes for the agents' telemetry (default: half the CPUs, at most 8)",
    )
    ap.add_argument("--database-url", default=None, help="default: SQLite in a temporary directory")
    args = ap.parse_args()
    config = load_config(nodes=args.nodes, gpus_per_node=args.gpus, seed=args.seed)
    nodes = tuple(node_name(i) for i in range(args.nodes))
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        url = args.database_url or f"sqlite:///{tmp / 'gpuwatch.db'}"
        upgrade(url)
        tokens = tokens_for(url, nodes)
        port = free_port()
        env = {"GPUWATCH_DATABASE_URL": url, "GPUWATCH_LOG_LEVEL": "WARNING"}
        server = start_server(tmp, port, tmp / "server.log", env)
        try:
            cpu0, wall0 = cpu_seconds(server.popen.pid), time.monotonic()
            settings = LiveSettings(
                flush_s=args.flush,
                duration_s=args.duration,
                failures=args.failures,
                agent_processes=args.agent_processes,
            )
            result = replay(f"http://127.0.0.1:{port}", tokens, config, settings, admin_token=new_admin_token(url))
            cpu = (cpu_seconds(server.popen.pid) - cpu0) / (time.monotonic() - wall0)
        finally:
            server.stop()
    summary = result.summary()
    summary["server_cpu_cores"] = round(cpu, 2)
    summary["database"] = "postgresql" if url.startswith("postgresql") else "sqlite"
    summary["agent_processes"] = args.agent_processes
    summary["cpus"] = os.cpu_count()
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
