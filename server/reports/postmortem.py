"""Gathering an incident's post-mortem from the database: what happened, why, what it cost, what was done.

Everything comes from rows the incident path already wrote: the incident (with the snapshot of the
node's GPUs and the job's steps taken when it opened, and the cost written when it was decided), its
run and the run that restarted it, the diagnosis with timed evidence, the audited actions, the job's
checkpoints and its earlier failures (for the MTBF behind the checkpoint-interval advice).
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpuwatch.config import Settings
from gpuwatch.protocol import Api
from gpuwatch.taxonomy import REASONS
from server.incidents.snapshot import job_gpus_on
from server.reports import markdown, stack_groups
from server.reports.document import (
    EvidenceLine,
    GpuPoint,
    GpuSeries,
    LostWork,
    PostMortem,
    TimelineEntry,
)
from server.store.models import Action, Diagnosis, EventRow, Exclusion, Gpu, Incident, Job, Node, Run

#: Advice per reason, beyond the checkpoint interval (which every restartable failure gets), in Markdown:
#: commands are code spans, and the node's name is escaped (`markdown.escape`) before it goes in.
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
    "hang": "Look at the suspect rank's innermost frames (Stack groups): it never entered the collective the "
    "others wait in. Without a suspect, enable PyTorch's NCCL flight recorder for the job (docs/jobs.md) to "
    "see which collective each rank last entered.",
}
SCRIPT_ADVICE = "A script error: fix the script; gpuwatch does not restart it (it would fail the same way)."
MAX_EVIDENCE = 50


def build(session: Session, incident_id: int, settings: Settings, all_gpus: bool = False) -> PostMortem | None:
    """The post-mortem of an incident, or None when there is no such incident. Its plots show the job's
    GPUs (a node-level incident's: the node's), or every GPU of the node with ``all_gpus``."""
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
    job_gpus = _job_gpus(session, incident, node, snapshot)
    window, window_text = _window(incident, run, after, settings)
    plots = tuple(replace(p, marks=_marks(after)) for p in _plots(session, incident, node, snapshot, window))
    shown = plots if all_gpus or not job_gpus else tuple(p for p in plots if p.gpu in job_gpus)
    window, window_text, shown = _fit(window, window_text, shown, _failed_at(incident, run))
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
        why=params.get("why", "") or _node_why(session, incident, diagnosis, node_name),
        evidence=_evidence(diagnosis),
        evidence_total=len(diagnosis.evidence) if diagnosis else 0,
        timeline=_timeline(incident, run, diagnosis, actions, after, params),
        lost=_lost(session, incident, run, after, job),
        plots=shown,
        recommendations=_advice(session, diagnosis, job, run, node_name),
        logs_url=f"{public.rstrip('/')}{Api.LOGS}?node={node.name if node else ''}",
        jobs_on_node=_jobs_on_node(incident, snapshot),
        job_gpus=job_gpus,
        plotted=_plotted(incident, job_gpus, shown, plots, all_gpus),
        window=window,
        window_text=window_text,
        stack_groups=stack_groups.gather(session, incident.id),
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


def _job_gpus(session: Session, incident: Incident, node: Node | None, snapshot: dict[str, Any]) -> tuple[int, ...]:
    """The node's GPUs the failed run's ranks were attributed to: kept in the snapshot when the incident
    opened (older snapshots: the job's ranks now). A node-level incident (no run) has none."""
    if incident.run_id is None or node is None:
        return ()
    if "job_gpus" in snapshot:
        return tuple(sorted(int(g) for g in snapshot["job_gpus"]))
    return tuple(job_gpus_on(session, incident.job_id, node.id))


def _window(
    incident: Incident, run: Run | None, after: Run | None, settings: Settings
) -> tuple[tuple[datetime, datetime], str]:
    """The plots' span: `report_before_s` before the failure to `report_after_s` after the restarted
    run's first step (else its start, else the failure), and that in words."""
    before, margin = settings.server.report_before_s, settings.server.report_after_s
    failed = _failed_at(incident, run)
    start = failed - timedelta(seconds=before)
    if after is not None and after.first_step_at is not None:
        anchor, what = after.first_step_at, f"the restarted run's first step (attempt {after.attempt})"
    elif after is not None:
        anchor, what = after.started_at, f"the restarted run's start (attempt {after.attempt}; no step reported)"
    else:
        anchor, what = failed, "the failure (not restarted)"
    end = max(anchor, failed) + timedelta(seconds=margin)
    return (start, end), f"from {_minutes(before)} before the failure to {_minutes(margin)} after {what}"


def _failed_at(incident: Incident, run: Run | None) -> datetime:
    """The failure: the run's exit, else (a hang, a node-level incident) the incident's opening."""
    return run.ended_at if run is not None and run.ended_at is not None else incident.opened_at


def _marks(after: Run | None) -> tuple[tuple[float, str], ...]:
    """What the plots mark of the recovery: the restarted run's start and its first step."""
    if after is None:
        return ()
    marks = [(after.started_at.timestamp(), f"restart (attempt {after.attempt})")]
    if after.first_step_at is not None:
        marks.append((after.first_step_at.timestamp(), "first step"))
    return tuple(marks)


def _fit(
    window: tuple[datetime, datetime], text: str, plots: tuple[GpuSeries, ...], failed: datetime
) -> tuple[tuple[datetime, datetime], str, tuple[GpuSeries, ...]]:
    """The window cut to the samples there are (an agent started seconds before the failure has no
    minutes before it; the incident keeps samples only up to the restart's first step), the failure
    always in it (a silent node's samples end before it): the plots do not show empty minutes, and the
    text says what was cut."""
    stamps = [p.ts for series in plots for p in series.points]
    if not stamps:
        return window, text, plots
    start = min(max(window[0], datetime.fromtimestamp(min(stamps), UTC)), failed)
    end = max(min(window[1], datetime.fromtimestamp(max(stamps), UTC)), failed)
    if (start, end) == window or start >= end:
        return window, text, plots
    span = (start.timestamp(), end.timestamp())
    return (start, end), f"{text}, cut to the samples recorded", tuple(replace(p, window=span) for p in plots)


def _plots(
    session: Session,
    incident: Incident,
    node: Node | None,
    snapshot: dict[str, Any],
    window: tuple[datetime, datetime],
) -> tuple[GpuSeries, ...]:
    """Every GPU of the node with samples in the snapshot, cut to ``window``, with its Xids and size."""
    if node is None or not snapshot.get("gpus"):
        return ()
    start, end = window[0].timestamp(), window[1].timestamp()
    points = {int(g): [r for r in rows if start <= r[0] <= end] for g, rows in snapshot["gpus"].items()}
    xids: dict[int, list[tuple[float, int]]] = {}
    for e in session.scalars(
        select(EventRow).where(
            EventRow.node_id == node.id, EventRow.kind == "xid", EventRow.ts >= window[0], EventRow.ts <= window[1]
        )
    ):
        if e.gpu_index is not None and e.data.get("xid"):
            xids.setdefault(e.gpu_index, []).append((e.ts.timestamp(), int(e.data["xid"])))
    sizes = dict(session.execute(select(Gpu.index, Gpu.memory_total_mib).where(Gpu.node_id == node.id)).tuples().all())
    return tuple(
        GpuSeries(
            node=node.name,
            gpu=gpu,
            points=tuple(GpuPoint(ts=r[0], util=r[1], fb_used_mib=r[2], power_w=r[3], temp_c=r[4]) for r in rows),
            xids=tuple(sorted(xids.get(gpu, []))),
            window=(start, end),
            memory_total_mib=sizes.get(gpu),
        )
        for gpu, rows in sorted(points.items())
    )


def _plotted(
    incident: Incident,
    job_gpus: tuple[int, ...],
    shown: tuple[GpuSeries, ...],
    plots: tuple[GpuSeries, ...],
    all_gpus: bool,
) -> str:
    """Which GPUs the plots show, and why, in words."""
    listed = ", ".join(str(g) for g in job_gpus)
    if incident.run_id is None:
        return "all of the node's GPUs (a node-level incident: no job's GPUs to choose)"
    if not job_gpus:
        return "all of the node's GPUs: the job's ranks were not attributed to any GPU (no LOCAL_RANK or NVML process)"
    if all_gpus:
        return f"all of the node's GPUs, as asked; the job's: {listed}"
    others = len(plots) - len(shown)
    rest = f"; {others} other GPU{'s' if others != 1 else ''} of the node left out (?gpus=all shows them)"
    return f"the job's GPU{'s' if len(job_gpus) > 1 else ''} {listed}{rest if others else ''}"


def _node_why(session: Session, incident: Incident, diagnosis: Diagnosis | None, node: str | None) -> str:
    """A node-level incident's decision (it has no decision row of a run's): the rule is the failure
    taxonomy's default action for the diagnosed reason, and what came of it (the exclusion, if any)."""
    if incident.run_id is not None:
        return ""
    if diagnosis is None:
        return "not decided yet: the incident is not diagnosed"
    info = REASONS.get(diagnosis.reason)
    if info is None:
        return f"no rule for the reason {diagnosis.reason}"
    rule = (
        f"rule taxonomy_default: the reason {diagnosis.reason} ({info.category}) has the default action "
        f"{info.action}, and a node-level incident has no run of its own to restart"
    )
    exclusion = session.scalar(select(Exclusion).where(Exclusion.incident_id == incident.id).order_by(Exclusion.id))
    if exclusion is not None:
        ttl = (exclusion.expires_at - exclusion.created_at).total_seconds() if exclusion.expires_at else None
        until = f" for {_minutes(ttl)}" if ttl is not None else ""
        how = f" (drained by {exclusion.executor})" if exclusion.executor else ""
        done = f"{exclusion.node_name} was excluded{until}{how}"
        return f"{rule}, so {done}; the runs there are decided in their own incidents"
    if info.action == "restart_exclude_node":
        return f"{rule}; {node or 'the node'} was not excluded (it was already, or the diagnosis named no node)"
    return f"{rule}, so the owner is told and nothing is excluded"


def _advice(
    session: Session, diagnosis: Diagnosis | None, job: Job | None, run: Run | None, node: str | None
) -> tuple[str, ...]:
    if diagnosis is None:
        return ()
    out = []
    if REASONS[diagnosis.reason].category == "script":
        out.append(SCRIPT_ADVICE)
    elif diagnosis.reason in ADVICE:
        out.append(ADVICE[diagnosis.reason].format(node=markdown.escape(node) if node else "the node"))
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
        f"interval `sqrt(2 * save time * MTBF)` is then {options}."
    )


def _minutes(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
