"""Shared request dependencies: the app's services, a database session, and who is calling (a node's
token, an admin's, or nobody) with what it may do."""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Header, HTTPException, Request
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from gpuwatch.config import Settings
from server.api.limits import RateLimiter
from server.notify import Notifier
from server.store.models import Node
from server.store.nodes import hash_token
from server.store.rollups import RollupBuffer
from server.store.tokens import ADMIN, TokenInfo, lookup
from server.telemetry.exporter import IngestMetrics, MetricsExporter
from server.telemetry.jobs import JobTracker
from server.telemetry.latest import Telemetry

if TYPE_CHECKING:
    from server.ingest.writer import BatchWriter  # which imports the store, as this module does


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
    rollups: RollupBuffer  # per-minute rollups waiting for their flush
    notifier: Notifier | None = None  # incident webhooks (server/NOTIFY.md)
    limits: RateLimiter | None = None  # per-node request rate; None: unlimited
    tokens: TokenCache = field(default_factory=lambda: TokenCache())  # tokens recently looked up
    decided: DecisionBoard = field(default_factory=DecisionBoard)
    first_steps: FirstSteps = field(default_factory=FirstSteps)
    writer: BatchWriter = field(init=False)  # stores ingest batches (set in create_app: it needs these)


async def services(request: Request) -> Services:
    """Async although it awaits nothing: FastAPI runs a plain ``def`` dependency in its thread pool, and
    that trip, taken by every request, was a third of the ingest route's cost on the event loop."""
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(services)]


def db_session(svc: ServicesDep) -> Iterator[Session]:
    with svc.sessions() as session:
        yield session


SessionDep = Annotated[Session, Depends(db_session)]

_UNAUTHORIZED = {"WWW-Authenticate": "Bearer"}


class TokenCache:
    """Tokens looked up in the last ``ttl_s`` seconds, by their hash: agents send a request every few
    seconds, and a database query for each was a tenth of the ingest path's time. A revoked token
    keeps working on a server for at most ``ttl_s``. Each entry lives a random 50 to 100 % of it, so the
    tokens of nodes that all started together are not looked up again all at once."""

    def __init__(self, ttl_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s, self._clock = ttl_s, clock
        self._found: dict[str, tuple[float, Principal]] = {}
        self._lock = threading.Lock()

    def get(self, token: str) -> Principal | None:
        key = hash_token(token)
        with self._lock:
            hit = self._found.get(key)
            if hit is None or hit[0] < self._clock():
                return None
            return hit[1]

    def put(self, token: str, who: Principal) -> Principal:
        if self.ttl_s <= 0:
            return who
        now = self._clock()
        with self._lock:
            if len(self._found) > 100_000:  # stale entries of tokens no longer used
                self._found = {k: v for k, v in self._found.items() if v[0] >= now}
            self._found[hash_token(token)] = (now + self.ttl_s * random.uniform(0.5, 1.0), who)
        return who


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request's bearer token says is calling: a node (``node`` set) or an admin (``name`` set)."""

    token: TokenInfo
    node: Node | None

    @property
    def is_admin(self) -> bool:
        return self.token.role == ADMIN

    @property
    def who(self) -> str:
        """For audit rows and messages: the role, whose, and the token's first characters (never all of it)."""
        owner = self.token.name if self.is_admin else self.token.node_name
        return f"{self.token.role} {owner} ({self.token.prefix}…)"


def _principal(svc: Services, authorization: str | None) -> Principal:
    if not authorization:
        raise HTTPException(
            401, "missing bearer token: create one with `gpuwatch token create --node NAME`", headers=_UNAUTHORIZED
        )
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HTTPException(401, "Authorization must be 'Bearer <token>'", headers=_UNAUTHORIZED)
    token = token.strip()
    if (cached := svc.tokens.get(token)) is not None:
        return cached
    with svc.sessions() as session:
        found = lookup(session, token)
    if found is None:
        raise HTTPException(401, "unknown or revoked token", headers=_UNAUTHORIZED)
    return svc.tokens.put(token, Principal(*found))


async def current_node(svc: ServicesDep, authorization: Annotated[str | None, Header()] = None) -> Node:
    """The node whose bearer token authorises this request: 401 without a valid token, 403 for an admin
    token (admins are not nodes), 429 past the node's request rate. Async: a token seen in the last
    `TokenCache.ttl_s` costs no database query and no trip through the thread pool."""
    who = svc.tokens.get(authorization.partition(" ")[2].strip()) if authorization else None
    if who is None:
        who = await run_in_threadpool(_principal, svc, authorization)
    if who.is_admin or who.node is None:
        raise HTTPException(403, "an admin token cannot act as a node: agents and supervisors use their node's token")
    if svc.limits is not None and (wait := svc.limits.acquire(who.node.id)):
        raise HTTPException(
            429,
            f"node {who.node.name} is over its request rate (GPUWATCH_RATE_LIMIT_PER_S); retry later",
            headers={"Retry-After": str(max(1, math.ceil(wait)))},
        )
    return who.node


def current_admin(svc: ServicesDep, authorization: Annotated[str | None, Header()] = None) -> Principal:
    """An admin token's holder: 401 without a valid token, 403 for a node's token."""
    who = _principal(svc, authorization)
    if not who.is_admin:
        raise HTTPException(
            403,
            f"this needs an admin token (`gpuwatch token create --admin --name NAME`); "
            f"the token given is node {who.token.node_name}'s",
        )
    return who


async def read_access(
    request: Request, svc: ServicesDep, authorization: Annotated[str | None, Header()] = None
) -> None:
    """With `read_auth` on, a GET needs a valid token (any role); writes check their own tokens. Async, so
    that with it off (the default) no request pays a trip through the thread pool for nothing."""
    if svc.settings.read_auth and request.method in ("GET", "HEAD"):
        await run_in_threadpool(_principal, svc, authorization)


def own_node(node: Node, named: str | None, what: str) -> None:
    """403 when a node's token speaks about another node: a node acts only for itself."""
    if named is not None and named != node.name:
        raise HTTPException(403, f"this token belongs to node {node.name}; it cannot {what} for node {named!r}")


NodeDep = Annotated[Node, Depends(current_node)]
AdminDep = Annotated[Principal, Depends(current_admin)]
ReadAccess = Depends(read_access)
