"""Alembic migrations on SQLite and PostgreSQL: up, down and up again; the models agree with the
migrated schema; the server refuses an out-of-date schema and says which command fixes it."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect

from server.store.db import SchemaOutOfDate, make_engine
from server.store.migrate import check_schema, current_revision, downgrade, head_revision, upgrade
from server.store.models import Base
from tests.helpers import CLI, REPO, free_port

MODEL_TABLES = set(Base.metadata.tables)


@pytest.fixture
def engine(empty_db_url: str) -> Iterator[Engine]:
    eng = make_engine(empty_db_url)
    yield eng
    eng.dispose()


def tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names())  # a new inspector each time: it caches what it read


def test_upgrade_downgrade_upgrade(empty_db_url: str, engine: Engine) -> None:
    assert tables(engine) == set()
    head = head_revision(empty_db_url)
    assert head is not None

    upgrade(empty_db_url)
    assert tables(engine) == MODEL_TABLES | {"alembic_version"}
    assert current_revision(engine) == head

    downgrade(empty_db_url, "base")
    assert tables(engine) <= {"alembic_version"}
    assert current_revision(engine) is None

    upgrade(empty_db_url, "head")
    assert tables(engine) == MODEL_TABLES | {"alembic_version"}
    assert current_revision(engine) == head


def test_models_match_migrated_schema(empty_db_url: str, engine: Engine) -> None:
    upgrade(empty_db_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    assert diff == [], f"models and migrations disagree; add a migration (alembic revision --autogenerate): {diff}"


def test_check_schema_requires_head(empty_db_url: str, engine: Engine) -> None:
    with pytest.raises(SchemaOutOfDate, match="gpuwatch db upgrade") as empty:
        check_schema(engine, empty_db_url)
    assert "empty" in str(empty.value)

    upgrade(empty_db_url)
    check_schema(engine, empty_db_url)

    downgrade(empty_db_url, "base")
    with pytest.raises(SchemaOutOfDate, match="gpuwatch db upgrade"):
        check_schema(engine, empty_db_url)


# --- the real `gpuwatch` command, as a child process ---------------------------------------------


def gpuwatch(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    # cwd is the repository, like `make test`: the package is importable from there however it is installed.
    full_env = {k: v for k, v in os.environ.items() if k != "GPUWATCH_CONFIG"} | env
    return subprocess.run(
        [*CLI, *args], env=full_env, cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture
def cli_db(empty_db_url: str, tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """Options and environment that point `gpuwatch` at the fresh database: for SQLite the default
    file in a new data directory (GPUWATCH_DATABASE_URL empty), for PostgreSQL --database-url."""
    data_dir = tmp_path / "data"
    opts = ["--data-dir", str(data_dir)]
    if not empty_db_url.startswith("sqlite"):
        opts += ["--database-url", empty_db_url]
    return opts, {"GPUWATCH_DATABASE_URL": ""}


def test_cli_server_refuses_unmigrated_db_then_db_upgrade(
    empty_db_url: str, cli_db: tuple[list[str], dict[str, str]]
) -> None:
    opts, env = cli_db
    refused = gpuwatch("server", *opts, "--port", str(free_port()), env=env)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "gpuwatch db upgrade" in refused.stderr

    done = gpuwatch("db", "upgrade", *opts, env=env)
    assert done.returncode == 0, done.stdout + done.stderr

    if empty_db_url.startswith("sqlite"):
        assert (Path(opts[1]) / "gpuwatch.db").is_file()  # the data directory's own SQLite file was used

    current = gpuwatch("db", "current", *opts, env=env)
    assert current.returncode == 0, current.stdout + current.stderr
    head = head_revision(empty_db_url)
    assert f"database: {head} " in current.stdout
    assert f"code head: {head}" in current.stdout


def test_db_upgrade_waits_for_an_unreachable_database_then_says_why(tmp_path: Path) -> None:
    url = f"postgresql+psycopg://gpuwatch:secret@127.0.0.1:{free_port()}/gpuwatch"  # nothing listens there
    started = time.monotonic()
    done = gpuwatch("db", "upgrade", "--wait", "2", "--database-url", url, "--data-dir", str(tmp_path), env={})
    assert done.returncode == 1, done.stdout + done.stderr
    assert time.monotonic() - started >= 2
    assert "waiting for the database" in done.stderr
    assert "unreachable after 2 s" in done.stderr and "secret" not in done.stderr
    assert "Traceback" not in done.stderr
