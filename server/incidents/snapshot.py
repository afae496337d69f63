"""What the server keeps of the moment an incident opened (for the post-mortem's plots and lost work),
and what the failure cost.

The snapshot is the node's recent GPU samples from the in-memory ring buffer (the last
`SNAPSHOT_S` seconds, or `report_before_s` if longer, which Prometheus may not have at full
resolution), extended with those up to the restarted run's first step when it steps (`extend`).
The cost, written when the failure is decided, is the work lost since the last valid checkpoint:
wall time from the checkpoint (or the run's start, when the checkpoint is older) to the exit, times
the job's GPUs; the downtime (exit → the restarted run's start) is added when the restart registers.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpuwatch.config import Settings
from server.incidents.context import IncidentContext
from server.store.jobs import jobs_on_node
from server.store.models import Incident, JobRank, Node, Run
from server.telemetry.latest import Point, Telemetry

SNAPSHOT_S = 300.0


def take(
    ctx: IncidentContext, node: str | None, now: float, session: Session, node_id: int, job_id: int | None = None
) -> dict[str, Any]:
    """``{"gpus": {index: [[ts, util, fb_used_mib, power_w, temp_c, xid_last], ...]}, "jobs": [{"job",
    "run"}, ...], "job_gpus": [index, ...], "at": now}``: the node's recent samples, the jobs at work on
    it (`jobs_on_node`), which a silent node's incident names as its lost work, and the node's GPUs the
    job's ranks were attributed to (kept now: a restart elsewhere moves the job's ranks)."""
    gpus: dict[str, list[list[Any]]] = {}
    keep = max(SNAPSHOT_S, ctx.settings.server.report_before_s)  # the ring holds `ring_size` s at most
    if node is not None:
        for state in ctx.telemetry.gpus(node):
            recent = [s for s in ctx.telemetry.recent(node, state.info.index) if s.ts >= now - keep]
            gpus[str(state.info.index)] = _rows(recent)
    return {"gpus": gpus, "jobs": jobs_on_node(session, node_id), "job_gpus": job_gpus_on(session, job_id, node_id),
            "at": now}  # fmt: skip


def _rows(points: list[Point]) -> list[list[Any]]:
    return [[p.ts, p.util_gpu, p.fb_used_mib, p.power_w, p.temp_c, p.xid_last] for p in points]


def job_gpus_on(session: Session, job_id: int | None, node_id: int | None) -> list[int]:
    """The GPU indices of ``node_id`` the job's ranks were attributed to (by LOCAL_RANK or NVML)."""
    if job_id is None or node_id is None:
        return []
    rows = session.scalars(
        select(JobRank.gpu_index).where(
            JobRank.job_id == job_id, JobRank.node_id == node_id, JobRank.gpu_index.is_not(None)
        )
    )
    return sorted({int(g) for g in rows})


def extend(session: Session, telemetry: Telemetry, new: Run) -> None:
    """``new`` (a restarted run) took its first step: add the samples since the failed run's incident
    opened to that incident's snapshot, so its post-mortem plots the failure through the recovery."""
    failed = session.scalar(select(Run.id).where(Run.job_id == new.job_id, Run.attempt == new.attempt - 1))
    if failed is None:
        return
    incident = session.scalar(select(Incident).where(Incident.run_id == failed).order_by(Incident.id))
    node = session.get(Node, incident.node_id) if incident is not None and incident.node_id is not None else None
    if incident is None or node is None or not (incident.snapshot or {}).get("gpus"):
        return
    gpus = dict(incident.snapshot["gpus"])
    for index, rows in gpus.items():
        last = max((r[0] for r in rows), default=float("-inf"))
        gpus[index] = rows + _rows([p for p in telemetry.recent(node.name, int(index)) if p.ts > last])
    incident.snapshot = {**incident.snapshot, "gpus": gpus, "extended_at": time.time()}  # a new dict: JSON change


def last_steps(ctx: IncidentContext, job: str) -> list[int]:
    """The last step each rank of the job reported (from the job tracker, at decision time: after the
    settle wait, so the steps a dying job's client flushed at exit are in)."""
    summary = ctx.jobs.summary(job)
    return [r.last_step for r in summary.ranks if r.rank >= 0 and r.last_step >= 0] if summary else []


def job_gpus(session: Session, job_id: int, steps: list[int]) -> int:
    """How many GPUs the job held: its ranks the agents saw (or that reported steps), else 1."""
    ranks = session.scalar(select(func.count(func.distinct(JobRank.rank))).where(JobRank.job_id == job_id)) or 0
    return max(1, int(ranks), len(steps))


def lost_work(
    session: Session, settings: Settings, run: Run, steps: list[int], checkpoint: dict[str, Any] | None
) -> dict[str, Any]:
    """The cost of a failed run, before any downtime (see `with_downtime`). ``steps``: its ranks' last
    reported steps (numbered from 0; a checkpoint of step N holds the work of steps 0..N-1)."""
    assert run.ended_at is not None
    start = run.started_at
    saved_at = (checkpoint or {}).get("saved_at")
    if saved_at is not None:
        start = max(start, datetime.fromtimestamp(float(saved_at), start.tzinfo))
    wall_s = max(0.0, (run.ended_at - start).total_seconds())
    lost_steps = None
    if steps and (checkpoint or {}).get("step") is not None:
        lost_steps = max(0, max(steps) + 1 - int(checkpoint["step"]))  # type: ignore[index]
    gpus = job_gpus(session, run.job_id, steps)
    return _priced(settings, {"gpus": gpus, "steps": lost_steps, "wall_s": wall_s, "downtime_s": None})


def with_downtime(settings: Settings, cost: dict[str, Any], downtime_s: float) -> dict[str, Any]:
    return _priced(settings, {**cost, "downtime_s": max(0.0, downtime_s)})


def _priced(settings: Settings, cost: dict[str, Any]) -> dict[str, Any]:
    hours = cost["gpus"] * (cost["wall_s"] + (cost.get("downtime_s") or 0.0)) / 3600
    return {
        **cost,
        "gpu_hours": hours,
        "cost": hours * settings.server.gpu_hour_price,
        "currency": settings.server.currency,
    }
