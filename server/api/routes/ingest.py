"""Agent-facing endpoints: registration, heartbeats and the batch of samples, log lines and events."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from fastapi import APIRouter, Request
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from gpuwatch.protocol import PROTOCOL_VERSION, BatchAck, Event, Heartbeat, RegisterRequest, RegisterResponse
from server.api.body import read_body, read_model
from server.api.deps import NodeDep, Services, ServicesDep, own_node
from server.detections import record
from server.incidents.watch import fatal_xids, open_xid_incident
from server.store.db import transaction
from server.store.models import Node, Run, utcnow
from server.store.nodes import register
from server.telemetry.exporter import IngestMetrics

router = APIRouter(prefix="/api/v1", tags=["ingest"])


def _count_xids(metrics: IngestMetrics, node: str, events: list[Event]) -> None:
    """Xid history as a counter: the DCGM gauge holds only each GPU's last Xid, so a fatal Xid
    followed by an application one, or a GPU that stops being exported, would hide it."""
    for event in events:
        if event.kind != "xid":
            continue
        try:
            code = int(event.data.get("xid"))
        except (TypeError, ValueError):
            continue  # no usable code: stored, but nothing to label the series with
        if code >= 0:
            gpu = "" if event.gpu is None else str(event.gpu)
            metrics.xid_events.labels(node, gpu, str(code)).inc()


def _row(session: Session, node: Node) -> Node:
    row = session.get(Node, node.id)
    if row is None:  # deleted between authentication and now
        raise LookupError(f"node {node.name} vanished")
    return row


@router.post("/nodes/register", response_model=RegisterResponse)
async def register_node(request: Request, node: NodeDep, svc: ServicesDep) -> RegisterResponse:
    """Called by the agent at start: who it is, which collector it runs, which GPUs it has."""
    req = await read_model(request, RegisterRequest, svc.settings.max_body_bytes)
    own_node(node, req.node, "register")

    def work() -> None:
        with transaction(svc.sessions) as session:
            register(session, _row(session, node), req)

    await run_in_threadpool(work)
    svc.telemetry.set_inventory(node.name, req.gpus)
    svc.telemetry.touch(node.name)
    return RegisterResponse(node=node.name, server_time=time.time(), protocol=PROTOCOL_VERSION)


@router.post("/nodes/heartbeat", status_code=204)
async def heartbeat(request: Request, node: NodeDep, svc: ServicesDep) -> None:
    beat = await read_model(request, Heartbeat, svc.settings.max_body_bytes)

    def work() -> None:
        with transaction(svc.sessions) as session:
            row = _row(session, node)
            row.last_seen_at = utcnow()
            if beat.dropped:
                row.dropped = beat.dropped

    await run_in_threadpool(work)
    svc.telemetry.touch(node.name, beat.dropped)


def stamp_first_steps(svc: Services, runs: list[tuple[str, int, list[float]]]) -> None:
    """Record when each newly started run reported its first step (the post-mortem's recovery time).
    Steps from before the run started (the previous attempt's last ones, shipped late) do not count:
    the run waits for its own."""
    with transaction(svc.sessions) as session:
        for job, run_id, times in runs:
            run = session.get(Run, run_id)
            if run is None or run.first_step_at is not None:
                continue
            own = [ts for ts in times if ts >= run.started_at.timestamp()]
            if own:
                run.first_step_at = datetime.fromtimestamp(own[0], UTC)
            else:
                svc.first_steps.keep(job, run_id)


@router.post("/ingest", response_model=BatchAck)
async def ingest(request: Request, node: NodeDep, svc: ServicesDep) -> BatchAck:
    """Store one batch atomically. A batch with any invalid item is refused whole (422) and stores
    nothing; a batch already stored is acknowledged with ``duplicate: true`` and changes nothing."""
    svc.writer.check_room()
    raw = await read_body(request, svc.settings.max_body_bytes)
    svc.metrics.request_bytes.inc(getattr(request.state, "body_bytes", 0))
    started = time.perf_counter()
    batch, result = await svc.writer.submit(node, raw)  # stored with others in one transaction
    ack = result.ack  # the writer counted it in the ingest metrics, with the rest of its group
    svc.metrics.latency.set(time.perf_counter() - started)
    if not ack.duplicate:
        _count_xids(svc.metrics, node.name, result.new_events)
        jobs = svc.jobs
        if batch.checkpoints:
            jobs.add_checkpoints(batch.checkpoints)
        found = jobs.add_steps(node.name, batch.steps)
        firsts = {}
        for st in batch.steps:
            if st.job not in firsts and (run_id := svc.first_steps.take(st.job)) is not None:
                firsts[st.job] = (st.job, run_id, sorted(s.ts for s in batch.steps if s.job == st.job))
        if firsts:
            await run_in_threadpool(stamp_first_steps, svc, list(firsts.values()))
        if found:
            await run_in_threadpool(record, svc, found)
        if codes := fatal_xids(batch, time.time()):  # cheap: a regex only on kernel lines
            await run_in_threadpool(open_xid_incident, svc, node.id, node.name, codes)
    svc.telemetry.touch(node.name, batch.dropped or None)
    return ack
