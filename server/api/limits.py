"""A per-node request rate limit: one token bucket per node, in memory.

In memory and per process on purpose: the limit protects one server from one runaway node (a loop
resending, a buggy build), so it needs no coordination between replicas, and a restart forgetting
the buckets only lets nodes start full again. The defaults are far above what an agent shipping a
batch every 1 to 5 s and its supervisors send.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable


class RateLimiter:
    """Token buckets: ``rate`` requests per second on average, ``burst`` at once."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst = rate, float(burst)
        self._clock = clock
        self._buckets: dict[Hashable, tuple[float, float]] = {}  # key -> (tokens, when counted)
        self._lock = threading.Lock()

    def acquire(self, key: Hashable) -> float:
        """Take one request for ``key``: 0 if allowed, else the seconds until one would be."""
        if self.rate <= 0:
            return 0.0
        now = self._clock()
        with self._lock:
            tokens, then = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - then) * self.rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate
