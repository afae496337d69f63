"""The admin audit log: who paused recovery, excluded or released a node, created or revoked a token."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel

from gpuwatch.protocol import Api
from server.api.deps import AdminDep, SessionDep
from server.store.audit import recent

router = APIRouter(prefix=Api.PREFIX, tags=["admin"])


class AuditOut(BaseModel):
    id: int
    at: datetime
    actor: str
    action: str
    target: str | None
    params: dict[str, Any]


@router.get("/audit", response_model=list[AuditOut])
def audit_log(
    admin: AdminDep,
    session: SessionDep,
    action: str | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> list[AuditOut]:
    """The newest entries first. Admin only, whatever `read_auth` says: it names who holds admin tokens."""
    return [
        AuditOut(id=e.id, at=e.at, actor=e.actor, action=e.action, target=e.target, params=e.params)
        for e in recent(session, limit, action)
    ]
