"""Shared request dependencies: the app's services, a database session, and who is calling (a node's
token, an admin's, or nobody) with what it may do."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from server.api.limits import RateLimiter
from server.services import Services
from server.store.models import Node
from server.store.tokens import Principal, lookup


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


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; None for any other scheme. The one
    place a header becomes a token: the cache was once consulted with whatever followed any scheme."""
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def _principal(svc: Services, authorization: str | None) -> Principal:
    if not authorization:
        raise HTTPException(
            401, "missing bearer token: create one with `gpuwatch token create --node NAME`", headers=_UNAUTHORIZED
        )
    token = bearer_token(authorization)
    if token is None:
        raise HTTPException(401, "Authorization must be 'Bearer <token>'", headers=_UNAUTHORIZED)
    if (cached := svc.tokens.get(token)) is not None:
        return cached
    with svc.sessions() as session:
        found = lookup(session, token)
    if found is None:
        raise HTTPException(401, "unknown or revoked token", headers=_UNAUTHORIZED)
    return svc.tokens.put(token, Principal(*found))


async def current_node(
    request: Request, svc: ServicesDep, authorization: Annotated[str | None, Header()] = None
) -> Node:
    """The node whose bearer token authorises this request: 401 without a valid token, 403 for an admin
    token (admins are not nodes), 429 past the node's request rate. Async: a token seen in the last
    `TokenCache.ttl_s` costs no database query and no trip through the thread pool."""
    return await node_of(request, svc, authorization)


async def node_of(request: Request, svc: Services, authorization: str | None) -> Node:
    """`current_node` as a plain function, for endpoints outside FastAPI's dependency injection."""
    token = bearer_token(authorization)
    who = svc.tokens.get(token) if token else None
    if who is None:
        who = await run_in_threadpool(_principal, svc, authorization)
    if who.is_admin or who.node is None:
        raise HTTPException(403, "an admin token cannot act as a node: agents and supervisors use their node's token")
    limits: RateLimiter | None = request.app.state.limits
    if limits is not None and (wait := limits.acquire(who.node.id)):
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
) -> Principal | None:
    """With `read_auth` on, a GET needs a valid token (any role), whose holder is returned; writes check
    their own tokens. Async, so that with it off (the default) no request pays a trip through the thread
    pool for nothing."""
    if svc.settings.server.read_auth and request.method in ("GET", "HEAD"):
        return await run_in_threadpool(_principal, svc, authorization)
    return None


def own_node(node: Node, named: str | None, what: str) -> None:
    """403 when a node's token speaks about another node: a node acts only for itself."""
    if named is not None and named != node.name:
        raise HTTPException(403, f"this token belongs to node {node.name}; it cannot {what} for node {named!r}")


NodeDep = Annotated[Node, Depends(current_node)]
AdminDep = Annotated[Principal, Depends(current_admin)]
ReadAccess = Depends(read_access)
#: Who reads (with `read_auth` on; None with it off): the same dependency as `ReadAccess`, run once.
ReaderDep = Annotated[Principal | None, ReadAccess]
