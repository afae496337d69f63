"""An admin's verdict on an incident's diagnosis: confirmed (the same reason) or corrected (another).

The diagnosis stays as the machine made it; the label is stored beside it (who, when, the reason, a
note) and written to the admin audit log in the same transaction. Labels are what on-call teaches the
rules with: `gpuwatch corpus export` turns labelled incidents into corpus cases, and
`gpuwatch rules suggest` proposes rules for the ones the rules get wrong.

`gpuwatch_diagnosis_corrections_total{from,to}` counts them. It is read from the database at each
scrape, not kept in memory: labels come from the API and from the CLI (another process), from any
replica, and a restart must not reset what an alert or a dashboard reads.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from gpuwatch.taxonomy import REASONS
from server.store.audit import audit
from server.store.db import lock
from server.store.models import Diagnosis, Incident, IncidentLabel

log = logging.getLogger("gpuwatch.server")

MAX_NOTE = 2000
CORRECTIONS = "gpuwatch_diagnosis_corrections"
_HELP = (
    "Incident diagnoses an admin labelled, by the diagnosed reason (from) and the reason it really was "
    "(to); a confirmation counts from=to. Read from the database."
)


class NotDiagnosed(RuntimeError):
    """The incident has no diagnosis yet: there is nothing to confirm or correct."""


def check_label(reason: str, note: str | None) -> None:
    """ValueError naming what is wrong with a label before anything is read or written."""
    if reason not in REASONS:
        raise ValueError(f"reason {reason!r} is not in the failure taxonomy; one of: {', '.join(REASONS)}")
    if note is not None and len(note) > MAX_NOTE:
        raise ValueError(f"note: at most {MAX_NOTE} characters ({len(note)} given)")


def label_incident(session: Session, incident_id: int, reason: str, note: str | None, actor: str) -> IncidentLabel:
    """Label the incident's latest diagnosis with ``reason``, in the caller's transaction, audited
    (`incident.label`). ValueError for a reason outside the taxonomy or a note too long, LookupError
    for no such incident, NotDiagnosed when it has no diagnosis yet."""
    check_label(reason, note)
    lock(session, f"incident:{incident_id}")
    if session.get(Incident, incident_id) is None:
        raise LookupError(f"no incident {incident_id}")
    diagnosis = session.scalar(
        select(Diagnosis).where(Diagnosis.incident_id == incident_id).order_by(Diagnosis.id.desc()).limit(1)
    )
    if diagnosis is None:
        raise NotDiagnosed(f"incident {incident_id} has no diagnosis yet; label it once it is diagnosed")
    row = IncidentLabel(
        incident_id=incident_id,
        diagnosis_id=diagnosis.id,
        diagnosed=diagnosis.reason,
        reason=reason,
        note=note or None,
        actor=actor[:255],
    )
    session.add(row)
    session.flush()
    kind = "confirmed" if reason == diagnosis.reason else "corrected"
    audit(
        session,
        actor,
        "incident.label",
        f"incident {incident_id}",
        diagnosed=diagnosis.reason,
        reason=reason,
        verdict=kind,
        note=note or None,
        label_id=row.id,
    )
    return row


def latest_label(session: Session, incident_id: int) -> IncidentLabel | None:
    return session.scalar(
        select(IncidentLabel).where(IncidentLabel.incident_id == incident_id).order_by(IncidentLabel.id.desc()).limit(1)
    )


def correction_counts(session: Session) -> dict[tuple[str, str], int]:
    """How many labels there are per (diagnosed reason, labelled reason)."""
    rows = session.execute(
        select(IncidentLabel.diagnosed, IncidentLabel.reason, func.count()).group_by(
            IncidentLabel.diagnosed, IncidentLabel.reason
        )
    ).tuples()
    return {(a, b): n for a, b, n in rows}


class CorrectionsCollector(Collector):
    """Exports `gpuwatch_diagnosis_corrections_total{from,to}`, one series per pair labelled at least
    once; both labels are reasons of the taxonomy (at most 24 x 24 series). A database that does not
    answer leaves the family empty for that scrape rather than failing /metrics."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def describe(self) -> Iterator[Metric]:
        yield Metric(CORRECTIONS, _HELP, "counter")

    def collect(self) -> Iterator[Metric]:
        family = Metric(CORRECTIONS, _HELP, "counter")
        try:
            with self._sessions() as session:
                counts = correction_counts(session)
        except SQLAlchemyError as exc:
            log.warning("%s: cannot read incident labels (%s)", CORRECTIONS, str(exc).splitlines()[0])
            counts = {}
        for (diagnosed, reason), n in sorted(counts.items()):
            if diagnosed in REASONS and reason in REASONS:
                family.add_sample(CORRECTIONS + "_total", {"from": diagnosed, "to": reason}, float(n))
        yield family
