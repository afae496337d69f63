"""The FastAPI application: the routers, error handlers and middleware around the server's components."""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, DBAPIError, OperationalError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gpuwatch import __version__
from gpuwatch.config import Settings
from gpuwatch.protocol import Api
from server.api.body import with_body_schemas
from server.api.deps import ReadAccess
from server.api.limits import RateLimiter
from server.api.routes import admin, health, ingest, labels, read, recovery, reports, runs, stacks
from server.ingest.metrics import IngestMetrics
from server.services import build

log = logging.getLogger("gpuwatch.server")


def create_app(settings: Settings) -> App:
    """Build the app around the server's components (server/services.py); raises SchemaOutOfDate when
    the database needs `gpuwatch db upgrade` first."""
    svc = build(settings)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        svc.start()
        yield
        svc.stop()

    app = App(
        title="gpuwatch", version=__version__, description="GPU cluster observability and diagnosis", lifespan=lifespan
    )
    app.state.services = svc
    app.state.limits = RateLimiter(settings.server.rate_limit_per_s, settings.server.rate_limit_burst)
    for module in (health, ingest):  # open, or each endpoint checks its node token
        app.include_router(module.router)
    for module in (read, runs, recovery, reports, admin, labels, stacks):  # their GETs need a token with `read_auth`
        app.include_router(module.router, dependencies=[ReadAccess])

    @app.exception_handler(DataError)
    @app.exception_handler(OverflowError)  # SQLite's driver, for an integer past 64 bits
    async def _refused_value(request: Request, exc: Exception) -> JSONResponse:
        # A value the database cannot hold (a NUL in a PostgreSQL string): the same request would fail
        # again, so a 422 the agent sets aside, never a 503 it would retry for ever.
        log.warning("database refused a value on %s: %s", request.url.path, str(exc).splitlines()[0])
        return JSONResponse(
            {"detail": "the database refused a value of the request (e.g. a NUL character); nothing was stored"},
            status_code=422,
        )

    @app.exception_handler(OperationalError)
    @app.exception_handler(DBAPIError)
    async def _database_down(request: Request, exc: Exception) -> JSONResponse:
        # The agent keeps its spool and retries; nothing from the request was stored.
        log.warning("database error on %s: %s", request.url.path, str(exc).splitlines()[0])
        return JSONResponse(
            {"detail": "database unavailable, nothing was stored; retry later"},
            status_code=503,
            headers={"Retry-After": "5"},
        )

    default_openapi = app.openapi

    def openapi() -> dict[str, Any]:  # the request bodies the handlers read themselves (body.json_body)
        if app.openapi_schema is None:
            app.openapi_schema = with_body_schemas(default_openapi())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    app.add_middleware(RejectionCounter, metrics=svc.ingest_metrics)
    return app


class App(FastAPI):
    """The FastAPI app, whose batch route (`ingest.ingest_endpoint`) is answered before any of the app's
    middleware, router or dependency injection: what every agent sends every few seconds pays for no
    layer it does not use (each wrapped the request's receive and send in a coroutine of its own). The
    route's errors are answered by the app's own exception handlers and counted as `RejectionCounter`
    counts them; one no handler takes goes to the server (uvicorn answers 500 and logs it), as it would
    from the server-error middleware. FastAPI's route (`ingest.ingest`) is still declared, for the
    OpenAPI spec, and never reached."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != Api.INGEST or scope["method"] != "POST":
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self  # as Starlette sets it: `request.app`
        request = Request(scope, receive)
        try:
            body = await ingest.ingest_endpoint(request)
        except Exception as exc:
            handlers = self.exception_handlers
            handler = next((handlers[k] for k in type(exc).__mro__ if k in handlers), None)
            if handler is None:
                raise
            response = handler(request, exc)
            if inspect.isawaitable(response):
                response = await response
            metrics: IngestMetrics = self.state.services.ingest_metrics
            metrics.rejected.labels(str(response.status_code)).inc()
            metrics.batches.labels("rejected").inc()
            await response(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 200, "headers": _json_headers(len(body))})
        await send({"type": "http.response.body", "body": body})


def _json_headers(length: int) -> list[tuple[bytes, bytes]]:
    return [(b"content-type", b"application/json"), (b"content-length", str(length).encode())]


class RejectionCounter:
    """Counts API requests answered 4xx/5xx (and refused batches). A plain ASGI middleware: Starlette's
    `@app.middleware("http")` wraps every response in a streaming one and a task group, which cost about
    0.3 ms a request on the ingest path."""

    def __init__(self, app: ASGIApp, metrics: IngestMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(Api.PREFIX + "/"):
            await self.app(scope, receive, send)
            return

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] >= 400:
                self.metrics.rejected.labels(str(message["status"])).inc()
                if path == Api.INGEST:
                    self.metrics.batches.labels("rejected").inc()
            await send(message)

        await self.app(scope, receive, counted)
