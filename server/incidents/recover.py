"""Turning a diagnosis into a recovery decision, recording it, and carrying it out.

The decision is `gpuwatch.recovery.decide` — the same function the supervisor calls when the server
is away — over the job's earlier decisions (its history), the job's policy, the cluster-wide pause
flag, the latest valid checkpoint the supervisor reported and the one the failed run resumed from (a
run that failed to load it falls back to the one before, once: the checkpoint skipped is in the
decision's params, so the database remembers it across restarts of the server). Every decision is an `actions` row
(kind `decision`, with who decided), and so is every step taken: `exclude_node` rows for the blamed
nodes (kept out for `recovery_exclude_ttl_s`, drained or cordoned through the cluster's `executor` or
the job's scheduler), and a `restart` row. A local job's restart is pending until its supervisor
registers the next run (`restart_of`); a Slurm or Kubernetes job's restart is done here through its
executor. Decisions are committed first and the executors called after, so a slow `scontrol` never
holds a database transaction open; what they answered is written to the same rows.

When a later run of the job succeeds, its open incidents are resolved; an exclusion whose time is up
is released (the node resumed or uncordoned) by the watchdog.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpuwatch.diagnosis.model import Diagnosis as Result
from gpuwatch.recovery import Attempt, Decision, decide
from gpuwatch.recovery.settings import policy_config
from gpuwatch.taxonomy import REASONS
from server.executors import registry
from server.executors.base import ActionResult, Executor, JobTarget
from server.incidents import faults, silent_nodes, snapshot
from server.incidents.context import IncidentContext
from server.notify import notices
from server.store.audit import audit
from server.store.db import lock, transaction
from server.store.models import Action, Diagnosis, Exclusion, Flag, Incident, Job, Node, Run, utcnow

log = logging.getLogger("gpuwatch.server.recovery")

PAUSED = "recovery_paused"
# An acting incident whose executor calls have not all answered by then is presumed to have lost them (its
# server died): the sweep reconciles it. Longer than any executor's timeouts (scontrol's 15 s, settling 30 s).
ACTING_DEADLINE = timedelta(minutes=2)


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


@dataclass(frozen=True, slots=True)
class _Call:
    """One executor call still to make: the action it carries out, and the call."""

    action_id: int
    call: Callable[[], ActionResult]


def decide_for_run(
    ctx: IncidentContext, incident_id: int, result: Result, checkpoint: dict[str, Any] | None
) -> Decision | None:
    """The server's decision about a failed run (diagnosed as ``result``); stored, counted, carried out.
    None when it was decided already (by another thread or replica: the decision is taken once)."""
    with transaction(ctx.sessions) as session:
        lock(session, f"incident:{incident_id}")
        incident, job, run = _context(session, incident_id)
        if not _due(incident):
            return None
        config = policy_config(ctx.settings.recovery, job.policy, paused=is_paused(session))
        decision = decide(
            result.reason,
            history=history(session, job.id),
            config=config,
            now=time.time(),
            node=result.node,
            exit_code=run.exit_code,
            checkpoint_step=(checkpoint or {}).get("step"),
            restart_nodes=_local_node(session, job, run),
            resumed_from=run.resume_from,
            silent_nodes=silent_nodes.still_silent(incident),
        )
        _record(session, ctx, incident, job, run, decision, checkpoint, actor="server")
    faults.reached("decide")
    act(ctx, incident_id)
    notices.send(ctx.notifier, ctx.sessions, "decided", incident_id, result, decision)
    return decision


def record_local(
    ctx: IncidentContext, incident_id: int, decision: Decision, checkpoint: dict[str, Any] | None, restarted: bool
) -> None:
    """A decision the supervisor took by itself (the server away, or it was told to stop), recorded as it
    happened: at the decision's ``at`` (on the server's clock), actor ``supervisor``."""
    with transaction(ctx.sessions) as session:
        lock(session, f"incident:{incident_id}")
        incident, job, run = _context(session, incident_id)
        if not _due(incident):
            return
        _record(session, ctx, incident, job, run, decision, checkpoint, actor="supervisor", restarted=restarted)
        result = Result.from_json({"reason": decision.reason, "node": decision.node, "source": "rules"})
    act(ctx, incident_id)
    notices.send(ctx.notifier, ctx.sessions, "decided", incident_id, result, decision)


def _local_node(session: Session, job: Job, run: Run) -> tuple[str, ...] | None:
    """The one node a local job can restart on (its supervisor's: the run's); None under a scheduler."""
    if job.scheduler != "local" or run.node_id is None:
        return None
    node = session.get(Node, run.node_id)
    return (node.name,) if node is not None else None


def _due(incident: Incident) -> bool:
    """Whether the incident awaits its decision; taking it (in the caller's transaction) makes it not."""
    if incident.state != "diagnosed" or incident.due_at is None:
        return False
    incident.due_at = None
    return True


def _context(session: Session, incident_id: int) -> tuple[Incident, Job, Run]:
    """A run failure's incident with its job and run."""
    incident = session.get(Incident, incident_id)
    assert incident is not None and incident.run_id is not None and incident.job_id is not None
    job, run = session.get(Job, incident.job_id), session.get(Run, incident.run_id)
    assert job is not None and run is not None
    return incident, job, run


def exclude_for_incident(ctx: IncidentContext, incident_id: int, result: Result) -> None:
    """A node-level incident (fatal Xid, silent node) whose reason blames the node: exclude it (drained
    by the cluster's `executor`, else by the scheduler of the job running there, if any)."""
    with transaction(ctx.sessions) as session:
        lock(session, f"incident:{incident_id}")
        incident = session.get(Incident, incident_id)
        if incident is None or not _due(incident):
            return
        incident.state, incident.due_at = "decided", utcnow()
        if result.action == "restart_exclude_node" and result.node:
            job = session.get(Job, incident.job_id) if incident.job_id is not None else None
            _exclude(session, ctx, [result.node], result.reason, incident_id, job)
    act(ctx, incident_id)


def resolve_job(ctx: IncidentContext, job_id: int, run_id: int) -> list[int]:
    """A run of the job succeeded: its decided incidents (acted on or not) are over. Returns their ids."""
    with transaction(ctx.sessions) as session:
        incidents = list(
            session.scalars(
                select(Incident).where(Incident.job_id == job_id, Incident.state.in_(("decided", "acting", "done")))
            )
        )
        for incident in incidents:
            incident.state, incident.closed_at = "resolved", utcnow()
        resolved = [i.id for i in incidents]
    if resolved:
        ctx.alerts_changed()  # their GpuwatchJobFailed alerts end
    for incident_id in resolved:
        notices.send(
            ctx.notifier,
            ctx.sessions,
            "resolved",
            incident_id,
            None,
            None,
            summary=f"run {run_id} of the job succeeded",
        )
    return resolved


def restarted(ctx: IncidentContext, session: Session, failed: Run, new: Run) -> None:
    """The failed run's restart registered (in the caller's transaction): its pending restart is done
    (the incident too, when nothing else is pending), and the downtime (exit → new start) is added to
    what it cost. A restart registered before the decision about it is found by `_record`."""
    incident = session.scalar(select(Incident).where(Incident.run_id == failed.id).order_by(Incident.id))
    if incident is None:
        return
    lock(session, f"incident:{incident.id}")
    session.refresh(incident)
    for action in session.scalars(select(Action).where(Action.incident_id == incident.id, Action.kind == "restart")):
        # pending (the server's decision), or done by a supervisor's own decision without its run yet
        done_here = action.status == "done" and action.actor == "supervisor" and "new_run_id" not in action.params
        if action.status == "pending" or done_here:
            restart_done(action, new, action.detail or "the supervisor registered the restarted run")
    faults.reached("act")
    if incident.state == "acting":
        settle(session, incident)
    if incident.cost is None or failed.ended_at is None or incident.cost.get("downtime_s"):
        return
    before = incident.cost["gpu_hours"]
    incident.cost = snapshot.with_downtime(
        ctx.settings, incident.cost, (new.started_at - failed.ended_at).total_seconds()
    )
    diagnosis = session.scalar(
        select(Diagnosis).where(Diagnosis.incident_id == incident.id).order_by(Diagnosis.id.desc())
    )
    if diagnosis is not None:
        ctx.metrics.lost_gpu_hours.labels(diagnosis.reason, diagnosis.category).inc(incident.cost["gpu_hours"] - before)


def act(ctx: IncidentContext, incident_id: int) -> None:
    """Carry out a decided incident's pending actions (decided → acting → done, or failed when an executor
    failed). A local job's restart is its supervisor's: the incident stays `acting` until the restarted run
    registers. Resumed after a crash (`acting` and overdue), an action is first reconciled with what
    happened meanwhile (a restart whose new run registered is done, not issued again), and only the rest is
    issued again: draining a drained node changes nothing."""
    with transaction(ctx.sessions) as session:
        lock(session, f"incident:{incident_id}")
        incident = session.get(Incident, incident_id)
        if incident is None or incident.due_at is None or incident.state not in ("decided", "acting"):
            return
        calls = _calls(session, ctx, incident)
        incident.state = "acting"
        incident.due_at = utcnow() + ACTING_DEADLINE if calls else None
        settle(session, incident)
        run_id = incident.run_id
    if run_id is not None:
        ctx.decided.mark(run_id)  # the decision goes out: the supervisor's long poll answers now
    if not calls:
        return
    for c in calls:
        _act(ctx, c.action_id, c.call)
    with transaction(ctx.sessions) as session:
        lock(session, f"incident:{incident_id}")
        incident = session.get(Incident, incident_id)
        if incident is not None and incident.state == "acting":
            settle(session, incident)


def _calls(session: Session, ctx: IncidentContext, incident: Incident) -> list[_Call]:
    """The executor calls of the incident's pending actions: drains first, then the restart. A restart
    whose new run has registered meanwhile is marked done instead (it happened)."""
    pending = list(
        session.scalars(
            select(Action).where(Action.incident_id == incident.id, Action.status == "pending").order_by(Action.id)
        )
    )
    decision = session.scalar(
        select(Action).where(Action.incident_id == incident.id, Action.kind == "decision").order_by(Action.id)
    )
    reason = (decision.params if decision is not None else {}).get("reason", "unknown")
    drains, restarts = [], []
    for action in pending:
        if action.kind == "exclude_node" and action.executor:
            node, name = action.params["node"], action.executor
            drains.append(
                _Call(
                    action.id,
                    lambda node=node, name=name: _executor(ctx, name).exclude_node(node, reason=reason),
                )
            )
        elif action.kind == "restart" and action.executor not in (None, "local"):
            if (new := successor(session, incident)) is not None:
                restart_done(action, new, "the restarted run registered before the restart was recorded done")
                continue
            job = session.get(Job, action.job_id) if action.job_id is not None else None
            if job is None:
                action.status, action.detail, action.finished_at = "failed", "the job is gone", utcnow()
                continue
            target, nodes = JobTarget(job.scheduler, job.external_id), tuple(action.params.get("exclude_nodes") or ())
            restarts.append(
                _Call(
                    action.id,
                    lambda target=target, nodes=nodes: _executor(ctx, target.executor).restart(
                        target, exclude_nodes=nodes, reason=reason
                    ),
                )
            )
    return drains + restarts


def settle(session: Session, incident: Incident) -> None:
    """An acting incident with nothing pending is over: done, or failed when an action failed."""
    statuses = set(session.scalars(select(Action.status).where(Action.incident_id == incident.id)))
    if "pending" in statuses:
        return
    incident.state, incident.due_at = ("failed" if "failed" in statuses else "done"), None


def successor(session: Session, incident: Incident) -> Run | None:
    """The run that restarted the incident's failed run, if one registered: the job's first later attempt."""
    if incident.run_id is None:
        return None
    failed = session.get(Run, incident.run_id)
    if failed is None:
        return None
    return session.scalar(
        select(Run).where(Run.job_id == failed.job_id, Run.attempt > failed.attempt).order_by(Run.attempt).limit(1)
    )


def restart_done(action: Action, new: Run, detail: str) -> None:
    """The restart happened: done at the restarted run's start (its registered time, whoever reports it), and
    not before the decision that ordered it (the action's own time): a supervisor's start time reaches the
    server moved by the clock offset it measured, which is off by its error."""
    done_at = new.started_at if action.created_at is None else max(new.started_at, action.created_at)
    action.status, action.finished_at, action.detail = "done", done_at, detail
    action.params = {**action.params, "new_run_id": new.id, "resume_from": new.resume_from}


def expire_exclusions(ctx: IncidentContext) -> list[str]:
    """Release the exclusions whose time is up (resume / uncordon the node); the nodes released."""
    now = datetime.now(UTC)
    with transaction(ctx.sessions) as session:
        expired = list(
            session.scalars(select(Exclusion).where(Exclusion.released_at.is_(None), Exclusion.expires_at <= now))
        )
        for e in expired:
            e.released_at = now
        released = [(e.node_name, e.executor) for e in expired]
    still = {e.node_name for e in _current(ctx)}
    for node, name in released:
        if node in still:  # excluded again meanwhile by a newer exclusion
            continue
        ctx.metrics.excluded_nodes.labels(node).set(0)
        if name:
            outcome = _executor(ctx, name).release_node(node)
            log.warning("exclusion of %s over: %s", node, outcome.detail)
    return [node for node, _ in released]


def exclude_by_hand(ctx: IncidentContext, node: str, reason: str, ttl_s: float | None, actor: str) -> Exclusion | None:
    """An admin keeps ``node`` out of restarts (drained or cordoned through the cluster's `executor`);
    audited. None when it is excluded already."""
    with transaction(ctx.sessions) as session:
        if any(e.node_name == node for e in excluded_nodes(session)):
            return None
        drains = _exclude(session, ctx, [node], reason, None, None, actor=actor[:64], ttl_s=ttl_s)
        audit(session, actor, "exclusion.add", node, reason=reason, ttl_s=ttl_s)
        session.flush()
        (added,) = [e for e in excluded_nodes(session) if e.node_name == node]
    for c in drains:
        _act(ctx, c.action_id, c.call)
    return added


def release_by_hand(ctx: IncidentContext, node: str, actor: str) -> bool:
    """An admin lets ``node`` back before its exclusion's time is up (resumed or uncordoned); audited.
    False when it was not excluded."""
    now = datetime.now(UTC)
    with transaction(ctx.sessions) as session:
        active = [e for e in excluded_nodes(session, now) if e.node_name == node]
        for e in active:
            e.released_at = now
        if active:
            audit(session, actor, "exclusion.release", node)
        executors = {e.executor for e in active if e.executor}
    if not active:
        return False
    ctx.metrics.excluded_nodes.labels(node).set(0)
    for name in executors:
        try:
            log.warning("%s releases %s: %s", actor, node, _executor(ctx, name).release_node(node).detail)
        except Exception as exc:  # the release is recorded; the scheduler's answer is only reported
            log.error("releasing %s through %s failed: %s", node, name, exc)
    return True


def _current(ctx: IncidentContext) -> list[Exclusion]:
    with ctx.sessions() as session:
        return excluded_nodes(session)


def _record(
    session: Session,
    ctx: IncidentContext,
    incident: Incident,
    job: Job,
    run: Run,
    decision: Decision,
    checkpoint: dict[str, Any] | None,
    *,
    actor: str,
    restarted: bool = False,
) -> None:
    """Store the decision and its actions (pending until carried out) in the caller's transaction; the
    incident is `decided` and its act due now."""
    params = {**decision.to_json(), "checkpoint": checkpoint, "run_id": run.id}
    # The server decides now; a supervisor's decision is recorded at the time it was taken.
    decided = utcnow() if actor == "server" else datetime.fromtimestamp(decision.at, UTC)
    session.add(
        Action(
            incident_id=incident.id,
            job_id=job.id,
            kind="decision",
            actor=actor,
            params=params,
            status="done",
            created_at=decided,
        )
    )
    incident.state, incident.due_at = "decided", utcnow()
    m = ctx.metrics
    if incident.cost is None:
        ctx.jobs.note_failure(job.name)  # once per failure: the MTBF behind the optimal checkpoint interval
    if run.ended_at is not None and incident.cost is None:
        steps = snapshot.last_steps(ctx, job.name)
        incident.cost = snapshot.lost_work(session, ctx.settings, run, steps, checkpoint)
        m.lost_gpu_hours.labels(decision.reason, REASONS[decision.reason].category).inc(incident.cost["gpu_hours"])
    m.decisions.labels(decision.outcome).inc()
    if run.ended_at is not None:
        m.restart_seconds.observe(max(0.0, (decided - run.ended_at).total_seconds()))
    log.warning("job %s run %d: %s (%s, by %s)", job.name, run.attempt, decision.outcome, decision.why, actor)
    if not decision.restart:
        return
    m.restarts.labels(job.name, decision.reason).inc()
    _exclude(session, ctx, list(decision.exclude_nodes), decision.reason, incident.id, job, actor)
    restart = Action(
        incident_id=incident.id,
        job_id=job.id,
        kind="restart",
        executor=job.scheduler,
        actor=actor,
        params={"run_id": run.id, "delay_s": decision.delay_s, "exclude_nodes": list(decision.exclude_nodes)},
        status="done" if restarted else "pending",
        created_at=decided,
    )
    session.add(restart)
    if not restarted and (new := successor(session, incident)) is not None:
        restart_done(restart, new, "the restarted run registered before the decision was recorded")
    session.flush()


def _exclude(
    session: Session,
    ctx: IncidentContext,
    nodes: list[str],
    reason: str,
    incident_id: int | None,
    job: Job | None,
    actor: str = "server",
    ttl_s: float | None = None,
) -> list[_Call]:
    """Exclude ``nodes`` (in the caller's transaction); the drains to carry out once it is committed."""
    ttl = timedelta(seconds=ctx.settings.recovery.exclude_ttl_s if ttl_s is None else ttl_s)
    current = {e.node_name for e in excluded_nodes(session)}
    executor = ctx.settings.server.executor or (job.scheduler if job is not None and job.scheduler != "local" else None)
    drains = []
    for node in nodes:
        if node in current:
            continue
        session.add(
            Exclusion(
                node_name=node, reason=reason, incident_id=incident_id, executor=executor, expires_at=utcnow() + ttl
            )
        )
        action = Action(
            incident_id=incident_id,
            job_id=job.id if job is not None else None,
            kind="exclude_node",
            executor=executor,
            actor=actor,
            params={"node": node, "ttl_s": ttl.total_seconds()},
            status="pending" if executor else "done",
        )
        session.add(action)
        session.flush()
        if executor:
            call = lambda node=node, name=executor: _executor(ctx, name).exclude_node(node, reason=reason)  # noqa: E731
            drains.append(_Call(action.id, call))
        ctx.metrics.excluded_nodes.labels(node).set(1)
    return drains


def _act(ctx: IncidentContext, action_id: int, call: Callable[[], ActionResult]) -> None:
    """Run one executor call and store its outcome on its action, unless the action was settled meanwhile;
    errors are recorded, never raised (the decision is stored already)."""
    try:
        outcome = call()
        status, detail, commands = ("done" if outcome.ok else "failed"), outcome.detail, list(outcome.commands)
    except Exception as exc:  # a broken executor must not lose the decision
        status, detail, commands = "failed", f"{type(exc).__name__}: {exc}", []
    with transaction(ctx.sessions) as session:
        faults.reached("act")
        action = session.get(Action, action_id)
        if action is not None and action.status == "pending":
            action.status, action.detail, action.finished_at = status, detail, utcnow()
            action.params = {**action.params, "commands": commands}


def _executor(ctx: IncidentContext, name: str) -> Executor:
    return registry.executor(ctx.settings, name)
