"""Fatal Xids: a GPU error the node reported, as an NVML event or an NVRM line of its kernel stream.

Every Xid is counted (`gpuwatch_xid_events_total`: the DCGM gauge holds only each GPU's last Xid, so
a fatal Xid followed by an application one, or a GPU that stops being exported, would hide it). A
fatal one (one that `gpuwatch.diagnosis.xid` maps to a hardware or link failure) opens an `xid`
incident for the node, unless one was opened for it within `incident_dedupe_s`: an Xid storm is one
incident. Lines older than the look-back (a kernel buffer replayed by a freshly started agent) open
nothing.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from gpuwatch.diagnosis.xid import fatal_xid_in_line, xid_reason
from gpuwatch.protocol import Batch, Event, xid_code
from server.detect.metrics import DetectMetrics
from server.incidents.context import IncidentContext
from server.incidents.pipeline import KERNEL_STREAM, LOOKBACK, open_incident
from server.store.jobs import running_job
from server.telemetry.labels import LabelBudget

log = logging.getLogger("gpuwatch.server.incidents")


def count_xids(metrics: DetectMetrics, labels: LabelBudget, node: str, events: list[Event]) -> None:
    """The Xid events just stored, in the Xid history counter: each (GPU, code) a series, within the
    node's budget of distinct ones (an ``xid`` event's code is an integer: `gpuwatch.protocol.batch_errors`)."""
    for event in events:
        if event.kind != "xid":
            continue
        gpu = "" if event.gpu is None else str(event.gpu)
        code = "" if (c := xid_code(event)) is None else str(c)
        if labels.admit(node, "xid", (gpu, code)):
            metrics.xid_events.labels(node, gpu, code).inc()


def fatal_xids(batch: Batch, now: float) -> list[int]:
    """The fatal Xid codes in ``batch`` that are recent enough to act on."""
    oldest = now - LOOKBACK.total_seconds()
    codes = [c for e in batch.events if (c := xid_code(e)) is not None and e.ts >= oldest and xid_reason(c)]
    for line in batch.logs:
        if line.stream == KERNEL_STREAM and line.ts >= oldest and (code := fatal_xid_in_line(line.text)):
            codes.append(code)
    return codes


def open_xid_incident(ctx: IncidentContext, node_id: int, node_name: str, codes: list[int]) -> int | None:
    """Open an `xid` incident for the fatal Xid ``codes`` from a node (see `fatal_xids`), unless one was
    opened within `incident_dedupe_s` (by any server replica); the new incident's id, or None."""
    with ctx.sessions() as session:
        job_id = running_job(session, node_id)
    window = datetime.now(UTC) - timedelta(seconds=ctx.settings.server.incident_dedupe_s)
    opened = open_incident(ctx, node_id=node_id, trigger="xid", job_id=job_id, once_since=window)
    if opened is not None:
        log.warning("fatal Xid %s from %s", ", ".join(map(str, sorted(set(codes)))), node_name)
    return opened
