"""The retention job's own series: rows deleted per table, runs by outcome, when it last ran.

Per process, like the ingest counters: each replica counts the rows it deleted itself, so the
cluster's total is the sum over replicas and the last run the maximum (docs/scale-out.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import Counter, Gauge
from prometheus_client.registry import CollectorRegistry

from server.store.retention import TABLES, PruneResult

OUTCOMES = ("pruned", "skipped", "failed")


class RetentionMetrics:
    """Registered on the app's registry; every table and outcome starts at 0 so `increase()` sees
    the first run."""

    def __init__(self, registry: CollectorRegistry, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.deleted = Counter(
            "gpuwatch_retention_deleted_rows",
            "Rows deleted by retention, by table (incident_snapshots: snapshots cleared).",
            ["table"],
            registry=registry,
        )
        self.runs = Counter(
            "gpuwatch_retention_runs",
            "Retention runs of this server, by outcome (skipped: another replica was pruning).",
            ["outcome"],
            registry=registry,
        )
        self.last_run = Gauge(
            "gpuwatch_retention_last_run_timestamp_seconds",
            "When this server last finished pruning (0: not yet).",
            registry=registry,
        )
        self.duration = Gauge(
            "gpuwatch_retention_last_run_seconds", "How long this server's last pruning took.", registry=registry
        )
        for table in TABLES:
            self.deleted.labels(table)
        for outcome in OUTCOMES:
            self.runs.labels(outcome)

    def observe(self, run: Callable[[], PruneResult]) -> PruneResult:
        """Run one pruning and count it; a failure is counted and raised on (the caller logs it)."""
        try:
            result = run()
        except Exception:
            self.runs.labels("failed").inc()
            raise
        if not result.ran:
            self.runs.labels("skipped").inc()
            return result
        for table, n in result.counts.items():
            self.deleted.labels(table).inc(n)
        self.runs.labels("pruned").inc()
        self.duration.set(result.seconds)
        self.last_run.set(self._clock())
        return result
