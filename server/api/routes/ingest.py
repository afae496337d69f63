"""Agent-facing endpoints: registration, heartbeats and the batch of samples, log lines and events."""

from __future__ import annotations

import time

from fastapi import APIRouter, HTTPException, Request
from pydantic import ValidationError
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from gpuwatch.columnar import CONTENT_TYPE as COLUMNAR_TYPE
from gpuwatch.columnar import VERSION as COLUMNAR_VERSION
from gpuwatch.protocol import Api, Batch, BatchAck, Heartbeat, RegisterRequest, RegisterResponse
from server.api.body import json_body, read_body, read_model, validation_error
from server.api.deps import NodeDep, ServicesDep, node_of, own_node
from server.ingest.writer import QueueFull
from server.services import Services
from server.store.db import transaction
from server.store.models import Node, utcnow
from server.store.nodes import GpuClaimConflict, register

router = APIRouter(prefix=Api.PREFIX, tags=["ingest"])


def _row(session: Session, node: Node) -> Node:
    row = session.get(Node, node.id)
    if row is None:  # deleted between authentication and now
        raise LookupError(f"node {node.name} vanished")
    return row


@router.post("/nodes/register", response_model=RegisterResponse, openapi_extra=json_body(RegisterRequest))
async def register_node(request: Request, node: NodeDep, svc: ServicesDep) -> RegisterResponse:
    """Called by the agent at start: who it is, which collector it runs, which GPUs it has."""
    req = await read_model(request, RegisterRequest, svc.settings.server.max_body_bytes)
    own_node(node, req.node, "register")

    def work() -> None:
        with transaction(svc.sessions) as session:
            register(session, _row(session, node), req)

    try:
        await run_in_threadpool(work)
    except GpuClaimConflict as exc:
        raise HTTPException(422 if exc.duplicate else 409, str(exc)) from None
    svc.telemetry.set_inventory(node.name, req.gpus)
    svc.telemetry.touch(node.name)
    return RegisterResponse(
        node=node.name,
        server_time=time.time(),
        protocol=COLUMNAR_VERSION,  # reads 3 (Content-Type COLUMNAR_TYPE) and 1-2 (JSON)
        max_body_bytes=svc.settings.server.max_body_bytes,
    )


@router.post("/nodes/heartbeat", status_code=204, openapi_extra=json_body(Heartbeat))
async def heartbeat(request: Request, node: NodeDep, svc: ServicesDep) -> None:
    beat = await read_model(request, Heartbeat, svc.settings.server.max_body_bytes)

    def work() -> None:
        with transaction(svc.sessions) as session:
            row = _row(session, node)
            row.last_seen_at = row.agent_seen_at = utcnow()  # only agents send heartbeats
            if beat.dropped:
                row.dropped = beat.dropped

    await run_in_threadpool(work)
    svc.telemetry.touch(node.name, beat.dropped)


@router.post("/ingest", response_model=BatchAck, openapi_extra=json_body(Batch))
async def ingest(request: Request, node: NodeDep, svc: ServicesDep) -> BatchAck:
    """Store one batch atomically. A batch with any invalid item is refused whole (422) and stores
    nothing; a batch already stored is acknowledged with ``duplicate: true`` and changes nothing.

    Declared here for the OpenAPI spec; requests go to `ingest_endpoint`, ahead of the app's stack."""
    return await _store(request, node, svc)


async def ingest_endpoint(request: Request) -> bytes:
    """The ingest route without FastAPI's dependency solving and response model: the same checks as
    `ingest`, and its answer's JSON body, at less fixed cost a batch. `server.app.App` calls it ahead of
    the app's middleware and router, and answers what it raises with the app's exception handlers."""
    svc: Services = request.app.state.services
    node = await node_of(request, svc, request.headers.get("authorization"))
    ack = await _store(request, node, svc)
    return ack.model_dump_json().encode()


async def _store(request: Request, node: Node, svc: Services) -> BatchAck:
    try:
        svc.writer.check_room()
        columnar = request.headers.get("content-type", "").startswith(COLUMNAR_TYPE)  # protocol 3
        raw = await read_body(request, svc.settings.server.max_body_bytes, json=not columnar)
        svc.ingest_metrics.request_bytes.inc(getattr(request.state, "body_bytes", 0))
        started = time.perf_counter()
        _, result, follow = await svc.writer.submit(node, raw, columnar)  # stored with others, folded into memory
    except QueueFull as full:
        raise HTTPException(503, str(full), headers={"Retry-After": str(full.retry_after_s)}) from None
    except ValidationError as exc:
        raise validation_error(exc) from None
    svc.ingest_metrics.latency.set(time.perf_counter() - started)  # the writer counted the batch, with its group
    if follow:
        await run_in_threadpool(svc.folder.follow_up, node, follow)
    if tasks := svc.incidents.stacks.pending(node.id):  # stack captures asked of this node (stack_requests.py)
        return result.ack.model_copy(update={"stack_tasks": tasks})
    return result.ack
