"""The recovery switchboard: the cluster-wide pause and the nodes kept out of restarts."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Request
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from server.api.body import read_model
from server.api.deps import NodeDep, ServicesDep, SessionDep
from server.incidents.recover import excluded_nodes, is_paused, set_paused
from server.store.db import transaction

router = APIRouter(prefix="/api/v1", tags=["recovery"])


class ExclusionOut(BaseModel):
    node: str
    reason: str
    incident_id: int | None
    since: datetime
    until: datetime


class RecoveryOut(BaseModel):
    paused: bool
    excluded: list[ExclusionOut]


class PauseIn(BaseModel):
    paused: bool


def _state(session: SessionDep) -> RecoveryOut:
    return RecoveryOut(
        paused=is_paused(session),
        excluded=[
            ExclusionOut(
                node=e.node_name, reason=e.reason, incident_id=e.incident_id, since=e.created_at, until=e.expires_at
            )
            for e in excluded_nodes(session)
        ],
    )


@router.get("/recovery", response_model=RecoveryOut)
def recovery_state(session: SessionDep) -> RecoveryOut:
    return _state(session)


@router.post("/recovery/pause", response_model=RecoveryOut)
async def pause(request: Request, node: NodeDep, svc: ServicesDep) -> RecoveryOut:
    """Pause (or resume) automatic restarts cluster-wide; decisions are still made and recorded."""
    body = await read_model(request, PauseIn, svc.settings.max_body_bytes)

    def work() -> RecoveryOut:
        with transaction(svc.sessions) as session:
            set_paused(session, body.paused, who=f"node token {node.name}")
            session.flush()
            return _state(session)

    return await run_in_threadpool(work)
