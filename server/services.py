"""The composition root: every component of the server built once, each handed its collaborators.

The data flow reads top to bottom in `build`: the store, the in-memory telemetry and job tracker, the
incident pipeline's context, the detectors, the ingest stage (folder and writer), and the periodic
checks. Nothing below this module reaches for a shared container: each component gets what it uses
as arguments. The API's handlers (server/api) reach the components through the `Services` built
here, which the app keeps in ``app.state``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, ProcessCollector
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from gpuwatch.config import LlmSettings, Settings
from gpuwatch.protocol import GpuSample
from server.detect.hangs import HangDetector
from server.detect.metrics import DetectMetrics
from server.detect.record import record
from server.detect.silence import SilenceWatch
from server.detect.stragglers import StragglerDetector
from server.detect.watchdog import Watchdog
from server.incidents.context import IncidentContext
from server.incidents.info import IncidentCollector
from server.incidents.labels import CorrectionsCollector
from server.incidents.metrics import IncidentMetrics
from server.incidents.open_series import OpenIncidentCollector
from server.incidents.pipeline import resume_due
from server.incidents.recover import expire_exclusions
from server.incidents.stack_requests import expire_due
from server.ingest.apply import Folder
from server.ingest.decode import mirror
from server.ingest.first_steps import FirstSteps
from server.ingest.metrics import IngestMetrics
from server.ingest.writer import BatchWriter
from server.notify.alertmanager import AlertSender
from server.notify.webhooks import Notifier, default_public_url
from server.store.db import make_engine, make_sessionmaker
from server.store.jobs import latest_checkpoints
from server.store.migrate import check_schema
from server.store.nodes import NODE_SEEN_EVERY_S, LastSeen
from server.store.retention import PruneResult, Retention, RetentionMetrics, prune
from server.store.rollups import RollupBuffer
from server.store.tokens import TokenCache
from server.telemetry.exporter import MetricsExporter
from server.telemetry.job_tracker import JobTracker
from server.telemetry.labels import LabelBudget
from server.telemetry.latest import Telemetry
from server.telemetry.restore import restore

if TYPE_CHECKING:
    from gpuwatch.diagnosis.llm import LlmAnalyser

log = logging.getLogger("gpuwatch.server")


@dataclass(slots=True)
class Services:
    """The server's components (see `build`), and the two threads of periodic checks it starts."""

    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    registry: CollectorRegistry
    telemetry: Telemetry
    jobs: JobTracker
    exporter: MetricsExporter
    rollups: RollupBuffer  # per-minute rollups waiting for their flush
    incidents: IncidentContext
    silence: SilenceWatch
    hangs: HangDetector
    detect_metrics: DetectMetrics
    ingest_metrics: IngestMetrics
    first_steps: FirstSteps
    folder: Folder
    writer: BatchWriter
    retention: RetentionMetrics
    notifier: Notifier
    tokens: TokenCache  # tokens recently looked up
    alerts: AlertSender | None = None  # the server's own alerts to Alertmanager (notify_alertmanager_url)
    _threads: list[Watchdog] = field(default_factory=list)

    def start(self) -> None:
        """Start the periodic checks: quiet jobs forgotten, hangs, silent nodes, exclusions' expiry and
        rollup flushes on one thread, and pruning on a thread of its own (a long backlog must not delay
        the hang checks)."""
        checks = Watchdog(
            [
                ("job expiry", self.jobs.forget_quiet),
                ("hang", lambda: record(self.incidents, self.detect_metrics, self.hangs.check())),
                ("silent node", self.silence.check),
                ("incident resume", lambda: resume_due(self.incidents)),
                ("stack requests", lambda: expire_due(self.sessions, self.incidents.stacks)),
                ("exclusion expiry", lambda: expire_exclusions(self.incidents)),
                ("rollup flush", lambda: self.writer.flush_rollups(due_only=True)),
                ("token revocation", self._drop_revoked_tokens),
            ],
            self.settings.server.hang_check_s,
        )
        if self.alerts is not None:
            self.alerts.start()
        self._threads = [checks]
        if self.settings.retention.interval_s > 0:
            pruner = Watchdog(
                [("retention", lambda: self.retention.observe(self._prune))], self.settings.retention.interval_s
            )
            self._threads.append(pruner)
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Stop the checks, store what is queued, flush the rollups, deliver what notices can be."""
        for thread in reversed(self._threads):
            thread.stop()
        self.writer.stop()  # what is queued is stored first
        self.writer.flush_rollups()
        self.notifier.close()
        if self.alerts is not None:
            self.alerts.close()

    def _drop_revoked_tokens(self) -> None:
        """Tokens revoked anywhere (the CLI, another replica) stop working here within a check period."""
        with self.sessions() as session:
            self.tokens.drop_revoked(session)

    def _prune(self) -> PruneResult:
        """One retention run (server/store/retention.py); on PostgreSQL skipped while another replica prunes."""
        return prune(
            self.engine, Retention.from_settings(self.settings.retention), chunk=self.settings.retention.chunk_rows
        )


def build(settings: Settings) -> Services:
    """Build every component; raises SchemaOutOfDate when the database needs `gpuwatch db upgrade` first."""
    server, url = settings.server, settings.effective_database_url
    engine = make_engine(url, server.db_busy_timeout_ms)
    check_schema(engine, url)
    sessions = make_sessionmaker(engine)
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)  # process_cpu_seconds_total & co: is one core enough (scale-out.md)

    labels = LabelBudget(registry)
    telemetry = Telemetry(server.ring_size, sample_type=mirror(GpuSample), labels=labels)
    jobs = JobTracker(window_s=server.job_window_s)
    _load_checkpoints(sessions, jobs)
    exporter = MetricsExporter(
        telemetry, registry, server.node_timeout_s, jobs=jobs, max_rank_series=server.max_rank_series
    )
    rollups = RollupBuffer(server.rollup_flush_s)
    notifier = Notifier.from_settings(settings, registry)
    public_url = server.public_url or default_public_url(server.host, server.port)
    alerts = AlertSender.from_settings(settings, sessions, telemetry, public_url, registry)

    incidents = IncidentContext(
        settings,
        sessions,
        IncidentMetrics(registry),
        telemetry,
        jobs,
        notifier=notifier,
        llm=_llm(settings.llm),
        alerts=alerts,
    )
    registry.register(IncidentCollector(sessions))
    registry.register(CorrectionsCollector(sessions))
    registry.register(OpenIncidentCollector(sessions))

    detect_metrics = DetectMetrics(registry)
    restore(sessions, telemetry, detect_metrics, labels, server.rollup_flush_s)  # what alerts need, from the database
    stragglers = StragglerDetector(
        jobs,
        margin=server.straggler_margin,
        steps=server.straggler_steps,
        min_s=server.straggler_min_s,
    )
    hangs = HangDetector(jobs, default_timeout_s=server.hang_timeout_s)
    silence = SilenceWatch(incidents, registry)

    ingest_metrics = IngestMetrics(registry)
    first_steps = FirstSteps()
    folder = Folder(
        telemetry=telemetry,
        jobs=jobs,
        rollups=rollups,
        first_steps=first_steps,
        stragglers=stragglers,
        detect_metrics=detect_metrics,
        incidents=incidents,
        labels=labels,
    )
    writer = BatchWriter(
        sessions=sessions,
        rollups=rollups,
        fold=folder.apply_batch,
        metrics=ingest_metrics,
        seen=LastSeen(min(NODE_SEEN_EVERY_S, server.node_timeout_s / 6)),
        max_queued_bytes=server.ingest_queue_bytes,
        flush_between_groups=engine.dialect.name == "sqlite",
    )
    return Services(
        settings=settings,
        engine=engine,
        sessions=sessions,
        registry=registry,
        telemetry=telemetry,
        jobs=jobs,
        exporter=exporter,
        rollups=rollups,
        incidents=incidents,
        silence=silence,
        hangs=hangs,
        detect_metrics=detect_metrics,
        ingest_metrics=ingest_metrics,
        first_steps=first_steps,
        folder=folder,
        writer=writer,
        retention=RetentionMetrics(registry),
        notifier=notifier,
        tokens=TokenCache(server.token_cache_s),
        alerts=alerts,
    )


def _load_checkpoints(sessions: sessionmaker[Session], jobs: JobTracker) -> None:
    """Each recent job's newest checkpoint, so its age (and GpuwatchCheckpointTooOld) survives a restart."""
    since = datetime.now(UTC) - timedelta(seconds=jobs.forget_after_s)
    with sessions() as session:
        for name, step, at, size, _ in latest_checkpoints(session, since):
            jobs.note_checkpoint(name, step, at.timestamp(), size)


def _llm(settings: LlmSettings) -> LlmAnalyser | None:
    """The one LLM analyser of the process, when the `llm` settings configure one (imported only then:
    openai is slow to load). One for all incidents: its cache of answers lasts as long as the server."""
    if not settings.enabled:
        return None
    from gpuwatch.diagnosis.llm import LlmAnalyser

    return LlmAnalyser.from_settings(settings)
