"""Runs (one attempt of a job) as a supervisor reports them, and the incidents their failures open."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, Field
from sqlalchemy import func, select
from starlette.concurrency import run_in_threadpool

from server.api.body import read_model
from server.api.deps import NodeDep, ServicesDep, SessionDep
from server.incidents.diagnose import StreamExit, mark_exit, open_incident
from server.store.db import transaction
from server.store.jobs import job_ids
from server.store.models import Diagnosis, Incident, Run

router = APIRouter(prefix="/api/v1", tags=["runs"])


class RunStart(BaseModel):
    job: str = Field(min_length=1, max_length=255)
    command: str | None = Field(default=None, max_length=10_000)


class RankExit(BaseModel):
    rank: int = Field(ge=0)
    exit_code: int | None = None
    signal: int | None = Field(default=None, ge=1, le=64)
    stream: str | None = Field(default=None, max_length=255, description="the rank's own log stream, if apart")


class RunExit(BaseModel):
    exit_code: int | None = None
    signal: int | None = Field(default=None, ge=1, le=64)
    streams: list[str] = Field(default_factory=list, max_length=1024, description="the run's log streams")
    ranks: list[RankExit] = Field(default_factory=list, max_length=100_000, description="how each rank ended")


class RunStarted(BaseModel):
    id: int
    job_id: int
    attempt: int


class RunEnded(BaseModel):
    run_id: int
    state: str
    incident_id: int | None


@router.post("/runs", response_model=RunStarted, status_code=201)
async def start_run(request: Request, node: NodeDep, svc: ServicesDep) -> RunStarted:
    body = await read_model(request, RunStart, svc.settings.max_body_bytes)

    def work() -> RunStarted:
        with transaction(svc.sessions) as session:
            job_id = job_ids(session, {body.job}, [])[body.job]
            attempt = (session.scalar(select(func.max(Run.attempt)).where(Run.job_id == job_id)) or 0) + 1
            run = Run(job_id=job_id, attempt=attempt, state="running", command=body.command)
            session.add(run)
            session.flush()
            return RunStarted(id=run.id, job_id=job_id, attempt=attempt)

    return await run_in_threadpool(work)


@router.post("/runs/{run_id}/exit", response_model=RunEnded, status_code=202)
async def run_exit(run_id: int, request: Request, node: NodeDep, svc: ServicesDep) -> RunEnded:
    """Record the exit; a failed run opens an incident, diagnosed once the last logs have arrived."""
    body = await read_model(request, RunExit, svc.settings.max_body_bytes)

    def work() -> RunEnded:
        with transaction(svc.sessions) as session:
            run = session.get(Run, run_id)
            if run is None:
                raise HTTPException(404, f"no run {run_id}")
            failed = mark_exit(run, body.exit_code, body.signal)
            state = run.state
        streams = [StreamExit(s, None, body.exit_code, body.signal) for s in body.streams]
        streams += [StreamExit(r.stream, r.rank, r.exit_code, r.signal) for r in body.ranks if r.stream]
        incident_id = (
            open_incident(svc, node_id=node.id, trigger="run_failed", run_id=run_id, streams=streams)
            if failed
            else None
        )
        return RunEnded(run_id=run_id, state=state, incident_id=incident_id)

    return await run_in_threadpool(work)


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


class IncidentOut(BaseModel):
    id: int
    job_id: int | None
    run_id: int | None
    trigger: str
    state: str
    diagnosis: DiagnosisOut | None


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
    return IncidentOut(
        id=incident.id,
        job_id=incident.job_id,
        run_id=incident.run_id,
        trigger=incident.trigger,
        state=incident.state,
        diagnosis=diagnosis,
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
