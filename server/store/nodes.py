"""Nodes, their GPUs and their bearer tokens."""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from gpuwatch.protocol import GpuInfo, RegisterRequest
from server.store.models import ApiToken, Gpu, Node, utcnow

TOKEN_PREFIX = "gwn_"


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
    node.registered_at = node.last_seen_at = now
    # Two queries and one flush for the whole inventory, not two and a flush per GPU: 12,500 nodes
    # registering at once (an agent rollout) was minutes of a core (bench/register.py).
    mine = {g.index: g for g in session.scalars(select(Gpu).where(Gpu.node_id == node.id))}
    new = [info.uuid for info in req.gpus if info.index not in mine]
    elsewhere = {g.uuid: g for g in session.scalars(select(Gpu).where(Gpu.uuid.in_(new)))} if new else {}
    gpus = []
    for info in req.gpus:
        gpu = mine.get(info.index)
        if gpu is None:
            # A GPU with this UUID seen elsewhere before (moved, or a node renamed) keeps its row.
            gpu = elsewhere.get(info.uuid) or Gpu(uuid=info.uuid)
            gpu.node_id, gpu.index = node.id, info.index
            session.add(gpu)
            mine[info.index] = gpu  # an index listed twice: the second describes the same row
        _describe(gpu, info, now)
        gpus.append(gpu)
    session.flush()
    return gpus


def upsert_gpu(session: Session, node_id: int, info: GpuInfo, now: datetime) -> Gpu:
    gpu = session.scalar(select(Gpu).where(Gpu.node_id == node_id, Gpu.index == info.index))
    if gpu is None:
        # A GPU with this UUID seen elsewhere before (moved, or a node renamed) keeps its row.
        gpu = session.scalar(select(Gpu).where(Gpu.uuid == info.uuid)) or Gpu(uuid=info.uuid)
        gpu.node_id, gpu.index = node_id, info.index
        session.add(gpu)
    _describe(gpu, info, now)
    session.flush()
    return gpu


def _describe(gpu: Gpu, info: GpuInfo, now: datetime) -> None:
    gpu.uuid = info.uuid
    gpu.model = info.name
    gpu.memory_total_mib = info.memory_total_mib
    gpu.pci_bus_id = info.pci_bus_id
    gpu.last_seen_at = now
