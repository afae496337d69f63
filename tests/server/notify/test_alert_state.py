"""Which alerts the server asserts, derived from the database and the GPU state rebuilt from it, on SQLite
and PostgreSQL: the rules' windows, codes and joins, and the labels each alert gets."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from gpuwatch.protocol import GpuInfo
from server.notify.alert_state import active_alerts
from server.store.db import make_engine, make_sessionmaker, transaction
from server.store.models import Diagnosis, Incident, Job, Node, Run, XidCount
from server.store.xids import NO_GPU
from server.telemetry.latest import NO_FAULTS, Telemetry

NODE_TIMEOUT_S = 30.0


def _diagnose(s, incident: Incident, reason: str = "host_oom") -> None:  # type: ignore[no-untyped-def]
    s.add(
        Diagnosis(
            incident_id=incident.id,
            reason=reason,
            category="framework",
            action="notify",
            confidence=0.9,
            source="rules",
        )
    )


def test_the_alerts_follow_the_stored_state(db_url: str) -> None:
    now = time.time()
    at = datetime.fromtimestamp(now, UTC)
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    try:
        with transaction(sessions) as s:
            n1, n2 = Node(name="n1"), Node(name="n2")
            s.add_all([n1, n2])
            s.flush()
            for node, gpu, xid, ago in [
                (n1, 2, 48, timedelta(minutes=10)),  # fatal, in its hour
                (n1, NO_GPU, 94, timedelta(minutes=5)),  # fatal, naming no GPU
                (n1, 3, 48, timedelta(hours=2)),  # fatal, its hour over
                (n1, 1, 13, timedelta(0)),  # an application's Xid
                (n1, 0, 79, timedelta(minutes=1)),  # fell off the bus: GPU 0 is known
                (n1, 4, 79, timedelta(minutes=20)),  # fell off, 10 minutes over
                (n2, 5, 79, timedelta(minutes=1)),  # no age series for it: the rule's join finds none
            ]:
                s.add(XidCount(node_id=node.id, gpu=gpu, xid=xid, count=1, last_at=at - ago))
            job = Job(name="llama")
            s.add(job)
            s.flush()
            runs = [Run(job_id=job.id, attempt=i) for i in (1, 2)]
            s.add_all(runs)
            s.flush()
            failed = Incident(trigger="run_failed", job_id=job.id, run_id=runs[0].id, node_id=n1.id)
            undiagnosed = Incident(trigger="run_failed", job_id=job.id, run_id=runs[1].id, node_id=n1.id)
            node_only = Incident(trigger="xid", node_id=n1.id)
            closed = Incident(trigger="run_failed", job_id=job.id, run_id=runs[1].id, node_id=n1.id, closed_at=at)
            s.add_all([failed, undiagnosed, node_only, closed])
            s.flush()
            for incident in (failed, node_only, closed):
                _diagnose(s, incident)
            failed_id = failed.id
        telemetry = Telemetry()
        telemetry.restore_node("n1", now, now)
        for gpu, sampled in ((0, now - 1), (6, now - 100)):  # GPU 6 unheard for 100 s while its agent spoke
            telemetry.restore_gpu("n1", GpuInfo(index=gpu, uuid=f"GPU-{gpu}", name="H100"), sampled, NO_FAULTS)
        found = {(a.rule.name, a.labels): a.until for a in active_alerts(sessions, telemetry, NODE_TIMEOUT_S, now)}
    finally:
        engine.dispose()
    xid48 = ("GpuFatalXid", (("instance", "n1"), ("gpu", "2"), ("xid", "48")))
    assert found == {
        xid48: (at - timedelta(minutes=10)).timestamp() + 3600,
        ("GpuFatalXid", (("instance", "n1"), ("xid", "94"))): (at - timedelta(minutes=5)).timestamp() + 3600,
        ("GpuFellOffTheBus", (("instance", "n1"), ("gpu", "0"))): (at - timedelta(minutes=1)).timestamp() + 600,
        ("GpuFellOffTheBus", (("instance", "n1"), ("gpu", "6"))): None,  # while it is lost
        (
            "GpuwatchJobFailed",
            (
                ("incident", str(failed_id)),
                ("job", "llama"),
                ("node", "n1"),
                ("run", str(runs[0].id)),
                ("trigger", "run_failed"),
                ("reason", "host_oom"),
                ("category", "framework"),
            ),
        ): None,
    }


def test_a_replayed_xid_holds_from_its_arrival_as_the_rule_does(db_url: str) -> None:
    """An Xid that arrives 50 minutes late (an agent's spool replayed after an outage) grows the counter now,
    so the Prometheus rule fires for its hour from now; the server's own alert must hold as long, or its
    resolve would come while the rule still fires (a resolved, then a second firing notification)."""
    from gpuwatch.protocol import Event
    from server.store.xids import add_xid_counts

    now = time.time()
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    try:
        with transaction(sessions) as s:
            node = Node(name="n1")
            s.add(node)
            s.flush()
            late = Event(stream="nvml", seq=1, ts=now - 3000, kind="xid", gpu=2, data={"xid": 48})
            add_xid_counts(s, node.id, [late], cap=100)
        alerts = [a for a in active_alerts(sessions, Telemetry(), NODE_TIMEOUT_S, time.time()) if a.until]
    finally:
        engine.dispose()
    assert [a.rule.name for a in alerts] == ["GpuFatalXid"]
    assert alerts[0].until >= now + 3600
