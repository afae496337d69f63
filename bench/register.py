"""Registering a node's GPU inventory: `server.store.nodes.register` (two queries and one flush per
node) against the way it was done before, `upsert_gpu` per GPU (two queries and a flush each), in the
same database, alternating rounds.

Each round registers ``--nodes`` new nodes of ``--gpus`` GPUs (an agent's first start), then the same
nodes again (an agent restarted), each node in a transaction of its own as the endpoint does. Reported:
the median over rounds of the time per node, for both ways, and their ratio.

    .venv/bin/python bench/register.py                          # SQLite, 500 nodes x 8 GPUs, 5 rounds
    .venv/bin/python bench/register.py --postgres postgresql+psycopg://postgres@127.0.0.1:5432/test  # own db there
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import create_engine, make_url, select, text
from sqlalchemy.orm import Session, sessionmaker

from gpuwatch.protocol import GpuInfo, RegisterRequest
from server.store.db import make_engine, make_sessionmaker, transaction
from server.store.migrate import upgrade
from server.store.models import Gpu, Node
from server.store.nodes import get_or_create_node, register

Way = Callable[..., object]


def per_gpu(session: Session, node: Node, req: RegisterRequest) -> object:
    """The way before (commit 50280ea), kept here as the reference: each GPU looked up by index, else
    by UUID, then written and flushed on its own."""
    now = datetime.now(UTC)
    node.registered_at = node.last_seen_at = now
    gpus = []
    for info in req.gpus:
        gpu = session.scalar(select(Gpu).where(Gpu.node_id == node.id, Gpu.index == info.index))
        if gpu is None:
            gpu = session.scalar(select(Gpu).where(Gpu.uuid == info.uuid)) or Gpu(uuid=info.uuid)
            gpu.node_id, gpu.index = node.id, info.index
            session.add(gpu)
        gpu.uuid, gpu.model, gpu.memory_total_mib = info.uuid, info.name, info.memory_total_mib
        gpu.pci_bus_id, gpu.last_seen_at = info.pci_bus_id, now
        session.flush()
        gpus.append(gpu)
    return gpus


def _request(name: str, gpus: int) -> RegisterRequest:
    infos = [GpuInfo(index=i, uuid=f"GPU-{name}-{i}", name="NVIDIA H100 80GB HBM3") for i in range(gpus)]
    return RegisterRequest(hostname=name, agent_version="bench", collector="simulated", gpus=infos)


def _time(sessions: sessionmaker[Session], way: Way, names: list[str], gpus: int) -> float:
    """Seconds per node to register ``names``, each in its own transaction."""
    requests = [_request(name, gpus) for name in names]
    start = time.perf_counter()
    for name, req in zip(names, requests, strict=True):
        with transaction(sessions) as session:
            way(session, get_or_create_node(session, name), req)
    return (time.perf_counter() - start) / len(names)


def run(url: str, nodes: int, gpus: int, rounds: int) -> None:
    upgrade(url)
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    ways: dict[str, Way] = {"per GPU (before)": per_gpu, "register": register}
    times: dict[tuple[str, str], list[float]] = {(w, p): [] for w in ways for p in ("first", "again")}
    for r in range(rounds):
        for w, way in ways.items():
            names = [f"bench-{r}-{w[:3]}-{n}" for n in range(nodes)]
            times[(w, "first")].append(_time(sessions, way, names, gpus))
            times[(w, "again")].append(_time(sessions, way, names, gpus))
    engine.dispose()
    print(f"{engine.dialect.name}: {nodes} nodes x {gpus} GPUs, median of {rounds} rounds, ms a node")
    for phase in ("first", "again"):
        before, after = (statistics.median(times[(w, phase)]) * 1e3 for w in ways)
        print(f"  {phase:5}: per GPU {before:.2f}, register {after:.2f} ({before / after:.1f}x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--postgres", help="a PostgreSQL server's URL: the bench runs in a database of its own there")
    args = ap.parse_args()
    if args.postgres is None:
        with tempfile.TemporaryDirectory() as tmp:
            run(f"sqlite:///{Path(tmp) / 'bench.db'}", **_sizes(args))
        return
    admin = create_engine(args.postgres, isolation_level="AUTOCOMMIT")
    name = f"gpuwatch_bench_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        run(make_url(args.postgres).set(database=name).render_as_string(hide_password=False), **_sizes(args))
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _sizes(args: argparse.Namespace) -> dict[str, int]:
    return {"nodes": args.nodes, "gpus": args.gpus, "rounds": args.rounds}


if __name__ == "__main__":
    main()
