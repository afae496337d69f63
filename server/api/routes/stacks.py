"""Stack captures of a job's ranks (server/incidents/stack_requests.py): an operator asks for them, agents
fetch what their node is asked and answer it, anyone who reads sees the result."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from gpuwatch.protocol import Api, StackAnswer, StackTasks
from server.api.body import json_body, read_body, read_model, validation_error
from server.api.deps import AdminDep, NodeDep, ServicesDep
from server.incidents.stack_requests import NoRanks, Refused, answer, create, describe, tasks_for
from server.store.audit import audit
from server.store.db import transaction
from server.store.models import Job, StackRequest

router = APIRouter(prefix=Api.PREFIX, tags=["stacks"])

#: The longest an operator's request stays open for its answers.
MAX_WAIT_S = 300.0


class StacksIn(BaseModel):
    wait_s: float | None = Field(
        default=None, gt=0, le=MAX_WAIT_S, description="seconds to wait for the answers (default hang_stacks_wait_s)"
    )


@router.post(Api.JOB_STACKS.removeprefix(Api.PREFIX), status_code=201, openapi_extra=json_body(StacksIn))
async def request_stacks(job_id: int, request: Request, admin: AdminDep, svc: ServicesDep) -> dict[str, Any]:
    """Ask the agents of the job's nodes for every rank's stack (py-spy) and flight recorder dump: what
    `gpuwatch job stacks` does. Admin only, audited (`job.stacks`); 404 for no such job, 409 when no rank
    of the job is known to run anywhere. The body may be empty. Read the result at `GET /api/v1/stacks/{id}`
    once it is `done` (every node answered) or `expired` (analysed with what came by ``wait_s``)."""
    raw = await read_body(request, svc.settings.server.max_body_bytes)
    try:
        body = StacksIn.model_validate_json(raw) if raw.strip() else StacksIn()
    except ValidationError as exc:
        raise validation_error(exc) from None
    wait_s = body.wait_s or svc.settings.server.hang_stacks_wait_s or 20.0

    def work() -> tuple[dict[str, Any], list[tuple[int, int]]]:
        with transaction(svc.sessions) as session:
            job = session.get(Job, job_id)
            if job is None:
                raise HTTPException(404, f"no job {job_id}")
            try:
                req, dumps = create(session, job, by=admin.who, wait_s=wait_s, tracker=svc.jobs)
            except NoRanks as exc:
                raise HTTPException(409, str(exc)) from None
            audit(session, admin.who, "job.stacks", job.name, request=req.id, wait_s=wait_s)
            return describe(session, req), dumps

    out, dumps = await run_in_threadpool(work)
    svc.incidents.stacks.add(dumps)
    return out


@router.get(Api.STACK_TASKS.removeprefix(Api.PREFIX), response_model=StackTasks)
async def stack_tasks(node: NodeDep, svc: ServicesDep) -> StackTasks:
    """The stack captures pending for the calling node (its agent learns there are some from a batch's
    acknowledgement, `stack_tasks`). A node's token only."""

    def work() -> StackTasks:
        with svc.sessions() as session:
            return StackTasks(tasks=tasks_for(session, node.id))

    return await run_in_threadpool(work)


@router.post(Api.STACK_TASK.removeprefix(Api.PREFIX), status_code=204, openapi_extra=json_body(StackAnswer))
async def answer_task(dump_id: int, request: Request, node: NodeDep, svc: ServicesDep) -> None:
    """A node's agent answers a capture: each rank's stack, or why it has none. 404 for no such capture,
    403 for another node's capture or a rank of the job that does not run on the calling node, 409 for a
    capture answered already or a request closed (its deadline passed)."""
    body = await read_model(request, StackAnswer, svc.settings.server.max_body_bytes)

    def work() -> None:
        try:
            answer(svc.sessions, node, dump_id, body)
        except Refused as exc:
            raise HTTPException(exc.status, str(exc)) from None
        except LookupError as exc:
            raise HTTPException(404, str(exc)) from None

    await run_in_threadpool(work)
    svc.incidents.stacks.done(node.id, dump_id)


@router.get(Api.STACK_REQUEST.removeprefix(Api.PREFIX))
async def stack_request(request_id: int, svc: ServicesDep) -> dict[str, Any]:
    """A stack request: its state, each node's answer, and (once done or expired) the ranks grouped by
    stack with the suspects."""

    def work() -> dict[str, Any]:
        with svc.sessions() as session:
            req = session.get(StackRequest, request_id)
            if req is None:
                raise HTTPException(404, f"no stack request {request_id}")
            return describe(session, req)

    return await run_in_threadpool(work)
