"""A decision the supervisor took by itself, attached to its run's incident once, with its own times.

A supervisor decides alone when the server is away (or when it is told to stop), and reports that
decision with the run's exit: at once, or later from its outbox (delivered by the supervisor, or by the
node's agent once the job has ended). However late it arrives, and in whatever state the server left
the incident when it died, the decision is recorded once, as actor ``supervisor``, at the time it was
taken (``decided_at``), and its restart at the time the job was relaunched (``restarted_at``), both on
the server's clock:

- no incident yet (the server died before opening one, or the exit is new): opened with the
  supervisor's diagnosis and its decision;
- open (not diagnosed yet): diagnosed from what the server stored, then the supervisor's decision;
- diagnosed, not decided: the supervisor's decision;
- decided already (by the server, or by an earlier delivery): nothing new; a restart still pending
  is marked done when the supervisor says it relaunched the job.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from gpuwatch.diagnosis.model import Diagnosis as Result
from gpuwatch.recovery import Decision
from server.incidents import recover
from server.incidents.context import IncidentContext
from server.incidents.pipeline import StreamExit, diagnose_incident, open_incident
from server.store.db import lock, transaction
from server.store.models import Action, Incident

log = logging.getLogger("gpuwatch.server.incidents")


@dataclass(frozen=True, slots=True)
class SupervisorDecision:
    """The supervisor's diagnosis and decision; the decision's ``at`` is when it was taken, on the
    server's clock, and ``restarted_at`` when the job was relaunched (None: not, or not yet)."""

    diagnosis: Result
    decision: Decision
    restarted_at: float | None = None


def attach(
    ctx: IncidentContext,
    *,
    run_id: int,
    node_id: int,
    record: SupervisorDecision,
    streams: Sequence[StreamExit] = (),
    checkpoint: dict[str, Any] | None = None,
) -> int | None:
    """Record ``record`` on the failed run's incident, once (see the module's doc); the incident's id."""
    restarted = record.restarted_at is not None
    found = _incident(ctx, run_id)
    if found is None:
        opened = open_incident(
            ctx,
            node_id=node_id,
            trigger="run_failed",
            run_id=run_id,
            streams=streams,
            checkpoint=checkpoint,
            result=record.diagnosis,
            local=(record.decision, restarted),
        )
        found = _incident(ctx, run_id) if opened is None else (opened, "decided", {})
        if found is None:
            return None
    incident_id, state, inputs = found
    if state == "open":  # the server died before diagnosing it: diagnose it now, from what it stored
        diagnose_incident(ctx, incident_id, [StreamExit(*s) for s in inputs.get("streams") or []])
        state = "diagnosed"
    if state == "diagnosed":
        stored = checkpoint if checkpoint is not None else inputs.get("checkpoint")
        recover.record_local(ctx, incident_id, record.decision, stored, restarted)
    if record.restarted_at is not None:
        _relaunched(ctx, incident_id, run_id, record.restarted_at)
    return incident_id


def _incident(ctx: IncidentContext, run_id: int) -> tuple[int, str, dict[str, Any]] | None:
    with ctx.sessions() as session:
        incident = session.scalar(select(Incident).where(Incident.run_id == run_id).order_by(Incident.id))
        return None if incident is None else (incident.id, incident.state, dict(incident.inputs or {}))


def _relaunched(ctx: IncidentContext, incident_id: int, run_id: int, at: float) -> None:
    """The run's restart happened at ``at``: its restart action done then (if not already finished), and
    the incident with it when it was acting on nothing else."""
    with transaction(ctx.sessions) as session:
        lock(session, f"incident:{incident_id}")
        incident = session.get(Incident, incident_id)
        new = None if incident is None else recover.successor(session, incident)
        for action in session.scalars(
            select(Action).where(Action.incident_id == incident_id, Action.kind == "restart").order_by(Action.id)
        ):
            if action.params.get("run_id") != run_id or "new_run_id" in action.params:
                continue
            if new is not None:  # registered already: the restart's time is its run's start
                recover.restart_done(action, new, "the supervisor relaunched the job")
            elif action.finished_at is None:
                action.status, action.finished_at = "done", datetime.fromtimestamp(at, UTC)
            log.info("incident %d: the supervisor relaunched run %d's job", incident_id, run_id)
        if incident is not None and incident.state == "acting":
            recover.settle(session, incident)
