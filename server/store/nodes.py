"""Nodes, their GPUs and their bearer tokens."""

from __future__ import annotations

import hashlib
import math
import secrets
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from gpuwatch.protocol import GpuInfo, RegisterRequest
from server.store.models import ApiToken, Gpu, Node, utcnow
from server.telemetry.latest import FaultChange, Faults

TOKEN_PREFIX = "gwn_"
#: How often a node's last_seen_at is written with its batches, at most (`LastSeen`).
NODE_SEEN_EVERY_S = 5.0


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def get_or_create_node(session: Session, name: str) -> Node:
    node = session.scalar(select(Node).where(Node.name == name))
    if node is None:
        node = Node(name=name, dropped={})
        session.add(node)
        session.flush()
    return node


def create_token(session: Session, node_name: str) -> str:
    """Create ``node_name`` if needed and return a new token for it; only its hash is stored."""
    node = get_or_create_node(session, node_name)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(ApiToken(node_id=node.id, role="node", token_hash=hash_token(token), prefix=token[:12]))
    return token


def revoke_tokens(session: Session, node_name: str) -> int:
    node = session.scalar(select(Node).where(Node.name == node_name))
    if node is None:
        raise LookupError(f"no node named {node_name!r}")
    result = session.execute(
        update(ApiToken).where(ApiToken.node_id == node.id, ApiToken.revoked_at.is_(None)).values(revoked_at=utcnow())
    )
    return result.rowcount or 0


def node_for_token(session: Session, token: str) -> Node | None:
    """The node a live token belongs to, or None for an unknown or revoked token."""
    return session.scalar(
        select(Node)
        .join(ApiToken, ApiToken.node_id == Node.id)
        .where(ApiToken.token_hash == hash_token(token), ApiToken.revoked_at.is_(None))
    )


def register(session: Session, node: Node, req: RegisterRequest) -> list[Gpu]:
    """Record the node's agent details and GPU inventory (GPUs matched by index, identity by UUID)."""
    now = datetime.now(UTC)
    node.hostname = req.hostname
    node.agent_version = req.agent_version
    node.collector = req.collector
    node.driver_version = req.driver_version
    node.registered_at = node.last_seen_at = node.agent_seen_at = now
    return upsert_gpus(session, node.id, req.gpus, now)


#: A GPU unseen this long on its node may be claimed by another one (it was moved) although its old node's
#: token is live; before that, a claim is a conflict (two agents naming one GPU: a cloned configuration,
#: or a node speaking for another's hardware).
GPU_MOVE_AFTER_S = 3600.0


class GpuClaimConflict(Exception):
    """An inventory names a GPU that another live node holds, or one UUID twice (the answer is 409 / 422)."""

    def __init__(self, detail: str, duplicate: bool = False) -> None:
        super().__init__(detail)
        self.duplicate = duplicate


def upsert_gpus(session: Session, node_id: int, infos: list[GpuInfo], now: datetime, strict: bool = True) -> list[Gpu]:
    """The node's GPUs for ``infos``, matched by index, created or described anew; one flush. Two queries
    for the whole inventory, not two and a flush per GPU: 12,500 nodes registering at once (an agent
    rollout) was minutes of a core (bench/register.py).

    A UUID is the identity of a piece of hardware, and whose it is is decided here: a row another node
    holds moves to this one only when that node can no longer speak (no live token: renamed or retired)
    or has not seen the GPU for `GPU_MOVE_AFTER_S`. Otherwise ``strict`` (a registration) raises
    `GpuClaimConflict`, and a GPU learnt from samples gets a row of this node's own under a placeholder
    UUID, so that its samples are kept and nobody else's row (nor the rollup flush shared by every node)
    is touched."""
    if strict and (twice := _listed_twice(infos)):
        raise GpuClaimConflict(f"the inventory lists GPU {twice} under more than one index", duplicate=True)
    mine = {g.index: g for g in session.scalars(select(Gpu).where(Gpu.node_id == node_id))}
    wanted = [info.uuid for info in infos if (g := mine.get(info.index)) is None or g.uuid != info.uuid]
    held = {g.uuid: g for g in session.scalars(select(Gpu).where(Gpu.uuid.in_(wanted)))} if wanted else {}
    gpus = []
    for info in infos:
        gpu, other = mine.get(info.index), held.get(info.uuid)
        uuid = info.uuid
        if other is not None and other is not gpu:
            if other.node_id != node_id and not _may_move(session, other, now):
                if strict:
                    owner = session.get(Node, other.node_id)
                    raise GpuClaimConflict(
                        f"GPU {info.uuid} is node {owner.name if owner else other.node_id}'s (GPU {other.index}, "
                        f"seen {other.last_seen_at:%Y-%m-%d %H:%M:%S}Z); revoke that node's tokens if it moved"
                    )
                uuid, other = f"unclaimed:{node_id}:{info.index}", None
            elif gpu is not None:  # this index's row stays; the other row keeps its history, retired
                other.uuid = f"retired:{other.id}:{other.uuid}"[:96]
                session.flush()
                other = None
        if gpu is None:
            # A GPU with this UUID seen elsewhere before (moved, or a node renamed) keeps its row.
            gpu = other or Gpu(uuid=uuid)
            gpu.node_id, gpu.index = node_id, info.index
            session.add(gpu)
            mine[info.index] = gpu  # an index listed twice: the second describes the same row
        _describe(gpu, info, uuid, now)
        gpus.append(gpu)
    session.flush()
    return gpus


def _listed_twice(infos: list[GpuInfo]) -> str | None:
    index_of: dict[str, int] = {}
    for info in infos:
        if index_of.setdefault(info.uuid, info.index) != info.index:
            return info.uuid
    return None


def _may_move(session: Session, gpu: Gpu, now: datetime) -> bool:
    """Whether ``gpu``'s node has let it go: no live token of that node, or the GPU long unseen there."""
    if gpu.last_seen_at is None or (now - gpu.last_seen_at).total_seconds() > GPU_MOVE_AFTER_S:
        return True
    live = select(ApiToken.id).where(ApiToken.node_id == gpu.node_id, ApiToken.revoked_at.is_(None)).limit(1)
    return session.scalar(live) is None


def _describe(gpu: Gpu, info: GpuInfo, uuid: str, now: datetime) -> None:
    gpu.uuid = uuid
    gpu.model = info.name
    gpu.memory_total_mib = info.memory_total_mib
    gpu.pci_bus_id = info.pci_bus_id
    gpu.last_seen_at = now


def from_agent(batch: Any) -> bool:
    """Whether a batch is its node's agent's: a supervisor ships only its job's log lines, so a node
    whose agent is down can still be heard, and must not count as watched (`Node.agent_seen_at`)."""
    return bool(
        batch.series or batch.samples or batch.events or batch.ib or batch.processes or batch.steps or batch.checkpoints
    )


def store_faults(session: Session, node_id: int, changes: Iterable[FaultChange]) -> None:
    """The GPUs' new fault counts (`Telemetry.add_series`), for the next start to export before their
    agent reconnects, or while their node is silent. A GPU sampled before its node registered gets its
    row here, as the rollups would give it."""
    changes = list(changes)
    known = set(session.scalars(select(Gpu.index).where(Gpu.node_id == node_id)))
    if missing := [GpuInfo(index=c.gpu, uuid=c.uuid, name="unknown") for c in changes if c.gpu not in known]:
        upsert_gpus(session, node_id, missing, datetime.fromtimestamp(max(c.ts for c in changes), UTC), False)
    rows = [
        {"node": node_id, "gpu_index": c.gpu, "at": datetime.fromtimestamp(c.ts, UTC)}
        | {f"f_{k}": v for k, v in c.faults._asdict().items()}
        for c in changes
    ]
    table = Gpu.__table__
    stmt = (
        update(table)
        .where(table.c.node_id == bindparam("node"), table.c.index == bindparam("gpu_index"))
        .values(
            faults_at=bindparam("at", type_=table.c.faults_at.type),
            **{name: bindparam(f"f_{name}", type_=table.c[name].type) for name in Faults._fields},
        )
    )
    session.connection().execute(stmt, rows)


_NODES = Node.__table__


class LastSeen:
    """Nodes' `last_seen_at`, written in the transaction that stores their batches, each node's at most
    every ``every_s`` (1,250 nodes' every batch would be 250 updates a second for nothing). Silence
    detection reads it (every replica's), so ``every_s`` must be well under `node_timeout_s`: the server
    uses a sixth of it, at most `NODE_SEEN_EVERY_S`. Likewise `agent_seen_at` for the nodes whose
    batches were their agent's (`from_agent`), which the wait for a silent agent's evidence reads.

    A node is marked written before its transaction commits: if that rolls back, its next write comes
    at most ``every_s`` late, which the margin above absorbs."""

    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        # column → nodes.id → when it was last written for the node
        self._written: dict[str, dict[int, float]] = {"last_seen_at": {}, "agent_seen_at": {}}

    def write(
        self, session: Session, node_ids: Iterable[int], now: float | None = None, agents: Iterable[int] = ()
    ) -> int:
        """Write ``now`` as the last-seen time of those of ``node_ids`` that are due, and as the agent's
        of those of ``agents``; how many nodes' last-seen times were due."""
        now = time.time() if now is None else now
        seen = datetime.fromtimestamp(now, UTC)
        counts = []
        for column, ids in (("last_seen_at", node_ids), ("agent_seen_at", agents)):
            written = self._written[column]
            due = [i for i in set(ids) if now - written.get(i, -math.inf) >= self.every_s]
            if due:
                # Core, not the ORM's bulk update: 0.09 against 0.28 ms for the one node of a group of one batch.
                session.connection().execute(_SEEN[column], [{"node": i, "seen": seen} for i in due])
                written.update(dict.fromkeys(due, now))
            counts.append(len(due))
        return counts[0]


_SEEN = {
    column: update(_NODES)
    .where(_NODES.c.id == bindparam("node"))
    .values({column: bindparam("seen", type_=_NODES.c[column].type)})
    for column in ("last_seen_at", "agent_seen_at")
}
