"""Engine and session set-up, and the check that the database schema is the one the code expects."""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError, OperationalError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

_log = logging.getLogger("gpuwatch.server.db")

#: One writer at a time per SQLite engine, queued in-process. SQLite allows one write transaction at a
#: time anyway; threads that find the file locked wait in its busy handler, which sleeps in steps of up
#: to 100 ms, and under concurrent ingest that wait, not the work, dominated (bench/README.md: ingest).
_SQLITE_WRITERS: weakref.WeakKeyDictionary[Engine, threading.RLock] = weakref.WeakKeyDictionary()


class SchemaOutOfDate(RuntimeError):
    """The database is not at the migration head; the message names the command that fixes it."""


class DatabaseUnreachable(RuntimeError):
    """The database did not accept a connection before the deadline; the message has its last error."""


def make_engine(url: str, busy_timeout_ms: int = 5000) -> Engine:
    """An engine for ``url``; SQLite files get WAL mode, foreign keys and a bounded lock wait."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        engine = create_engine(url)
        _ping_when_idle(engine)
        return engine
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    # A pool as large as the threads that may hold a connection at once (the request thread pool's 40,
    # the ingest writer, the watchdog): beyond its size a connection is closed after use, and opening
    # one again (with its pragmas) under load cost a tenth of the server's time in token lookups. Last
    # in, first out: the few connections in use keep their page caches (2 MiB each) warm, and the rest
    # stay idle and small, where taking them in turn filled all 48.
    engine = create_engine(
        url, connect_args={"timeout": busy_timeout_ms / 1000}, pool_size=48, max_overflow=16, pool_use_lifo=True
    )

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cur.close()

    _SQLITE_WRITERS[engine] = threading.RLock()
    return engine


#: A pooled connection back in the pool longer than this is checked with a round trip before it is used.
PING_IDLE_S = 1.0


def _ping_when_idle(engine: Engine) -> None:
    """Check a pooled connection before use only if it sat idle `PING_IDLE_S` (SQLAlchemy's
    ``pool_pre_ping`` checks every checkout: the ingest writer paid a round trip a group of batches for
    it). One the server dropped meanwhile (a restart, an idle timeout) fails the ping and the pool
    replaces it; one dropped while in steady use fails its statement instead, which the writer retries
    batch by batch and the agent's spool retries after that."""

    @event.listens_for(engine, "checkin")
    def _returned(_dbapi_conn: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _taken(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.pop("idle_since", None)
        if since is None or time.monotonic() - since < PING_IDLE_S:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except Exception as exc:  # the pool discards it and takes another (up to three tries)
            raise DisconnectionError(f"a pooled connection idle {time.monotonic() - since:.0f} s is gone") from exc


def wait_for_database(url: str, timeout_s: float, every_s: float = 1.0) -> None:
    """Return once ``url`` accepts a connection and answers ``SELECT 1``; raise DatabaseUnreachable
    after ``timeout_s``. For one-shot jobs started beside the database (compose's `init`): a server
    that is restarting, still initialising, or not resolvable yet is retried, not fatal."""
    parsed = make_url(url)
    args = {"connect_timeout": max(1, int(every_s * 5))} if parsed.get_backend_name() == "postgresql" else {}
    engine = create_engine(url, poolclass=NullPool, connect_args=args)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                with engine.connect() as conn:
                    conn.execute(text("SELECT 1"))
                return
            except OperationalError as exc:
                first = (str(exc.orig or exc).strip().splitlines() or ["?"])[0]
                where = parsed.render_as_string(hide_password=True)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DatabaseUnreachable(f"database {where} unreachable after {timeout_s:g} s: {first}") from exc
                _log.info("waiting for the database %s (%s): %.0f s left", where, first, left)
                time.sleep(min(every_s, left))
    finally:
        engine.dispose()


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work: committed if the block succeeds, rolled back entirely if it raises."""
    bind = factory.kw.get("bind")
    writer = _SQLITE_WRITERS.get(bind) if isinstance(bind, Engine) else None
    with writer or nullcontext(), factory() as session, session.begin():
        yield session


def lock(session: Session, key: str) -> None:
    """Serialise ``key`` across server replicas until the session's transaction ends: a PostgreSQL
    transaction-level advisory lock. SQLite has one writer at a time already (and one server)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": key})
