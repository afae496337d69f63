"""The recovery switchboard: the cluster-wide pause, the nodes kept out of restarts, and what a job's
restart acts on (its scheduler, id and policy). Changing any takes an admin token, and every change is
written to the admin audit log."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Request, Response
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from gpuwatch.protocol import Api
from gpuwatch.recovery.settings import policy_config
from server.api.body import json_body, read_model
from server.api.deps import AdminDep, ServicesDep, SessionDep
from server.incidents.recover import exclude_by_hand, excluded_nodes, is_paused, release_by_hand, set_paused
from server.store.audit import audit
from server.store.db import transaction
from server.store.jobs import job_ids, job_members
from server.store.models import Exclusion, Job

router = APIRouter(prefix=Api.PREFIX, tags=["recovery"])


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


class ExclusionIn(BaseModel):
    node: str = Field(min_length=1, max_length=255)
    reason: str = Field(default="manual", min_length=1, max_length=64)
    ttl_s: float | None = Field(
        default=None, ge=1, le=365 * 86400, description="default: recovery_exclude_ttl_s (shorter: expired at once)"
    )


def _out(e: Exclusion) -> ExclusionOut:
    return ExclusionOut(
        node=e.node_name, reason=e.reason, incident_id=e.incident_id, since=e.created_at, until=e.expires_at
    )


def _state(session: SessionDep) -> RecoveryOut:
    return RecoveryOut(paused=is_paused(session), excluded=[_out(e) for e in excluded_nodes(session)])


@router.get("/recovery", response_model=RecoveryOut)
def recovery_state(session: SessionDep) -> RecoveryOut:
    return _state(session)


@router.post("/recovery/pause", response_model=RecoveryOut, openapi_extra=json_body(PauseIn))
async def pause(request: Request, admin: AdminDep, svc: ServicesDep) -> RecoveryOut:
    """Pause (``{"paused": true}``) or resume (``false``) automatic restarts cluster-wide; decisions are
    still made and recorded. Admin only."""
    body = await read_model(request, PauseIn, svc.settings.server.max_body_bytes)

    def work() -> RecoveryOut:
        with transaction(svc.sessions) as session:
            set_paused(session, body.paused, who=admin.who)
            audit(session, admin.who, "recovery.pause" if body.paused else "recovery.unpause")
            session.flush()
            return _state(session)

    return await run_in_threadpool(work)


@router.post("/exclusions", response_model=ExclusionOut, status_code=201, openapi_extra=json_body(ExclusionIn))
async def exclude(request: Request, response: Response, admin: AdminDep, svc: ServicesDep) -> ExclusionOut:
    """Keep a node out of restarts (drained or cordoned through the cluster's executor, if one is set)
    until its TTL. A node excluded already keeps its exclusion (200). Admin only."""
    body = await read_model(request, ExclusionIn, svc.settings.server.max_body_bytes)
    added = await run_in_threadpool(exclude_by_hand, svc.incidents, body.node, body.reason, body.ttl_s, admin.who)
    if added is not None:
        return _out(added)

    def current() -> ExclusionOut:
        with svc.sessions() as session:
            return next(_out(e) for e in excluded_nodes(session) if e.node_name == body.node)

    response.status_code = 200
    return await run_in_threadpool(current)


@router.delete("/exclusions/{node}", status_code=204)
async def release(node: str, admin: AdminDep, svc: ServicesDep) -> None:
    """Let an excluded node back (resumed or uncordoned) before its TTL. Admin only; 404 if not excluded."""
    if not await run_in_threadpool(release_by_hand, svc.incidents, node, admin.who):
        raise HTTPException(404, f"node {node!r} is not excluded")


class JobSettingsIn(BaseModel):
    scheduler: Literal["local", "slurm", "kubernetes"] | None = Field(default=None, description="who restarts it")
    external_id: str | None = Field(default=None, max_length=255, description="the scheduler's id of the job")
    policy: dict[str, Any] | None = Field(default=None, description="its recovery policy overrides")
    member_nodes: list[Annotated[str, Field(min_length=1, max_length=255)]] | None = Field(
        default=None, max_length=100_000, description="the nodes that may start and report its runs"
    )


class JobIn(JobSettingsIn):
    name: str = Field(min_length=1, max_length=255)


class JobSettingsOut(BaseModel):
    id: int
    name: str
    scheduler: str | None
    external_id: str | None
    policy: dict[str, Any] | None
    member_nodes: list[str] | None


def _job_out(job: Job) -> JobSettingsOut:
    return JobSettingsOut(
        id=job.id,
        name=job.name,
        scheduler=job.scheduler,
        external_id=job.external_id,
        policy=job.policy,
        member_nodes=job.member_nodes,
    )


def _checked_policy(svc: ServicesDep, body: JobSettingsIn) -> None:
    if body.policy is not None:
        try:
            policy_config(svc.settings.recovery, body.policy)
        except (TypeError, ValueError) as exc:
            raise HTTPException(422, f"policy: {exc}") from None


@router.post("/jobs", response_model=JobSettingsOut, status_code=201, openapi_extra=json_body(JobIn))
async def register_job(request: Request, admin: AdminDep, svc: ServicesDep) -> JobSettingsOut:
    """Register a job before its first run: the nodes that may start and report its runs (a job run on
    several nodes without a scheduler to vouch for them), its scheduler, id and policy. Admin only;
    audited; 409 for a job that exists already with runs or a registration (change it with PATCH)."""
    body = await read_model(request, JobIn, svc.settings.server.max_body_bytes)
    _checked_policy(svc, body)

    def work() -> JobSettingsOut:
        with transaction(svc.sessions) as session:
            job_id = job_ids(session, {body.name}, [])[body.name]
            job = session.get(Job, job_id)
            assert job is not None
            if job.member_nodes is not None or job_members(session, [job_id]):
                raise HTTPException(409, f"job {body.name!r} exists already: PATCH /api/v1/jobs/{job_id}")
            job.scheduler, job.external_id = body.scheduler or "local", body.external_id
            job.policy, job.member_nodes = body.policy, body.member_nodes or []
            audit(session, admin.who, "job.register", job.name, **body.model_dump(exclude={"name"}))
            return _job_out(job)

    return await run_in_threadpool(work)


@router.patch("/jobs/{job_id}", response_model=JobSettingsOut, openapi_extra=json_body(JobSettingsIn))
async def change_job(job_id: int, request: Request, admin: AdminDep, svc: ServicesDep) -> JobSettingsOut:
    """Change what a job's first run (or its registration) set and no later run may change: its scheduler,
    the scheduler's id and its recovery policy (which decide what a restart does, and to what), and the
    nodes registered to it. Admin only; audited."""
    body = await read_model(request, JobSettingsIn, svc.settings.server.max_body_bytes)
    _checked_policy(svc, body)
    changes = body.model_dump(exclude_unset=True)

    def work() -> JobSettingsOut:
        with transaction(svc.sessions) as session:
            job = session.get(Job, job_id)
            if job is None:
                raise HTTPException(404, f"no job {job_id}")
            before = {k: getattr(job, k) for k in changes}
            for key, value in changes.items():
                setattr(job, key, value)
            audit(session, admin.who, "job.change", job.name, before=before, after=changes)
            return _job_out(job)

    return await run_in_threadpool(work)
