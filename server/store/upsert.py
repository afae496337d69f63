"""Dialect-aware INSERT … ON CONFLICT, the one way the store writes idempotently."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


def insert_for(session: Session, table: Table) -> Any:
    """An INSERT construct with `.on_conflict_do_nothing/_do_update` for the session's database."""
    name = session.get_bind().dialect.name
    if name == "postgresql":
        return postgresql.insert(table)
    if name == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"gpuwatch supports SQLite and PostgreSQL, not {name}")
