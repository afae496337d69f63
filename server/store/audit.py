"""The admin audit log: every act of an admin token, and token management by the CLI."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.store.models import AuditEntry


def audit(session: Session, actor: str, action: str, target: str | None = None, **params: Any) -> None:
    """Record ``action`` in the caller's transaction: the act and its record commit (or fail) together."""
    session.add(AuditEntry(actor=actor[:255], action=action, target=target[:255] if target else None, params=params))


def recent(session: Session, limit: int = 100, action: str | None = None) -> list[AuditEntry]:
    """The newest entries first."""
    query = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit)
    if action is not None:
        query = query.where(AuditEntry.action == action)
    return list(session.scalars(query))
