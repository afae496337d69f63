"""An admin confirms or corrects an incident's diagnosis (server/incidents/labels.py)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from gpuwatch.protocol import Api
from server.api.body import json_body, read_model
from server.api.deps import AdminDep, ServicesDep
from server.api.schemas import LabelOut
from server.incidents.labels import MAX_NOTE, NotDiagnosed, check_label, label_incident
from server.store.db import transaction

router = APIRouter(prefix=Api.PREFIX, tags=["incidents"])


class LabelIn(BaseModel):
    reason: str = Field(min_length=1, max_length=64, description="a reason of the failure taxonomy")
    note: str | None = Field(default=None, max_length=MAX_NOTE, description="what on-call found, in a line")


@router.post(
    "/incidents/{incident_id}/label", response_model=LabelOut, status_code=201, openapi_extra=json_body(LabelIn)
)
async def label(incident_id: int, request: Request, admin: AdminDep, svc: ServicesDep) -> LabelOut:
    """Confirm (the diagnosed reason) or correct (another reason of the taxonomy) the incident's
    diagnosis. The diagnosis is kept; the label is stored beside it and audited (`incident.label`).
    Admin only; 422 for a reason outside the taxonomy, 404 for no such incident, 409 before its
    diagnosis."""
    body = await read_model(request, LabelIn, svc.settings.server.max_body_bytes)
    try:
        check_label(body.reason, body.note)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None

    def work() -> LabelOut:
        try:
            with transaction(svc.sessions) as session:
                return LabelOut.of(label_incident(session, incident_id, body.reason, body.note, admin.who))
        except LookupError as exc:
            raise HTTPException(404, str(exc)) from None
        except NotDiagnosed as exc:
            raise HTTPException(409, str(exc)) from None

    return await run_in_threadpool(work)
