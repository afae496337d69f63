"""Runs (one attempt of a job) as a supervisor reports them, and the incidents their failures open.

The bodies are the run protocol's models (`gpuwatch.protocol`: `RunStart`, `RunExit`, `DecisionAnswer`),
the ones the supervisor sends. Times a supervisor recorded on its node (a replay from its outbox) are
moved onto the server's clock by the request's ``clock_offset_s`` and kept: a run that started,
ended, was decided about and restarted during an outage is recorded with those times, not with the
time the record arrived. The offset is a measurement, off by its error; what causality bounds stays in
bounds (`_heard`, and a restart done no earlier than its decision: `server.incidents.recover.restart_done`)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request, Response
from pydantic import BaseModel, Field
from sqlalchemy import func, select
from starlette.concurrency import run_in_threadpool

from gpuwatch.diagnosis.model import Diagnosis as Diagnosis_
from gpuwatch.protocol import (
    DECISION_WAIT_MAX_S,
    TS_FUTURE_S,
    TS_PAST_S,
    Api,
    DecisionAnswer,
    RunEnded,
    RunExit,
    RunStart,
    RunStarted,
    on_server_clock,
)
from gpuwatch.recovery import Decision
from gpuwatch.recovery.settings import policy_config
from server.api.body import json_body, read_model
from server.api.deps import NodeDep, ServicesDep, SessionDep, own_node
from server.api.schemas import LabelOut
from server.executors.base import JobTarget
from server.executors.registry import executor
from server.incidents.labels import latest_label
from server.incidents.pipeline import StreamExit, mark_exit, open_incident
from server.incidents.recover import resolve_job, restarted
from server.incidents.replay import SupervisorDecision, attach
from server.store.db import lock, transaction
from server.store.jobs import job_ids, job_members
from server.store.models import Action, Checkpoint, Diagnosis, Incident, Job, Node, Run, StackRequest, utcnow
from server.store.upsert import insert_for

router = APIRouter(prefix=Api.PREFIX, tags=["runs"])


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
    started_at = _heard(body.started_at, body.clock_offset_s, time.time(), "started_at")
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
                started_at=_at(started_at),
            )
            session.add(run)
            session.flush()
            svc.first_steps.expect(body.job, run.id)
            if failed is not None:  # the pending restart of the failed run is now done
                restarted(svc.incidents, session, failed, run)
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
    then decided on. A supervisor that decided by itself (the server away, or it was told to stop) sends
    its decision as ``local``, recorded as it was taken (`server.incidents.replay`), also when the exit
    is a replay of one the server has: the decision is recorded once. Otherwise a repeated exit changes
    nothing. A run that succeeds resolves its job's decided incidents."""
    body = await read_model(request, RunExit, svc.settings.server.max_body_bytes)
    offset, now = body.clock_offset_s, time.time()
    for name, ts in body.times():  # a time every reader (lost work, the period report) can make a date of
        _when(on_server_clock(ts, offset), name)
    ended_at = _heard(body.ended_at, offset, now, "ended_at")
    saved_at = _heard(body.checkpoint.saved_at, offset, now, "checkpoint.saved_at") if body.checkpoint else None
    local = None
    if body.local is not None:
        try:
            diagnosis = Diagnosis_.from_json(body.local.diagnosis)
            decision = Decision.from_json(body.local.decision)
        except KeyError as exc:
            raise HTTPException(422, f"local: missing field {exc}") from None
        except (TypeError, ValueError) as exc:
            raise HTTPException(422, f"local: {exc}") from None
        # A node speaks only for itself: its supervisor's own decision cannot blame, or drain, another node.
        own_node(node, diagnosis.node, "report a diagnosis")
        for named in (decision.node, *decision.exclude_nodes):
            own_node(node, named, "decide")
        decided_at = _heard(body.local.decided_at, offset, now, "local.decided_at")
        local = SupervisorDecision(
            diagnosis,
            replace(decision, at=time.time() if decided_at is None else decided_at),
            _heard(body.local.restarted_at, offset, now, "local.restarted_at"),
        )
    streams = [StreamExit(s, None, body.exit_code, body.signal) for s in body.streams]
    streams += [StreamExit(r.stream, r.rank, r.exit_code, r.signal) for r in body.ranks if r.stream]
    checkpoint = body.checkpoint.model_dump() if body.checkpoint else None

    def work() -> RunEnded:
        replayed = None
        with transaction(svc.sessions) as session:
            run = session.get(Run, run_id, with_for_update=True)  # one exit per run, across replicas
            if run is None:
                raise HTTPException(404, f"no run {run_id}")
            if run.node_id != node.id:
                raise HTTPException(403, f"run {run_id} was started by another node; node {node.name} cannot end it")
            if run.ended_at is not None:  # a replay: report what was recorded the first time
                incident = session.scalar(select(Incident.id).where(Incident.run_id == run_id))
                replayed = RunEnded(run_id=run_id, state=run.state, incident_id=incident)
            else:
                failed = mark_exit(run, body.exit_code, body.signal)
                if ended_at is not None:  # when it really ended, not when the server heard of it
                    run.ended_at = _at(ended_at)
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
                            created_at=datetime.fromtimestamp(saved_at, UTC) if saved_at else utcnow(),
                        )
                        .on_conflict_do_nothing()
                    )
                    job = session.get(Job, job_id)
                    if job is not None:  # its age at /metrics, for jobs that report saves no other way
                        svc.jobs.note_checkpoint(job.name, body.checkpoint.step, saved_at or time.time())
                # Already decided while it ran (a hang, its node silent): the supervisor stopped it for that.
                earlier = session.scalar(select(Incident.id).where(Incident.run_id == run_id))
                if earlier is not None:
                    run.state = state = "failed"
                    return RunEnded(run_id=run_id, state=state, incident_id=earlier)
        if replayed is not None:
            if local is None or replayed.state != "failed":
                return replayed
            # ... with the supervisor's own decision, which the server may never have had (it died before
            # opening the incident, or before deciding): recorded once, with its own times
            incident_id = attach(
                svc.incidents, run_id=run_id, node_id=node.id, record=local, streams=streams, checkpoint=checkpoint
            )
            return replayed.model_copy(update={"incident_id": incident_id})
        if not failed:
            resolve_job(svc.incidents, job_id, run_id)
            return RunEnded(run_id=run_id, state=state, incident_id=None)
        if local is not None:
            incident_id = attach(
                svc.incidents, run_id=run_id, node_id=node.id, record=local, streams=streams, checkpoint=checkpoint
            )
        else:
            incident_id = open_incident(
                svc.incidents,
                node_id=node.id,
                trigger="run_failed",
                run_id=run_id,
                streams=streams,
                checkpoint=checkpoint,
                lines=body.lines,
            )
        return RunEnded(run_id=run_id, state=state, incident_id=incident_id)

    return await run_in_threadpool(work)


@router.get("/runs/{run_id}/decision", response_model=DecisionAnswer)
async def run_decision(
    run_id: int,
    svc: ServicesDep,
    wait: Annotated[float, Query(ge=0, le=DECISION_WAIT_MAX_S, description="long-poll, seconds")] = 0,
) -> DecisionAnswer:
    """The recovery decision about a failed run; with ``wait``, held until there is one (or the wait ends)."""
    deadline = time.monotonic() + wait

    def look() -> DecisionAnswer:
        with svc.sessions() as session:
            run = session.get(Run, run_id)
            if run is None:
                raise HTTPException(404, f"no run {run_id}")
            incident = session.scalar(select(Incident).where(Incident.run_id == run_id))
            if incident is None:
                return DecisionAnswer(state="none" if run.state == "succeeded" else "pending", run_id=run_id)
            action = session.scalar(
                select(Action).where(Action.incident_id == incident.id, Action.kind == "decision").order_by(Action.id)
            )
            if action is None or incident.state == "decided":  # decided, and not yet carried out: not yet out
                return DecisionAnswer(state="pending", run_id=run_id, incident_id=incident.id)
            return DecisionAnswer(
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
    label: LabelOut | None = Field(description="an admin's verdict on the diagnosis (the latest), if any")
    actions: list[ActionOut]
    stack_request: int | None = Field(
        default=None,
        description="a hang's capture of its ranks' stacks: GET /api/v1/stacks/{id} (docs/jobs.md)",
    )


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
        label=LabelOut.of(labelled) if (labelled := latest_label(session, incident.id)) else None,
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
        stack_request=session.scalar(
            select(StackRequest.id).where(StackRequest.incident_id == incident.id).order_by(StackRequest.id).limit(1)
        ),
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


def _heard(ts: float | None, offset_s: float | None, now: float, name: str) -> float | None:
    """A node's time of something it reports, on the server's clock (422 outside the window a reader can date,
    `_when`), and no later than ``now``, when the server heard of it: the measured offset is off by its error (a
    few milliseconds on one loaded host), and a run cannot have started or ended after the server was told it had."""
    moved = _when(on_server_clock(ts, offset_s), name)
    return None if moved is None else min(moved, now)


def _at(ts: float | None) -> datetime:
    return datetime.fromtimestamp(ts, UTC) if ts is not None else utcnow()


def _when(ts: float | None, name: str) -> float | None:
    """``ts`` (server's clock) if a reader can make a date of it: 422 outside the window around now."""
    now = time.time()
    if ts is not None and not now - TS_PAST_S <= ts <= now + TS_FUTURE_S:
        raise HTTPException(422, f"{name} {ts!r} is outside the accepted window around the server's clock")
    return ts
