"""A node's registration on SQLite and PostgreSQL: its GPUs matched by index, a GPU's row kept by UUID
when it moves, its description refreshed when the agent registers again."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from gpuwatch.protocol import GpuInfo, RegisterRequest
from server.store.db import make_engine, make_sessionmaker, transaction
from server.store.models import Gpu, Node
from server.store.nodes import get_or_create_node, register


def _inventory(*uuids: str, model: str = "NVIDIA H100 80GB HBM3") -> RegisterRequest:
    gpus = [GpuInfo(index=i, uuid=u, name=model, memory_total_mib=81559.0) for i, u in enumerate(uuids)]
    return RegisterRequest(hostname="h", agent_version="1", collector="nvml", gpus=gpus)


def test_registration_matches_gpus_by_index_and_keeps_a_moved_gpus_row(db_url: str) -> None:
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    try:
        with transaction(sessions) as session:
            a = get_or_create_node(session, "a")
            first = register(session, a, _inventory("GPU-0", "GPU-1", "GPU-2"))
            ids = {g.uuid: g.id for g in first}
        assert [g.index for g in first] == [0, 1, 2]

        # Again, with a new driver's model name: the same rows, described anew.
        with transaction(sessions) as session:
            a = get_or_create_node(session, "a")
            again = register(session, a, _inventory("GPU-0", "GPU-1", "GPU-2", model="NVIDIA H100 SXM"))
            assert [g.id for g in again] == [ids["GPU-0"], ids["GPU-1"], ids["GPU-2"]]
            assert all(g.model == "NVIDIA H100 SXM" for g in again)

        # GPU-2 moves to node b as its index 1: its row (and so its history) goes with it.
        with transaction(sessions) as session:
            b = get_or_create_node(session, "b")
            moved = register(session, b, _inventory("GPU-9", "GPU-2"))
            assert moved[1].id == ids["GPU-2"] and moved[0].id not in ids.values()

        with sessions() as session:
            rows = session.execute(
                select(Node.name, Gpu.index, Gpu.uuid, Gpu.last_seen_at).join(Node, Node.id == Gpu.node_id)
            ).all()
        where = {uuid: (name, index) for name, index, uuid, _ in rows}
        assert where == {"GPU-0": ("a", 0), "GPU-1": ("a", 1), "GPU-2": ("b", 1), "GPU-9": ("b", 0)}
        assert all(isinstance(seen, datetime) and seen.tzinfo is not None for *_, seen in rows)
    finally:
        engine.dispose()


def test_an_index_listed_twice_describes_one_row(db_url: str) -> None:
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    try:
        twice = _inventory("GPU-0")
        twice.gpus.append(GpuInfo(index=0, uuid="GPU-0", name="NVIDIA H100 SXM"))
        with transaction(sessions) as session:
            gpus = register(session, get_or_create_node(session, "a"), twice)
            assert gpus[0] is gpus[1] and gpus[0].model == "NVIDIA H100 SXM"
        with sessions() as session:
            assert len(session.scalars(select(Gpu)).all()) == 1
    finally:
        engine.dispose()
