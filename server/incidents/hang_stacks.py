"""A hang's incident waits for its ranks' stacks, then says who is stuck and where.

When a hang opens an incident, its first step asks the agents of the job's nodes for every rank's stack
(`server.incidents.stack_requests`) and waits, at most `hang_stacks_wait_s`, for their answers: the wait
is the request's deadline, kept in the incident's `inputs["stacks"]` and its `due_at`, so a server
restarted meanwhile resumes it. Answered or not by then, the incident is diagnosed with what came: the
suspect rank(s) and node(s) (`server.incidents.stacks.localise`), the suspect's innermost frames as
evidence. The decision follows the evidence: a suspect node that logged a hardware Xid during the run
is diagnosed with that Xid's reason, whose action excludes the node; otherwise the hang is restarted.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpuwatch.diagnosis.diagnose import diagnose_hang
from gpuwatch.diagnosis.model import Diagnosis as Result
from gpuwatch.diagnosis.model import Evidence
from gpuwatch.diagnosis.xid import fatal_xid_in_line, xid_event_line, xid_reason
from server.incidents.context import IncidentContext
from server.incidents.stack_requests import NoRanks, create, finish
from server.store.db import lock, transaction
from server.store.models import EventRow, Incident, Job, LogLineRow, Node, Run, StackDump, StackRequest

log = logging.getLogger("gpuwatch.server.incidents")

#: How often a waiting incident looks whether every node answered, at most.
LOOK_EVERY_S = 0.25
#: The evidence file of stack lines, and of the flight recorder's.
STACKS_SOURCE = "stacks"
KERNEL_STREAM = "kernel"


def hold(ctx: IncidentContext, incident_id: int, now: float | None = None) -> float | None:
    """Seconds until the hang incident should look again, while it waits for its stacks (its `due_at`
    set to then); None when it may be diagnosed now. Its first call makes the request. One transaction
    under the incident's lock."""
    now = time.time() if now is None else now
    wait_s = ctx.settings.server.hang_stacks_wait_s
    asked: list[tuple[int, int]] = []
    with transaction(ctx.sessions) as session:
        lock(session, f"incident:{incident_id}")
        incident = session.get(Incident, incident_id)
        if incident is None or incident.state != "open" or incident.trigger != "hang" or wait_s <= 0:
            return None
        inputs: dict[str, Any] = dict(incident.inputs or {})
        stacks: dict[str, Any] | None = dict(inputs["stacks"]) if inputs.get("stacks") else None
        if stacks is None:
            job = session.get(Job, incident.job_id) if incident.job_id is not None else None
            if job is None:
                return None
            try:
                req, asked = create(session, job, by="server", wait_s=wait_s, incident_id=incident_id, tracker=ctx.jobs)
            except NoRanks as exc:
                incident.inputs = {**inputs, "stacks": {"request": None, "note": str(exc)}}
                return None
            stacks = {"request": req.id, "until": req.deadline_at.timestamp()}
            incident.inputs = {**inputs, "stacks": stacks}
        if stacks.get("request") is None:
            return None
        req = session.get(StackRequest, stacks["request"])
        if req is None or req.state != "pending":
            return None
        pending = session.scalar(
            select(StackDump.id).where(StackDump.request_id == req.id, StackDump.state == "pending").limit(1)
        )
        if pending is None or now >= stacks["until"]:
            lock(session, f"stacks:{req.id}")
            session.refresh(req)
            if req.state == "pending":
                finish(session, req)
            return None
        later = min(stacks["until"], now + LOOK_EVERY_S)
        incident.due_at = datetime.fromtimestamp(later, UTC)
    ctx.stacks.add(asked)
    return later - now


def diagnose(ctx: IncidentContext, incident_id: int) -> Result:
    """The hang's diagnosis: the job tracker's observation, localised by the ranks' stacks when they came."""
    with ctx.sessions() as session:
        incident = session.get(Incident, incident_id)
        assert incident is not None
        inputs = incident.inputs or {}
        node = session.get(Node, incident.node_id) if incident.node_id is not None else None
        base = diagnose_hang(str(inputs.get("hang") or "no step progress and idle GPUs"), node.name if node else None)
        stacks = inputs.get("stacks") or {}
        req = session.get(StackRequest, stacks["request"]) if stacks.get("request") else None
        if req is None or not req.analysis:
            note = stacks.get("note") or "no stack capture was made"
            return replace(base, explanation=f"{base.explanation} The ranks' stacks are unknown: {note}.")
        return localised(session, incident, base, req.analysis)


def localised(session: Session, incident: Incident, base: Result, analysis: dict[str, Any]) -> Result:
    """``base`` with the stack analysis: the suspect named, its frames as evidence, and the reason of a
    hardware Xid its node logged during the run (whose action excludes the node), if any."""
    suspects, nodes = list(analysis.get("suspects") or []), list(analysis.get("suspect_nodes") or [])
    evidence = list(base.evidence)
    lines = [
        *analysis.get("evidence", []),
        *(f"rank {f['rank']} ({f['node']}): {f['error']}" for f in analysis.get("failed", [])),
    ]
    evidence += [Evidence(file=STACKS_SOURCE, line=i, text=text) for i, text in enumerate(lines, 1)]
    why = str(analysis.get("why") or "")
    if not suspects:
        return replace(base, evidence=tuple(evidence), explanation=f"{base.explanation} Stacks: {why}.")
    rank = suspects[0] if len(suspects) == 1 else None
    node = nodes[0] if len(nodes) == 1 else base.node
    explanation = (
        f"{base.explanation} Stacks: {why}; suspect {'rank' if rank is not None else 'ranks'} "
        f"{', '.join(map(str, suspects))} on {', '.join(nodes)}."
    )
    result = replace(base, evidence=tuple(evidence), node=node, rank=rank, explanation=explanation)
    if len(nodes) != 1:
        return result
    hardware = node_hardware(session, nodes[0], incident)
    if hardware is None:
        return replace(result, explanation=f"{explanation} No hardware evidence on {nodes[0]}: restart, not exclude.")
    reason, line = hardware
    return replace(
        result,
        reason=reason,
        evidence=(*result.evidence, Evidence(file=f"{KERNEL_STREAM}@{nodes[0]}", line=1, text=line)),
        explanation=f"{explanation} {nodes[0]} logged a hardware Xid during the run ({line}): {reason}.",
    )


def node_hardware(session: Session, node_name: str, incident: Incident) -> tuple[str, str] | None:
    """A hardware Xid the node logged (NVML event or kernel line) since the incident's run started:
    (its reason, the line); None without one. Node-local evidence that the node, not the job, is at fault."""
    node = session.scalar(select(Node).where(Node.name == node_name))
    run = session.get(Run, incident.run_id) if incident.run_id is not None else None
    if node is None or run is None:
        return None
    for e in session.scalars(
        select(EventRow)
        .where(EventRow.node_id == node.id, EventRow.kind == "xid", EventRow.ts >= run.started_at)
        .order_by(EventRow.ts)
        .limit(1000)
    ):
        code = int(e.data.get("xid") or 0)
        if (reason := xid_reason(code)) is not None:
            return reason, xid_event_line(e.gpu_index, code, e.message)
    for text in session.scalars(
        select(LogLineRow.text)
        .where(LogLineRow.node_id == node.id, LogLineRow.stream == KERNEL_STREAM, LogLineRow.ts >= run.started_at)
        .order_by(LogLineRow.seq)
        .limit(100_000)
    ):
        if (code := fatal_xid_in_line(text)) is not None and (reason := xid_reason(code)) is not None:
            return reason, text
    return None
