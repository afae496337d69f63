"""The `gpuwatch` command.

This module is the composition root: it is the one place in `gpuwatch/` that reaches into `server`
and `agent`, and only inside the command that needs them, so `gpuwatch diagnose` or the training
client never pull in FastAPI or NVML.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from gpuwatch.config import Settings, load_settings

app = typer.Typer(help="GPU cluster observability and failure diagnosis.", no_args_is_help=True, add_completion=False)
db_app = typer.Typer(help="Database schema (Alembic migrations).", no_args_is_help=True)
token_app = typer.Typer(help="Node bearer tokens.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(token_app, name="token")

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="TOML configuration file", exists=True, dir_okay=False)
]
DataDirOpt = Annotated[Path | None, typer.Option("--data-dir", help="data directory (SQLite, spools)")]
DbOpt = Annotated[str | None, typer.Option("--database-url", help="SQLAlchemy URL (default: SQLite in data dir)")]


def _settings(config: Path | None, **overrides: object) -> Settings:
    settings = load_settings(config, **overrides)
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request would drown the agent's log
    return settings


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

    raise typer.Exit(serve(_settings(config, data_dir=data_dir, database_url=database_url, host=host, port=port)))


@app.command()
def agent(
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    server: Annotated[str | None, typer.Option("--server", help="server URL")] = None,
    token: Annotated[str | None, typer.Option(help="this node's bearer token")] = None,
    token_file: Annotated[Path | None, typer.Option(help="read the token from this file")] = None,
    node: Annotated[str | None, typer.Option(help="node name (default: short hostname)")] = None,
    simulate: Annotated[int | None, typer.Option(help="simulate N GPUs instead of reading NVML")] = None,
    interval: Annotated[float | None, typer.Option(help="sampling period, seconds")] = None,
    flush: Annotated[float | None, typer.Option(help="shipping period, seconds")] = None,
    log_file: Annotated[list[Path] | None, typer.Option("--log-file", help="a job log to tail (repeatable)")] = None,
    spool_dir: Annotated[Path | None, typer.Option(help="spool directory")] = None,
    backoff_max: Annotated[float | None, typer.Option(help="longest retry wait, seconds")] = None,
    client_port: Annotated[int | None, typer.Option(help="loopback port for training clients (0: any)")] = None,
    sysfs_root: Annotated[Path | None, typer.Option(help="sysfs root for InfiniBand counters")] = None,
) -> None:
    """Run the node agent: sample GPUs, tail logs, ship to the server."""
    from agent.main import run_agent

    settings = _settings(
        config,
        data_dir=data_dir,
        server_url=server,
        token=token,
        node=node,
        simulate=simulate,
        interval_s=interval,
        flush_s=flush,
        log_files=log_file or None,
        spool_dir=spool_dir,
        backoff_max_s=backoff_max,
        client_port=client_port,
        sysfs_root=sysfs_root,
    )
    raise typer.Exit(run_agent(settings))


@app.command()
def inject(
    node: Annotated[str, typer.Argument(help="node name of a running simulated agent")],
    gpu: Annotated[int, typer.Argument(help="GPU index")],
    fault: Annotated[str, typer.Argument(help="xid | ecc_dbe | thermal | silent | clear")],
    code: Annotated[int | None, typer.Option(help="Xid code (for xid), e.g. 79, 48, 74, 13")] = None,
    count: Annotated[int | None, typer.Option(help="errors to add (for ecc_dbe)")] = None,
    duration: Annotated[float | None, typer.Option(help="seconds (for thermal)")] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Inject a fault into a simulated GPU of a running `gpuwatch agent --simulate N`."""
    from agent.collectors.simulated import write_fault

    settings = _settings(config, data_dir=data_dir, node=node)
    params = {k: v for k, v in {"code": code, "count": count, "duration_s": duration}.items() if v is not None}
    try:
        path = write_fault(settings.agent_dir / "faults", gpu, fault, **params)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    typer.echo(f"injected {fault} {params or ''} into {node} GPU {gpu} ({path})")


@db_app.command("upgrade")
def db_upgrade(
    config: ConfigOpt = None, data_dir: DataDirOpt = None, database_url: DbOpt = None, revision: str = "head"
) -> None:
    """Create or migrate the schema to ``revision`` (default: the latest)."""
    from server.store.migrate import upgrade

    settings = _settings(config, data_dir=data_dir, database_url=database_url)
    if settings.effective_database_url.startswith("sqlite:///"):
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    upgrade(settings.effective_database_url, revision)


@db_app.command("downgrade")
def db_downgrade(
    revision: str, config: ConfigOpt = None, data_dir: DataDirOpt = None, database_url: DbOpt = None
) -> None:
    """Migrate the schema down to ``revision`` (`base` drops everything)."""
    from server.store.migrate import downgrade

    downgrade(_settings(config, data_dir=data_dir, database_url=database_url).effective_database_url, revision)


@db_app.command("current")
def db_current(config: ConfigOpt = None, data_dir: DataDirOpt = None, database_url: DbOpt = None) -> None:
    """Print the database's revision and the code's head."""
    from server.store.db import make_engine
    from server.store.migrate import current_revision, head_revision

    url = _settings(config, data_dir=data_dir, database_url=database_url).effective_database_url
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

    url = _settings(config, data_dir=data_dir, database_url=database_url).effective_database_url
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

    url = _settings(config, data_dir=data_dir, database_url=database_url).effective_database_url
    with transaction(make_sessionmaker(make_engine(url))) as session:
        n = revoke_tokens(session, node)
    typer.echo(f"revoked {n} token(s) of {node}")


@app.command()
def demo(
    duration: Annotated[float | None, typer.Option(help="stop after S seconds (default: until Ctrl-C)")] = None,
    data_dir: DataDirOpt = None,
    nodes: Annotated[int, typer.Option(help="simulated nodes")] = 2,
    gpus: Annotated[int, typer.Option(help="GPUs per node")] = 8,
) -> None:
    """Server on SQLite + simulated agents as separate processes, with a live table of their GPUs."""
    from gpuwatch.demo import run_demo

    raise typer.Exit(run_demo(duration=duration, data_dir=data_dir, nodes=nodes, gpus=gpus))


def main() -> None:
    app()
