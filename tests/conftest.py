from __future__ import annotations

import atexit
import importlib.util
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from gpuwatch.config import Settings
from server.store.migrate import upgrade
from tests.helpers import REQUIRE_TOOLS_ENV, InProcessServer, migrated_sqlite
from tests.local_llm import LocalLlm, local_llm, missing
from tests.slurm_cluster import SlurmCluster, slurm_cluster

os.environ.pop("GPUWATCH_CONFIG", None)  # a developer's own config must not leak into tests
# Compiled prefilters (gpuwatch/diagnosis/bytescan.py) go to a cache of the test run's own, not the user's.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="gpuwatch-test-cache-")
atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], True)

POSTGRES_URL_ENV = "GPUWATCH_TEST_POSTGRES_URL"
REQUIRE_POSTGRES_ENV = "GPUWATCH_TEST_REQUIRE_POSTGRES"  # CI sets it to 1: no PostgreSQL is a failure, not a skip
DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses `postgres_url` directly is a `postgres` test even if its author forgot the mark.

    A test on the real Slurm cluster is `serial`: `make test` runs it after the parallel phase, alone,
    against one cluster. Each xdist worker that ran one would otherwise start its own three daemons, and a
    fresh CI run saw a batch job not start within 120 s beside two other workers. (xdist's `loadgroup`
    did not keep a group on one worker here: pytest 9.2, xdist 3.8.)"""
    for item in items:
        if "postgres_url" in getattr(item, "fixturenames", ()) and item.get_closest_marker("postgres") is None:
            item.add_marker(pytest.mark.postgres)
        if "slurm" in getattr(item, "fixturenames", ()) and item.get_closest_marker("serial") is None:
            item.add_marker(pytest.mark.serial)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return migrated_sqlite(tmp_path)


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str) -> Settings:
    return Settings(
        data_dir=tmp_path,
        database_url=sqlite_url,
        max_body_bytes=64 * 1024,
        db_busy_timeout_ms=200,
        token_cache_s=0.2,
    )


@pytest.fixture
def live_server(settings: Settings) -> Iterator[InProcessServer]:
    with InProcessServer(settings) as srv:
        yield srv


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """The URL of a fresh, empty PostgreSQL database of this test's own, dropped afterwards.

    It is created on the server named by GPUWATCH_TEST_POSTGRES_URL (default: the local `test`
    database). No server there: the test is skipped, or fails where GPUWATCH_TEST_REQUIRE_POSTGRES=1.
    Whatever the test leaves connected is cut off by DROP DATABASE … WITH (FORCE) (PostgreSQL 13+).
    """
    base = make_url(os.environ.get(POSTGRES_URL_ENV) or DEFAULT_POSTGRES_URL)
    name = f"gpuwatch_test_{secrets.token_hex(6)}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT", poolclass=NullPool, connect_args={"connect_timeout": 5})
    reason = None
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError as exc:  # not there, refusing connections, or refusing us
        admin.dispose()
        first_line = (str(exc.orig or exc).strip().splitlines() or ["?"])[0]
        reason = f"PostgreSQL not reachable at {base.render_as_string()} ({POSTGRES_URL_ENV}): {first_line}"
    if reason is not None:
        if os.environ.get(REQUIRE_POSTGRES_ENV) == "1":
            pytest.fail(f"{reason} [{REQUIRE_POSTGRES_ENV}=1]", pytrace=False)
        pytest.skip(reason)
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, un-migrated database on each backend gpuwatch supports: a SQLite file, then PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'empty.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def db_url(empty_db_url: str) -> str:
    """The same, migrated to the latest schema: for tests of what gpuwatch does with its database."""
    upgrade(empty_db_url)
    return empty_db_url


@pytest.fixture(scope="session")
def slurm_session() -> Iterator[SlurmCluster]:
    """One real single-node Slurm for the whole run (tests/slurm_cluster.py); skipped without it."""
    with slurm_cluster() as cluster:
        yield cluster


@pytest.fixture
def slurm(slurm_session: SlurmCluster) -> Iterator[SlurmCluster]:
    yield slurm_session
    slurm_session.reset()


@pytest.fixture(scope="session")
def real_llm() -> Iterator[LocalLlm]:
    """One real small LLM (tests/local_llm.py) for the whole run. Skipped where llama-cpp-python is not
    built (`make llm`: 6-12 min, once per machine; `make test` installs it from pip's cache when it is);
    once it is, a missing model fails where GPUWATCH_TEST_REQUIRE_TOOLS=1."""
    reason = missing()
    if reason is not None:
        if os.environ.get(REQUIRE_TOOLS_ENV) == "1" and importlib.util.find_spec("llama_cpp") is not None:
            pytest.fail(f"{reason} [{REQUIRE_TOOLS_ENV}=1]", pytrace=False)
        pytest.skip(reason)
    with local_llm() as llm:
        yield llm
