"""Opening an incident when a run fails, and diagnosing it from the logs the agents stored.

The diagnosis waits `incident_settle_s` after the exit so that log lines still in the agent's last
batch arrive first, then reads the run's streams and the node's kernel log since the run started,
and calls the same `gpuwatch.diagnosis.diagnose` as the CLI."""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import select

from gpuwatch.diagnosis.diagnose import diagnose
from gpuwatch.diagnosis.model import LogSource
from server.api.deps import Services
from server.store.db import transaction
from server.store.models import Diagnosis, Incident, LogLineRow, Node, Run, utcnow

log = logging.getLogger("gpuwatch.server.incidents")

KERNEL_STREAM = "kernel"
MAX_LINES_PER_STREAM = 200_000


@dataclass(frozen=True, slots=True)
class StreamExit:
    """A log stream of a failed run, with the rank it is (if one) and how that process ended."""

    stream: str
    rank: int | None
    exit_code: int | None
    signal: int | None


def open_incident(svc: Services, run_id: int, node_id: int, trigger: str, streams: list[StreamExit]) -> int:
    with transaction(svc.sessions) as session:
        run = session.get(Run, run_id)
        assert run is not None
        incident = Incident(job_id=run.job_id, run_id=run.id, node_id=node_id, trigger=trigger, state="open")
        session.add(incident)
        session.flush()
        incident_id = incident.id
    timer = threading.Timer(svc.settings.incident_settle_s, _diagnose_safely, args=(svc, incident_id, streams))
    timer.daemon = True
    timer.start()
    return incident_id


def _diagnose_safely(svc: Services, incident_id: int, streams: list[StreamExit]) -> None:
    try:
        diagnose_incident(svc, incident_id, streams)
    except Exception:  # a failed diagnosis leaves the incident open, and says why in the log
        log.exception("diagnosis of incident %d failed", incident_id)


def diagnose_incident(svc: Services, incident_id: int, streams: list[StreamExit]) -> None:
    with svc.sessions() as session:
        incident = session.get(Incident, incident_id)
        assert incident is not None and incident.run_id is not None
        run = session.get(Run, incident.run_id)
        node = session.get(Node, incident.node_id)
        assert run is not None and node is not None
        since = run.started_at - timedelta(minutes=5)
        sources = []
        for s in [*streams, StreamExit(KERNEL_STREAM, None, None, None)]:
            lines = session.scalars(
                select(LogLineRow.text)
                .where(LogLineRow.node_id == node.id, LogLineRow.stream == s.stream, LogLineRow.ts >= since)
                .order_by(LogLineRow.seq)
                .limit(MAX_LINES_PER_STREAM)
            ).all()
            if lines or s.exit_code or s.signal:
                sources.append(
                    LogSource(
                        file=s.stream,
                        lines=list(lines),
                        node=node.name,
                        rank=s.rank,
                        exit_code=s.exit_code,
                        signal=s.signal,
                    )
                )
    llm = None
    if os.environ.get("GPUWATCH_LLM_BASE_URL"):
        from gpuwatch.diagnosis.llm import LlmAnalyser

        llm = LlmAnalyser.from_env(os.environ)
    result = diagnose(sources, llm=llm)
    with transaction(svc.sessions) as session:
        session.add(
            Diagnosis(
                incident_id=incident_id,
                reason=result.reason,
                category=result.category,
                action=result.action,
                confidence=result.confidence,
                source=result.source,
                node_name=result.node or node.name,
                rank=result.rank,
                evidence=[{"file": e.file, "line": e.line, "text": e.text} for e in result.evidence],
                explanation=result.explanation,
            )
        )
        incident_row = session.get(Incident, incident_id)
        assert incident_row is not None
        incident_row.state = "diagnosed"
    svc.metrics.failures.labels(result.reason, result.category).inc()
    log.warning("incident %d: %s on %s (%s)", incident_id, result.reason, result.node or node.name, result.source)


def mark_exit(run: Run, exit_code: int | None, signal: int | None) -> bool:
    """Record how a run ended; True when it failed."""
    run.exit_code, run.signal, run.ended_at = exit_code, signal, utcnow()
    failed = bool(signal) or (exit_code is not None and exit_code != 0)
    run.state = "failed" if failed else "succeeded"
    return failed
