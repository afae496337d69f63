"""The agent's collector registry: collectors chosen by name, each on or off by default (node_exporter's
model)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agent.collectors.base import Reading
from agent.collectors.registry import REGISTRY, Registry, Spec, UnknownCollector
from agent.state import AgentState
from gpuwatch.config import Settings
from tests.helpers import CLI, InProcessServer, Proc, free_port, new_token, wait_until

NODE = "node-c"
SYSFS = Path(__file__).parent / "fixtures" / "sysfs-ib"
BUILT_IN = ["gpu", "infiniband", "kernel", "logfile"]


class Never:
    """A collector no one turned on."""

    stream = "never"

    def collect(self, now: float) -> Reading:
        raise AssertionError("never run")

    def close(self) -> None:
        pass


def test_collectors_run_by_default_unless_turned_off_by_name(tmp_path: Path) -> None:
    assert [s.name for s in REGISTRY.select({})] == BUILT_IN
    assert [s.name for s in REGISTRY.select({"infiniband": False, "kernel": True})] == ["gpu", "kernel", "logfile"]
    optional = Registry([Spec("extra", False, "off unless asked for", lambda settings, state: Never())])
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
    assert Settings().collectors == {"infiniband": False}


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
        wait_until(lambda: "agent node-c: collectors logfile, 0 GPUs via none" in agent.output(), what="the agent")
    finally:
        assert agent.stop() == 0, agent.output()


@pytest.mark.parametrize(
    ("flags", "env", "message"),
    [
        (["--collector", "infiniban"], {}, "unknown collector 'infiniban'; the collectors are: " + ", ".join(BUILT_IN)),
        ([], {"GPUWATCH_COLLECTORS": '{"nvml": false}'}, "unknown collector 'nvml'"),
        (["--collector", "gpu", "--no-collector", "gpu"], {}, "--collector and --no-collector both name gpu"),
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
