"""Opening incidents and taking them through their states, each step one transaction kept in the database.

Three triggers open an incident: a run that ends non-zero (`run_failed`), a fatal Xid arriving from a
node (`xid`, from NVML or an NVRM line in the kernel log) and a node whose agent went silent
(`node_silent`). The diagnosis waits `incident_settle_s` so that log lines still in the agent's last
batch arrive first, then reads the run's streams, the node's kernel log and its Xid events, and
calls the same `gpuwatch.diagnosis.diagnose` as the CLI. A silent node cannot say anything more about
itself: its diagnosis is `node_failure` straight away.

The states: ``open`` → ``diagnosed`` → ``decided`` (the decision and its actions stored, pending) →
``acting`` (the actions given to their executors; a local job's restart waits for its supervisor to
register the restarted run) → ``done``, or ``failed`` when an executor failed; a later successful run of
the job makes a decided incident ``resolved``. While a step is due, ``due_at`` says when; a server that
dies leaves it overdue, and `resume_due` (the watchdog's sweep, on any replica) takes it. The fault
points between the steps (server/incidents/faults.py) are where the tests kill the server.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import astuple, dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpuwatch.diagnosis.diagnose import diagnose
from gpuwatch.diagnosis.model import Diagnosis as Result
from gpuwatch.diagnosis.model import LogSource
from gpuwatch.diagnosis.xid import xid_event_line
from gpuwatch.recovery import Decision, exit_failed
from server.incidents import faults, hang_stacks, late_lines, recover, silent_nodes, snapshot
from server.incidents.context import IncidentContext
from server.notify import notices
from server.store.db import lock, transaction
from server.store.models import Diagnosis, EventRow, Incident, LogLineRow, Node, Run, utcnow

log = logging.getLogger("gpuwatch.server.incidents")

KERNEL_STREAM = "kernel"
EVENTS_SOURCE = "nvml-events"
EXIT_SOURCE = "exit status"
MAX_LINES_PER_STREAM = 200_000
LOOKBACK = timedelta(minutes=5)  # evidence this long before an incident without a run opened


@dataclass(frozen=True, slots=True)
class StreamExit:
    """A log stream of a failed run, with the rank it is (if one) and how that process ended."""

    stream: str
    rank: int | None
    exit_code: int | None
    signal: int | None


def open_incident(
    ctx: IncidentContext,
    *,
    node_id: int,
    trigger: str,
    run_id: int | None = None,
    job_id: int | None = None,
    streams: Sequence[StreamExit] = (),
    result: Result | None = None,
    checkpoint: dict[str, Any] | None = None,
    local: tuple[Decision, bool] | None = None,
    once_since: datetime | None = None,
    hang: str | None = None,
    lines: dict[str, int] | None = None,
) -> int | None:
    """Store a new incident and diagnose it on a timer thread (or at once, when ``result`` is given),
    then decide about the run (or record ``local``: the supervisor's own decision and whether it
    restarted), or exclude the node a node-level incident blames.

    Exactly once, across server replicas: a run gets one incident, and with ``once_since`` a node
    gets no second incident of the same trigger opened since then. The check and the insert hold a
    database lock on (trigger, node or run); None when the incident exists already. ``hang``: the job
    tracker's words about a hung job, whose diagnosis waits for its ranks' stacks (`hang_stacks`).
    ``lines``: each stream's line count as the exit reported it, waited for (`late_lines`)."""
    with transaction(ctx.sessions) as session:
        lock(session, f"incident:{trigger}:{node_id}" if run_id is None else f"incident:run:{run_id}")
        if run_id is not None and session.scalar(select(Incident.id).where(Incident.run_id == run_id)) is not None:
            return None
        if once_since is not None and session.scalar(
            select(Incident.id).where(
                Incident.node_id == node_id,
                Incident.trigger == trigger,
                Incident.run_id.is_(None),
                Incident.opened_at >= once_since,
            )
        ):
            return None
        if run_id is not None:
            run = session.get(Run, run_id)
            assert run is not None
            job_id = run.job_id
        node = session.get(Node, node_id)
        now = time.time()
        taken = snapshot.take(ctx, node.name if node else None, now, session, node_id, job_id)
        settle = 0.0 if result is not None else ctx.settings.server.incident_settle_s
        incident = Incident(
            job_id=job_id,
            run_id=run_id,
            node_id=node_id,
            trigger=trigger,
            state="open",
            snapshot=taken,
            due_at=datetime.fromtimestamp(now + settle, UTC),
            inputs={"streams": [astuple(s) for s in streams], "checkpoint": checkpoint}
            | ({"hang": hang} if hang is not None else {})
            | ({"lines": wait} if (wait := late_lines.expect([s.stream for s in streams], lines or {})) else {}),
        )
        session.add(incident)
        session.flush()
        incident_id = incident.id
    ctx.metrics.incidents.labels(trigger).inc()
    faults.reached("accept")
    notices.send(
        ctx.notifier, ctx.sessions, "opened", incident_id, None, summary=f"incident opened: {trigger.replace('_', ' ')}"
    )
    if result is not None:
        if _store(ctx, incident_id, result):
            _recover(ctx, incident_id, run_id, result, checkpoint, local)
        return incident_id
    _wake(ctx, incident_id, settle)
    return incident_id


def _wake(ctx: IncidentContext, incident_id: int, after_s: float) -> None:
    """Advance the incident after ``after_s`` in this process; its `due_at` says so for any other."""
    timer = threading.Timer(after_s, advance, args=(ctx, incident_id))
    timer.daemon = True
    timer.start()


def advance(ctx: IncidentContext, incident_id: int) -> None:
    """Take the incident its next steps: diagnose an open one, decide about a diagnosed one, carry out
    a decided one's actions, reconcile an acting one whose actions were lost with a dead server. Each
    step is one transaction that checks the incident is still where it was, so a step taken twice (the
    timer and a resuming sweep, two replicas) is taken once. Errors are logged, never raised: the
    incident stays due, and the sweep tries it again."""
    try:
        with ctx.sessions() as session:
            incident = session.get(Incident, incident_id)
            if incident is None or incident.due_at is None:
                return
            state, run_id, inputs = incident.state, incident.run_id, incident.inputs or {}
            trigger = incident.trigger
        checkpoint = inputs.get("checkpoint")
        if state == "open":
            if (wait := silent_nodes.hold(ctx, incident_id)) is not None:  # a node's agent is silent
                _wake(ctx, incident_id, wait)
                return
            if (wait := late_lines.hold(ctx, incident_id)) is not None:  # lines its exit counted are on the way
                _wake(ctx, incident_id, wait)
                return
            if (wait := hang_stacks.hold(ctx, incident_id)) is not None:  # a hang waits for its ranks' stacks
                _wake(ctx, incident_id, wait)
                return
            if trigger == "hang":
                result = hang_stacks.diagnose(ctx, incident_id)
                if not _store(ctx, incident_id, result):
                    return
            else:
                streams = [StreamExit(*s) for s in inputs.get("streams") or []]
                found = diagnose_incident(ctx, incident_id, streams)
                if found is None:
                    return  # someone else diagnosed it meanwhile, and decides
                result = found
        elif state == "diagnosed":
            result = _stored(ctx, incident_id)
        elif state in ("decided", "acting"):
            recover.act(ctx, incident_id)
            return
        else:
            return
        _recover(ctx, incident_id, run_id, result, checkpoint, None)
    except Exception:  # the incident stays due: the sweep tries again
        log.exception("incident %d: its next step failed", incident_id)


def resume_due(ctx: IncidentContext, now: float | None = None) -> list[int]:
    """The incidents whose next step is overdue by `incident_resume_after_s` (their timer died with a
    server, or another replica's did), taken their next step; run by the watchdog, so a restarted server
    finishes what a killed one started."""
    now = time.time() if now is None else now
    overdue = datetime.fromtimestamp(now - ctx.settings.server.incident_resume_after_s, UTC)
    with ctx.sessions() as session:
        due = list(session.scalars(select(Incident.id).where(Incident.due_at <= overdue).order_by(Incident.id)))
    for incident_id in due:
        log.warning("incident %d: resuming its overdue next step", incident_id)
        advance(ctx, incident_id)
    return due


def _stored(ctx: IncidentContext, incident_id: int) -> Result:
    """The incident's stored diagnosis."""
    with ctx.sessions() as session:
        row = session.scalar(
            select(Diagnosis).where(Diagnosis.incident_id == incident_id).order_by(Diagnosis.id.desc()).limit(1)
        )
        assert row is not None
        return Result.from_json(
            {
                "reason": row.reason,
                "confidence": row.confidence,
                "source": row.source,
                "node": row.node_name,
                "rank": row.rank,
                "explanation": row.explanation,
            }
        )


def _recover(
    ctx: IncidentContext,
    incident_id: int,
    run_id: int | None,
    result: Result,
    checkpoint: dict[str, Any] | None,
    local: tuple[Decision, bool] | None,
) -> None:
    if run_id is None:
        recover.exclude_for_incident(ctx, incident_id, result)
    elif local is not None:
        recover.record_local(ctx, incident_id, local[0], checkpoint, local[1])
    else:
        recover.decide_for_run(ctx, incident_id, result, checkpoint)


def diagnose_incident(ctx: IncidentContext, incident_id: int, streams: Sequence[StreamExit]) -> Result | None:
    """Gather the incident's evidence from the database, diagnose it, store and count the result; None
    when it was diagnosed meanwhile (by another thread or replica)."""
    with ctx.sessions() as session:
        incident = session.get(Incident, incident_id)
        assert incident is not None and incident.node_id is not None
        node = session.get(Node, incident.node_id)
        assert node is not None
        sources, times = incident_sources(session, incident, streams)
        node_name, inputs = node.name, incident.inputs
    rules_dir = ctx.settings.rules_dir
    result = diagnose(sources, llm=ctx.llm, rules_dir=str(rules_dir) if rules_dir else None)
    if result.node is None:
        result = replace(result, node=node_name)
    result = late_lines.flag(silent_nodes.flag(result, inputs), inputs)
    return result if _store(ctx, incident_id, result, times) else None


def incident_sources(
    session: Session, incident: Incident, streams: Sequence[StreamExit] | None = None
) -> tuple[list[LogSource], dict[str, list[float]]]:
    """What the incident is diagnosed from, read from the database: the run's streams (``streams``, by
    default those stored with the incident) with how each process ended, the node's kernel log and its
    Xid events; and each source's line times (for the evidence's timestamps). `gpuwatch corpus export`
    reads a labelled incident's logs through this too, so a case holds what the diagnosis saw."""
    if streams is None:
        streams = [StreamExit(*s) for s in (incident.inputs or {}).get("streams") or []]
    node = session.get(Node, incident.node_id) if incident.node_id is not None else None
    if node is None:
        return [], {}
    run = session.get(Run, incident.run_id) if incident.run_id is not None else None
    # A run's evidence is what was logged while it ran. Read from before its start, the node's kernel
    # log would blame it for an earlier attempt's Xid (and a log file shared by attempts for their
    # errors). Not only the last minutes before the failure either: a hang surfaces as NCCL timeouts
    # the watchdog's timeout (often 30 min) after the Xid that caused it. An incident without a run
    # reads LOOKBACK before it opened: the lines that opened it.
    since = run.started_at if run is not None else incident.opened_at - LOOKBACK
    sources = []
    times: dict[str, list[float]] = {}  # each source's line times, for the evidence's timestamps
    for s in [*streams, StreamExit(KERNEL_STREAM, None, None, None)]:
        rows = _stream_lines(session, node.id, s.stream, since)
        lines, times[s.stream] = [text for text, _ in rows], [ts.timestamp() for _, ts in rows]
        if lines or s.exit_code or s.signal:
            sources.append(
                LogSource(
                    file=s.stream,
                    lines=lines,
                    node=node.name,
                    rank=s.rank,
                    exit_code=s.exit_code,
                    signal=s.signal,
                )
            )
    if run is not None and not any(s.exit_code or s.signal for s in streams):  # the run's own status
        sources.append(
            LogSource(file=EXIT_SOURCE, lines=[], node=node.name, exit_code=run.exit_code, signal=run.signal)
        )
    xid_rows = _xid_event_lines(session, node.id, since)
    if xid_rows:
        lines, times[EVENTS_SOURCE] = [text for text, _ in xid_rows], [ts.timestamp() for _, ts in xid_rows]
        sources.append(LogSource(file=EVENTS_SOURCE, lines=lines, node=node.name))
    return sources, times


def _stream_lines(session: Session, node_id: int, stream: str, since: datetime) -> list[tuple[str, datetime]]:
    """(text, time) of the stream's lines since ``since``, in order."""
    rows = session.execute(
        select(LogLineRow.text, LogLineRow.ts)
        .where(LogLineRow.node_id == node_id, LogLineRow.stream == stream, LogLineRow.ts >= since)
        .order_by(LogLineRow.seq)
        .limit(MAX_LINES_PER_STREAM)
    )
    return [(text, ts) for text, ts in rows]


def _xid_event_lines(session: Session, node_id: int, since: datetime) -> list[tuple[str, datetime]]:
    """The node's Xid events (from NVML) as (line, time), for agents that do not follow the kernel log."""
    rows = session.scalars(
        select(EventRow)
        .where(EventRow.node_id == node_id, EventRow.kind == "xid", EventRow.ts >= since)
        .order_by(EventRow.ts)
        .limit(10_000)
    ).all()
    return [
        (xid_event_line(r.gpu_index, int(r.data.get("xid", 0)), r.message), r.ts) for r in rows if r.data.get("xid")
    ]


def _store(ctx: IncidentContext, incident_id: int, result: Result, times: dict[str, list[float]] | None = None) -> bool:
    """Store the diagnosis of an open incident; each evidence line gets its time (``ts``) when ``times``
    knows its source. False (and nothing stored) when it is no longer open."""
    evidence = []
    for e in result.evidence:
        known = (times or {}).get(e.file) or []
        ts = known[e.line - 1] if 0 < e.line <= len(known) else None
        evidence.append({"file": e.file, "line": e.line, "text": e.text, "ts": ts})
    with transaction(ctx.sessions) as session:
        lock(session, f"incident:{incident_id}")
        incident_row = session.get(Incident, incident_id)
        if incident_row is None or incident_row.state != "open":
            return False
        session.add(
            Diagnosis(
                incident_id=incident_id,
                reason=result.reason,
                category=result.category,
                action=result.action,
                confidence=result.confidence,
                source=result.source,
                node_name=result.node,
                rank=result.rank,
                evidence=evidence,
                explanation=result.explanation,
            )
        )
        incident_row.state = "diagnosed"
        incident_row.due_at = utcnow()  # the decision is due now
        run_failure = incident_row.run_id is not None
    faults.reached("diagnose")
    if run_failure:  # failures of jobs; node-level incidents are counted by gpuwatch_incidents_total
        ctx.metrics.failures.labels(result.reason, result.category).inc()
    ctx.alerts_changed()  # a failed run's incident, diagnosed: GpuwatchJobFailed
    notices.send(ctx.notifier, ctx.sessions, "diagnosed", incident_id, result)
    log.warning("incident %d: %s on %s (%s)", incident_id, result.reason, result.node, result.source)
    return True


def mark_exit(run: Run, exit_code: int | None, signal: int | None) -> bool:
    """Record how a run ended; True when it failed."""
    run.exit_code, run.signal, run.ended_at = exit_code, signal, utcnow()
    failed = exit_failed(exit_code, signal)
    run.state = "failed" if failed else "succeeded"
    return failed
