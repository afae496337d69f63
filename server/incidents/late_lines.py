"""A failed run's lines that reach the server after its exit: the diagnosis waits for them.

A supervisor reports the exit once it has tried to deliver the run's last lines, but a server that is
overloaded, restarting or briefly unwilling (503, 429) can take the exit first; diagnosed then, the run
has no evidence, is `unknown`, and is restarted whatever killed it. So the exit says how many lines
each stream has (`RunExit.lines`), and before the incident is diagnosed it waits, up to
`server.incident_lines_wait_s`, until each stream's last line is stored. The wait lives in the incident's
`inputs["lines"]` and its next look in `due_at`, so a server restarted meanwhile resumes it. Lines that
never came are named in the diagnosis's explanation.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpuwatch.diagnosis.model import Diagnosis as Result
from server.incidents.context import IncidentContext
from server.store.db import lock, transaction
from server.store.models import Incident, LogLineRow

#: How often a waiting incident looks again whether the lines arrived, at most.
LOOK_EVERY_S = 0.25


def expect(streams: list[str], counts: dict[str, int]) -> dict[str, Any] | None:
    """The wait to store with a new incident: the counts of the exit's own streams (a count for a stream
    the exit does not name is ignored)."""
    wanted = {s: n for s, n in counts.items() if s in streams and n > 0}
    return {"expected": wanted} if wanted else None


def hold(ctx: IncidentContext, incident_id: int, now: float | None = None) -> float | None:
    """Seconds until the open incident should be looked at again, while lines its exit counted are
    missing (its `due_at` set to then); None when it may be diagnosed now. One transaction under the
    incident's lock."""
    now = time.time() if now is None else now
    with transaction(ctx.sessions) as session:
        lock(session, f"incident:{incident_id}")
        incident = session.get(Incident, incident_id)
        if incident is None or incident.state != "open" or incident.node_id is None:
            return None
        inputs: dict[str, Any] = dict(incident.inputs or {})
        wait: dict[str, Any] | None = dict(inputs["lines"]) if inputs.get("lines") else None  # a copy: see
        # silent_nodes.hold
        if wait is None or "missing" in wait:
            return None  # nothing counted, or the wait is over
        missing = _missing(session, incident.node_id, wait["expected"])
        wait.setdefault("until", now + ctx.settings.server.incident_lines_wait_s)
        if missing and now < wait["until"]:
            later: float | None = min(wait["until"], now + LOOK_EVERY_S)
        else:
            wait["missing"], later = missing, None
        incident.inputs = {**inputs, "lines": wait}
        if later is None:
            return None
        incident.due_at = datetime.fromtimestamp(later, UTC)
        return later - now


def _missing(session: Session, node_id: int, expected: dict[str, int]) -> dict[str, int]:
    """Per stream, how many of its ``expected`` lines are not stored (by its last sequence number: batches
    arrive in order, so a stream whose last line is here has the others, save those dropped on the way)."""
    rows = session.execute(
        select(LogLineRow.stream, func.max(LogLineRow.seq))
        .where(LogLineRow.node_id == node_id, LogLineRow.stream.in_(list(expected)))
        .group_by(LogLineRow.stream)
    )
    last = {stream: seq for stream, seq in rows}
    out = {}
    for stream, count in expected.items():
        have = last.get(stream)
        if have is None or have + 1 < count:
            out[stream] = count - (0 if have is None else have + 1)
    return out


def flag(result: Result, inputs: dict[str, Any] | None) -> Result:
    """The diagnosis, its explanation saying which streams' last lines never arrived."""
    missing = ((inputs or {}).get("lines") or {}).get("missing")
    if not missing:
        return result
    named = ", ".join(f"{stream} ({n} line{'s' if n != 1 else ''})" for stream, n in sorted(missing.items()))
    note = f"Lines its supervisor counted had not arrived when the run was diagnosed: {named}: unseen evidence."
    return replace(result, explanation=f"{result.explanation}\n{note}" if result.explanation else note)
