"""The `gpuwatch` command.

The shared package imports neither the server, the agent nor the simulation, so their commands are
plugins: each side registers its own (`server`, `db`, `token`, `report` in `server/cli.py`; `agent`,
`run`, `inject` in `agent/cli.py`; `simulate`, `demo` in `simulate/cli.py`) through the
`gpuwatch.commands` entry points in pyproject.toml. A command module imports its heavy side (FastAPI,
SQLAlchemy, NVML, matplotlib) only when that command runs.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:  # the settings (pydantic) are imported by the commands that read them
    from gpuwatch.config import Settings
    from gpuwatch.diagnosis.model import Diagnosis

app = typer.Typer(help="GPU cluster observability and failure diagnosis.", no_args_is_help=True, add_completion=False)

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="TOML configuration file", exists=True, dir_okay=False)
]
DataDirOpt = Annotated[Path | None, typer.Option("--data-dir", help="data directory (SQLite, spools)")]
DbOpt = Annotated[str | None, typer.Option("--database-url", help="SQLAlchemy URL (default: SQLite in data dir)")]


def settings_for(config: Path | None, **overrides: object) -> Settings:
    """The settings of a command (flags override env and file), with logging set up from them."""
    from gpuwatch.config import load_settings

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
    llm_url: Annotated[str | None, typer.Option(help="the LLM's OpenAI-compatible endpoint (llm_base_url)")] = None,
    llm_model: Annotated[str | None, typer.Option(help="the model the endpoint serves (llm_model)")] = None,
    llm_timeout: Annotated[
        float | None, typer.Option(help="the LLM's deadline, seconds (llm_timeout_s)", min=0.001)
    ] = None,
    llm_budget: Annotated[
        int | None, typer.Option(help="tokens of log excerpt and examples in the prompt (llm_budget_tokens)")
    ] = None,
    llm_min_confidence: Annotated[
        float | None, typer.Option(help="use the LLM's answer only at or above this (llm_min_confidence)")
    ] = None,
) -> None:
    """Say why a run failed: one reason of the failure taxonomy, with the evidence lines.

    Needs no server; the LLM analyser is asked only when an endpoint and a model are configured
    (GPUWATCH_LLM_BASE_URL and GPUWATCH_LLM_MODEL, the GPUWATCH_CONFIG file, or --llm-url and
    --llm-model) and the rules are not confident."""
    from gpuwatch.diagnosis.diagnose import diagnose as run_diagnosis
    from gpuwatch.diagnosis.diagnose import read_sources

    if format not in ("text", "json"):
        raise typer.BadParameter("--format must be text or json")
    flags = (llm_url, llm_model, llm_timeout, llm_budget, llm_min_confidence)
    if all(f is None for f in flags) and not any(k.upper().startswith("GPUWATCH_") for k in os.environ):
        # Nothing could configure an LLM (flags, GPUWATCH_* variables, the GPUWATCH_CONFIG file), so
        # there are no settings to read: their model's import was half the command's start-up.
        result = run_diagnosis(read_sources(logfiles), rules_dir=str(rules_dir) if rules_dir else None)
        _print_diagnosis(result, format)
        return
    from pydantic import ValidationError

    from gpuwatch.config import load_settings

    try:
        settings = load_settings(
            llm_base_url=llm_url,
            llm_model=llm_model,
            llm_timeout_s=llm_timeout,
            llm_budget_tokens=llm_budget,
            llm_min_confidence=llm_min_confidence,
        ).llm
    except ValidationError as exc:
        first = exc.errors()[0]
        raise typer.BadParameter(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    llm = None
    if settings.enabled:
        from gpuwatch.diagnosis.llm import LlmAnalyser

        llm = LlmAnalyser.from_settings(settings)
    result = run_diagnosis(read_sources(logfiles), llm=llm, rules_dir=str(rules_dir) if rules_dir else None)
    _print_diagnosis(result, format)


def _print_diagnosis(result: Diagnosis, format: str) -> None:
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
    if "model" in result.extra:
        used = "used" if result.extra.get("used") else "not used"
        typer.echo(f"LLM {result.extra['model']}: {result.extra.get('llm_seconds', 0):.1f} s, answer {used}")
    for e in result.evidence:
        typer.echo(f"  {e.file}:{e.line}: {e.text}")


rules_app = typer.Typer(help="Diagnosis rules: learn new ones from labelled cases.", no_args_is_help=True)
app.add_typer(rules_app, name="rules")
#: The labelled corpus of this checkout (tests/data/failures), the default `--corpus`.
DEFAULT_CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "failures"


@rules_app.command("suggest")
def rules_suggest(
    corpus: Annotated[
        list[Path] | None,
        typer.Option(help="a corpus directory (repeatable); default: tests/data/failures", file_okay=False),
    ] = None,
    rules_dir: Annotated[
        Path | None, typer.Option(help="the user rules directory (*.toml)", envvar="GPUWATCH_RULES_DIR")
    ] = None,
    write: Annotated[bool, typer.Option("--write", help="write each accepted rule into --rules-dir")] = False,
    learn_from: Annotated[
        list[Path] | None,
        typer.Option(
            help="learn only from the wrong cases of this corpus directory (repeatable; say the incidents exported by "
            "`gpuwatch corpus export`); every --corpus case still checks the rules. Default: every wrong case",
            file_okay=False,
        ),
    ] = None,
) -> None:
    """Propose rules for the corpus cases the rules get wrong (incidents on-call labelled, from
    `gpuwatch corpus export`): templates of their error lines, each checked against the whole corpus. A
    rule is accepted only if it makes its cases right and changes no other case's answer; --write puts
    the accepted ones into the user rules directory. Exits 1 when a cluster of cases was refused."""
    from gpuwatch.diagnosis.corpus import load_corpus
    from gpuwatch.diagnosis.suggest import MAX_TRIES, suggest, write_rule

    corpora = corpus or [DEFAULT_CORPUS]
    for path in corpora:
        if not path.is_dir():
            raise typer.BadParameter(f"--corpus {path}: no such directory")
    if write and rules_dir is None:
        raise typer.BadParameter("--write needs --rules-dir DIR (or GPUWATCH_RULES_DIR)")
    for path in learn_from or []:
        if not any(path.resolve() == c.resolve() for c in corpora):
            raise typer.BadParameter(f"--learn-from {path}: not one of the --corpus directories")
    cases = load_corpus(corpora)
    result = suggest(cases, rules_dir, learn_from=learn_from)
    typer.echo(f"{len(cases)} cases, {len(result.wrong)} diagnosed otherwise than labelled")
    for name, (want, got) in sorted(result.wrong.items()):
        typer.echo(f"  {name}: labelled {want}, the rules say {got}")
    for p in result.proposals:
        typer.echo("")
        if not p.rule:
            typer.echo(f"{p.reason}: no rule: no error-looking line to learn from in {', '.join(p.cluster)}")
            continue
        typer.echo(p.toml().rstrip())
        if p.accepted:
            where = f"written to {write_rule(rules_dir, p)}" if write and rules_dir is not None else "not written"
            typer.echo(f"# accepted: makes {', '.join(p.cluster)} {p.reason}, changes no other case; {where}")
            continue
        typer.echo(f"# refused; no other template of these cases did better (up to {MAX_TRIES} tried). This one:")
        for name in p.missed:
            typer.echo(f"#   {name} would still not be {p.reason}")
        for name, (was, now) in sorted(p.changed.items()):
            typer.echo(f"#   {name} would change: {was} -> {now}")
    if result.refused:
        raise typer.Exit(1)


def main() -> None:
    # `diagnose` is this module's own and needs no plugin: their imports (the settings model among
    # them) were two thirds of its start-up, which counts against a big log (docs/diagnosis.md).
    if sys.argv[1:2] != ["diagnose"]:
        from importlib.metadata import entry_points  # 45 ms of import `diagnose` need not pay

        for plugin in entry_points(group="gpuwatch.commands"):
            plugin.load()(app)
    app()
