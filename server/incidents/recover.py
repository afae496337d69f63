"""Turning a diagnosis into a recovery decision, recording it, and carrying it out.

The decision is `gpuwatch.recovery.decide` — the same function the supervisor calls when the server
is away — over the job's earlier decisions (its history), the job's policy, the cluster-wide pause
flag and the latest valid checkpoint the supervisor reported. Every decision is an `actions` row
(kind `decision`, with who decided), and so is every step taken: `exclude_node` rows for the blamed
nodes (kept out for `recovery_exclude_ttl_s`), and a `restart` row. A local job's restart is pending
until its supervisor registers the next run (`restart_of`); a Slurm or Kubernetes job's restart is
done here through its executor.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpuwatch.diagnosis.model import Diagnosis as Result
from gpuwatch.recovery import Attempt, Decision, decide
from gpuwatch.recovery.settings import policy_config
from server.api.deps import Services
from server.store.db import transaction
from server.store.models import Action, Exclusion, Flag, Incident, Job, Run, utcnow

log = logging.getLogger("gpuwatch.server.recovery")

PAUSED = "recovery_paused"


def history(session: Session, job_id: int, before_action: int | None = None) -> list[Attempt]:
    """The job's earlier decisions, oldest first."""
    query = select(Action.params).where(Action.job_id == job_id, Action.kind == "decision").order_by(Action.id)
    if before_action is not None:
        query = query.where(Action.id < before_action)
    return [Attempt.from_json(p) for p in session.scalars(query) if p.get("reason")]


def is_paused(session: Session) -> bool:
    flag = session.get(Flag, PAUSED)
    return bool(flag and flag.value)


def set_paused(session: Session, paused: bool, who: str) -> None:
    flag = session.get(Flag, PAUSED)
    if flag is None:
        session.add(Flag(name=PAUSED, value=paused, updated_by=who))
    else:
        flag.value, flag.updated_by = paused, who


def excluded_nodes(session: Session, now: datetime | None = None) -> list[Exclusion]:
    now = now or datetime.now(UTC)
    return list(
        session.scalars(
            select(Exclusion)
            .where(Exclusion.released_at.is_(None), Exclusion.expires_at > now)
            .order_by(Exclusion.node_name)
        )
    )


def decide_for_run(svc: Services, incident_id: int, result: Result, checkpoint: dict[str, Any] | None) -> Decision:
    """The server's decision about a failed run (diagnosed as ``result``); stored, counted, carried out."""
    with transaction(svc.sessions) as session:
        incident, job, run = _context(session, incident_id)
        config = policy_config(svc.settings, job.policy, paused=is_paused(session))
        decision = decide(
            result.reason,
            history=history(session, job.id),
            config=config,
            now=time.time(),
            node=result.node,
            exit_code=run.exit_code,
            checkpoint_step=(checkpoint or {}).get("step"),
        )
        _record(session, svc, incident, job, run, decision, checkpoint, actor="server")
    return decision


def record_local(
    svc: Services, incident_id: int, decision: Decision, checkpoint: dict[str, Any] | None, restarted: bool
) -> None:
    """A decision the supervisor took by itself while the server was away, recorded as it happened."""
    with transaction(svc.sessions) as session:
        incident, job, run = _context(session, incident_id)
        _record(session, svc, incident, job, run, decision, checkpoint, actor="supervisor", restarted=restarted)


def _context(session: Session, incident_id: int) -> tuple[Incident, Job, Run]:
    """A run failure's incident with its job and run."""
    incident = session.get(Incident, incident_id)
    assert incident is not None and incident.run_id is not None and incident.job_id is not None
    job, run = session.get(Job, incident.job_id), session.get(Run, incident.run_id)
    assert job is not None and run is not None
    return incident, job, run


def exclude_for_incident(svc: Services, incident_id: int, result: Result) -> None:
    """A node-level incident (fatal Xid, silent node) whose reason blames the node: exclude it."""
    if result.action != "restart_exclude_node" or not result.node:
        return
    with transaction(svc.sessions) as session:
        _exclude(session, svc, [result.node], result.reason, incident_id, None)


def _record(
    session: Session,
    svc: Services,
    incident: Incident,
    job: Job,
    run: Run,
    decision: Decision,
    checkpoint: dict[str, Any] | None,
    *,
    actor: str,
    restarted: bool = False,
) -> None:
    params = {**decision.to_json(), "checkpoint": checkpoint, "run_id": run.id}
    session.add(
        Action(incident_id=incident.id, job_id=job.id, kind="decision", actor=actor, params=params, status="done")
    )
    incident.state = "decided"
    m = svc.metrics
    m.decisions.labels(decision.outcome).inc()
    if run.ended_at is not None:
        m.restart_seconds.observe(max(0.0, (utcnow() - run.ended_at).total_seconds()))
    log.warning("job %s run %d: %s (%s, by %s)", job.name, run.attempt, decision.outcome, decision.why, actor)
    if not decision.restart:
        return
    m.restarts.labels(job.name, decision.reason).inc()
    _exclude(session, svc, list(decision.exclude_nodes), decision.reason, incident.id, job.id, actor)
    restart = Action(
        incident_id=incident.id,
        job_id=job.id,
        kind="restart",
        executor=job.scheduler,
        actor=actor,
        params={"run_id": run.id, "delay_s": decision.delay_s, "exclude_nodes": list(decision.exclude_nodes)},
        status="done" if restarted else "pending",
    )
    session.add(restart)
    if job.scheduler != "local" and not restarted:
        _execute(svc, job, restart, decision)


def _exclude(
    session: Session,
    svc: Services,
    nodes: list[str],
    reason: str,
    incident_id: int,
    job_id: int | None,
    actor: str = "server",
) -> None:
    ttl = timedelta(seconds=svc.settings.recovery_exclude_ttl_s)
    current = {e.node_name for e in excluded_nodes(session)}
    for node in nodes:
        if node in current:
            continue
        session.add(Exclusion(node_name=node, reason=reason, incident_id=incident_id, expires_at=utcnow() + ttl))
        session.add(
            Action(
                incident_id=incident_id,
                job_id=job_id,
                kind="exclude_node",
                actor=actor,
                params={"node": node, "ttl_s": ttl.total_seconds()},
                status="done",
            )
        )
        svc.metrics.excluded_nodes.labels(node).set(1)


def _execute(svc: Services, job: Job, restart: Action, decision: Decision) -> None:
    """A Slurm or Kubernetes job: restart it through its executor (errors are recorded, not raised)."""
    from server.executors.base import JobTarget, executor_for

    try:
        executor = executor_for(job.scheduler)
        for node in decision.exclude_nodes:
            executor.exclude_node(node, reason=decision.reason)
        outcome = executor.restart(
            JobTarget(job.scheduler, job.external_id), exclude_nodes=decision.exclude_nodes, reason=decision.reason
        )
        restart.status = "done" if outcome.ok else "failed"
        restart.detail = outcome.detail
        restart.params = {**restart.params, "commands": list(outcome.commands)}
    except Exception as exc:  # a broken executor must not lose the decision already recorded
        restart.status, restart.detail = "failed", f"{type(exc).__name__}: {exc}"
    restart.finished_at = utcnow()
