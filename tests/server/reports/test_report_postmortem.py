"""The post-mortem of a recorded end-to-end failure (issue 7, acceptance 1): a simulated 2-GPU node, a job
under `gpuwatch run` that steps, checkpoints every 5 steps, dies of a CUDA error at step 12 and is
restarted from its checkpoint of step 10. Its Markdown and HTML reports must hold every section, the
timeline in order, and the lost work the scenario really had: 2 steps redone (11 and 12), the GPU-hours and money
of the time from the checkpoint to the restart."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from tests.helpers import CLI, Proc, free_port, migrated_sqlite, new_token, start_server, wait_until

PRICE = 3600.0  # per GPU-hour: the cost in the report is then the lost GPU-seconds, easy to check
SECTIONS = ["Summary", "Timeline", "Root cause", "GPUs around the failure", "Lost work", "Recommendations"]
TIMELINE = [
    "run started",
    "last valid checkpoint",
    "first error",
    "exit",
    "incident opened",
    "diagnosed",
    "decision",
    "restarted",
    "first step after resume",
    "resolved",
]


@dataclass
class Scenario:
    base: str
    incident: dict
    runs: list[dict]
    checkpoint_mtime: float
    data_dir: Path


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    tmp = tmp_path_factory.mktemp("report")
    url = migrated_sqlite(tmp)
    port, client_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    # A settle wait over the agent's flush period: the steps the dying job's client flushed at exit are in.
    env = {"GPUWATCH_INCIDENT_SETTLE_S": "1.5", "GPUWATCH_GPU_HOUR_PRICE": str(PRICE)}
    server = start_server(tmp, port, tmp / "server.log", env)
    token = new_token(url, "node-r")
    common = ["--server", base, "--token", token, "--node", "node-r", "--data-dir", str(tmp)]
    agent = Proc(
        ["agent", *common, "--simulate", "2", "--interval", "0.5", "--flush", "0.5", "--client-port", str(client_port)],
        tmp / "agent.log",
    )
    ckpt = tmp / "ckpt"
    try:
        wait_until(lambda: len(httpx.get(f"{base}/api/v1/gpus").json()) == 2, what="the agent's GPUs")
        job = [sys.executable, "-m", "simulate.demo_job", "--ckpt-dir", str(ckpt), "--step-s", "0.15"]
        sup = Proc(
            ["run", "--job", "report-job", "--checkpoint-dir", str(ckpt), *common, "--", *job],
            tmp / "sup.log",
            {"GPUWATCH_AGENT_URL": f"http://127.0.0.1:{client_port}"},
        )
        assert sup.popen.wait(120) == 0, sup.output()[-3000:]
        sup.stop()

        def resolved() -> dict | None:
            found = httpx.get(f"{base}/api/v1/incidents").json()
            return found[0] if found and found[0]["state"] == "resolved" else None

        incident = wait_until(resolved, what="the incident resolved by the second run")
        (j,) = httpx.get(f"{base}/api/v1/jobs", params={"name": "report-job"}).json()
        runs = sorted(httpx.get(f"{base}/api/v1/jobs/{j['id']}/runs").json(), key=lambda r: r["attempt"])
        yield Scenario(base, incident, runs, (ckpt / "step_000010.ckpt").stat().st_mtime, tmp)
    finally:
        agent.stop()
        server.stop()


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_markdown_post_mortem_has_every_section_and_the_real_numbers(scenario: Scenario) -> None:
    md = httpx.get(f"{scenario.base}/api/v1/incidents/{scenario.incident['id']}/report", params={"format": "md"})
    assert md.status_code == 200 and md.headers["content-type"].startswith("text/markdown")
    text = md.text
    positions = [text.find(f"## {s}") for s in SECTIONS]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), positions
    assert "cuda_error" in text and "report-job" in text and "node-r" in text
    assert "CUDA error: an illegal memory access was encountered" in text, "the evidence line"
    # The timeline, in the order things happened.
    timeline = text[text.find("## Timeline") : text.find("## Root cause")]
    found = [re.search(rf"  {re.escape(what)}(  |\n)", timeline) for what in TIMELINE]
    order = [m.start() if m else -1 for m in found]
    assert all(p >= 0 for p in order), dict(zip(TIMELINE, order, strict=True))
    assert order == sorted(order)
    # Lost work: steps 11 and 12 were redone (the failure came before step 13, the checkpoint held step 10).
    lost = text[text.find("## Lost work") : text.find("## Recommendations")]
    assert "Steps since the last valid checkpoint:** 2 steps" in lost, lost
    failed, again = scenario.runs
    wall = _ts(failed["ended_at"]) - scenario.checkpoint_mtime
    downtime = _ts(again["started_at"]) - _ts(failed["ended_at"])
    expected_cost = 1 * (wall + downtime) * PRICE / 3600  # one rank, one GPU
    shown = float(re.search(r"([0-9][0-9,]*\.[0-9]{2}) USD", lost).group(1).replace(",", ""))
    assert shown == pytest.approx(expected_cost, abs=0.02), lost
    md_plots = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", text)
    assert sorted(md_plots) == [f"/api/v1/incidents/{scenario.incident['id']}/plots/{g}.png" for g in (0, 1)]
    png = httpx.get(f"{scenario.base}{md_plots[0]}")
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG\r\n\x1a\n")


def test_html_post_mortem_embeds_the_plots_and_loads_nothing(scenario: Scenario) -> None:
    page = httpx.get(f"{scenario.base}/api/v1/incidents/{scenario.incident['id']}/report", params={"format": "html"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    for s in SECTIONS:
        assert s in html
    assert html.count("data:image/png;base64,") == 2, "one plot per GPU of the node"
    assert "<script" not in html.lower() and 'src="http' not in html
    assert httpx.get(f"{scenario.base}/api/v1/incidents/999/report").status_code == 404


def test_cli_writes_the_report_with_plot_files_beside_it(scenario: Scenario, tmp_path: Path) -> None:
    out = tmp_path / "postmortem.md"
    done = subprocess.run(
        [*CLI, "report", str(scenario.incident["id"]), "--out", str(out), "--data-dir", str(scenario.data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "GPUWATCH_DATABASE_URL": "", "GPUWATCH_GPU_HOUR_PRICE": str(PRICE)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out)
    text = out.read_text()
    assert all(f"## {s}" in text for s in SECTIONS)
    for gpu in (0, 1):
        plot = tmp_path / f"postmortem-gpu{gpu}.png"
        assert plot.read_bytes().startswith(b"\x89PNG") and f"](postmortem-gpu{gpu}.png)" in text
    period = subprocess.run(
        [*CLI, "report", "--since", "1d", "--data-dir", str(scenario.data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "GPUWATCH_DATABASE_URL": ""},
    )
    assert period.returncode == 0 and "cuda_error" in period.stdout, period.stderr
