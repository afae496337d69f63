"""`gpuwatch demo`: the whole pipeline on one machine, as real processes talking real HTTP.

It starts `gpuwatch server` on SQLite and N simulated agents as separate processes, then shows a
live table of every GPU as the server reports it (so what you see has gone agent → HTTP → server).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.live import Live
from rich.table import Table

_CLI = [sys.executable, "-m", "gpuwatch"]


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

    def spawn(args: list[str], log_name: str) -> subprocess.Popen[bytes]:
        with open(logs / log_name, "wb") as out:
            proc = subprocess.Popen([*_CLI, *args], env=env, stdout=out, stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc

    seen: set[tuple[str, int]] = set()
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
                    "0",
                ],
                f"agent-{n}.log",
            )
        console.print(f"server {url} · data in {data_dir} · Ctrl-C to stop")
        started = time.monotonic()
        with httpx.Client(base_url=url, timeout=5.0) as http, Live(console=console, refresh_per_second=2) as live:
            while duration is None or time.monotonic() - started < duration:
                rows = http.get("/api/v1/gpus").json()
                seen.update((g["node"], g["index"]) for g in rows if g.get("sample"))
                live.update(_table(rows, url, time.monotonic() - started))
                time.sleep(1.0)  # the refresh period of the live table
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
    console.print(
        f"While it ran: metrics at {url}/metrics, API docs at {url}/docs. "
        f"Data and logs kept in {data_dir}; serve them again with "
        f"`gpuwatch server --data-dir {data_dir}`."
    )
    return 0 if len(seen) == expected else 1
