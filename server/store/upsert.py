"""Dialect-aware INSERT … ON CONFLICT, the one way the store writes idempotently."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, ClassVar

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.elements import ClauseElement


def insert_for(session: Session, table: Table) -> Any:
    """An INSERT construct with `.on_conflict_do_nothing/_do_update` for the session's database."""
    name = session.get_bind().dialect.name
    if name == "postgresql":
        return postgresql.insert(table)
    if name == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"gpuwatch supports SQLite and PostgreSQL, not {name}")


class _OnConflictDoNothing(ClauseElement):
    """``ON CONFLICT DO NOTHING``, the same on SQLite and PostgreSQL; it has no state, so it caches."""

    inherit_cache = True
    _traverse_internals: ClassVar[list[Any]] = []


@compiles(_OnConflictDoNothing)
def _render(_element: _OnConflictDoNothing, _compiler: SQLCompiler, **_kw: Any) -> str:
    return "ON CONFLICT DO NOTHING"


class _InsertIgnore(Insert):
    inherit_cache = True
    _post_values_clause = _OnConflictDoNothing()


def insert_ignore(table: Table) -> Insert:
    """``INSERT … ON CONFLICT DO NOTHING`` that SQLAlchemy compiles once and caches. The dialects' own
    `insert().on_conflict_do_nothing()` opts out of the statement cache (SQLAlchemy 2.0), and compiling
    it again for every batch cost about 1 ms of the ingest path's 2.5 ms per request."""
    return _InsertIgnore(table)


#: Rows a raw multi-row INSERT carries at most: SQLite binds at most 32,766 values in a statement
#: and statements of a few hundred rows are as fast as longer ones.
_ROWS_A_STATEMENT = 500


def insert_new_rows(
    session: Session, table: Table, columns: Sequence[str], rows: Sequence[Sequence[Any]], returning: Sequence[str]
) -> list[tuple[Any, ...]]:
    """``INSERT … ON CONFLICT DO NOTHING RETURNING`` ``rows`` in the session's transaction; returns the
    ``returning`` columns of the rows inserted (not of those already there). ``rows`` are tuples in
    ``columns``' order holding what the driver takes (`db_time` for times): the SQL is the driver's own,
    with no compiling and no bind processors, and its errors are wrapped as SQLAlchemy's, as any
    statement's are.

    For the ingest path's hottest tables, a batch's claim and log lines: `store_batches` took 170 µs a
    batch of 10 lines through SQLAlchemy's insertmanyvalues, 85 µs this way on SQLite (bench/README.md).
    On PostgreSQL the rows go as one array a column through ``unnest``: one short statement, which the
    driver prepares once, where a VALUES list of thousands of parameters was parsed and planned anew each
    time (half the writer's time went waiting for it)."""
    if not rows:
        return []
    conn = session.connection()
    if conn.dialect.name == "postgresql":
        result = conn.exec_driver_sql(
            _unnest_sql(table, tuple(columns), tuple(returning)), tuple(map(list, zip(*rows, strict=True)))
        )
        out = result.cursor.fetchall()  # the driver's tuples: SQLAlchemy's Rows cost 2 µs each, and hash slowly
        result.close()
        return out
    one = "(" + ", ".join(["?"] * len(columns)) + ")"
    head = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES "
    tail = f" ON CONFLICT DO NOTHING RETURNING {', '.join(returning)}"
    out = []
    for start in range(0, len(rows), _ROWS_A_STATEMENT):
        chunk = rows[start : start + _ROWS_A_STATEMENT]
        result = conn.exec_driver_sql(
            head + ", ".join([one] * len(chunk)) + tail, tuple(v for row in chunk for v in row)
        )
        out.extend(result.cursor.fetchall())
        result.close()
    return out


@lru_cache(maxsize=32)
def _unnest_sql(table: Table, columns: tuple[str, ...], returning: tuple[str, ...]) -> str:
    """PostgreSQL's ``INSERT … SELECT * FROM unnest(%s::type[], …)`` for ``columns`` of ``table``."""
    arrays = ", ".join(f"%s::{table.c[name].type.compile(dialect=postgresql.dialect())}[]" for name in columns)
    return (
        f"INSERT INTO {table.name} ({', '.join(columns)}) SELECT * FROM unnest({arrays}) "
        f"ON CONFLICT DO NOTHING RETURNING {', '.join(returning)}"
    )


def db_time(session: Session) -> Callable[[float], Any]:
    """A Unix time as the session's driver takes it for a `UTCDateTime` column, stored exactly as the
    ORM stores it: SQLite's text (SQLAlchemy's ``YYYY-MM-DD HH:MM:SS.ffffff``, in UTC), an aware
    datetime for PostgreSQL."""
    if session.get_bind().dialect.name == "sqlite":
        return _sqlite_time
    return _aware_time


def _sqlite_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(" ", "microseconds")[:26]


def _aware_time(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)
