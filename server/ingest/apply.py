"""Folding a stored batch into memory, all of it in one place, and what it asks of the rest of the server.

`Folder.apply_batch` runs on the writer thread once the batch is committed (a replay folds nothing:
it was folded the first time): its GPU series into the latest values, rings and rollups, its
InfiniBand counters, its processes, steps and checkpoints into the job tracker, its Xids into their
counter; a fatal Xid or a GPU newly lost pokes the Alertmanager sender. What that turns up and needs
the database — a run's first step to stamp, stragglers found, fatal Xids, GPUs' changed fault counts
— comes back as a `FollowUp`, which the request runs
(`Folder.follow_up`) off the writer thread, so that opening an incident never holds up other nodes'
batches.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gpuwatch.protocol import Batch, StepReport, xid_code
from server.detect.detection import Detection
from server.detect.fatal_xid import count_xids, fatal_xids, open_xid_incident
from server.detect.metrics import DetectMetrics
from server.detect.record import record
from server.detect.stragglers import StragglerDetector
from server.incidents.context import IncidentContext
from server.ingest.first_steps import FirstSteps
from server.ingest.store import StoreResult
from server.notify.alert_rules import ALERTED_XIDS
from server.store.db import transaction
from server.store.models import Node
from server.store.nodes import from_agent, store_faults
from server.store.rollups import RollupBuffer
from server.telemetry.exporter import fell_off
from server.telemetry.job_tracker import JobTracker
from server.telemetry.labels import LabelBudget
from server.telemetry.latest import FaultChange, Telemetry


@dataclass(slots=True)
class FollowUp:
    """What a folded batch asks of the database: first steps to stamp (job, run id, step times),
    detections to record, fatal Xid codes to open an incident for, GPUs' new fault counts to store."""

    first_steps: list[tuple[str, int, list[float]]] = field(default_factory=list)
    detections: list[Detection] = field(default_factory=list)
    fatal_xids: list[int] = field(default_factory=list)
    faults: list[FaultChange] = field(default_factory=list)  # GPUs whose fault counts changed: to store

    def __bool__(self) -> bool:
        return bool(self.first_steps or self.detections or self.fatal_xids or self.faults)


class Folder:
    """The in-memory state a batch is folded into, and who acts on what it turns up."""

    def __init__(
        self,
        *,
        telemetry: Telemetry,
        jobs: JobTracker,
        rollups: RollupBuffer,
        first_steps: FirstSteps,
        stragglers: StragglerDetector,
        detect_metrics: DetectMetrics,
        incidents: IncidentContext,
        labels: LabelBudget,
    ) -> None:
        self.telemetry, self.jobs, self.rollups, self.labels = telemetry, jobs, rollups, labels
        self.first_steps, self.stragglers = first_steps, stragglers
        self.detect_metrics, self.incidents = detect_metrics, incidents
        self._lost: dict[str, frozenset[int]] = {}  # each node's GPUs judged lost at its last batch

    def apply_batch(self, node: Node, batch: Batch, result: StoreResult) -> FollowUp:
        """Fold one committed batch into memory (a duplicate only shows its node alive)."""
        follow = FollowUp()
        if not result.ack.duplicate:
            name = node.name
            if self.rollups.flush_s > 0:
                self.rollups.add(node.id, batch.series)  # only once committed: a retried batch counts once
            follow.faults = self.telemetry.add_series(name, batch.series)
            self.telemetry.add_ib(name, batch.ib)
            jobs = self.jobs
            processes, steps, checkpoints = batch.processes, batch.steps, batch.checkpoints
            if foreign := result.foreign_jobs:  # another node's job: left out as the store left it out
                processes = [p for p in processes if p.job not in foreign]
                steps = [s for s in steps if s.job not in foreign]
                checkpoints = [c for c in checkpoints if c.job not in foreign]
            jobs.add_processes(name, processes)
            jobs.add_series(name, batch.series)
            if checkpoints:
                jobs.add_checkpoints(name, checkpoints)
            if steps:
                follow.detections = self.stragglers.check(jobs.add_steps(name, steps))
                follow.first_steps = self._first_steps(steps)
            count_xids(self.detect_metrics, self.labels, name, result.new_events)
            follow.fatal_xids = fatal_xids(batch, time.time())  # cheap: a regex only on kernel lines
            if any(e.kind == "xid" and xid_code(e) in ALERTED_XIDS for e in result.new_events):
                self.incidents.alerts_changed()  # committed: the sender reads it from the database
        self.telemetry.touch(node.name, batch.dropped or None, agent=from_agent(batch))
        if self.incidents.alerts is not None:
            self._note_lost(node.name)
        return follow

    def _note_lost(self, node: str) -> None:
        """A GPU of ``node`` judged lost (or found again) since its last batch: GpuFellOffTheBus changed,
        so the alert sender is poked at once rather than at its next resend."""
        agent, timeout = self.telemetry.agent_seen(node), self.incidents.settings.server.node_timeout_s
        lost = frozenset(i for i, at in self.telemetry.received(node).items() if fell_off(at, agent, timeout))
        if lost != self._lost.get(node, frozenset()):
            self._lost[node] = lost
            self.incidents.alerts_changed()

    def _first_steps(self, steps: list[StepReport]) -> list[tuple[str, int, list[float]]]:
        firsts: dict[str, tuple[str, int, list[float]]] = {}
        for st in steps:
            if st.job not in firsts and (run_id := self.first_steps.take(st.job)) is not None:
                firsts[st.job] = (st.job, run_id, sorted(s.ts for s in steps if s.job == st.job))
        return list(firsts.values())

    def follow_up(self, node: Node, follow: FollowUp) -> None:
        """The database side of a folded batch (blocking: run it off the event loop)."""
        if follow.first_steps:
            self.first_steps.stamp(self.incidents.sessions, follow.first_steps, self.telemetry)
        if follow.detections:
            record(self.incidents, self.detect_metrics, follow.detections)
        if follow.fatal_xids:
            open_xid_incident(self.incidents, node.id, node.name, follow.fatal_xids)
        if follow.faults:  # rare: counts change when a fault happens (and once per GPU after a restart)
            with transaction(self.incidents.sessions) as session:
                store_faults(session, node.id, follow.faults)
