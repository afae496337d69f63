"""The `gpuwatch` command.

The shared package imports neither the server nor the agent, so their commands are plugins: each
side registers its own (`server`, `db`, `token` in `server/cli.py`; `agent`, `inject` in
`agent/cli.py`) through the `gpuwatch.commands` entry points in pyproject.toml. A command module
imports its heavy side (FastAPI, SQLAlchemy, NVML) only when that command runs.
"""

from __future__ import annotations

import logging
from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated

import typer

from gpuwatch.config import Settings, load_settings

app = typer.Typer(help="GPU cluster observability and failure diagnosis.", no_args_is_help=True, add_completion=False)

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="TOML configuration file", exists=True, dir_okay=False)
]
DataDirOpt = Annotated[Path | None, typer.Option("--data-dir", help="data directory (SQLite, spools)")]
DbOpt = Annotated[str | None, typer.Option("--database-url", help="SQLAlchemy URL (default: SQLite in data dir)")]


def settings_for(config: Path | None, **overrides: object) -> Settings:
    """The settings of a command (flags override env and file), with logging set up from them."""
    settings = load_settings(config, **overrides)
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request would drown the agent's log
    return settings


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
    for plugin in entry_points(group="gpuwatch.commands"):
        plugin.load()(app)
    app()
