"""The FastAPI application: wiring of settings, store, telemetry and routers."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from prometheus_client import CollectorRegistry, ProcessCollector
from sqlalchemy import Engine, select
from sqlalchemy.exc import DataError, DBAPIError, OperationalError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gpuwatch import __version__
from gpuwatch.config import Settings
from gpuwatch.protocol import GpuInfo, GpuSample
from server.api.deps import ReadAccess, Services, TokenCache
from server.api.limits import RateLimiter
from server.api.routes import admin, health, ingest, read, recovery, reports, runs
from server.detections import record
from server.incidents.recover import expire_exclusions
from server.incidents.watch import SilenceWatch
from server.ingest.decode import mirror
from server.ingest.writer import BatchWriter
from server.notify import Notifier
from server.store.db import make_engine, make_sessionmaker, transaction
from server.store.migrate import check_schema
from server.store.models import Gpu, Node
from server.store.retention import PruneResult, Retention, prune
from server.store.rollups import RollupBuffer
from server.telemetry.exporter import IngestMetrics, MetricsExporter
from server.telemetry.incidents import IncidentCollector
from server.telemetry.jobs import JobTracker
from server.telemetry.latest import Telemetry
from server.telemetry.retention import RetentionMetrics
from server.watchdog import Watchdog

log = logging.getLogger("gpuwatch.server")


def create_app(settings: Settings) -> FastAPI:
    """Build the app; raises SchemaOutOfDate when the database needs `gpuwatch db upgrade` first."""
    url = settings.effective_database_url
    engine = make_engine(url, settings.db_busy_timeout_ms)
    check_schema(engine, url)
    sessions = make_sessionmaker(engine)
    telemetry = Telemetry(settings.ring_size, sample_type=mirror(GpuSample))
    _load_inventory(sessions, telemetry)
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)  # process_cpu_seconds_total & co: is one core enough (scale-out.md)
    jobs = JobTracker(
        window_s=settings.job_window_s,
        straggler_margin=settings.straggler_margin,
        straggler_steps=settings.straggler_steps,
        straggler_min_s=settings.straggler_min_s,
        default_hang_timeout_s=settings.hang_timeout_s,
    )
    exporter = MetricsExporter(
        telemetry, registry, settings.node_timeout_s, jobs=jobs, max_rank_series=settings.max_rank_series
    )
    registry.register(IncidentCollector(sessions))
    notifier = Notifier.from_settings(settings, registry)
    retention = RetentionMetrics(registry)
    rollups = RollupBuffer(settings.rollup_flush_s)
    svc = Services(settings, engine, sessions, telemetry, exporter, jobs, IngestMetrics(registry), rollups, notifier)
    svc.limits = RateLimiter(settings.rate_limit_per_s, settings.rate_limit_burst)
    svc.tokens = TokenCache(settings.token_cache_s)
    svc.writer = BatchWriter(svc, settings.ingest_queue_bytes)
    silence = SilenceWatch(svc, registry)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        watchdog = Watchdog(
            [
                ("hang", lambda: record(svc, svc.jobs.check_hangs())),
                ("silent node", silence.check),
                ("exclusion expiry", lambda: expire_exclusions(svc)),
                ("rollup flush", lambda: flush_rollups(svc, due_only=True)),
            ],
            settings.hang_check_s,
        )
        watchdog.start()
        # Pruning on a thread of its own: a long backlog must not delay the hang checks.
        pruner = Watchdog(
            [("retention", lambda: retention.observe(lambda: _prune(engine, settings)))], settings.retention_interval_s
        )
        if settings.retention_interval_s > 0:
            pruner.start()
        yield
        if settings.retention_interval_s > 0:
            pruner.stop()
        watchdog.stop()
        svc.writer.stop()  # what is queued is stored first
        flush_rollups(svc)
        notifier.close()

    app = FastAPI(
        title="gpuwatch", version=__version__, description="GPU cluster observability and diagnosis", lifespan=lifespan
    )
    app.state.services = svc
    for module in (health, ingest):  # open, or each endpoint checks its node token
        app.include_router(module.router)
    for module in (read, runs, recovery, reports, admin):  # their GETs need a token with `read_auth`
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

    app.add_middleware(RejectionCounter, metrics=svc.metrics)
    return app


class RejectionCounter:
    """Counts API requests answered 4xx/5xx (and refused batches). A plain ASGI middleware: Starlette's
    `@app.middleware("http")` wraps every response in a streaming one and a task group, which cost about
    0.3 ms a request on the ingest path."""

    def __init__(self, app: ASGIApp, metrics: IngestMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith("/api/v1/"):
            await self.app(scope, receive, send)
            return

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] >= 400:
                self.metrics.rejected.labels(str(message["status"])).inc()
                if path == "/api/v1/ingest":
                    self.metrics.batches.labels("rejected").inc()
            await send(message)

        await self.app(scope, receive, counted)


def _prune(engine: Engine, settings: Settings) -> PruneResult:
    """One retention run (server/store/retention.py); on PostgreSQL skipped while another replica prunes."""
    return prune(engine, Retention.from_settings(settings), chunk=settings.retention_chunk_rows)


def _load_inventory(sessions, telemetry: Telemetry) -> None:  # type: ignore[no-untyped-def]
    """Known GPUs are listed (without values) from the start, before their agents reconnect."""
    with sessions() as session:
        rows = session.execute(select(Node.name, Gpu).join(Gpu, Gpu.node_id == Node.id)).tuples().all()
    by_node: dict[str, list[GpuInfo]] = {}
    for name, gpu in rows:
        by_node.setdefault(name, []).append(
            GpuInfo(
                index=gpu.index,
                uuid=gpu.uuid,
                name=gpu.model,
                memory_total_mib=gpu.memory_total_mib,
                pci_bus_id=gpu.pci_bus_id,
            )
        )
    for name, gpus in by_node.items():
        telemetry.set_inventory(name, gpus)


def flush_rollups(svc: Services, due_only: bool = False) -> None:
    """Write the buffered rollups now (or only when their flush is due and the ingest writer, which
    flushes them in slices between its groups while batches arrive, is not doing it)."""
    if not due_only or (svc.rollups.due() and not svc.writer.flushes_rollups()):
        with transaction(svc.sessions) as session:
            svc.rollups.flush(session)
