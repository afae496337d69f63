"""What the incident code tells on-call: one notice per step of an incident, through `server.notify`."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from gpuwatch.diagnosis.model import Diagnosis as Result
from gpuwatch.recovery import Decision
from server.notify.webhooks import Event, IncidentNotice, Notifier
from server.store.models import Incident, Job, Node, Run


def send(
    notifier: Notifier | None,
    sessions: sessionmaker[Session],
    event: Event,
    incident_id: int,
    result: Result | None,
    decision: Decision | None = None,
    summary: str | None = None,
) -> None:
    """Queue a notice (never blocks, never raises past the notifier); nothing when none is configured."""
    if notifier is None or not notifier.targets:
        return
    with sessions() as session:
        incident = session.get(Incident, incident_id)
        if incident is None:
            return
        job = session.get(Job, incident.job_id) if incident.job_id is not None else None
        run = session.get(Run, incident.run_id) if incident.run_id is not None else None
        node = session.get(Node, incident.node_id) if incident.node_id is not None else None
        job_name = _jobs(incident, job)
        attempt = run.attempt if run else None
        node_name = node.name if node else None
    action = decision.outcome if decision else None
    why = summary if summary is not None else (decision.why if decision else None)
    if result is None:
        notice = IncidentNotice(event, incident_id, job_name, attempt, node_name, action=action, summary=why or "")
    else:
        notice = IncidentNotice.from_diagnosis(
            event, incident_id, job_name, result, attempt=attempt, node=node_name, action=action, summary=why
        )
    notifier.notify(notice)


def _jobs(incident: Incident, job: Job | None) -> str:
    """The job the notice is about: the run's; for a node's incident (no run: a silent node, an Xid)
    every job at work on the node when it opened, from its snapshot; else the incident's own."""
    on_node = [str(entry["job"]) for entry in (incident.snapshot or {}).get("jobs") or []]
    if incident.run_id is None and on_node:
        return ", ".join(on_node)
    return job.name if job else f"(no job: {incident.trigger})"
