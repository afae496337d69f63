"""What the incident pipeline works with, handed to it once by the composition root (server/services.py):
the database, its own metrics, where notices and alerts go, the in-memory state it reads (the node's recent GPU
samples for the snapshot, the job's last steps for the lost work) and the LLM analyser, one for the
process so that its cache of answers outlives each incident."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session, sessionmaker

from gpuwatch.config import Settings
from server.incidents.metrics import IncidentMetrics
from server.incidents.stack_requests import StackBoard
from server.notify.webhooks import Notifier
from server.telemetry.job_tracker import JobTracker
from server.telemetry.latest import Telemetry

if TYPE_CHECKING:
    from gpuwatch.diagnosis.llm import LlmAnalyser
    from server.notify.alertmanager import AlertSender


class DecisionBoard:
    """Runs decided on since this server started. The decision long poll watches this set instead of
    querying the database every few milliseconds, and reads the database only once its run is in it
    (and once when its wait ends, for decisions another server process made)."""

    def __init__(self) -> None:
        self._runs: set[int] = set()
        self._lock = threading.Lock()

    def mark(self, run_id: int) -> None:
        with self._lock:
            self._runs.add(run_id)

    def __contains__(self, run_id: object) -> bool:
        with self._lock:
            return run_id in self._runs


@dataclass(frozen=True, slots=True)
class IncidentContext:
    settings: Settings
    sessions: sessionmaker[Session]
    metrics: IncidentMetrics
    telemetry: Telemetry  # the node's recent GPU samples, kept with the incident
    jobs: JobTracker  # the job's last steps (lost work) and failures (MTBF)
    decided: DecisionBoard = field(default_factory=DecisionBoard)
    stacks: StackBoard = field(default_factory=StackBoard)  # stack dumps pending per node, for the ingest acks
    notifier: Notifier | None = None
    llm: LlmAnalyser | None = None  # None: the LLM path is off
    alerts: AlertSender | None = None  # None: no Alertmanager configured

    def alerts_changed(self) -> None:
        """What the server asserts to Alertmanager may have changed (an incident diagnosed or closed, a fatal
        Xid stored): post soon. Never blocks."""
        if self.alerts is not None:
            self.alerts.poke()
