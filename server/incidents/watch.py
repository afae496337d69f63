"""Incidents that no run reports: a fatal Xid arriving from a node, and a node that goes silent.

A fatal Xid (one that `gpuwatch.diagnosis.xid` maps to a hardware or link failure) in a stored batch,
as an NVML event or an NVRM line of the node's kernel stream, opens an `xid` incident for that node,
unless one was opened for it within `incident_dedupe_s`: an Xid storm is one incident. Lines older
than the look-back (a kernel buffer replayed by a freshly started agent) open nothing.

A node whose agent has not been heard from for `node_timeout_s` opens one `node_silent` incident per
silence, diagnosed `node_failure` at once. Only nodes heard from since this server started are
watched (the last-seen times live in memory).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpuwatch.diagnosis.diagnose import diagnose_silence
from gpuwatch.diagnosis.xid import fatal_xid_in_line, xid_reason
from gpuwatch.protocol import Batch
from server.api.deps import Services
from server.incidents.diagnose import KERNEL_STREAM, LOOKBACK, open_incident
from server.store.models import Incident, JobRank, Node, Run

log = logging.getLogger("gpuwatch.server.incidents")


def fatal_xids(batch: Batch, now: float) -> list[int]:
    """The fatal Xid codes in ``batch`` that are recent enough to act on."""
    oldest = now - LOOKBACK.total_seconds()
    codes = [
        int(e.data["xid"])
        for e in batch.events
        if e.kind == "xid" and e.ts >= oldest and xid_reason(int(e.data.get("xid") or 0))
    ]
    for line in batch.logs:
        if line.stream == KERNEL_STREAM and line.ts >= oldest and (code := fatal_xid_in_line(line.text)):
            codes.append(code)
    return codes


def open_xid_incident(svc: Services, node_id: int, node_name: str, codes: list[int]) -> int | None:
    """Open an `xid` incident for the fatal Xid ``codes`` from a node (see `fatal_xids`), unless one was
    opened within `incident_dedupe_s`; the new incident's id, or None."""
    with svc.sessions() as session:
        window = datetime.now(UTC) - timedelta(seconds=svc.settings.incident_dedupe_s)
        recent = session.scalar(
            select(Incident.id).where(
                Incident.node_id == node_id, Incident.trigger == "xid", Incident.opened_at >= window
            )
        )
        if recent is not None:
            return None
        job_id = running_job(session, node_id)
    log.warning("fatal Xid %s from %s", ", ".join(map(str, sorted(set(codes)))), node_name)
    return open_incident(svc, node_id=node_id, trigger="xid", job_id=job_id)


def running_job(session: Session, node_id: int) -> int | None:
    """The job with a running run and a rank on the node (the latest, if several)."""
    return session.scalar(
        select(Run.job_id)
        .join(JobRank, JobRank.job_id == Run.job_id)
        .where(JobRank.node_id == node_id, Run.state == "running")
        .order_by(Run.id.desc())
        .limit(1)
    )


class SilenceWatch:
    """Opens a `node_silent` incident the first time a node passes its timeout, and re-arms when the
    node is heard from again."""

    def __init__(self, svc: Services) -> None:
        self._svc = svc
        self._silent: set[str] = set()

    def check(self, now: float | None = None) -> list[int]:
        now = time.time() if now is None else now
        timeout = self._svc.settings.node_timeout_s
        opened = []
        for node in self._svc.telemetry.nodes():
            if node.last_seen is None:
                continue
            silent_for = now - node.last_seen
            if silent_for <= timeout:
                self._silent.discard(node.name)
                continue
            if node.name in self._silent:
                continue
            self._silent.add(node.name)
            with self._svc.sessions() as session:
                node_id = session.scalar(select(Node.id).where(Node.name == node.name))
                job_id = running_job(session, node_id) if node_id is not None else None
            if node_id is None:
                continue
            log.warning("node %s silent for %.0f s", node.name, silent_for)
            result = diagnose_silence(node.name, silent_for, timeout)
            opened.append(
                open_incident(self._svc, node_id=node_id, trigger="node_silent", job_id=job_id, result=result)
            )
        return opened
