"""Failed runs on a node whose agent is silent: wait for it, then say so and restart elsewhere.

A node's agent that has not spoken for `node_timeout_s` (`nodes.agent_seen_at`; a supervisor's words do
not count) has shipped nothing since: an Xid its kernel logged meanwhile is unseen, and a diagnosis
without it blames the job. So before a failed run is diagnosed, when a node of the run (its own, and a
multi-node job's `member_nodes`) has a silent agent, the incident waits up to `recovery.silent_node_wait_s`
for it to speak: its wait is in the incident's `inputs["silent"]` and its next look in `due_at`, so a
server restarted meanwhile resumes it. An agent that speaks gets one `incident_settle_s` more for its
backlog to land, then the run is diagnosed with it. Whatever the outcome, the diagnosis says which agents
were silent since when, and a node still silent when the wait ends is not restarted onto (`decide`'s
`silent_nodes`).
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpuwatch.diagnosis.model import Diagnosis as Result
from server.incidents.context import IncidentContext
from server.store.db import lock, transaction
from server.store.models import Incident, Job, Node, Run

#: How often a waiting incident looks again whether the silent agents spoke, at most.
LOOK_EVERY_S = 0.5


def hold(ctx: IncidentContext, incident_id: int, now: float | None = None) -> float | None:
    """Seconds until the open incident should be looked at again, while it waits for a silent agent (its
    `due_at` set to then); None when it may be diagnosed now. One transaction under the incident's lock."""
    now = time.time() if now is None else now
    with transaction(ctx.sessions) as session:
        lock(session, f"incident:{incident_id}")
        incident = session.get(Incident, incident_id)
        if incident is None or incident.state != "open" or incident.run_id is None:
            return None
        inputs: dict[str, Any] = dict(incident.inputs or {})
        wait: dict[str, Any] | None = dict(inputs["silent"]) if inputs.get("silent") else None  # a copy: a JSON
        # column changed in place compares equal to itself, and is not written
        silent = _silent(session, incident, now - ctx.settings.server.node_timeout_s)
        if wait is None:
            if not silent:
                return None
            wait = {"since": silent, "from": now, "until": now + ctx.settings.recovery.silent_node_wait_s}
        if wait.get("still") is not None:
            return None  # the wait is over: decided before
        if silent and now < wait["until"]:
            later = min(wait["until"], now + LOOK_EVERY_S)
        elif silent:  # the wait is over, they are still silent
            wait["still"] = sorted(silent)
            later = None
        elif "heard" not in wait:  # every one spoke: let its backlog land
            wait["heard"] = now
            later = now + ctx.settings.server.incident_settle_s
        else:
            wait["still"] = []
            later = None
        incident.inputs = {**inputs, "silent": wait}
        if later is None:
            return None
        incident.due_at = datetime.fromtimestamp(later, UTC)
        return later - now


def still_silent(incident: Incident) -> list[str]:
    """The nodes whose agent was still silent when the incident's wait ended: not to restart onto."""
    return list(((incident.inputs or {}).get("silent") or {}).get("still") or [])


def flag(result: Result, inputs: dict[str, Any] | None) -> Result:
    """The diagnosis, its explanation saying which nodes' agents were silent, since when, and whether they
    spoke again: evidence they logged meanwhile may be missing from it."""
    wait = (inputs or {}).get("silent")
    if not wait:
        return result
    still = set(wait.get("still") or [])
    notes = []
    for name, since in sorted(wait["since"].items()):
        at = datetime.fromtimestamp(since, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        if name in still:
            notes.append(
                f"Node {name}'s agent was silent since {at} and still was after a wait of "
                f"{wait['until'] - wait['from']:g} s: what it logged since is unseen, and may be missing from this "
                "diagnosis; the job is not restarted onto it."
            )
        else:
            notes.append(f"Node {name}'s agent was silent since {at}; it spoke again before the diagnosis.")
    note = " ".join(notes)
    return replace(result, explanation=f"{result.explanation}\n{note}" if result.explanation else note)


def _silent(session: Session, incident: Incident, before: float) -> dict[str, float]:
    """The run's nodes whose agent was last heard before ``before``, with when; a node never heard from by
    an agent has none to wait for."""
    run = session.get(Run, incident.run_id)
    job = session.get(Job, incident.job_id) if incident.job_id is not None else None
    names = set(job.member_nodes or []) if job is not None else set()
    rows = session.execute(
        select(Node.name, Node.agent_seen_at).where((Node.id == run.node_id) | Node.name.in_(sorted(names)))
    )
    cutoff = datetime.fromtimestamp(before, UTC)
    return {name: seen.timestamp() for name, seen in rows if seen is not None and seen < cutoff}
