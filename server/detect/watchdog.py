"""The server's periodic checks (hung jobs, silent nodes) on one thread of their own."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

log = logging.getLogger("gpuwatch.server.watchdog")


class Watchdog:
    """Runs each named check every ``period_s``; a check that raises is logged and tried again next time."""

    def __init__(self, checks: Sequence[tuple[str, Callable[[], object]]], period_s: float) -> None:
        self._checks = list(checks)
        self._period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._period_s):
            for name, check in self._checks:
                try:
                    check()
                except Exception:  # one failed check must not end all future checks
                    log.exception("%s check failed", name)
