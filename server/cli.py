"""The server's commands: `gpuwatch server`, `gpuwatch db …`, `gpuwatch token …`, `gpuwatch report`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpuwatch.cli import ConfigOpt, DataDirOpt, DbOpt, settings_for
from gpuwatch.config import Settings

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker


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
        from server.store.db import transaction
        from server.store.nodes import create_token

        with transaction(_sessions(config, data_dir, database_url)) as session:
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
        from server.store.db import transaction
        from server.store.nodes import revoke_tokens

        with transaction(_sessions(config, data_dir, database_url)) as session:
            n = revoke_tokens(session, node)
        typer.echo(f"revoked {n} token(s) of {node}")

    @app.command()
    def report(
        incident: Annotated[int | None, typer.Argument(help="the incident's id (its post-mortem)")] = None,
        since: Annotated[str | None, typer.Option(help="a period report instead: 7d, 24h, 90m or an ISO date")] = None,
        format: Annotated[str, typer.Option("--format", help="md or html")] = "md",
        out: Annotated[Path | None, typer.Option(help="write here (Markdown: plots as PNG files beside it)")] = None,
        config: ConfigOpt = None,
        data_dir: DataDirOpt = None,
        database_url: DbOpt = None,
    ) -> None:
        """The post-mortem of INCIDENT, or a period report with --since; read from the database."""
        if (incident is None) == (since is None):
            raise typer.BadParameter("give an INCIDENT id or --since PERIOD (not both)")
        if format not in ("md", "html"):
            raise typer.BadParameter(f"--format {format!r}: md or html")
        settings = settings_for(config, data_dir=data_dir, database_url=database_url)
        sessions = _sessions(config, data_dir, database_url)
        if since is not None:
            text = _period(sessions, since, format, settings)
        else:
            assert incident is not None
            text = _postmortem(sessions, incident, format, settings, out)
        if out is None:
            typer.echo(text)
        else:
            out.write_text(text, encoding="utf-8")
            typer.echo(str(out))


def _sessions(config: Path | None, data_dir: Path | None, database_url: str | None) -> sessionmaker[Session]:
    """Sessions on the configured database, refusing one whose schema is not at the code's head."""
    from server.store.db import make_engine, make_sessionmaker
    from server.store.migrate import check_schema

    url = settings_for(config, data_dir=data_dir, database_url=database_url).effective_database_url
    engine = make_engine(url)
    check_schema(engine, url)
    return make_sessionmaker(engine)


def _postmortem(
    sessions: sessionmaker[Session], incident: int, format: str, settings: Settings, out: Path | None
) -> str:
    from server.reports.postmortem import build
    from server.reports.render import gpu_plots, render_html, render_markdown

    with sessions() as session:
        pm = build(session, incident, settings)
    if pm is None:
        raise typer.BadParameter(f"no incident {incident}")
    if format == "html":
        return render_html(pm)
    links = {}
    if out is not None:  # the plots beside the Markdown file, linked relatively
        for gpu, png in gpu_plots(pm).items():
            path = out.with_name(f"{out.stem}-gpu{gpu}.png")
            path.write_bytes(png)
            links[gpu] = path.name
    return render_markdown(pm, links)


def _period(sessions: sessionmaker[Session], since: str, format: str, settings: Settings) -> str:
    from datetime import UTC, datetime

    from server.reports.period import parse_since, period_report, render_period_html, render_period_markdown

    now = datetime.now(UTC)
    try:
        start = parse_since(since, now)
    except ValueError as exc:
        raise typer.BadParameter(f"--since: {exc}") from None
    with sessions() as session:
        r = period_report(session, start, now, settings)
    return render_period_html(r) if format == "html" else render_period_markdown(r)
