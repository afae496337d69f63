"""The agent's collector registry: collectors chosen by name, each run isolated, each reporting its own
duration and success on the agent's /metrics (node_exporter's model)."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

from agent.agent import Agent
from agent.collectors.base import Reading
from agent.collectors.registry import REGISTRY, Registry, Spec, UnknownCollector
from agent.state import AgentState
from gpuwatch.config import Settings
from server.store.models import LogLineRow
from tests.helpers import CLI, TESTS, InProcessServer, Proc, free_port, new_token, wait_until

NODE = "node-c"
SYSFS = TESTS / "fixtures" / "sysfs-ib"
BUILT_IN = ["gpu", "infiniband", "kernel", "logfile"]


class Broken:
    """A collector whose every run raises, as a driver call that started failing would."""

    stream = "broken"

    def __init__(self) -> None:
        self.closed = False

    def collect(self, now: float) -> Reading:
        raise RuntimeError("the device stopped answering")

    def close(self) -> None:
        self.closed = True


def _with_broken() -> Registry:
    return Registry([*REGISTRY, Spec("broken", True, "raises", lambda settings, state: Broken())])


def _scrape(url: str) -> dict[str, dict[str, float]]:
    """{metric name: {collector: value}} of the agent's collector metrics, read over HTTP."""
    resp = httpx.get(url, timeout=5)
    resp.raise_for_status()
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(resp.text):
        for sample in family.samples:
            if "collector" in sample.labels:
                out.setdefault(sample.name, {})[sample.labels["collector"]] = sample.value
    return out


@pytest.fixture
def running(live_server: InProcessServer, tmp_path: Path) -> Iterator[tuple[Agent, Path, str]]:
    """An agent with every built-in collector configured, plus one that always raises, shipping to a
    real server; also serving /metrics on a second address."""
    job_log = tmp_path / "train.log"
    job_log.write_text("step 1\nstep 2\n")
    metrics_port = free_port()
    settings = Settings(
        data_dir=tmp_path / "agent",
        server_url=live_server.url,
        token=new_token(live_server.services.settings.effective_database_url, NODE),
        node=NODE,
        client_port=0,
        interval_s=0.1,
        flush_s=0.1,
        simulate=2,
        log_files=[job_log],
        kernel_log=tmp_path / "kern.log",
        sysfs_root=SYSFS,
        metrics_address=f"127.0.0.1:{metrics_port}",
    )
    agent = Agent(settings, _with_broken())
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    try:
        yield agent, job_log, f"http://127.0.0.1:{metrics_port}/metrics"
    finally:
        agent.stop.set()
        thread.join(timeout=10)


def test_a_collector_that_raises_does_not_stop_the_others(
    running: tuple[Agent, Path, str], live_server: InProcessServer
) -> None:
    agent, job_log, _ = running
    url = f"http://127.0.0.1:{agent.local_api.port}/metrics"

    def failed_twice() -> dict[str, dict[str, float]] | None:
        got = _scrape(url)
        return got if got.get("gpuwatch_agent_collector_errors_total", {}).get("broken", 0) >= 2 else None

    metrics = wait_until(failed_twice, what="the broken collector to fail on every interval")
    assert metrics["gpuwatch_agent_collector_success"] == {
        "gpu": 1,
        "infiniband": 1,
        "kernel": 1,
        "logfile": 1,
        "broken": 0,
    }
    assert set(metrics["gpuwatch_agent_collector_duration_seconds"]) == {*BUILT_IN, "broken"}
    assert all(v >= 0 for v in metrics["gpuwatch_agent_collector_duration_seconds"].values())

    def stored_lines() -> int:
        with live_server.services.sessions() as s:
            return s.scalar(select(func.count()).where(LogLineRow.stream == f"file:{job_log}"))

    # The others' readings still reach the server: the job log, appended to after the failures began.
    with job_log.open("a") as f:
        f.write("step 3\n")
    wait_until(lambda: stored_lines() == 3, what="the job log's lines stored")


def test_the_collector_metrics_are_served_on_the_metrics_address_too(running: tuple[Agent, Path, str]) -> None:
    _, _, url = running

    def both() -> dict[str, float] | None:  # each collector's first run is its own: wait for both to report
        success = _scrape(url).get("gpuwatch_agent_collector_success") or {}
        return success if {"broken", "gpu"} <= success.keys() else None

    got = wait_until(both, what="both collectors' metrics on the address")
    assert got["broken"] == 0 and got["gpu"] == 1


def test_collectors_run_by_default_unless_turned_off_by_name(tmp_path: Path) -> None:
    assert [s.name for s in REGISTRY.select({})] == BUILT_IN
    assert [s.name for s in REGISTRY.select({"infiniband": False, "kernel": True})] == ["gpu", "kernel", "logfile"]
    optional = Registry([Spec("extra", False, "off unless asked for", lambda settings, state: Broken())])
    assert optional.select({}) == []
    assert [s.name for s in optional.select({"extra": True})] == ["extra"]


def test_a_disabled_collector_is_not_built_and_an_unconfigured_one_not_run(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, node=NODE, collectors={"gpu": False}, sysfs_root=SYSFS)
    built = REGISTRY.build(settings, AgentState(tmp_path / "state.json"))
    assert [spec.name for spec, _ in built] == ["infiniband"]  # kernel_log and log_files are not set


def test_an_unknown_collector_name_is_refused_with_the_known_names() -> None:
    with pytest.raises(UnknownCollector, match=r"unknown collector 'infiniban'; the collectors are: gpu, infiniband"):
        REGISTRY.select({"infiniband": True, "infiniban": False})


def test_the_collectors_setting_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUWATCH_COLLECTORS", '{"infiniband": false}')
    assert Settings().agent.collectors == {"infiniband": False}


def test_agent_flags_turn_collectors_on_and_off_over_the_environment(
    live_server: InProcessServer, tmp_path: Path
) -> None:
    """`--no-collector gpu` goes with the environment's `infiniband: false`: only the job log is read."""
    job_log = tmp_path / "train.log"
    job_log.write_text("step 1\n")
    port = free_port()
    token = new_token(live_server.services.settings.effective_database_url, NODE)
    args = ["agent", "--server", live_server.url, "--token", token, "--node", NODE, "--client-port", str(port)]
    args += ["--data-dir", str(tmp_path), "--simulate", "1", "--no-collector", "gpu", "--log-file", str(job_log)]
    agent = Proc(args, tmp_path / "agent.log", env={"GPUWATCH_COLLECTORS": '{"infiniband": false}'})
    try:
        got = wait_until(
            lambda: _scrape(f"http://127.0.0.1:{port}/metrics").get("gpuwatch_agent_collector_success"),
            what="the agent's /metrics",
        )
        assert got == {"logfile": 1}
    finally:
        assert agent.stop() == 0, agent.output()


@pytest.mark.parametrize(
    ("flags", "env", "message"),
    [
        (["--collector", "infiniban"], {}, "unknown collector 'infiniban'; the collectors are: " + ", ".join(BUILT_IN)),
        ([], {"GPUWATCH_COLLECTORS": '{"nvml": false}'}, "unknown collector 'nvml'"),
        (["--collector", "gpu", "--no-collector", "gpu"], {}, "--collector and --no-collector both name gpu"),
        (["--metrics-address", "9601"], {}, "metrics_address '9601': expected HOST:PORT"),
    ],
)
def test_a_bad_collector_choice_stops_the_agent_with_a_clear_error(
    tmp_path: Path, flags: list[str], env: dict[str, str], message: str
) -> None:
    args = [*CLI, "agent", "--token", "t", "--data-dir", str(tmp_path), "--simulate", "1", "--client-port", "0"]
    done = subprocess.run(
        [*args, *flags], capture_output=True, text=True, timeout=60, env={**_clean_env(), **env}, check=False
    )
    assert done.returncode == 2
    assert message in " ".join(done.stderr.split()), done.stderr


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.upper().startswith("GPUWATCH_")}
