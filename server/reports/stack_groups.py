"""The post-mortem's stack groups: a hang incident's ranks grouped by where their stacks were when it was
captured (server/incidents/stacks.py), the suspects marked. Read from the incident's stack request."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.reports.document import StackGroupRow, StackGroups
from server.store.models import StackRequest

#: Groups shown at most (a large job's ranks rarely split into more; the rest are counted).
MAX_GROUPS = 20


def gather(session: Session, incident_id: int) -> StackGroups | None:
    """The incident's stack groups; None when no capture was made for it (not a hang, or none asked)."""
    req = session.scalar(
        select(StackRequest).where(StackRequest.incident_id == incident_id).order_by(StackRequest.id).limit(1)
    )
    if req is None:
        return None
    analysis = req.analysis or {}
    rows = tuple(
        StackGroupRow(
            ranks=tuple(int(r) for r in g.get("ranks") or ()),
            nodes=tuple(str(n) for n in g.get("nodes") or ()),
            collective=g.get("collective"),
            frames=tuple(str(f) for f in g.get("top") or ()),
            suspect=bool(g.get("suspect")),
            flight=str(g.get("flight") or ""),
        )
        for g in (analysis.get("groups") or [])[:MAX_GROUPS]
    )
    failed = tuple(f"rank {f['rank']} ({f['node']}): {f['error']}" for f in analysis.get("failed") or [])
    why = str(analysis.get("why") or "") if req.state != "pending" else "the capture is still waiting for its answers"
    return StackGroups(
        state=req.state,
        why=why,
        groups=rows,
        more=max(0, len(analysis.get("groups") or []) - MAX_GROUPS),
        failed=failed,
    )
