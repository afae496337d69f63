"""`gpuwatch demo`: the whole pipeline on one machine, as real processes talking real HTTP.

It starts `gpuwatch server` on SQLite and N simulated agents as separate processes, then shows a
live table of every GPU as the server reports it (so what you see has gone agent → HTTP → server).
A stand-in training job (`simulate.demo_job`) runs under `gpuwatch run` on the first node: it
checkpoints, dies of a CUDA error, is diagnosed and restarted from its checkpoint by the server's
decision, and finishes. The demo then writes the incident's post-mortem (HTML and Markdown) and ends,
printing its path (with `--duration`, it ends at that time instead).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from rich.console import Console
from rich.live import Live
from rich.table import Table

from gpuwatch.protocol import Api

_CLI = [sys.executable, "-m", "gpuwatch"]
DEMO_JOB = "demo-training"
# A plot's link in a post-mortem's Markdown, `(/api/v1/incidents/<id>/plots/<gpu>.png)`: the GPU is captured.
_PLOT_LINK = re.compile(
    re.escape(f"({Api.INCIDENT_PLOT})").replace(r"\{incident_id\}", r"\d+").replace(r"\{gpu\}", r"(\d+)")
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(url: str, server: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with status {server.returncode}")
        try:
            if httpx.get(f"{url}/readyz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)  # polling a child process with a deadline
    raise RuntimeError(f"the server was not ready within {timeout_s:.0f}s")


def _cell(value: float | None, fmt: str, warn: float | None = None) -> str:
    if value is None:
        return "[dim]-[/dim]"
    text = format(value, fmt)
    return f"[bold red]{text}[/bold red]" if warn is not None and value >= warn else text


def _table(gpus: list[dict], url: str, elapsed: float) -> Table:
    table = Table(title=f"gpuwatch demo — {len(gpus)} GPUs — {elapsed:.0f}s", caption=f"{url}/metrics · {url}/docs")
    for col in ("node", "gpu", "model", "util%", "mem%", "FB MiB", "W", "°C", "SM MHz", "Xid"):
        table.add_column(col, justify="left" if col in ("node", "model") else "right", no_wrap=True)
    for g in gpus:
        s = g.get("sample") or {}
        table.add_row(
            g["node"],
            str(g["index"]),
            g["model"],
            _cell(s.get("util_gpu"), ".0f"),
            _cell(s.get("util_mem"), ".0f"),
            _cell(s.get("fb_used_mib"), ",.0f"),
            _cell(s.get("power_w"), ".0f"),
            _cell(s.get("temp_c"), ".0f", warn=85),
            _cell(s.get("sm_clock_mhz"), ".0f"),
            _cell(s.get("xid_last"), "d", warn=1),
        )
    return table


def run_demo(duration: float | None, data_dir: Path | None, nodes: int = 2, gpus: int = 8) -> int:
    console = Console()
    data_dir = data_dir or Path(tempfile.mkdtemp(prefix="gpuwatch-demo-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GPUWATCH_DATA_DIR": str(data_dir), "GPUWATCH_DATABASE_URL": ""}
    env.pop("GPUWATCH_CONFIG", None)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    subprocess.run([*_CLI, "db", "upgrade"], env=env, check=True, capture_output=True)
    names = [f"demo-node-{i + 1}" for i in range(nodes)]
    tokens = {
        n: subprocess.run(
            [*_CLI, "token", "create", "--node", n], env=env, check=True, capture_output=True, text=True
        ).stdout.strip()
        for n in names
    }
    logs = data_dir / "logs"
    logs.mkdir(exist_ok=True)
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(args: list[str], log_name: str, extra: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        with open(logs / log_name, "wb") as out:
            proc = subprocess.Popen([*_CLI, *args], env={**env, **(extra or {})}, stdout=out, stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc

    seen: set[tuple[str, int]] = set()
    report: Path | None = None
    client_port = _free_port()
    story: dict[str, object] = {}
    try:
        server = spawn(["server", "--port", str(port)], "server.log")
        _wait_ready(url, server)
        for n in names:
            spawn(
                [
                    "agent",
                    "--server",
                    url,
                    "--token",
                    tokens[n],
                    "--node",
                    n,
                    "--simulate",
                    str(gpus),
                    "--flush",
                    "1",
                    "--client-port",
                    str(client_port) if n == names[0] else "0",
                ],
                f"agent-{n}.log",
            )
        job = _start_job(spawn, url, tokens[names[0]], names[0], data_dir, client_port)
        console.print(f"server {url} · data in {data_dir} · Ctrl-C to stop")
        started = time.monotonic()
        with httpx.Client(base_url=url, timeout=5.0) as http, Live(console=console, refresh_per_second=2) as live:
            while duration is None or time.monotonic() - started < duration:
                rows = http.get(Api.GPUS).json()
                seen.update((g["node"], g["index"]) for g in rows if g.get("sample"))
                story = _story(http, job)
                table = _table(rows, url, time.monotonic() - started)
                table.caption = f"{table.caption}\n{story['line']}"
                live.update(table)
                if duration is None and story.get("resolved") and len(seen) == nodes * gpus:
                    break
                time.sleep(1.0)  # the refresh period of the live table
            report = _write_postmortem(http, story, data_dir) if story.get("incident") else None
    except KeyboardInterrupt:
        pass
    except (RuntimeError, httpx.HTTPError, subprocess.CalledProcessError) as exc:
        console.print(f"[red]demo failed: {exc}[/red] (process logs in {logs})")
        return 1
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    expected = nodes * gpus
    console.print()
    console.print(f"{len(seen)}/{expected} GPUs reported through the server.")
    console.print(str(story.get("line", "")))
    if report is not None:
        console.print(f"post-mortem: {report} (Markdown beside it: {report.with_suffix('.md')})")
    console.print(
        f"While it ran: metrics at {url}/metrics, API docs at {url}/docs. "
        f"Data and logs kept in {data_dir}; serve them again with "
        f"`gpuwatch server --data-dir {data_dir}`."
    )
    return 0 if len(seen) == expected else 1


def _start_job(
    spawn: Callable[[list[str], str, dict[str, str]], subprocess.Popen[bytes]],
    url: str,
    token: str,
    node: str,
    data_dir: Path,
    client_port: int,
) -> subprocess.Popen[bytes]:
    """The stand-in training job under `gpuwatch run` on the first node: it fails once and recovers."""
    ckpt = data_dir / "checkpoints"
    args = ["run", "--job", DEMO_JOB, "--checkpoint-dir", str(ckpt), "--server", url, "--token", token]
    args += ["--node", node, "--"]
    args += [sys.executable, "-m", "simulate.demo_job", "--ckpt-dir", str(ckpt), "--steps", "24", "--fail-at", "17"]
    args += ["--step-s", "0.4"]
    # Its steps go to the first node's agent, whose simulated GPU 0 then follows the job's CPU use; its rank
    # and local rank (as torchrun would set them) tie it to GPU 0, the one its post-mortem plots.
    ranks = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}
    return spawn(args, "demo-job.log", {"GPUWATCH_AGENT_URL": f"http://127.0.0.1:{client_port}", **ranks})


def _story(http: httpx.Client, job: subprocess.Popen[bytes]) -> dict[str, object]:
    """Where the demo job's failure and recovery stand, in one line."""
    jobs = http.get(Api.JOBS, params={"name": DEMO_JOB}).json()
    if not jobs:
        return {"line": f"{DEMO_JOB}: starting"}
    runs = http.get(Api.JOB_RUNS.format(job_id=jobs[0]["id"])).json()
    incidents = [i for i in http.get(Api.INCIDENTS).json() if i["job_id"] == jobs[0]["id"]]
    line = f"{DEMO_JOB}: attempt {runs[-1]['attempt']} {runs[-1]['state']}" if runs else f"{DEMO_JOB}: starting"
    out: dict[str, object] = {"line": line}
    if incidents:
        incident = incidents[-1]
        d = incident.get("diagnosis") or {}
        out["incident"] = incident["id"]
        out["resolved"] = incident["state"] == "resolved" and job.poll() is not None
        line += f" · incident {incident['id']}: {d.get('reason', '…')} → {incident['state']}"
        out["line"] = line
    return out


def _write_postmortem(http: httpx.Client, story: dict[str, object], data_dir: Path) -> Path:
    """The incident's post-mortem as HTML and Markdown (its plots beside it) in <data_dir>/reports."""
    incident = story["incident"]
    reports = data_dir / "reports"
    reports.mkdir(exist_ok=True)
    html = reports / f"incident-{incident}.html"
    report = Api.INCIDENT_REPORT.format(incident_id=incident)
    html.write_text(http.get(report, params={"format": "html"}).text)
    md = http.get(report, params={"format": "md"}).text
    for link in sorted(set(_PLOT_LINK.findall(md))):
        name = f"incident-{incident}-gpu{link}.png"
        plot = Api.INCIDENT_PLOT.format(incident_id=incident, gpu=link)
        (reports / name).write_bytes(http.get(plot).content)
        md = md.replace(f"({plot})", f"({name})")
    html.with_suffix(".md").write_text(md)
    return html
