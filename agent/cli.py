"""The agent's commands: `gpuwatch agent`, `gpuwatch run` and `gpuwatch inject`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpuwatch.cli import ConfigOpt, DataDirOpt, settings_for


def register(app: typer.Typer) -> None:
    app.command("agent")(agent_command)
    app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(run_command)
    app.command("inject")(inject_command)


def agent_command(
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
    kernel_log: Annotated[
        Path | None, typer.Option(help="/dev/kmsg (root or CAP_SYSLOG), or a file of kernel lines, to follow")
    ] = None,
    sysfs_root: Annotated[Path | None, typer.Option(help="sysfs root for InfiniBand counters")] = None,
    collector: Annotated[
        list[str] | None, typer.Option("--collector", metavar="NAME", help="run this collector (repeatable)")
    ] = None,
    no_collector: Annotated[
        list[str] | None, typer.Option("--no-collector", metavar="NAME", help="do not run this collector (repeatable)")
    ] = None,
    metrics_address: Annotated[
        str | None, typer.Option(metavar="HOST:PORT", help="also serve the agent's /metrics here, e.g. 0.0.0.0:9601")
    ] = None,
) -> None:
    """Run the node agent: sample GPUs, tail logs, ship to the server."""
    from agent.main import run_agent

    settings = settings_for(
        config,
        data_dir=data_dir,
        server_url=server,
        token=token,
        token_file=token_file,
        node=node,
        simulate=simulate,
        interval_s=interval,
        flush_s=flush,
        log_files=log_file or None,
        spool_dir=spool_dir,
        backoff_max_s=backoff_max,
        client_port=client_port,
        kernel_log=kernel_log,
        sysfs_root=sysfs_root,
        metrics_address=metrics_address,
    )
    if collector or no_collector:
        if both := sorted(set(collector or ()) & set(no_collector or ())):
            raise typer.BadParameter(f"--collector and --no-collector both name {', '.join(both)}")
        chosen = {**dict.fromkeys(collector or (), True), **dict.fromkeys(no_collector or (), False)}
        # Per name, over what the file or the environment said of it: the others keep their choice.
        settings = settings.replace(collectors={**settings.agent.collectors, **chosen})
    raise typer.Exit(run_agent(settings))


def run_command(
    command: Annotated[list[str], typer.Argument(help="the command to supervise, after --")],
    job: Annotated[str | None, typer.Option(help="job name (default: the command's name)")] = None,
    checkpoint_dir: Annotated[Path | None, typer.Option(help="where the job writes checkpoints")] = None,
    max_restarts: Annotated[int | None, typer.Option(help="restarts in all before giving up")] = None,
    grace: Annotated[float, typer.Option(help="seconds after SIGTERM for an emergency checkpoint")] = 30.0,
    decision_timeout: Annotated[float, typer.Option(help="seconds to wait for the server's decision")] = 30.0,
    policy: Annotated[
        list[str] | None, typer.Option("--policy", help="KEY=VALUE recovery policy override (repeatable)")
    ] = None,
    executor: Annotated[
        str | None,
        typer.Option(help="who restarts: local (this supervisor), slurm, kubernetes (default: slurm in a Slurm job)"),
    ] = None,
    external_id: Annotated[
        str | None, typer.Option(help="the scheduler's job: Slurm job id (default SLURM_JOB_ID), or namespace/name")
    ] = None,
    server: Annotated[str | None, typer.Option("--server", help="server URL")] = None,
    token: Annotated[str | None, typer.Option(help="this node's bearer token")] = None,
    token_file: Annotated[Path | None, typer.Option(help="read the token from this file")] = None,
    node: Annotated[str | None, typer.Option(help="node name (default: short hostname)")] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Run a training command; restart it from its latest valid checkpoint when it fails and can be helped.

    Example: gpuwatch run --job llama --checkpoint-dir /ckpt -- torchrun --nproc-per-node 8 train.py
    --resume {checkpoint}
    """
    import os
    import signal

    from agent.supervisor import Options, Supervisor, scheduler_from_env

    settings = settings_for(config, data_dir=data_dir, server_url=server, token=token, token_file=token_file, node=node)
    overrides: dict[str, object] = {}
    for item in policy or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"--policy {item!r}: expected KEY=VALUE")
        overrides[key] = _policy_value(value)
    if max_restarts is not None:
        overrides["max_restarts"] = max_restarts
    detected, detected_id = scheduler_from_env(os.environ)
    if executor not in (None, "local", "slurm", "kubernetes"):
        raise typer.BadParameter(f"--executor {executor!r}: expected local, slurm or kubernetes")
    options = Options(
        job=job or Path(command[0]).name,
        command=list(command),
        checkpoint_dir=checkpoint_dir,
        grace_s=grace,
        decision_timeout_s=decision_timeout,
        policy=overrides,
        executor=executor or detected,
        external_id=external_id or (detected_id if (executor or detected) == detected else None),
    )
    if options.executor != "local" and not options.external_id:
        raise typer.BadParameter(f"--executor {options.executor} needs --external-id (the scheduler's job)")
    try:
        supervisor = Supervisor(settings, options)
    except (TypeError, ValueError) as exc:
        raise typer.BadParameter(str(exc)) from None
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: supervisor.terminate())
    raise typer.Exit(supervisor.run())


def inject_command(
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

    settings = settings_for(config, data_dir=data_dir, node=node)
    params = {k: v for k, v in {"code": code, "count": count, "duration_s": duration}.items() if v is not None}
    try:
        path = write_fault(settings.agent_dir / "faults", gpu, fault, **params)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    typer.echo(f"injected {fault} {params or ''} into {node} GPU {gpu} ({path})")


def _policy_value(text: str) -> object:
    """`--policy` values: JSON where it parses (numbers, true/false, {"reason": "action"}), else the text."""
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text
