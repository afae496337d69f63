"""`gpuwatch_incident_info`: the most recent incidents as labelled series, for Grafana's tables.

Read from the database at each scrape (one query), not kept in memory: the incident rows change
behind the exporter's back (diagnosis on a timer thread, decisions, a supervisor's replayed
outbox), and the database is where they are already correct.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from sqlalchemy import Select, func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, aliased, sessionmaker

from server.store.models import Action, Diagnosis, Incident, Job, Node

log = logging.getLogger("gpuwatch.server")

NAME = "gpuwatch_incident_info"
LABELS = ("incident", "job", "node", "trigger", "reason", "category", "action", "state")
HELP = (
    "The most recent incidents, 1 each: job, node (the one the diagnosis blames, else where it was "
    "opened), trigger, diagnosed reason and category, action (the recovery decision, else the "
    "diagnosis's default) and state."
)


def incidents_query(limit: int) -> Select[Any]:
    """The ``limit`` most recent incidents with their job, node, latest diagnosis and latest
    decision's outcome, newest first."""
    recent = (
        select(Incident.id, Incident.job_id, Incident.node_id, Incident.trigger, Incident.state)
        .order_by(Incident.id.desc())
        .limit(limit)
        .subquery("recent")
    )
    other = aliased(Diagnosis)
    latest_diagnosis = (
        select(func.max(other.id)).where(other.incident_id == recent.c.id).correlate(recent).scalar_subquery()
    )
    decision = (
        select(Action.params["outcome"].as_string())
        .where(Action.incident_id == recent.c.id, Action.kind == "decision")
        .order_by(Action.id.desc())
        .limit(1)
        .correlate(recent)
        .scalar_subquery()
    )
    return (
        select(
            recent.c.id,
            Job.name,
            func.coalesce(Diagnosis.node_name, Node.name),
            recent.c.trigger,
            Diagnosis.reason,
            Diagnosis.category,
            func.coalesce(decision, Diagnosis.action),
            recent.c.state,
        )
        .outerjoin(Job, Job.id == recent.c.job_id)
        .outerjoin(Node, Node.id == recent.c.node_id)
        .outerjoin(Diagnosis, Diagnosis.id == latest_diagnosis)
        .order_by(recent.c.id.desc())
    )


class IncidentCollector(Collector):
    """Exports `gpuwatch_incident_info{incident, job, node, trigger, reason, category, action, state} 1`
    for the ``limit`` most recent incidents; a label not known yet (no diagnosis, no job) is "".

    A database that does not answer leaves the family empty for that scrape rather than failing
    /metrics: the GPU series matter more than the incident table."""

    def __init__(self, sessions: sessionmaker[Session], limit: int = 50) -> None:
        self._sessions = sessions
        self._query = incidents_query(limit)

    def describe(self) -> Iterator[Metric]:
        """The family without its samples: registration needs no database."""
        yield Metric(NAME, HELP, "gauge")

    def collect(self) -> Iterator[Metric]:
        family = Metric(NAME, HELP, "gauge")
        try:
            with self._sessions() as session:
                rows = session.execute(self._query).tuples().all()
        except SQLAlchemyError as exc:
            log.warning("%s: cannot read incidents (%s)", NAME, str(exc).splitlines()[0])
            rows = []
        for row in rows:
            values = ("" if value is None else str(value) for value in row)
            family.add_sample(NAME, dict(zip(LABELS, values, strict=True)), 1.0)
        yield family
