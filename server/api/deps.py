"""Shared request dependencies: the app's services, a database session, the calling node."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from gpuwatch.config import Settings
from server.store.models import Node
from server.store.nodes import node_for_token
from server.telemetry.exporter import IngestMetrics, MetricsExporter
from server.telemetry.jobs import JobTracker
from server.telemetry.latest import Telemetry


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
