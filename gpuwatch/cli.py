"""The `gpuwatch` command.

The shared package imports neither the server, the agent nor the simulation, so their commands are
plugins: each side registers its own (`server`, `db`, `token`, `report` in `server/cli.py`; `agent`,
`run`, `inject` in `agent/cli.py`; `simulate`, `demo` in `simulate/cli.py`) through the
`gpuwatch.commands` entry points in pyproject.toml. A command module imports its heavy side (FastAPI,
SQLAlchemy, NVML, matplotlib) only when that command runs.
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
def diagnose(
    logfiles: Annotated[
        list[Path], typer.Argument(help="logs of one run: ranks, nodes, a kernel log", exists=True, dir_okay=False)
    ],
    format: Annotated[str, typer.Option("--format", help="text or json")] = "text",
    rules_dir: Annotated[Path | None, typer.Option(help="extra rules (*.toml)", envvar="GPUWATCH_RULES_DIR")] = None,
) -> None:
    """Say why a run failed: one reason of the failure taxonomy, with the evidence lines.

    Needs no server; the LLM analyser is asked only when GPUWATCH_LLM_BASE_URL and GPUWATCH_LLM_MODEL
    are set and the rules are not confident."""
    import json

    from gpuwatch.diagnosis.diagnose import diagnose as run_diagnosis
    from gpuwatch.diagnosis.diagnose import read_sources

    if format not in ("text", "json"):
        raise typer.BadParameter("--format must be text or json")
    llm = None
    if (settings := Settings().llm).enabled:  # the environment, or the GPUWATCH_CONFIG file
        from gpuwatch.diagnosis.llm import LlmAnalyser

        llm = LlmAnalyser.from_settings(settings)
    result = run_diagnosis(read_sources(logfiles), llm=llm, rules_dir=str(rules_dir) if rules_dir else None)
    if format == "json":
        typer.echo(json.dumps(result.to_json()))
        return
    where = ", ".join(
        x
        for x in (
            f"node {result.node}" if result.node else "",
            f"rank {result.rank}" if result.rank is not None else "",
        )
        if x
    )
    typer.echo(
        f"{result.reason} ({result.category}; action: {result.action}; confidence {result.confidence:.2f}; "
        f"by {result.source}){' on ' + where if where else ''}"
    )
    if result.explanation:
        typer.echo(f"why: {result.explanation}")
    if result.rules_guess:
        typer.echo(f"the rules' best guess: {result.rules_guess}")
    for e in result.evidence:
        typer.echo(f"  {e.file}:{e.line}: {e.text}")


def main() -> None:
    for plugin in entry_points(group="gpuwatch.commands"):
        plugin.load()(app)
    app()
