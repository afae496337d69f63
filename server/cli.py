"""The server's commands: `gpuwatch server`, `gpuwatch db …`, `gpuwatch token …`."""

from __future__ import annotations

from typing import Annotated

import typer

from gpuwatch.cli import ConfigOpt, DataDirOpt, DbOpt, settings_for


def register(app: typer.Typer) -> None:
    db_app = typer.Typer(help="Database schema (Alembic migrations).", no_args_is_help=True)
    token_app = typer.Typer(help="Node bearer tokens.", no_args_is_help=True)
    app.add_typer(db_app, name="db")
    app.add_typer(token_app, name="token")

    @app.command()
    def server(
        config: ConfigOpt = None,
        data_dir: DataDirOpt = None,
        database_url: DbOpt = None,
        host: Annotated[str | None, typer.Option(help="listen address")] = None,
        port: Annotated[int | None, typer.Option(help="listen port")] = None,
    ) -> None:
        """Run the central service (HTTP API, /metrics, /docs)."""
        from server.main import serve

        raise typer.Exit(
            serve(settings_for(config, data_dir=data_dir, database_url=database_url, host=host, port=port))
        )

    @db_app.command("upgrade")
    def db_upgrade(
        config: ConfigOpt = None, data_dir: DataDirOpt = None, database_url: DbOpt = None, revision: str = "head"
    ) -> None:
        """Create or migrate the schema to ``revision`` (default: the latest)."""
        from server.store.migrate import upgrade

        settings = settings_for(config, data_dir=data_dir, database_url=database_url)
        if settings.effective_database_url.startswith("sqlite:///"):
            settings.data_dir.mkdir(parents=True, exist_ok=True)
        upgrade(settings.effective_database_url, revision)

    @db_app.command("downgrade")
    def db_downgrade(
        revision: str, config: ConfigOpt = None, data_dir: DataDirOpt = None, database_url: DbOpt = None
    ) -> None:
        """Migrate the schema down to ``revision`` (`base` drops everything)."""
        from server.store.migrate import downgrade

        downgrade(settings_for(config, data_dir=data_dir, database_url=database_url).effective_database_url, revision)

    @db_app.command("current")
    def db_current(config: ConfigOpt = None, data_dir: DataDirOpt = None, database_url: DbOpt = None) -> None:
        """Print the database's revision and the code's head."""
        from server.store.db import make_engine
        from server.store.migrate import current_revision, head_revision

        url = settings_for(config, data_dir=data_dir, database_url=database_url).effective_database_url
        typer.echo(f"database: {current_revision(make_engine(url))}  code head: {head_revision(url)}")

    @token_app.command("create")
    def token_create(
        node: Annotated[str, typer.Option(help="node name")],
        config: ConfigOpt = None,
        data_dir: DataDirOpt = None,
        database_url: DbOpt = None,
    ) -> None:
        """Create a bearer token for NODE (creating the node); printed once, stored only hashed."""
        from server.store.db import make_engine, make_sessionmaker, transaction
        from server.store.migrate import check_schema
        from server.store.nodes import create_token

        url = settings_for(config, data_dir=data_dir, database_url=database_url).effective_database_url
        engine = make_engine(url)
        check_schema(engine, url)
        with transaction(make_sessionmaker(engine)) as session:
            token = create_token(session, node)
        typer.echo(token)

    @token_app.command("revoke")
    def token_revoke(
        node: Annotated[str, typer.Option(help="node name")],
        config: ConfigOpt = None,
        data_dir: DataDirOpt = None,
        database_url: DbOpt = None,
    ) -> None:
        """Revoke every token of NODE."""
        from server.store.db import make_engine, make_sessionmaker, transaction
        from server.store.nodes import revoke_tokens

        url = settings_for(config, data_dir=data_dir, database_url=database_url).effective_database_url
        with transaction(make_sessionmaker(make_engine(url))) as session:
            n = revoke_tokens(session, node)
        typer.echo(f"revoked {n} token(s) of {node}")
