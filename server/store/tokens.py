"""Bearer tokens by role: a node's token (see `nodes.py`) acts only as that node; an admin token
belongs to a person, acts on the cluster (pause, exclusions, the audit log) and never as a node."""

from __future__ import annotations

import random
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from server.store.models import ApiToken, Node, utcnow
from server.store.nodes import hash_token

NODE, ADMIN = "node", "admin"
ADMIN_PREFIX = "gwa_"


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A live token as a request sees it: the role, the node it is bound to, whose it is."""

    id: int
    role: str
    prefix: str
    name: str | None
    node_id: int | None
    node_name: str | None


def lookup(session: Session, token: str) -> tuple[TokenInfo, Node | None] | None:
    """The live token and (for a node token) its node; None for an unknown or revoked token."""
    row = session.execute(
        select(ApiToken, Node)
        .outerjoin(Node, Node.id == ApiToken.node_id)
        .where(ApiToken.token_hash == hash_token(token), ApiToken.revoked_at.is_(None))
    ).first()
    if row is None:
        return None
    tok, node = row
    return TokenInfo(tok.id, tok.role, tok.prefix, tok.name, tok.node_id, node.name if node else None), node


def create_admin_token(session: Session, name: str) -> str:
    """A new admin token for ``name`` (a person or a tool); printed once, only its hash stored."""
    token = ADMIN_PREFIX + secrets.token_urlsafe(32)
    session.add(ApiToken(node_id=None, role=ADMIN, name=name, token_hash=hash_token(token), prefix=token[:12]))
    return token


def revoke_admin_tokens(session: Session, name: str) -> int:
    result = session.execute(
        update(ApiToken)
        .where(ApiToken.role == ADMIN, ApiToken.name == name, ApiToken.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )
    if not result.rowcount:
        raise LookupError(f"no live admin token named {name!r}")
    return result.rowcount


@dataclass(frozen=True, slots=True)
class TokenRow:
    id: int
    role: str
    owner: str  # the node's name, or the admin token's
    prefix: str
    created_at: datetime
    revoked_at: datetime | None


def list_tokens(session: Session) -> list[TokenRow]:
    """Every token, live and revoked, oldest first; never the secret, only its first characters."""
    rows = session.execute(
        select(ApiToken, Node.name).outerjoin(Node, Node.id == ApiToken.node_id).order_by(ApiToken.id)
    ).all()
    return [
        TokenRow(t.id, t.role, (node_name if t.role == NODE else t.name) or "?", t.prefix, t.created_at, t.revoked_at)
        for t, node_name in rows
    ]


class TokenCache:
    """Tokens looked up in the last ``ttl_s`` seconds, by their hash: agents send a request every few
    seconds, and a database query for each was a tenth of the ingest path's time. Each entry lives a
    random 50 to 100 % of ``ttl_s``, so the tokens of nodes that all started together are not looked up
    again all at once. A revoked token stops working on a server at its next `drop_revoked` (the
    watchdog's, every `hang_check_s`), on every replica, whoever revoked it; ``ttl_s`` is the bound
    should those checks fail."""

    #: Revocations are looked for this far before the last check: the clocks of the hosts that revoke
    #: (`revoked_at` is theirs) and the commit of a revocation may lag this server's.
    REVOCATION_MARGIN = timedelta(minutes=5)

    def __init__(self, ttl_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s, self._clock = ttl_s, clock
        self._found: dict[str, tuple[float, Principal]] = {}
        self._lock = threading.Lock()
        self._revoked_since = utcnow() - self.REVOCATION_MARGIN

    def drop(self, token_hashes: Iterable[str]) -> int:
        """Forget these tokens (by hash): their next request is looked up again. How many were cached."""
        with self._lock:
            return sum(self._found.pop(h, None) is not None for h in token_hashes)

    def drop_revoked(self, session: Session) -> int:
        """Forget the cached tokens revoked since the last call (less `REVOCATION_MARGIN`)."""
        checked = utcnow()
        revoked = session.scalars(select(ApiToken.token_hash).where(ApiToken.revoked_at >= self._revoked_since))
        dropped = self.drop(revoked)
        self._revoked_since = checked - self.REVOCATION_MARGIN
        return dropped

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
