"""What the server does with a straggler or hang found by the job tracker: count it, store it as an
event of the blamed node (so it sits in the same timeline as that node's Xids and logs), log it."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

from sqlalchemy import select

from server.api.deps import Services
from server.store.db import transaction
from server.store.models import EventRow, Node
from server.telemetry.jobs import Detection

log = logging.getLogger("gpuwatch.server.detections")

STREAM = "server:detector"


def record(svc: Services, detections: list[Detection]) -> None:
    for d in detections:
        svc.metrics.detections.labels(d.kind).inc()
        log.warning("%s: %s", d.kind, d.message)
        with transaction(svc.sessions) as session:
            node_id = session.scalar(select(Node.id).where(Node.name == d.node)) if d.node else None
            if node_id is None:
                continue  # a job seen only through steps from an unnamed node: counted and logged only
            session.add(
                EventRow(
                    node_id=node_id,
                    stream=STREAM,
                    seq=time.time_ns(),
                    ts=datetime.now(UTC),
                    kind=d.kind,
                    gpu_index=None,
                    message=d.message,
                    data={"job": d.job, "ranks": list(d.ranks), **d.data},
                )
            )


class HangChecker:
    """Asks the tracker for hung jobs every ``period_s`` on a thread of its own."""

    def __init__(self, svc: Services, period_s: float) -> None:
        self._svc = svc
        self._period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hang-checker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._period_s):
            try:
                record(self._svc, self._svc.jobs.check_hangs())
            except Exception:  # a failed check must not end all future checks
                log.exception("hang check failed")
