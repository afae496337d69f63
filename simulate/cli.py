"""The simulation's commands: `gpuwatch simulate` and `gpuwatch demo`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpuwatch.cli import DataDirOpt


def simulate(
    config: Annotated[
        Path | None, typer.Option("--config", help="simulation TOML (shape: simulate/default.toml)")
    ] = None,
    nodes: Annotated[int | None, typer.Option(help="nodes in the cluster")] = None,
    gpus_per_node: Annotated[int | None, typer.Option(help="GPUs per node")] = None,
    days: Annotated[float | None, typer.Option(help="simulated days")] = None,
    seed: Annotated[int | None, typer.Option(help="seed of the failure trace")] = None,
    policy: Annotated[str, typer.Option(help="all, manual, torchrun, gpuwatch or gpuwatch-async")] = "all",
    format: Annotated[str, typer.Option("--format", help="table, json or md")] = "table",
    plot: Annotated[Path | None, typer.Option(help="write a PNG plot here")] = None,
) -> None:
    """Replay weeks of a cluster's failures through the real diagnosis and restart policy; compare ETTR,
    lost GPU-hours and pages across policies on the same seeded trace. Needs no server."""
    from simulate.command import run

    try:
        run(
            config=config,
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            days=days,
            seed=seed,
            policy=policy,
            fmt=format,
            plot=plot,
        )
    except (ValueError, OSError) as exc:
        raise typer.BadParameter(str(exc)) from None


def demo(
    duration: Annotated[float | None, typer.Option(help="stop after S seconds (default: until Ctrl-C)")] = None,
    data_dir: DataDirOpt = None,
    nodes: Annotated[int, typer.Option(help="simulated nodes")] = 2,
    gpus: Annotated[int, typer.Option(help="GPUs per node")] = 8,
) -> None:
    """Server on SQLite + simulated agents as separate processes, with a live table of their GPUs."""
    from simulate.demo import run_demo

    raise typer.Exit(run_demo(duration=duration, data_dir=data_dir, nodes=nodes, gpus=gpus))


def register(app: typer.Typer) -> None:
    """Add the simulation's commands to `gpuwatch`."""
    app.command("simulate")(simulate)
    app.command("demo")(demo)
