"""Runs (one attempt of a job) as a supervisor reports them, and the incidents their failures open."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request, Response
from pydantic import BaseModel, Field
from sqlalchemy import func, select
from starlette.concurrency import run_in_threadpool

from gpuwatch.diagnosis.model import Diagnosis as Diagnosis_
from gpuwatch.protocol import TS_FUTURE_S, TS_PAST_S, Api
from gpuwatch.recovery import Decision
from gpuwatch.recovery.settings import policy_config
from server.api.body import json_body, read_model
from server.api.deps import NodeDep, ServicesDep, SessionDep, own_node
from server.executors.base import JobTarget
from server.executors.registry import executor
from server.incidents.pipeline import StreamExit, mark_exit, open_incident
from server.incidents.recover import resolve_job, restarted
from server.store.db import lock, transaction
from server.store.jobs import job_ids, job_members
from server.store.models import Action, Checkpoint, Diagnosis, Incident, Job, Node, Run, utcnow
from server.store.upsert import insert_for

router = APIRouter(prefix=Api.PREFIX, tags=["runs"])


class RunStart(BaseModel):
    job: str = Field(min_length=1, max_length=255)
    node: str | None = Field(
        default=None, max_length=255, description="the supervisor's node; must be the token's (403 otherwise)"
    )
    command: str | None = Field(default=None, max_length=10_000)
    key: str | None = Field(
        default=None, min_length=1, max_length=64, description="the supervisor's id: a repeated start is the same run"
    )
    restart_of: str | None = Field(default=None, max_length=64, description="key of the failed run it restarts")
    resume_from: str | None = Field(default=None, max_length=4096, description="the checkpoint it resumes from")
    policy: dict[str, Any] | None = Field(default=None, description="recovery policy overrides for the job")
    scheduler: Literal["local", "slurm", "kubernetes"] = Field(
        default="local",
        description="who restarts the job: its supervisor (local), or the server through Slurm/Kubernetes",
    )
    external_id: str | None = Field(
        default=None, max_length=255, description="the scheduler's id: Slurm job id, or namespace/name of a Job"
    )


class RankExit(BaseModel):
    rank: int = Field(ge=0)
    exit_code: int | None = None
    signal: int | None = Field(default=None, ge=1, le=64)
    stream: str | None = Field(default=None, max_length=255, description="the rank's own log stream, if apart")


class CheckpointRef(BaseModel):
    path: str = Field(max_length=4096)
    step: int | None = Field(default=None, ge=0)
    saved_at: float | None = Field(default=None, gt=0, description="unix time it was written (its mtime)")


class RunExit(BaseModel):
    exit_code: int | None = None
    signal: int | None = Field(default=None, ge=1, le=64)
    streams: list[str] = Field(default_factory=list, max_length=1024, description="the run's log streams")
    ranks: list[RankExit] = Field(default_factory=list, max_length=100_000, description="how each rank ended")
    checkpoint: CheckpointRef | None = Field(default=None, description="the latest valid checkpoint at the exit")
    diagnosis: dict[str, Any] | None = Field(default=None, description="supervisor's own diagnosis (server away)")
    decision: dict[str, Any] | None = Field(default=None, description="supervisor's own decision (server away)")
    restarted: bool = Field(default=False, description="the supervisor already restarted the job")


class RunStarted(BaseModel):
    id: int
    job_id: int
    attempt: int


class RunEnded(BaseModel):
    run_id: int
    state: str
    incident_id: int | None


@router.post("/runs", response_model=RunStarted, status_code=201, openapi_extra=json_body(RunStart))
async def start_run(request: Request, response: Response, node: NodeDep, svc: ServicesDep) -> RunStarted:
    """Register a run. With a ``key`` seen before, the same run is returned (200), so a supervisor
    replaying its outbox after an outage creates nothing twice.

    A job belongs to the nodes that started its runs (docs/security.md): its first run's node creates it
    with the run's ``scheduler``, ``external_id`` and ``policy``, which no later start changes (409; an
    admin changes them: ``PATCH /api/v1/jobs/{id}``); another node joins it only when the job's scheduler
    says the job runs there (403 otherwise)."""
    body = await read_model(request, RunStart, svc.settings.server.max_body_bytes)
    own_node(node, body.node, "start a run")
    if body.policy is not None:
        try:
            policy_config(svc.settings.recovery, body.policy)
        except (TypeError, ValueError) as exc:
            raise HTTPException(422, f"policy: {exc}") from None

    def joining() -> JobTarget | None:
        """The job's scheduler target when this node would join another node's job, else None."""
        with svc.sessions() as session:
            job = session.scalar(select(Job).where(Job.name == body.job))
            if job is None or (body.key is not None and session.scalar(select(Run.id).where(Run.key == body.key))):
                return None
            members = job_members(session, [job.id]).get(job.id, set())
            registered = job.member_nodes
            if (not members and registered is None) or node.id in members or node.name in (registered or []):
                return None
            if job.scheduler in ("slurm", "kubernetes") and job.external_id:
                return JobTarget(job.scheduler, job.external_id)
            raise HTTPException(
                403,
                f"job {body.job!r} belongs to the nodes that started its runs or an admin registered it to; "
                f"node {node.name} is not one of them",
            )

    if (target := await run_in_threadpool(joining)) is not None:
        nodes = await run_in_threadpool(lambda: executor(svc.settings, target.executor).job_nodes(target))
        if not nodes or node.name not in nodes:
            raise HTTPException(
                403,
                f"job {body.job!r} belongs to other nodes, and its scheduler ({target.executor} {target.ref}) "
                f"does not run it on node {node.name}",
            )

    def work() -> tuple[RunStarted, bool]:
        with transaction(svc.sessions) as session:
            if body.key is not None and (run := session.scalar(select(Run).where(Run.key == body.key))):
                if run.node_id != node.id:
                    raise HTTPException(409, f"run key {body.key!r} is another node's run's")
                return RunStarted(id=run.id, job_id=run.job_id, attempt=run.attempt), False
            job_id = job_ids(session, {body.job}, [])[body.job]
            job = session.get(Job, job_id)
            assert job is not None
            lock(session, f"job:{job_id}")  # one first run, across replicas
            if job.member_nodes is None and not job_members(session, [job_id]):  # its first run: this node's
                job.scheduler, job.external_id = body.scheduler, body.external_id
                if body.policy is not None:
                    job.policy = body.policy
            elif changed := _changes(job, body):
                raise HTTPException(
                    409,
                    f"job {body.job!r} was started with other {', '.join(changed)}; a run cannot change them "
                    f"(an admin can: PATCH /api/v1/jobs/{job_id}), or use another job name",
                )
            failed = session.scalar(select(Run).where(Run.key == body.restart_of)) if body.restart_of else None
            if failed is not None and failed.job_id != job_id:
                raise HTTPException(409, f"restart_of {body.restart_of!r} is a run of another job")
            attempt = (session.scalar(select(func.max(Run.attempt)).where(Run.job_id == job_id)) or 0) + 1
            run = Run(
                job_id=job_id,
                attempt=attempt,
                state="running",
                command=body.command,
                key=body.key,
                node_id=node.id,
                resume_from=body.resume_from,
            )
            session.add(run)
            session.flush()
            svc.first_steps.expect(body.job, run.id)
            if failed is not None:  # the pending restart of the failed run is now done
                restarted(svc.incidents, session, failed, run)
                for action in session.scalars(
                    select(Action).where(Action.kind == "restart", Action.status == "pending", Action.job_id == job_id)
                ):
                    if action.params.get("run_id") == failed.id:
                        action.status, action.finished_at = "done", utcnow()
                        action.params = {**action.params, "new_run_id": run.id, "resume_from": body.resume_from}
            return RunStarted(id=run.id, job_id=job_id, attempt=attempt), True

    started, created = await run_in_threadpool(work)
    response.status_code = 201 if created else 200
    return started


def _changes(job: Job, body: RunStart) -> list[str]:
    """What of the job a later start asks to change (set once, by its first run)."""
    changed = []
    if body.scheduler != (job.scheduler or "local"):
        changed.append(f"scheduler ({job.scheduler})")
    if (body.external_id or None) != (job.external_id or None):
        changed.append(f"external_id ({job.external_id})")
    if body.policy is not None and body.policy != (job.policy or {}):
        changed.append("policy")
    return changed


@router.post("/runs/{run_id}/exit", response_model=RunEnded, status_code=202, openapi_extra=json_body(RunExit))
async def run_exit(run_id: int, request: Request, node: NodeDep, svc: ServicesDep) -> RunEnded:
    """Record the exit; a failed run opens an incident, diagnosed once the last logs have arrived and
    then decided on. A supervisor that decided by itself while the server was away sends its
    ``diagnosis`` and ``decision``, which are recorded as they were. A repeated exit changes nothing.
    A run that succeeds resolves its job's decided incidents."""
    body = await read_model(request, RunExit, svc.settings.server.max_body_bytes)
    saved_at = body.checkpoint.saved_at if body.checkpoint else None
    if saved_at is not None and not time.time() - TS_PAST_S <= saved_at <= time.time() + TS_FUTURE_S:
        # a time every reader (the post-mortem's lost work, the period report) can make a date of
        raise HTTPException(
            422, f"checkpoint.saved_at {saved_at!r} is outside the accepted window around the server's clock"
        )
    local = None
    if body.decision is not None or body.diagnosis is not None:
        try:
            local = (Diagnosis_.from_json(body.diagnosis or {}), Decision.from_json(body.decision or {}))
        except KeyError as exc:
            raise HTTPException(422, f"diagnosis/decision: missing field {exc}") from None
        except (TypeError, ValueError) as exc:
            raise HTTPException(422, f"diagnosis/decision: {exc}") from None
        # A node speaks only for itself: its supervisor's own decision cannot blame, or drain, another node.
        own_node(node, local[0].node, "report a diagnosis")
        for named in (local[1].node, *local[1].exclude_nodes):
            own_node(node, named, "decide")

    def work() -> RunEnded:
        with transaction(svc.sessions) as session:
            run = session.get(Run, run_id, with_for_update=True)  # one exit per run, across replicas
            if run is None:
                raise HTTPException(404, f"no run {run_id}")
            if run.node_id != node.id:
                raise HTTPException(403, f"run {run_id} was started by another node; node {node.name} cannot end it")
            if run.ended_at is not None:  # a replay: report what was recorded the first time
                incident = session.scalar(select(Incident.id).where(Incident.run_id == run_id))
                return RunEnded(run_id=run_id, state=run.state, incident_id=incident)
            failed = mark_exit(run, body.exit_code, body.signal)
            state, job_id = run.state, run.job_id
            if body.checkpoint is not None:  # the latest valid checkpoint, as the supervisor validated it
                session.execute(
                    insert_for(session, Checkpoint.__table__)
                    .values(
                        job_id=job_id,
                        run_id=run_id,
                        path=body.checkpoint.path,
                        step=body.checkpoint.step,
                        valid=True,
                        created_at=utcnow(),
                    )
                    .on_conflict_do_nothing()
                )
            # Already decided while it ran (a hang, its node silent): the supervisor stopped it for that.
            earlier = session.scalar(select(Incident.id).where(Incident.run_id == run_id))
            if earlier is not None:
                run.state = state = "failed"
                return RunEnded(run_id=run_id, state=state, incident_id=earlier)
        if not failed:
            resolve_job(svc.incidents, job_id, run_id)
            return RunEnded(run_id=run_id, state=state, incident_id=None)
        streams = [StreamExit(s, None, body.exit_code, body.signal) for s in body.streams]
        streams += [StreamExit(r.stream, r.rank, r.exit_code, r.signal) for r in body.ranks if r.stream]
        checkpoint = body.checkpoint.model_dump() if body.checkpoint else None
        incident_id = open_incident(
            svc.incidents,
            node_id=node.id,
            trigger="run_failed",
            run_id=run_id,
            streams=streams,
            checkpoint=checkpoint,
            result=local[0] if local else None,
            local=(local[1], body.restarted) if local else None,
        )
        return RunEnded(run_id=run_id, state=state, incident_id=incident_id)

    return await run_in_threadpool(work)


class DecisionOut(BaseModel):
    state: str = Field(description="pending (not decided yet), decided, or none (the run did not fail)")
    run_id: int
    incident_id: int | None = None
    decision: dict[str, Any] | None = None
    actor: str | None = None


@router.get("/runs/{run_id}/decision", response_model=DecisionOut)
async def run_decision(
    run_id: int, svc: ServicesDep, wait: Annotated[float, Query(ge=0, le=30, description="long-poll, seconds")] = 0
) -> DecisionOut:
    """The recovery decision about a failed run; with ``wait``, held until there is one (or the wait ends)."""
    deadline = time.monotonic() + wait

    def look() -> DecisionOut:
        with svc.sessions() as session:
            run = session.get(Run, run_id)
            if run is None:
                raise HTTPException(404, f"no run {run_id}")
            incident = session.scalar(select(Incident).where(Incident.run_id == run_id))
            if incident is None:
                return DecisionOut(state="none" if run.state == "succeeded" else "pending", run_id=run_id)
            action = session.scalar(
                select(Action).where(Action.incident_id == incident.id, Action.kind == "decision").order_by(Action.id)
            )
            if action is None:
                return DecisionOut(state="pending", run_id=run_id, incident_id=incident.id)
            return DecisionOut(
                state="decided", run_id=run_id, incident_id=incident.id, decision=action.params, actor=action.actor
            )

    out = await run_in_threadpool(look)
    while out.state == "pending" and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
        if run_id in svc.incidents.decided or time.monotonic() >= deadline:
            out = await run_in_threadpool(look)
    return out


class DiagnosisOut(BaseModel):
    reason: str
    category: str
    action: str
    confidence: float
    source: str
    node: str | None
    rank: int | None
    evidence: list[dict]
    explanation: str | None


class ActionOut(BaseModel):
    id: int
    kind: str = Field(description="decision, exclude_node, restart")
    actor: str = Field(description="who acted: server, or supervisor (when the server was away)")
    executor: str | None
    status: str
    params: dict[str, Any]
    detail: str | None
    created_at: datetime
    finished_at: datetime | None


class IncidentOut(BaseModel):
    id: int
    job_id: int | None
    run_id: int | None
    node: str | None
    trigger: str
    state: str
    opened_at: datetime
    diagnosis: DiagnosisOut | None
    actions: list[ActionOut]


def _incident_out(session: SessionDep, incident: Incident) -> IncidentOut:
    d = session.scalar(select(Diagnosis).where(Diagnosis.incident_id == incident.id).order_by(Diagnosis.id.desc()))
    diagnosis = (
        None
        if d is None
        else DiagnosisOut(
            reason=d.reason,
            category=d.category,
            action=d.action,
            confidence=d.confidence,
            source=d.source,
            node=d.node_name,
            rank=d.rank,
            evidence=d.evidence,
            explanation=d.explanation,
        )
    )
    actions = session.scalars(select(Action).where(Action.incident_id == incident.id).order_by(Action.id))
    node = session.get(Node, incident.node_id) if incident.node_id is not None else None
    return IncidentOut(
        id=incident.id,
        job_id=incident.job_id,
        run_id=incident.run_id,
        node=node.name if node else None,
        trigger=incident.trigger,
        state=incident.state,
        opened_at=incident.opened_at,
        diagnosis=diagnosis,
        actions=[
            ActionOut(
                id=a.id,
                kind=a.kind,
                actor=a.actor,
                executor=a.executor,
                status=a.status,
                params=a.params,
                detail=a.detail,
                created_at=a.created_at,
                finished_at=a.finished_at,
            )
            for a in actions
        ],
    )


@router.get("/incidents", response_model=list[IncidentOut])
def list_incidents(session: SessionDep) -> list[IncidentOut]:
    return [
        _incident_out(session, i) for i in session.scalars(select(Incident).order_by(Incident.id.desc()).limit(100))
    ]


@router.get("/incidents/{incident_id}", response_model=IncidentOut)
def get_incident(incident_id: int, session: SessionDep) -> IncidentOut:
    incident = session.get(Incident, incident_id)
    if incident is None:
        raise HTTPException(404, f"no incident {incident_id}")
    return _incident_out(session, incident)


def _at(ts: float | None) -> datetime:
    return datetime.fromtimestamp(ts, UTC) if ts is not None else utcnow()
