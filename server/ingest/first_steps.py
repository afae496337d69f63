"""When each newly started run reported its first step (the post-mortem's recovery time).

A run registered on this server is expected (`FirstSteps.expect`); the ingest path takes it with one
dictionary lookup per batch, and `stamp` writes `runs.first_step_at` once per run.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from sqlalchemy.orm import Session, sessionmaker

from server.incidents import snapshot
from server.store.db import transaction
from server.store.models import Run
from server.telemetry.latest import Telemetry


class FirstSteps:
    """Runs started on this server whose first step report has not come yet, by job name."""

    def __init__(self) -> None:
        self._waiting: dict[str, int] = {}
        self._lock = threading.Lock()

    def expect(self, job: str, run_id: int) -> None:
        with self._lock:
            self._waiting[job] = run_id

    def keep(self, job: str, run_id: int) -> None:
        """Wait on for ``run_id``'s first step, unless a newer run of the job started meanwhile."""
        with self._lock:
            self._waiting.setdefault(job, run_id)

    def take(self, job: str) -> int | None:
        with self._lock:
            return self._waiting.pop(job, None)

    def stamp(
        self,
        sessions: sessionmaker[Session],
        runs: list[tuple[str, int, list[float]]],
        telemetry: Telemetry | None = None,
    ) -> None:
        """Record when each of ``runs`` (job, run id, its step times) reported its first step. Steps from
        before the run started (the previous attempt's last ones, shipped late) do not count: the run
        waits for its own. With ``telemetry``, the failed attempt's incident keeps the GPU samples from
        its failure to this first step (`snapshot.extend`), for its post-mortem."""
        with transaction(sessions) as session:
            for job, run_id, times in runs:
                run = session.get(Run, run_id)
                if run is None or run.first_step_at is not None:
                    continue
                own = [ts for ts in times if ts >= run.started_at.timestamp()]
                if own:
                    run.first_step_at = datetime.fromtimestamp(own[0], UTC)
                    if telemetry is not None:
                        snapshot.extend(session, telemetry, run)
                else:
                    self.keep(job, run_id)
