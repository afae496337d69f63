"""Liveness, readiness and the Prometheus endpoint."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool

from server.api.deps import ServicesDep
from server.store.db import SchemaOutOfDate
from server.store.migrate import check_schema

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process answers; says nothing about the database."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(svc: ServicesDep) -> JSONResponse:
    """Ready when the database answers and its schema is at the migration head."""
    try:
        with svc.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        check_schema(svc.engine, svc.settings.effective_database_url)
    except (SQLAlchemyError, SchemaOutOfDate) as exc:
        return JSONResponse({"status": "unavailable", "error": str(exc).splitlines()[0]}, status_code=503)
    return JSONResponse({"status": "ready"})


@router.get("/metrics")
async def metrics(svc: ServicesDep) -> Response:
    body = await run_in_threadpool(svc.exporter.render)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
