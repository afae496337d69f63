"""PostgreSQL's pooled connections are checked with a round trip only after they sat idle (server/store/db.py).

A ping on every checkout cost the ingest writer one round trip a group of batches; a connection in
steady use needs none, and one the server dropped while it sat in the pool is still replaced before use."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

from gpuwatch.config import Settings
from server.store import db
from server.store.db import make_engine
from server.store.migrate import upgrade
from tests.helpers import InProcessServer, new_token


@pytest.fixture
def engine(postgres_url: str) -> Iterator[Engine]:
    engine = make_engine(postgres_url)
    try:
        yield engine
    finally:
        engine.dispose()


def _pings(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    seen: list[Any] = []
    real = engine.dialect.do_ping

    def counted(dbapi_connection: Any) -> bool:
        seen.append(dbapi_connection)
        return real(dbapi_connection)

    monkeypatch.setattr(engine.dialect, "do_ping", counted)
    return seen


def _backend(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def test_a_connection_in_steady_use_is_not_pinged(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    pings = _pings(engine, monkeypatch)
    monkeypatch.setattr(db, "PING_IDLE_S", 3600.0)
    pids = {_backend(engine) for _ in range(5)}
    assert len(pids) == 1  # the same pooled connection each time
    assert pings == []


def test_an_idle_connection_is_pinged_and_one_the_server_dropped_is_replaced(
    engine: Engine, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pings = _pings(engine, monkeypatch)
    first = _backend(engine)
    monkeypatch.setattr(db, "PING_IDLE_S", 0.0)  # every connection back in the pool counts as idle
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with admin.connect() as conn:
            assert conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": first}).scalar_one()
    finally:
        admin.dispose()
    second = _backend(engine)  # no error: the ping found the dead connection, the pool made a new one
    assert second != first
    assert len(pings) == 1


def _batch(n: int) -> dict[str, Any]:
    return {"batch_id": n, "logs": [{"stream": "train.log", "seq": n, "ts": time.time(), "text": f"line {n}"}]}


def test_a_batch_whose_connection_the_database_dropped_in_steady_use_is_stored_on_a_fresh_one(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ping catches a connection dropped while in steady use (a failover, an administrator's
    pg_terminate_backend): its statement fails, and the writer stores the batch again, once, on a new
    connection, rather than answering 503 for the agent to retry in five seconds."""
    monkeypatch.setattr(db, "PING_IDLE_S", 3600.0)  # nothing is pinged: the drop is met by a statement
    upgrade(postgres_url)
    token = new_token(postgres_url, "pg-node")
    with (
        InProcessServer(Settings(data_dir=tmp_path, database_url=postgres_url)) as srv,
        httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client,
    ):
        assert client.post("/api/v1/ingest", json=_batch(0)).status_code == 200
        admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        try:
            with admin.connect() as conn:
                dropped = conn.execute(
                    text(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                ).scalar_one()
        finally:
            admin.dispose()
        assert dropped >= 1  # the server's pooled connections
        answer = client.post("/api/v1/ingest", json=_batch(1))
        assert answer.status_code == 200, answer.text
        assert answer.json()["logs"] == 1
    engine = make_engine(postgres_url)
    try:
        with engine.connect() as conn:
            lines = conn.execute(text("SELECT text FROM log_lines ORDER BY seq")).scalars().all()
    finally:
        engine.dispose()
    assert lines == ["line 0", "line 1"]
