"""Which of the server's alerts hold now, derived from what survives a crash: the database (stored Xid
counts, open incidents) and the GPU state the server rebuilds from it at start-up (server/telemetry/
restore.py). Nothing here is remembered between calls, so a restarted server asserts exactly what its
predecessor did, and the set is the one the Prometheus rules compute from the same series:

- GpuFatalXid: a fatal Xid (`FATAL_XIDS`) stored for a node, GPU and code within the rule's hour, from
  ``xid_counts.last_at`` (`gpuwatch_xid_events_total` is that count);
- GpuFellOffTheBus: a GPU judged lost (`server.telemetry.exporter.gpu_lost`, as `gpuwatch_gpu_lost`), or
  one with Xid 79 within ten minutes whose age series exists (the rule joins on it);
- GpuwatchJobFailed: the incidents `gpuwatch_incident_open` exports (the same query, the same bound) of a
  run, once diagnosed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from server.incidents.open_series import LABELS as OPEN_LABELS
from server.incidents.open_series import LIMIT, OPEN_FOR, open_query
from server.notify.alert_rules import (
    ALERTED_XIDS,
    FATAL_XID,
    FATAL_XIDS,
    FELL_OFF_THE_BUS,
    FELL_OFF_XID,
    JOB_FAILED,
    AlertRule,
)
from server.store.models import Node, XidCount
from server.store.xids import NO_GPU
from server.telemetry.exporter import gpu_lost
from server.telemetry.latest import GpuState, Telemetry

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert that holds: its rule, its labels (the rule's, in its order, empty ones left out as
    Prometheus leaves them out), when it began and, for an event's alert, when its window ends."""

    rule: AlertRule
    labels: Labels
    starts_at: float
    until: float | None = None  # None: it holds while its state does

    @property
    def key(self) -> tuple[str, Labels]:
        return self.rule.name, self.labels


def labels_of(rule: AlertRule, values: dict[str, str]) -> Labels:
    """The rule's labels with ``values``; an empty value is no label (Prometheus drops it too)."""
    return tuple((name, values[name]) for name in rule.labels if values.get(name))


def _add(found: dict[tuple[str, Labels], Alert], alert: Alert) -> None:
    """One alert per rule and labels: two reasons for the same (a lost GPU that also had Xid 79) merge,
    the earliest start and the later end kept (None, holding while the state does, is the latest)."""
    old = found.get(alert.key)
    if old is None:
        found[alert.key] = alert
        return
    until = None if old.until is None or alert.until is None else max(old.until, alert.until)
    found[alert.key] = Alert(alert.rule, alert.labels, min(old.starts_at, alert.starts_at), until)


def xid_alerts(session: Session, now: float, has_age: Callable[[str, int], bool]) -> Iterable[Alert]:
    """GpuFatalXid and the Xid 79 side of GpuFellOffTheBus, from the stored counts' last times."""
    windows = {FELL_OFF_XID: FELL_OFF_THE_BUS.window_s or 0.0} | dict.fromkeys(FATAL_XIDS, FATAL_XID.window_s or 0.0)
    since = datetime.fromtimestamp(now - max(windows.values()), UTC)
    rows = session.execute(
        select(Node.name, XidCount.gpu, XidCount.xid, XidCount.last_at)
        .join(Node, Node.id == XidCount.node_id)
        .where(XidCount.xid.in_(sorted(ALERTED_XIDS)), XidCount.last_at > since)
    ).tuples()
    for node, gpu, xid, last_at in rows:
        at = last_at.timestamp()
        until = at + windows[xid]
        if until <= now:
            continue
        gpu_label = "" if gpu == NO_GPU else str(gpu)
        if xid == FELL_OFF_XID:
            if gpu != NO_GPU and has_age(node, gpu):
                yield Alert(
                    FELL_OFF_THE_BUS, labels_of(FELL_OFF_THE_BUS, {"instance": node, "gpu": gpu_label}), at, until
                )
        else:
            values = {"instance": node, "gpu": gpu_label, "xid": str(xid)}
            yield Alert(FATAL_XID, labels_of(FATAL_XID, values), at, until)


def lost_gpu_alerts(
    gpus: Iterable[GpuState], agents: dict[str, float | None], node_timeout_s: float, now: float
) -> Iterable[Alert]:
    """GpuFellOffTheBus for each GPU `gpuwatch_gpu_lost` calls lost (unheard while its agent spoke)."""
    for state in gpus:
        if gpu_lost(state, agents.get(state.node), node_timeout_s):
            values = {"instance": state.node, "gpu": str(state.info.index)}
            # It has been lost since node_timeout_s after its last sample.
            yield Alert(
                FELL_OFF_THE_BUS, labels_of(FELL_OFF_THE_BUS, values), (state.received_at or now) + node_timeout_s
            )


def failed_job_alerts(session: Session, now: float) -> Iterable[Alert]:
    """GpuwatchJobFailed: a run's open incident once diagnosed, as `gpuwatch_incident_open` exports it."""
    since = datetime.fromtimestamp(now, UTC) - OPEN_FOR
    for row in session.execute(open_query(LIMIT, since)).tuples():
        values = {name: "" if value is None else str(value) for name, value in zip(OPEN_LABELS, row, strict=True)}
        if values["run"] and values["reason"]:
            yield Alert(JOB_FAILED, labels_of(JOB_FAILED, values), now)


def active_alerts(
    sessions: sessionmaker[Session], telemetry: Telemetry, node_timeout_s: float, now: float
) -> list[Alert]:
    """Every alert of `alert_rules.RULES` that holds at ``now``."""
    gpus = telemetry.gpus()
    known = {(s.node, s.info.index) for s in gpus if s.received_at is not None}
    found: dict[tuple[str, Labels], Alert] = {}
    with sessions() as session:
        for alert in xid_alerts(session, now, lambda node, gpu: (node, gpu) in known):
            _add(found, alert)
        for alert in failed_job_alerts(session, now):
            _add(found, alert)
    agents = {n.name: n.agent_seen for n in telemetry.nodes()}
    for alert in lost_gpu_alerts(gpus, agents, node_timeout_s, now):
        _add(found, alert)
    return list(found.values())
