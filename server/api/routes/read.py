"""Read endpoints: nodes, GPUs with their latest values, jobs, runs, log lines and events."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import fields
from typing import Annotated, TypeVar

from fastapi import APIRouter, HTTPException, Query, Response
from sqlalchemy import Select, func, select

from gpuwatch.protocol import Api, GpuSample
from server.api.deps import ReaderDep, ServicesDep, SessionDep, own_node
from server.api.schemas import (
    CheckpointOut,
    EventOut,
    GpuOut,
    JobDetailOut,
    JobOut,
    JobUtilizationOut,
    LogLineOut,
    NodeOut,
    RunOut,
)
from server.ingest.decode import as_model
from server.store.models import Checkpoint, EventRow, Gpu, Job, JobRank, JobRollup, LogLineRow, Node, Run

router = APIRouter(prefix=Api.PREFIX, tags=["read"])
T = TypeVar("T")
TRUNCATED = "X-Gpuwatch-Truncated"
#: Bytes counted for a row besides its text: its other fields as JSON.
_ROW_BYTES = 120


@router.get("/nodes", response_model=list[NodeOut])
def list_nodes(session: SessionDep, svc: ServicesDep) -> list[NodeOut]:
    counts = dict(session.execute(select(Gpu.node_id, func.count()).group_by(Gpu.node_id)).tuples().all())
    seen = {n.name: n.last_seen for n in svc.telemetry.nodes()}
    now, timeout = time.time(), svc.settings.server.node_timeout_s
    return [
        NodeOut(
            name=n.name,
            hostname=n.hostname,
            collector=n.collector,
            agent_version=n.agent_version,
            driver_version=n.driver_version,
            registered_at=n.registered_at,
            last_seen_at=n.last_seen_at,
            up=seen.get(n.name) is not None and now - seen[n.name] <= timeout,  # type: ignore[operator]
            gpus=counts.get(n.id, 0),
            dropped=n.dropped or {},
        )
        for n in session.scalars(select(Node).order_by(Node.name))
    ]


@router.get("/gpus", response_model=list[GpuOut])
def list_gpus(svc: ServicesDep, node: str | None = None) -> list[GpuOut]:
    """Every known GPU with its latest sample (null until the first one arrives) and that sample's age."""
    now = time.time()
    return [
        GpuOut(
            node=g.node,
            index=g.info.index,
            uuid=g.info.uuid,
            model=g.info.name,
            memory_total_mib=g.info.memory_total_mib,
            sample=None if g.latest is None else as_model(GpuSample, g.latest),
            sample_age_s=None if g.received_at is None else now - g.received_at,
        )
        for g in svc.telemetry.gpus()
        if node is None or g.node == node
    ]


@router.get("/jobs", response_model=list[JobOut])
def list_jobs(
    session: SessionDep, name: str | None = None, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> list[Job]:
    q = select(Job).order_by(Job.id.desc()).limit(limit)
    if name is not None:
        q = q.where(Job.name == name)
    return list(session.scalars(q))


def get_job(job_id: int, session: SessionDep) -> Job:
    job = session.get(Job, job_id)
    if job is None:
        raise HTTPException(404, f"no job {job_id}")
    return job


@router.get("/jobs/{job_id}", response_model=JobDetailOut)
def job_detail(job_id: int, session: SessionDep, svc: ServicesDep) -> JobDetailOut:
    """The job, with its GPU-hours (and money) at risk now: GPUs x time since its last complete checkpoint."""
    job = get_job(job_id, session)
    out = JobDetailOut.model_validate(job)
    last = session.scalar(
        select(Checkpoint)
        .where(Checkpoint.job_id == job_id, Checkpoint.valid.is_(True))
        .order_by(Checkpoint.created_at.desc(), Checkpoint.id.desc())
    )
    if last is None:
        return out
    age = max(0.0, time.time() - last.created_at.timestamp())
    summary = svc.jobs.summary(job.name)
    ranks = session.scalar(select(func.count(func.distinct(JobRank.rank))).where(JobRank.job_id == job_id))
    gpus = max(summary.gpus if summary else 0, ranks or 0) or None
    hours = gpus * age / 3600 if gpus else None
    return out.model_copy(
        update={
            "last_checkpoint_path": last.path,
            "last_checkpoint_step": last.step,
            "last_checkpoint_at": last.created_at,
            "checkpoint_age_s": age,
            "gpus": gpus,
            "gpu_hours_at_risk": hours,
            "cost_at_risk": hours * svc.settings.server.gpu_hour_price if hours is not None else None,
            "currency": svc.settings.server.currency,
        }
    )


@router.get("/jobs/{job_id}/utilization", response_model=JobUtilizationOut)
def job_utilization(
    job_id: int,
    session: SessionDep,
    svc: ServicesDep,
    window_s: Annotated[float | None, Query(gt=0, le=86_400)] = None,
) -> JobUtilizationOut:
    """Utilization, step time, communication overhead and interconnect traffic of a job, over the
    recent window, per rank; and its GPU time over its whole life, from the per-minute rollups."""
    job = get_job(job_id, session)
    summary = svc.jobs.summary(job.name, window_s)
    if summary is None:
        raise HTTPException(404, f"job {job.name!r} has sent no steps or GPU samples since the server started")
    totals = session.execute(
        select(
            func.coalesce(func.sum(JobRollup.gpu_seconds), 0.0),
            func.coalesce(func.sum(JobRollup.idle_gpu_seconds), 0.0),
            func.coalesce(func.sum(JobRollup.energy_j), 0.0),
        ).where(JobRollup.job_id == job_id)
    ).one()
    return JobUtilizationOut(
        **{f.name: getattr(summary, f.name) for f in fields(summary)},
        id=job.id,
        stored_gpu_hours=totals[0] / 3600,
        stored_idle_gpu_hours=totals[1] / 3600,
        stored_energy_kwh=totals[2] / 3.6e6,
    )


@router.get("/jobs/{job_id}/runs", response_model=list[RunOut])
def list_runs(job_id: int, session: SessionDep) -> list[Run]:
    get_job(job_id, session)
    return list(session.scalars(select(Run).where(Run.job_id == job_id).order_by(Run.attempt)))


@router.get("/jobs/{job_id}/checkpoints", response_model=list[CheckpointOut])
def list_checkpoints(job_id: int, session: SessionDep) -> list[Checkpoint]:
    """The job's checkpoints that its supervisor found valid when a run ended, newest step first."""
    get_job(job_id, session)
    query = select(Checkpoint).where(Checkpoint.job_id == job_id).order_by(Checkpoint.step.desc(), Checkpoint.id.desc())
    return list(session.scalars(query))


@router.get("/runs/{run_id}", response_model=RunOut)
def get_run(run_id: int, session: SessionDep) -> Run:
    run = session.get(Run, run_id)
    if run is None:
        raise HTTPException(404, f"no run {run_id}")
    return run


def _node_id(session: SessionDep, name: str) -> int:
    node_id = session.scalar(select(Node.id).where(Node.name == name))
    if node_id is None:
        raise HTTPException(404, f"no node named {name!r}")
    return node_id


def _capped(
    session: SessionDep, q: Select[tuple[T]], size: Callable[[T], int], budget: int, response: Response
) -> list[T]:
    """The rows of ``q``, fetched a few hundred at a time, until their ``size`` passes ``budget`` bytes
    (`read_max_bytes`; at least one row): ``limit`` bounds rows, not bytes, and three reads of 10,000
    long lines took the server from 372 MB to 1.3 GB. A cut answer says so in its `TRUNCATED` header."""
    out: list[T] = []
    used = 0
    rows: Iterable[T] = session.scalars(q.execution_options(yield_per=256))
    for row in rows:
        used += size(row) + _ROW_BYTES
        if used > budget and out:
            response.headers[TRUNCATED] = "bytes"
            break
        out.append(row)
    return out


def _readable_node(reader: ReaderDep, node: str | None, what: str) -> str | None:
    """The node whose rows ``reader`` may read: with `read_auth` on, a node's token reads its own only."""
    if reader is None or reader.node is None:  # read_auth off, or an admin
        return node
    own_node(reader.node, node, what)
    return reader.node.name


@router.get("/logs", response_model=list[LogLineOut])
def list_logs(
    session: SessionDep,
    svc: ServicesDep,
    reader: ReaderDep,
    response: Response,
    node: str,
    stream: str | None = None,
    after_seq: Annotated[int, Query(ge=-1)] = -1,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> list[LogLineRow]:
    """A node's log lines in sequence order, at most `read_max_bytes` of text; page with ``after_seq``
    (per stream). With `read_auth` on, a node's token reads only its own node's lines."""
    node = _readable_node(reader, node, "read the logs") or node
    q = select(LogLineRow).where(LogLineRow.node_id == _node_id(session, node), LogLineRow.seq > after_seq)
    if stream is not None:
        q = q.where(LogLineRow.stream == stream)
    q = q.order_by(LogLineRow.stream, LogLineRow.seq).limit(limit)
    return _capped(session, q, lambda r: len(r.text), svc.settings.server.read_max_bytes, response)


@router.get("/events", response_model=list[EventOut])
def list_events(
    session: SessionDep,
    svc: ServicesDep,
    reader: ReaderDep,
    response: Response,
    node: str | None = None,
    kind: str | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> list[EventRow]:
    """Events, newest first, at most `read_max_bytes` of message and data. With `read_auth` on, a node's
    token reads only its own node's events."""
    node = _readable_node(reader, node, "read the events")
    q = select(EventRow)
    if node is not None:
        q = q.where(EventRow.node_id == _node_id(session, node))
    if kind is not None:
        q = q.where(EventRow.kind == kind)
    q = q.order_by(EventRow.ts.desc()).limit(limit)
    size = lambda r: len(r.message) + len(json.dumps(r.data))  # noqa: E731
    return _capped(session, q, size, svc.settings.server.read_max_bytes, response)
