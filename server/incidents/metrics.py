"""The incident pipeline's own series (on the app's registry): incidents opened, failures diagnosed,
decisions, restarts, what failures cost, and the nodes kept out. Label values known in advance start at
0, so that increase() and rate() see the first event; restarts are labelled by job, so theirs appear
with the first one."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.registry import CollectorRegistry

from gpuwatch.taxonomy import REASONS

INCIDENT_TRIGGERS = ("run_failed", "xid", "node_silent", "hang")
DECISION_ACTIONS = ("restart", "restart_exclude_node", "notify", "stop", "dry_run")


class IncidentMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.incidents = Counter("gpuwatch_incidents", "Incidents opened, by trigger.", ["trigger"], registry=registry)
        self.failures = Counter(
            "gpuwatch_failures",
            "Diagnosed failures, by reason and category.",
            ["reason", "category"],
            registry=registry,
        )
        self.restarts = Counter(
            "gpuwatch_restarts",
            "Restarts ordered by the recovery policy, by job and reason.",
            ["job", "reason"],
            registry=registry,
        )
        self.decisions = Counter(
            "gpuwatch_recovery_decisions",
            "Recovery decisions, by action taken (restart, restart_exclude_node, notify, stop, dry_run).",
            ["action"],
            registry=registry,
        )
        self.restart_seconds = Histogram(
            "gpuwatch_restart_seconds",
            "Seconds from a run's exit to its restart decision.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300),
            registry=registry,
        )
        self.lost_gpu_hours = Counter(
            "gpuwatch_lost_gpu_hours",
            "GPU-hours lost to failures (work since the last checkpoint plus downtime), by reason and category.",
            ["reason", "category"],
            registry=registry,
        )
        self.excluded_nodes = Gauge(
            "gpuwatch_excluded_nodes", "Nodes on the recovery exclusion list (1 per node).", ["node"], registry=registry
        )
        for reason, info in REASONS.items():
            self.failures.labels(reason, info.category)
            self.lost_gpu_hours.labels(reason, info.category)
        for trigger in INCIDENT_TRIGGERS:
            self.incidents.labels(trigger)
        for action in DECISION_ACTIONS:
            self.decisions.labels(action)
