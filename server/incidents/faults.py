"""Fault points: the named places between the incident pipeline's transitions where a test stops the
server, to kill it (or the agent, or both) right there (tests/server/incidents/test_faults.py).

A no-op unless the environment variable ``GPUWATCH_TEST_HOLD_AT`` names the point; never set it in
production. Then the first thread of the process to reach that point creates the file named by the point
in the folder ``GPUWATCH_TEST_HOLD_DIR`` and waits, doing nothing, until the file is removed. The test
sees the file, kills what it means to, and removes the file to let a survivor go on. The points:

- ``accept``: the run's exit stored and its incident opened (committed), nothing diagnosed
- ``diagnose``: the diagnosis committed, nothing decided
- ``decide``: the decision and its actions committed as pending, nothing carried out
- ``act``: an action carried out (an executor answered, a supervisor registered the restarted run) and
  not yet recorded done (inside the transaction that records it)
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

HOLD_AT_ENV = "GPUWATCH_TEST_HOLD_AT"
HOLD_DIR_ENV = "GPUWATCH_TEST_HOLD_DIR"
POINTS = ("accept", "diagnose", "decide", "act")

_held: set[str] = set()
_lock = threading.Lock()


def reached(point: str) -> None:
    """Hold here, once per process, when the test armed ``point``; else return at once."""
    assert point in POINTS, point
    if os.environ.get(HOLD_AT_ENV) != point:
        return
    with _lock:
        if point in _held:
            return
        _held.add(point)
    marker = Path(os.environ.get(HOLD_DIR_ENV, ".")) / point
    marker.write_text(str(os.getpid()))
    while marker.exists():  # the test's signal to go on; a killed process never gets here
        time.sleep(0.01)
