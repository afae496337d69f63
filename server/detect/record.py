"""What the server does with a straggler or hang found by the job tracker: count it, store it as an
event of the blamed node (so it sits in the same timeline as that node's Xids and logs), log it; a
hang also opens an incident on the job's running run (see `server.detect.hangs`)."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from sqlalchemy import select

from server.detect.detection import Detection
from server.detect.hangs import open_hang_incident
from server.detect.metrics import DetectMetrics
from server.incidents.context import IncidentContext
from server.store.db import transaction
from server.store.models import EventRow, Node

log = logging.getLogger("gpuwatch.server.detections")

STREAM = "server:detector"


def record(ctx: IncidentContext, metrics: DetectMetrics, detections: list[Detection]) -> None:
    for d in detections:
        metrics.detections.labels(d.kind).inc()
        log.warning("%s: %s", d.kind, d.message)
        if d.kind == "hang":  # the recovery policy's business: kill the hung run and restart it
            open_hang_incident(ctx, d.job, d.node, d.message)
        with transaction(ctx.sessions) as session:
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
