"""Gathering an incident's post-mortem from the database: what happened, why, what it cost, what was done.

Everything comes from rows the incident path already wrote: the incident (with the snapshot of the
node's GPUs and the job's steps taken when it opened, and the cost written when it was decided), its
run and the run that restarted it, the diagnosis with timed evidence, the audited actions, the job's
checkpoints and its earlier failures (for the MTBF behind the checkpoint-interval advice).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpuwatch.config import Settings
from gpuwatch.protocol import Api
from gpuwatch.taxonomy import REASONS
from server.reports.document import (
    EvidenceLine,
    GpuPoint,
    GpuSeries,
    LostWork,
    PostMortem,
    TimelineEntry,
)
from server.store.models import Action, Diagnosis, EventRow, Incident, Job, Node, Run

#: Advice per reason, beyond the checkpoint interval (which every restartable failure gets).
ADVICE: dict[str, str] = {
    "gpu_hardware": "Keep {node} drained and run the vendor's diagnostics (`dcgmi diag -r 3`); a GPU that "
    "repeats a fatal Xid or has row-remap failures needs an RMA.",
    "nvlink_error": "Keep {node} drained and check its NVLink error counters (`nvidia-smi nvlink -e`) and cabling.",
    "node_failure": "Find out why {node} went away (power, kernel panic, network) before returning it to service.",
    "nccl_timeout": "Look for the rank that stopped first (its node's Xids, OOM-killer, straggler events); raise "
    "the NCCL timeout only if the collective is legitimately slow.",
    "nccl_error": "Check the InfiniBand/RoCE counters of the nodes involved and run `NCCL_DEBUG=INFO` once.",
    "network_error": "Check the NIC and switch counters on both ends; exclude a node only with node-local evidence.",
    "storage_error": "Check the filesystem or object store the job writes to (space, quotas, stale handles).",
    "cuda_error": "If the same CUDA error repeats, rerun with `CUDA_LAUNCH_BLOCKING=1` to find the kernel.",
    "preempted": "Preemptions are expected: save on SIGTERM (`gpuwatch.client.install_preemption_handler`).",
    "gpu_oom": "Lower the micro-batch size, enable activation checkpointing, or set "
    "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` against fragmentation.",
    "host_oom": "Fewer DataLoader workers or smaller prefetch; check host memory per rank.",
    "dataloader_error": "Check the dataset files and the DataLoader worker's traceback.",
    "checkpoint_load_error": "The checkpoint does not match the model: check the model config and the checkpoint path.",
    "loss_divergence": "Lower the learning rate or restart from an earlier checkpoint; check for bad data.",
    "hang": "Find which rank stopped stepping (the hang event names it) and what it was waiting for.",
}
SCRIPT_ADVICE = "A script error: fix the script; gpuwatch does not restart it (it would fail the same way)."
MAX_EVIDENCE = 50


def build(session: Session, incident_id: int, settings: Settings) -> PostMortem | None:
    """The post-mortem of an incident, or None when there is no such incident."""
    incident = session.get(Incident, incident_id)
    if incident is None:
        return None
    job = session.get(Job, incident.job_id) if incident.job_id is not None else None
    run = session.get(Run, incident.run_id) if incident.run_id is not None else None
    node = session.get(Node, incident.node_id) if incident.node_id is not None else None
    diagnosis = session.scalar(
        select(Diagnosis).where(Diagnosis.incident_id == incident.id).order_by(Diagnosis.id.desc())
    )
    actions = list(session.scalars(select(Action).where(Action.incident_id == incident.id).order_by(Action.id)))
    decision = next((a for a in actions if a.kind == "decision"), None)
    params = decision.params if decision is not None else {}
    after = _next_run(session, run)
    node_name = (diagnosis.node_name if diagnosis else None) or (node.name if node else None)
    snapshot = incident.snapshot or {}
    public = settings.server.public_url or f"http://{settings.server.host}:{settings.server.port}"
    return PostMortem(
        incident_id=incident.id,
        trigger=incident.trigger,
        state=incident.state,
        job=job.name if job else None,
        attempt=run.attempt if run else None,
        node=node_name,
        gpus=tuple(sorted(int(g) for g in (snapshot.get("gpus") or {}))),
        reason=diagnosis.reason if diagnosis else None,
        category=diagnosis.category if diagnosis else None,
        action=params.get("outcome") or (diagnosis.action if diagnosis else None),
        outcome=_outcome(params, after, incident),
        confidence=diagnosis.confidence if diagnosis else None,
        source=diagnosis.source if diagnosis else None,
        explanation=(diagnosis.explanation or "") if diagnosis else "",
        llm_explanation=bool(diagnosis and diagnosis.source == "llm"),
        why=params.get("why", ""),
        evidence=_evidence(diagnosis),
        evidence_total=len(diagnosis.evidence) if diagnosis else 0,
        timeline=_timeline(incident, run, diagnosis, actions, after, params),
        lost=_lost(session, incident, run, after, job),
        plots=_plots(session, incident, node, snapshot),
        recommendations=_advice(session, diagnosis, job, run, node_name),
        logs_url=f"{public.rstrip('/')}{Api.LOGS}?node={node.name if node else ''}",
        jobs_on_node=_jobs_on_node(incident, snapshot),
    )


def _next_run(session: Session, run: Run | None) -> Run | None:
    if run is None:
        return None
    return session.scalar(select(Run).where(Run.job_id == run.job_id, Run.attempt == run.attempt + 1).order_by(Run.id))


def _outcome(params: dict[str, Any], after: Run | None, incident: Incident) -> str:
    if not params:
        return "no recovery decision (a node-level incident)" if incident.run_id is None else "not decided yet"
    if not params.get("restart"):
        return f"not restarted: {params.get('why', '')}".rstrip(": ")
    if after is None:
        return "restart ordered; the job has not started again yet"
    state = {"succeeded": "which succeeded", "failed": "which failed too", "running": "which is running"}
    return f"restarted as attempt {after.attempt}, {state.get(after.state, after.state)}"


def _evidence(diagnosis: Diagnosis | None) -> tuple[EvidenceLine, ...]:
    if diagnosis is None:
        return ()
    return tuple(
        EvidenceLine(file=e["file"], line=int(e["line"]), text=e["text"], rank=diagnosis.rank, node=diagnosis.node_name)
        for e in diagnosis.evidence[:MAX_EVIDENCE]
    )


def _timeline(
    incident: Incident,
    run: Run | None,
    diagnosis: Diagnosis | None,
    actions: list[Action],
    after: Run | None,
    params: dict[str, Any],
) -> tuple[TimelineEntry, ...]:
    entries: list[TimelineEntry] = []
    if run is not None:
        entries.append(TimelineEntry(run.started_at, "run started", f"attempt {run.attempt}"))
        checkpoint = params.get("checkpoint") or {}
        if checkpoint.get("saved_at"):
            at = datetime.fromtimestamp(float(checkpoint["saved_at"]), UTC)
            entries.append(
                TimelineEntry(at, "last valid checkpoint", f"step {checkpoint.get('step')}: {checkpoint.get('path')}")
            )
    times = [e["ts"] for e in (diagnosis.evidence if diagnosis else []) if e.get("ts")]
    if times:
        first = min((e for e in diagnosis.evidence if e.get("ts")), key=lambda e: e["ts"])  # type: ignore[union-attr]
        entries.append(
            TimelineEntry(datetime.fromtimestamp(first["ts"], UTC), "first error", f"{first['file']}:{first['line']}")
        )
    if run is not None and run.ended_at is not None:
        status = f"signal {run.signal}" if run.signal else f"exit code {run.exit_code}"
        entries.append(TimelineEntry(run.ended_at, "exit", status))
    entries.append(TimelineEntry(incident.opened_at, "incident opened", incident.trigger.replace("_", " ")))
    if diagnosis is not None:
        entries.append(TimelineEntry(diagnosis.created_at, "diagnosed", f"{diagnosis.reason} ({diagnosis.source})"))
    for a in actions:
        if a.kind == "decision":
            entries.append(TimelineEntry(a.created_at, "decision", f"{a.params.get('outcome')} by {a.actor}"))
        elif a.kind == "exclude_node":
            entries.append(TimelineEntry(a.finished_at or a.created_at, "node excluded", str(a.params.get("node"))))
    if after is not None:
        entries.append(TimelineEntry(after.started_at, "restarted", f"attempt {after.attempt}"))
        if after.first_step_at is not None:
            entries.append(TimelineEntry(after.first_step_at, "first step after resume", after.resume_from or ""))
    if incident.closed_at is not None:
        entries.append(TimelineEntry(incident.closed_at, "resolved", ""))
    return tuple(sorted(entries, key=lambda e: e.at))


def _jobs_on_node(incident: Incident, snapshot: dict[str, Any]) -> tuple[str, ...]:
    """A node's incident (no run of its own): the jobs its snapshot found at work on the node."""
    if incident.run_id is not None:
        return ()
    return tuple(f"{entry['job']} (run {entry['run']})" for entry in snapshot.get("jobs") or [])


def _lost(session: Session, incident: Incident, run: Run | None, after: Run | None, job: Job | None) -> LostWork | None:
    cost = incident.cost
    if cost is None or run is None or run.ended_at is None:
        return None
    recovered_at = (after.first_step_at or after.started_at) if after is not None else None
    restarts = 0
    if job is not None:
        restarts = len(
            list(
                session.scalars(
                    select(Action.id).where(
                        Action.job_id == job.id, Action.kind == "restart", Action.incident_id <= incident.id
                    )
                )
            )
        )
    return LostWork(
        steps=cost.get("steps"),
        wall_s=float(cost["wall_s"]),
        gpus=int(cost["gpus"]),
        gpu_hours=float(cost["gpu_hours"]),
        cost=float(cost["cost"]),
        currency=str(cost["currency"]),
        downtime_s=cost.get("downtime_s"),
        time_to_recover_s=(recovered_at - run.ended_at).total_seconds() if recovered_at else None,
        restarts_so_far=restarts,
    )


def _plots(session: Session, incident: Incident, node: Node | None, snapshot: dict[str, Any]) -> tuple[GpuSeries, ...]:
    if node is None or not snapshot.get("gpus"):
        return ()
    points = {int(g): rows for g, rows in snapshot["gpus"].items()}
    start = min((r[0] for rows in points.values() for r in rows), default=None)
    xids: dict[int, list[tuple[float, int]]] = {}
    if start is not None:
        for e in session.scalars(
            select(EventRow).where(
                EventRow.node_id == node.id,
                EventRow.kind == "xid",
                EventRow.ts >= datetime.fromtimestamp(start, UTC),
            )
        ):
            if e.gpu_index is not None and e.data.get("xid"):
                xids.setdefault(e.gpu_index, []).append((e.ts.timestamp(), int(e.data["xid"])))
    return tuple(
        GpuSeries(
            node=node.name,
            gpu=gpu,
            points=tuple(GpuPoint(ts=r[0], util=r[1], fb_used_mib=r[2], power_w=r[3], temp_c=r[4]) for r in rows),
            xids=tuple(sorted(xids.get(gpu, []))),
        )
        for gpu, rows in sorted(points.items())
    )


def _advice(
    session: Session, diagnosis: Diagnosis | None, job: Job | None, run: Run | None, node: str | None
) -> tuple[str, ...]:
    if diagnosis is None:
        return ()
    out = []
    if REASONS[diagnosis.reason].category == "script":
        out.append(SCRIPT_ADVICE)
    elif diagnosis.reason in ADVICE:
        out.append(ADVICE[diagnosis.reason].format(node=node or "the node"))
    if job is not None and REASONS[diagnosis.reason].action != "notify":
        interval = _checkpoint_advice(session, job)
        if interval:
            out.append(interval)
    return tuple(out)


def _checkpoint_advice(session: Session, job: Job) -> str | None:
    """Young/Daly: the checkpoint interval that minimises lost work is about sqrt(2 * C * MTBF) for a
    checkpoint that takes C seconds, given the job's observed mean time between failures."""
    runs = list(session.scalars(select(Run).where(Run.job_id == job.id, Run.ended_at.is_not(None))))
    failures = sum(1 for r in runs if r.state == "failed")
    if not failures:
        return None
    mtbf = sum((r.ended_at - r.started_at).total_seconds() for r in runs if r.ended_at) / failures  # type: ignore[operator]
    options = ", ".join(f"{_minutes(math.sqrt(2 * c * mtbf))} for a {c} s save" for c in (10, 60, 300))
    return (
        f"Observed mean time between failures of this job: {_minutes(mtbf)}. Young/Daly's optimal checkpoint "
        f"interval sqrt(2 * save time * MTBF) is then {options}."
    )


def _minutes(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
