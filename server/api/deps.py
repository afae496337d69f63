"""Shared request dependencies: the app's services, a database session, the calling node."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from gpuwatch.config import Settings
from server.notify import Notifier
from server.store.models import Node
from server.store.nodes import node_for_token
from server.telemetry.exporter import IngestMetrics, MetricsExporter
from server.telemetry.jobs import JobTracker
from server.telemetry.latest import Telemetry


class DecisionBoard:
    """Runs decided on since this server started. The decision long poll watches this set instead of
    querying the database every few milliseconds, and reads the database only once its run is in it
    (and once when its wait ends, for decisions another server process made)."""

    def __init__(self) -> None:
        self._runs: set[int] = set()
        self._lock = threading.Lock()

    def mark(self, run_id: int) -> None:
        with self._lock:
            self._runs.add(run_id)

    def __contains__(self, run_id: object) -> bool:
        with self._lock:
            return run_id in self._runs


class FirstSteps:
    """Runs started on this server whose first step report has not come yet, by job name: the ingest
    path stamps `runs.first_step_at` once per run with one dictionary lookup per batch."""

    def __init__(self) -> None:
        self._waiting: dict[str, int] = {}
        self._lock = threading.Lock()

    def expect(self, job: str, run_id: int) -> None:
        with self._lock:
            self._waiting[job] = run_id

    def keep(self, job: str, run_id: int) -> None:
        """Wait on for ``run_id``'s first step, unless a newer run of the job started meanwhile."""
        with self._lock:
            self._waiting.setdefault(job, run_id)

    def take(self, job: str) -> int | None:
        with self._lock:
            return self._waiting.pop(job, None)


@dataclass(slots=True)
class Services:
    """Everything a request handler may need, built once per app in `server.app.create_app`."""

    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    telemetry: Telemetry
    exporter: MetricsExporter
    jobs: JobTracker
    metrics: IngestMetrics
    notifier: Notifier | None = None  # incident webhooks (server/NOTIFY.md)
    decided: DecisionBoard = field(default_factory=DecisionBoard)
    first_steps: FirstSteps = field(default_factory=FirstSteps)


def services(request: Request) -> Services:
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(services)]


def db_session(svc: ServicesDep) -> Iterator[Session]:
    with svc.sessions() as session:
        yield session


SessionDep = Annotated[Session, Depends(db_session)]

_UNAUTHORIZED = {"WWW-Authenticate": "Bearer"}


def current_node(svc: ServicesDep, authorization: Annotated[str | None, Header()] = None) -> Node:
    """The node whose bearer token authorises this request; 401 otherwise."""
    if not authorization:
        raise HTTPException(
            401, "missing bearer token: create one with `gpuwatch token create --node NAME`", headers=_UNAUTHORIZED
        )
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HTTPException(401, "Authorization must be 'Bearer <token>'", headers=_UNAUTHORIZED)
    with svc.sessions() as session:
        node = node_for_token(session, token.strip())
    if node is None:
        raise HTTPException(401, "unknown or revoked token", headers=_UNAUTHORIZED)
    return node


NodeDep = Annotated[Node, Depends(current_node)]
