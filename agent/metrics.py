"""The agent's own metrics, per collector as node_exporter reports its own: how long its last run took
and whether it succeeded. A collector that raises is logged and counted here and its reading is lost;
the other collectors go on, and a dashboard shows the broken one instead of a silent gap in the data.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector as _PromCollector

from agent.collectors.base import Collector, Reading

if TYPE_CHECKING:
    from agent.batching import Pending
    from agent.spool import Spool

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

    def watch(self, spool: Spool, pending: Pending) -> None:
        """Export what the spool dropped and failed to write, and what waits in memory, at each scrape."""
        self.registry.register(_SpoolMetrics(spool, pending))

    def exposition(self) -> bytes:
        """The Prometheus text format of these metrics."""
        return generate_latest(self.registry)


#: The spool's dropped-count keys are ``<reason>_<kind>``; the spool's own drops (over its bound) have no prefix.
_REASONS = ("rejected", "spool_error")


class _SpoolMetrics(_PromCollector):
    """The spool's counts (persisted by the spool, so they survive a restart) as metrics."""

    def __init__(self, spool: Spool, pending: Pending) -> None:
        self._spool, self._pending = spool, pending

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        dropped = CounterMetricFamily(
            "gpuwatch_agent_dropped",
            "Items the agent dropped since it first started, by kind and why: spool_full (the spool past "
            "spool_max_bytes), spool_error (the spool unwritable and memory past pending_max_bytes), rejected "
            "(refused by the server for good, kept in the spool's rejected/ folder).",
            labels=["kind", "reason"],
        )
        for key, n in sorted(self._spool.dropped_snapshot().items()):
            reason, kind = next(
                ((r, key[len(r) + 1 :]) for r in _REASONS if key.startswith(r + "_")), ("spool_full", key)
            )
            dropped.add_metric([kind, reason], n)
        yield dropped
        errors = CounterMetricFamily(
            "gpuwatch_agent_spool_errors", "Batches the spool failed to write, by error.", labels=["error"]
        )
        for error, n in sorted(self._spool.errors.items()):
            errors.add_metric([error], n)
        yield errors
        yield GaugeMetricFamily(
            "gpuwatch_agent_pending_bytes",
            "Items read and not yet spooled (estimated bytes).",
            value=self._pending.bytes,
        )
