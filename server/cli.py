"""The server's commands: `gpuwatch server`, `gpuwatch db …`, `gpuwatch token …`, `gpuwatch report`,
`gpuwatch incident label`, `gpuwatch corpus export`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpuwatch.cli import ConfigOpt, DataDirOpt, DbOpt, settings_for
from gpuwatch.config import Settings
from server.stacks_cli import register as register_job_commands

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker


def server(
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    database_url: DbOpt = None,
    host: Annotated[str | None, typer.Option(help="listen address")] = None,
    port: Annotated[int | None, typer.Option(help="listen port")] = None,
    ssl_certfile: Annotated[Path | None, typer.Option(help="serve HTTPS: certificate (PEM)", exists=True)] = None,
    ssl_keyfile: Annotated[Path | None, typer.Option(help="serve HTTPS: private key (PEM)", exists=True)] = None,
) -> None:
    """Run the central service (HTTP API, /metrics, /docs)."""
    from server.main import serve

    settings = settings_for(
        config,
        data_dir=data_dir,
        database_url=database_url,
        host=host,
        port=port,
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
    )
    raise typer.Exit(serve(settings))


def db_upgrade(
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    database_url: DbOpt = None,
    revision: str = "head",
    wait: Annotated[
        float,
        typer.Option(min=0, help="seconds to wait for the database to accept connections first (0: fail at once)"),
    ] = 0,
) -> None:
    """Create or migrate the schema to ``revision`` (default: the latest)."""
    from server.store.db import DatabaseUnreachable, wait_for_database
    from server.store.migrate import upgrade

    settings = settings_for(config, data_dir=data_dir, database_url=database_url)
    url = settings.effective_database_url
    if url.startswith("sqlite:///"):
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    if wait > 0:
        try:
            wait_for_database(url, wait)
        except DatabaseUnreachable as exc:
            typer.echo(f"gpuwatch db upgrade: {exc}", err=True)
            raise typer.Exit(1) from None
    upgrade(url, revision)


def db_downgrade(
    revision: str, config: ConfigOpt = None, data_dir: DataDirOpt = None, database_url: DbOpt = None
) -> None:
    """Migrate the schema down to ``revision`` (`base` drops everything)."""
    from server.store.migrate import downgrade

    downgrade(settings_for(config, data_dir=data_dir, database_url=database_url).effective_database_url, revision)


def db_current(config: ConfigOpt = None, data_dir: DataDirOpt = None, database_url: DbOpt = None) -> None:
    """Print the database's revision and the code's head."""
    from server.store.db import make_engine
    from server.store.migrate import current_revision, head_revision

    url = settings_for(config, data_dir=data_dir, database_url=database_url).effective_database_url
    typer.echo(f"database: {current_revision(make_engine(url))}  code head: {head_revision(url)}")


def db_prune(
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    database_url: DbOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="count what would be deleted, delete nothing")] = False,
) -> None:
    """Delete rows older than their retention (the retention_* settings), a chunk at a time."""
    from server.store.db import make_engine
    from server.store.migrate import check_schema
    from server.store.retention import Retention, prune

    settings = settings_for(config, data_dir=data_dir, database_url=database_url)
    engine = make_engine(settings.effective_database_url)
    check_schema(engine, settings.effective_database_url)
    result = prune(
        engine, Retention.from_settings(settings.retention), dry_run=dry_run, chunk=settings.retention.chunk_rows
    )
    if not result.ran:
        typer.echo("another gpuwatch process is pruning this database now; nothing done", err=True)
        raise typer.Exit(1)
    for table, n in result.counts.items():
        typer.echo(f"{table}: {n} {'to delete' if dry_run else 'deleted'}")


def token_create(
    node: Annotated[str | None, typer.Option(help="a node token for this node (creating the node)")] = None,
    admin: Annotated[bool, typer.Option("--admin", help="an admin token instead (needs --name)")] = False,
    name: Annotated[str | None, typer.Option(help="whose admin token it is (a person or a tool)")] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    database_url: DbOpt = None,
) -> None:
    """Create a token: --node NODE for an agent, --admin --name NAME for a person. Printed once,
    stored only hashed; the creation is written to the admin audit log."""
    from server.store.audit import audit
    from server.store.db import transaction
    from server.store.nodes import create_token
    from server.store.tokens import create_admin_token

    if admin == (node is not None) or admin != (name is not None):
        raise typer.BadParameter("give --node NODE, or --admin --name NAME")
    with transaction(_sessions(config, data_dir, database_url)) as session:
        if node is not None:
            token = create_token(session, node)
            audit(session, _cli_actor(), "token.create", node, role="node", prefix=token[:12])
        else:
            assert name is not None
            token = create_admin_token(session, name)
            audit(session, _cli_actor(), "token.create", name, role="admin", prefix=token[:12])
    typer.echo(token)


def token_revoke(
    node: Annotated[str | None, typer.Option(help="revoke every token of this node")] = None,
    name: Annotated[str | None, typer.Option(help="revoke every admin token of this name")] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    database_url: DbOpt = None,
) -> None:
    """Revoke every token of NODE (--node) or of the admin NAME (--name); audited."""
    from server.store.audit import audit
    from server.store.db import transaction
    from server.store.nodes import revoke_tokens
    from server.store.tokens import revoke_admin_tokens

    if (node is None) == (name is None):
        raise typer.BadParameter("give --node NODE or --name NAME")
    try:
        with transaction(_sessions(config, data_dir, database_url)) as session:
            if node is not None:
                n, role, whose = revoke_tokens(session, node), "node", node
            else:
                assert name is not None
                n, role, whose = revoke_admin_tokens(session, name), "admin", name
            audit(session, _cli_actor(), "token.revoke", whose, role=role, count=n)
    except LookupError as exc:
        raise typer.BadParameter(str(exc)) from None
    typer.echo(f"revoked {n} {role} token(s) of {whose}")


def token_list(config: ConfigOpt = None, data_dir: DataDirOpt = None, database_url: DbOpt = None) -> None:
    """Every token with its role, owner and first characters (never the secret)."""
    from server.store.tokens import list_tokens

    with _sessions(config, data_dir, database_url)() as session:
        rows = list_tokens(session)
    typer.echo(f"{'id':>4}  {'role':<5}  {'owner':<24}  {'prefix':<12}  {'created':<19}  state")
    for t in rows:
        state = f"revoked {t.revoked_at:%Y-%m-%d %H:%M}" if t.revoked_at else "live"
        typer.echo(f"{t.id:>4}  {t.role:<5}  {t.owner:<24}  {t.prefix:<12}  {t.created_at:%Y-%m-%d %H:%M:%S}  {state}")


def report(
    incident: Annotated[int | None, typer.Argument(help="the incident's id (its post-mortem)")] = None,
    since: Annotated[str | None, typer.Option(help="a period report instead: 7d, 24h, 90m or an ISO date")] = None,
    format: Annotated[str, typer.Option("--format", help="md or html")] = "md",
    out: Annotated[Path | None, typer.Option(help="write here (Markdown: plots as PNG files beside it)")] = None,
    all_gpus: Annotated[bool, typer.Option("--all-gpus", help="plot every GPU of the node, not the job's")] = False,
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
        text = _postmortem(sessions, incident, format, settings, out, all_gpus)
    if out is None:
        typer.echo(text)
    else:
        out.write_text(text, encoding="utf-8")
        typer.echo(str(out))


def incident_label(
    incident: Annotated[int, typer.Argument(help="the incident's id")],
    reason: Annotated[str, typer.Option("--reason", help="what it really was: a reason of the failure taxonomy")],
    note: Annotated[str | None, typer.Option(help="what on-call found, in a line")] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    database_url: DbOpt = None,
) -> None:
    """Confirm (its diagnosed reason) or correct (another reason) INCIDENT's diagnosis. The diagnosis is
    kept; the label is stored beside it, written to the admin audit log and counted in
    gpuwatch_diagnosis_corrections_total. `gpuwatch corpus export` makes test cases of labelled incidents."""
    from server.incidents.labels import NotDiagnosed, check_label, label_incident
    from server.store.db import transaction

    try:
        check_label(reason, note)
        with transaction(_sessions(config, data_dir, database_url)) as session:
            row = label_incident(session, incident, reason, note, _cli_actor())
    except (ValueError, LookupError, NotDiagnosed) as exc:
        raise typer.BadParameter(str(exc)) from None
    verdict = "confirmed" if row.reason == row.diagnosed else f"corrected: {row.diagnosed} -> {row.reason}"
    typer.echo(f"incident {incident}: {verdict}")


def corpus_export(
    out: Annotated[Path, typer.Option(help="the corpus directory (one case directory per incident)")] = Path("corpus"),
    since: Annotated[str | None, typer.Option(help="only labels since: 7d, 24h, 90m or an ISO date")] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    database_url: DbOpt = None,
) -> None:
    """Write each labelled incident as a corpus case (tests/data/failures/README.md): the label, and the
    logs the server diagnosed it from, excerpted and scrubbed of secrets. Run again, it rewrites the
    cases of incidents labelled anew."""
    from datetime import UTC, datetime
    from urllib.parse import urlparse

    from server.incidents.export import export_labelled
    from server.reports.period import parse_since

    settings = settings_for(config, data_dir=data_dir, database_url=database_url)
    try:
        start = parse_since(since, datetime.now(UTC)) if since is not None else None
    except ValueError as exc:
        raise typer.BadParameter(f"--since: {exc}") from None
    server = urlparse(settings.server.public_url or "").netloc or _hostname()
    with _sessions(config, data_dir, database_url)() as session:
        result = export_labelled(session, out, server, start)
    for path in result.written:
        typer.echo(str(path))
    for incident, why in result.skipped:
        typer.echo(f"incident {incident} skipped: {why}", err=True)
    typer.echo(f"{len(result.written)} case(s) written to {out}", err=True)


def register(app: typer.Typer) -> None:
    """Add the server's commands, and its `db` and `token` groups, to `gpuwatch`."""
    db_app = typer.Typer(help="Database: schema (Alembic migrations) and retention.", no_args_is_help=True)
    token_app = typer.Typer(help="Bearer tokens: a node's (agents, supervisors) or an admin's.", no_args_is_help=True)
    app.add_typer(db_app, name="db")
    app.add_typer(token_app, name="token")
    incident_app = typer.Typer(help="Incidents: confirm or correct their diagnoses.", no_args_is_help=True)
    corpus_app = typer.Typer(help="The labelled failure corpus, from incidents on-call labelled.", no_args_is_help=True)
    app.add_typer(incident_app, name="incident")
    app.add_typer(corpus_app, name="corpus")
    incident_app.command("label")(incident_label)
    corpus_app.command("export")(corpus_export)
    app.command("server")(server)
    db_app.command("upgrade")(db_upgrade)
    db_app.command("downgrade")(db_downgrade)
    db_app.command("current")(db_current)
    db_app.command("prune")(db_prune)
    token_app.command("create")(token_create)
    token_app.command("revoke")(token_revoke)
    token_app.command("list")(token_list)
    app.command("report")(report)
    register_job_commands(app)


def _cli_actor() -> str:
    """Who runs the CLI, for the audit log: the OS user (the CLI has the database, not a token)."""
    import getpass

    try:
        return f"cli {getpass.getuser()}"
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        return "cli ?"


def _hostname() -> str:
    import socket

    return socket.gethostname()


def _sessions(config: Path | None, data_dir: Path | None, database_url: str | None) -> sessionmaker[Session]:
    """Sessions on the configured database, refusing one whose schema is not at the code's head."""
    from server.store.db import make_engine, make_sessionmaker
    from server.store.migrate import check_schema

    url = settings_for(config, data_dir=data_dir, database_url=database_url).effective_database_url
    engine = make_engine(url)
    check_schema(engine, url)
    return make_sessionmaker(engine)


def _postmortem(
    sessions: sessionmaker[Session], incident: int, format: str, settings: Settings, out: Path | None, all_gpus: bool
) -> str:
    from server.reports.postmortem import build
    from server.reports.render import gpu_plots, render_html, render_markdown

    with sessions() as session:
        pm = build(session, incident, settings, all_gpus=all_gpus)
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
