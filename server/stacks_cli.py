"""`gpuwatch job stacks JOB`: ask the server for the stacks of every rank of a running job, wait for the
agents' answers, and print the ranks grouped by stack with the suspects (docs/jobs.md). Over the HTTP
API with an admin token, like every operator action (a command of the server's plugin: it speaks httpx)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpuwatch.cli import ConfigOpt, settings_for

if TYPE_CHECKING:
    import httpx

#: Extra seconds the command waits past the request's own deadline, for the server's watchdog to close it.
_GRACE_S = 5.0


def job_stacks(
    job: Annotated[str, typer.Argument(help="the job's name")],
    wait: Annotated[float, typer.Option(help="seconds to wait for the agents' answers", min=0.1, max=300)] = 20.0,
    format: Annotated[str, typer.Option("--format", help="text or json")] = "text",
    server: Annotated[str | None, typer.Option("--server", help="server URL")] = None,
    token: Annotated[str | None, typer.Option(help="an admin token (GPUWATCH_TOKEN)")] = None,
    token_file: Annotated[Path | None, typer.Option(help="read the admin token from this file")] = None,
    config: ConfigOpt = None,
) -> None:
    """Capture the Python stack (py-spy) of every rank of JOB on every node it runs on, and show which
    rank is not where the others are: the suspect of a hang."""
    if format not in ("text", "json"):
        raise typer.BadParameter("--format must be text or json")
    import httpx  # here, not at the top: every `gpuwatch` command loads this plugin (the wire models too)

    from gpuwatch.protocol import Api

    settings = settings_for(config, server_url=server, token=token, token_file=token_file)
    secret = settings.effective_token
    if not secret:
        raise typer.BadParameter("an admin token is needed: --token, GPUWATCH_TOKEN or --token-file")
    with httpx.Client(
        base_url=settings.agent.server_url.rstrip("/"), headers={"Authorization": f"Bearer {secret}"}, timeout=10
    ) as http:
        found = _ok(http.get(Api.JOBS, params={"name": job}), f"looking up job {job}")
        if not found:
            raise typer.BadParameter(f"no job named {job!r} on the server")
        req = _ok(http.post(Api.JOB_STACKS.format(job_id=found[0]["id"]), json={"wait_s": wait}), "asking for stacks")
        deadline = time.monotonic() + wait + _GRACE_S
        while req["state"] == "pending" and time.monotonic() < deadline:
            time.sleep(0.25)  # the server holds nothing open: poll the request until it is closed
            req = _ok(http.get(Api.STACK_REQUEST.format(request_id=req["id"])), "reading the request")
    if format == "json":
        typer.echo(json.dumps(req))
        return
    typer.echo(render(req))


def render(req: dict[str, Any]) -> str:
    """A stack request as text: its state, the suspects and why, the groups, the ranks without a stack."""
    analysis = req.get("analysis") or {}
    lines = [f"stack request {req['id']} for job {req['job']}: {req['state']}"]
    if req["state"] == "pending":
        return "\n".join([*lines, "the agents have not all answered yet: read it later with the API"])
    suspects = analysis.get("suspects") or []
    if suspects:
        nodes = ", ".join(analysis.get("suspect_nodes") or [])
        lines.append(f"suspect: rank {', '.join(map(str, suspects))} on {nodes}")
    else:
        lines.append("no suspect")
    lines.append(f"why: {analysis.get('why', '')}")
    for g in analysis.get("groups") or []:
        mark = "SUSPECT " if g.get("suspect") else ""
        where = g.get("collective") or "no collective"
        lines.append(f"{mark}ranks {', '.join(map(str, g['ranks']))} on {', '.join(g['nodes'])}: in {where}")
        lines += [f"    {frame}" for frame in g.get("top") or []]
        if g.get("flight"):
            lines.append(f"    flight recorder: {g['flight']}")
    lines += [f"no stack: rank {f['rank']} on {f['node']}: {f['error']}" for f in analysis.get("failed") or []]
    return "\n".join(lines)


def _ok(resp: httpx.Response, what: str) -> Any:
    if resp.status_code >= 300:
        try:
            detail = resp.json().get("detail", resp.text)
        except ValueError:
            detail = resp.text
        raise typer.BadParameter(f"{what}: HTTP {resp.status_code}: {str(detail)[:500]}")
    return resp.json()


def register(app: typer.Typer) -> None:
    job_app = typer.Typer(help="Jobs: look inside a running job.", no_args_is_help=True)
    app.add_typer(job_app, name="job")
    job_app.command("stacks")(job_stacks)
