"""What a starting server's memory is rebuilt from: the state its alerts need, out of the database.

A restart must not read as a repair. Before its agents reconnect (and for nodes that never will), the
server knows from the database each node's and agent's last word, each GPU's last sample and fault
counts (ECC, retired pages, row-remap failure), and every Xid count. So a GPU that fell off the bus
keeps its `gpuwatch_gpu_last_sample_seconds` and `gpuwatch_gpu_lost`, a GPU with uncorrectable ECC
errors its `DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`, and `gpuwatch_xid_events_total` goes on from its count
instead of starting again (which Prometheus would read as a counter reset, or as no Xid at all).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from gpuwatch.protocol import GpuInfo
from server.detect.metrics import DetectMetrics
from server.store.models import Gpu, Node
from server.store.rollups import GPU_SEEN_EVERY_S
from server.store.xids import stored_xids
from server.telemetry.labels import LabelBudget
from server.telemetry.latest import Faults, Telemetry


def _ts(at: datetime | None) -> float | None:
    return None if at is None else at.timestamp()


def restore(
    sessions: sessionmaker[Session],
    telemetry: Telemetry,
    metrics: DetectMetrics,
    labels: LabelBudget,
    rollup_flush_s: float,
) -> None:
    """Fill ``telemetry`` and the Xid counter from the database (at start-up, before any batch).

    A GPU's last sample time is written at most every `GPU_SEEN_EVERY_S` (plus a rollup flush), its
    agent's every few seconds: a GPU whose recorded time is that close to its agent's last word was
    heard until then as far as the database can tell, and is taken so (else every GPU of a node that
    fell silent would look lost after a restart)."""
    slack = GPU_SEEN_EVERY_S + rollup_flush_s
    with sessions() as session:
        nodes = session.execute(select(Node.name, Node.last_seen_at, Node.agent_seen_at)).tuples().all()
        gpus = session.execute(select(Node.name, Gpu).join(Gpu, Gpu.node_id == Node.id)).tuples().all()
        xids = stored_xids(session)
    agents: dict[str, float | None] = {}
    for name, last_seen, agent_seen in nodes:
        # A node last heard before agents' words were told apart: its last word is taken as its agent's.
        agents[name] = _ts(agent_seen) or _ts(last_seen)
        telemetry.restore_node(name, _ts(last_seen), agents[name])
    for name, gpu in gpus:
        sampled, agent = _ts(gpu.last_seen_at), agents.get(name)
        if sampled is not None and agent is not None and 0 < agent - sampled <= slack:
            sampled = agent
        info = GpuInfo(
            index=gpu.index,
            uuid=gpu.uuid,
            name=gpu.model,
            memory_total_mib=gpu.memory_total_mib,
            pci_bus_id=gpu.pci_bus_id,
        )
        faults = Faults(
            gpu.ecc_sbe_volatile, gpu.ecc_dbe_volatile, gpu.retired_pages_sbe, gpu.retired_pages_dbe, gpu.remap_failure
        )
        telemetry.restore_gpu(name, info, sampled, faults)
    for x in xids:
        gpu_label = "" if x.gpu is None else str(x.gpu)
        code = "" if x.xid is None else str(x.xid)
        if labels.admit(x.node, "xid", (gpu_label, code)):
            metrics.xid_events.labels(x.node, gpu_label, code).inc(x.count)
