"""The agent's own metrics, per collector as node_exporter reports its own: how long its last run took
and whether it succeeded. A collector that raises is logged and counted here and its reading is lost;
the other collectors go on, and a dashboard shows the broken one instead of a silent gap in the data.
"""

from __future__ import annotations

import logging
import time

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from agent.collectors.base import Collector, Reading

log = logging.getLogger("gpuwatch.agent.metrics")


class AgentMetrics:
    """Metrics of one agent, in a registry of its own (several agents may share a test process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.duration = Gauge(
            "gpuwatch_agent_collector_duration_seconds",
            "How long the collector's last run took.",
            ["collector"],
            registry=self.registry,
        )
        self.success = Gauge(
            "gpuwatch_agent_collector_success",
            "1 if the collector's last run succeeded, 0 if it raised.",
            ["collector"],
            registry=self.registry,
        )
        self.errors = Counter(
            "gpuwatch_agent_collector_errors",
            "Runs of the collector that raised (its reading was lost; the other collectors went on).",
            ["collector"],
            registry=self.registry,
        )
        self._failing: set[str] = set()

    def collect(self, name: str, collector: Collector, now: float) -> Reading | None:
        """Run one collector, isolated and measured; None if it raised."""
        began = time.perf_counter()
        try:
            reading = collector.collect(now)
        except Exception:
            self.errors.labels(name).inc()
            if name not in self._failing:  # the traceback once per failing streak, not once a second
                self._failing.add(name)
                log.exception("collector %s failed; the other collectors go on", name)
            else:
                log.debug("collector %s failed again", name, exc_info=True)
            reading = None
        else:
            if name in self._failing:
                self._failing.discard(name)
                log.info("collector %s works again", name)
        self.duration.labels(name).set(time.perf_counter() - began)
        self.success.labels(name).set(0 if reading is None else 1)
        return reading

    def exposition(self) -> bytes:
        """The Prometheus text format of these metrics."""
        return generate_latest(self.registry)
