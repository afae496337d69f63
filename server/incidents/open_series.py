"""`gpuwatch_incident_open`: each incident not yet closed as one series naming its job, node and run,
for alerts that say what failed (GpuwatchJobFailed, GpuwatchNodeIncident).

An incident is an event, not a series per job forever, so the family is bounded three ways: a series
exists only while its incident is open (no `closed_at`: a later run of the job has not succeeded);
an incident older than `OPEN_FOR` is history (a stopped job, a node never repaired), not a page; and
at most `limit` of the newest are exported, the rest counted in `gpuwatch_incident_open_overflow`.

Read from the database at each scrape, like `gpuwatch_incident_info`: nothing is kept in memory, so
a server restart neither loses an open incident's series nor duplicates it, and every replica
exports the same series (fold them with `max without (replica, instance)`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from sqlalchemy import Select, func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, aliased, sessionmaker

from server.store.models import Diagnosis, Incident, Job, Node

log = logging.getLogger("gpuwatch.server")

NAME = "gpuwatch_incident_open"
OVERFLOW = "gpuwatch_incident_open_overflow"
LABELS = ("incident", "job", "node", "run", "trigger", "reason", "category")
#: How many open incidents are exported at most (the newest): the bound on the family's series.
LIMIT = 100
#: An incident open for longer than this is no longer exported (nor counted as overflow).
OPEN_FOR = timedelta(days=1)
HELP = (
    f"Incidents not yet closed (at most {LIMIT}, opened in the last {OPEN_FOR.days} day), 1 each: job, "
    "node (the one the diagnosis blames, else where it was opened), run id, trigger, diagnosed reason "
    "and category; empty when not known (yet)."
)
OVERFLOW_HELP = f"Open incidents not exported in {NAME} because more than its limit of series are open."


def _open(since: datetime) -> Any:
    return (Incident.closed_at.is_(None), Incident.opened_at > since)


def open_query(limit: int, since: datetime) -> Select[Any]:
    """The ``limit`` newest incidents opened after ``since`` and not closed, with their job, node and
    latest diagnosis, newest first."""
    recent = (
        select(Incident.id, Incident.job_id, Incident.node_id, Incident.run_id, Incident.trigger)
        .where(*_open(since))
        .order_by(Incident.id.desc())
        .limit(limit)
        .subquery("open_incidents")
    )
    other = aliased(Diagnosis)
    latest = select(func.max(other.id)).where(other.incident_id == recent.c.id).correlate(recent).scalar_subquery()
    return (
        select(
            recent.c.id,
            Job.name,
            func.coalesce(Diagnosis.node_name, Node.name),
            recent.c.run_id,
            recent.c.trigger,
            Diagnosis.reason,
            Diagnosis.category,
        )
        .outerjoin(Job, Job.id == recent.c.job_id)
        .outerjoin(Node, Node.id == recent.c.node_id)
        .outerjoin(Diagnosis, Diagnosis.id == latest)
        .order_by(recent.c.id.desc())
    )


class OpenIncidentCollector(Collector):
    """Exports `gpuwatch_incident_open{incident, job, node, run, trigger, reason, category} 1` for the
    newest ``limit`` open incidents and `gpuwatch_incident_open_overflow` for the others.

    A database that does not answer leaves both families empty for that scrape (the alerts then hold
    through `keep_firing_for`) rather than failing /metrics."""

    def __init__(self, sessions: sessionmaker[Session], limit: int = LIMIT) -> None:
        self._sessions = sessions
        self._limit = limit

    def describe(self) -> Iterator[Metric]:
        """The families without their samples: registration needs no database."""
        yield Metric(NAME, HELP, "gauge")
        yield Metric(OVERFLOW, OVERFLOW_HELP, "gauge")

    def collect(self) -> Iterator[Metric]:
        family, overflow = Metric(NAME, HELP, "gauge"), Metric(OVERFLOW, OVERFLOW_HELP, "gauge")
        since = datetime.now(UTC) - OPEN_FOR
        try:
            with self._sessions() as session:
                rows = session.execute(open_query(self._limit, since)).tuples().all()
                total = session.scalar(select(func.count()).select_from(Incident).where(*_open(since))) or 0
        except SQLAlchemyError as exc:
            log.warning("%s: cannot read incidents (%s)", NAME, str(exc).splitlines()[0])
            yield family
            yield overflow
            return
        for row in rows:
            values = ("" if value is None else str(value) for value in row)
            family.add_sample(NAME, dict(zip(LABELS, values, strict=True)), 1.0)
        overflow.add_sample(OVERFLOW, {}, float(max(0, total - len(rows))))
        yield family
        yield overflow
