"""Alembic, driven from code: `gpuwatch db upgrade|downgrade|current` and the start-up schema check."""

from __future__ import annotations

from importlib import resources

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from server.store.db import SchemaOutOfDate


def alembic_config(url: str) -> Config:
    """An Alembic config pointing at the packaged `migrations/` directory and at ``url``."""
    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("migrations")))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)


def head_revision(url: str) -> str | None:
    return ScriptDirectory.from_config(alembic_config(url)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def check_schema(engine: Engine, url: str) -> None:
    """Raise SchemaOutOfDate unless the database is exactly at the migration head."""
    current, head = current_revision(engine), head_revision(url)
    if current != head:
        where = "empty" if current is None else f"at revision {current}"
        raise SchemaOutOfDate(
            f"database schema is {where}, this gpuwatch needs {head}: run `gpuwatch db upgrade` "
            "(with the same GPUWATCH_DATABASE_URL / --database-url) and start the server again"
        )
