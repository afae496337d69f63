"""Per-node budgets of distinct label values: one node cannot grow /metrics or the server's memory.

A label value that a node chooses (an Xid code, an InfiniBand device and port) makes a new series the
first time it is seen, and a series is never forgotten by prometheus-client. 60,000 Xid codes from one
node took /metrics from 28 KB to 16 MB and the server from 115 to 345 MB (issue 21). So each node gets
at most `cap` distinct values of each kind; the rest are still stored (the events table keeps them) but
not exported, and counted in ``gpuwatch_label_values_refused_total{what}``.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable

from prometheus_client import Counter
from prometheus_client.registry import CollectorRegistry

#: Distinct values of one kind per node: far above a real node (8 GPUs x a few Xid codes, 8-16 IB ports).
DEFAULT_CAP = 64


class LabelBudget:
    """Which label values each node may still add, by kind (``what``)."""

    def __init__(self, registry: CollectorRegistry | None = None, cap: int = DEFAULT_CAP) -> None:
        self.cap = cap
        self._seen: dict[tuple[str, str], set[Hashable]] = {}
        self._lock = threading.Lock()
        self.refused = Counter(
            "gpuwatch_label_values_refused",
            "Label values a node sent past its budget of distinct values (not exported), by kind.",
            ["what"],
            registry=registry,
        )

    def admit(self, node: str, what: str, value: Hashable) -> bool:
        """True if ``value`` is one of ``node``'s ``what`` values, or there is room for it; else counted."""
        with self._lock:
            seen = self._seen.setdefault((node, what), set())
            if value in seen:
                return True
            if len(seen) < self.cap:
                seen.add(value)
                return True
        self.refused.labels(what).inc()
        return False
