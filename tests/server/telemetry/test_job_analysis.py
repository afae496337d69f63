"""Per-job utilization, communication overhead, stragglers and hangs, measured on real
torch.distributed jobs (gloo, CPU, launched by torchrun) through a real agent and server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.helpers import TESTS, Proc, free_port, migrated_sqlite, new_token, start_server, wait_until

# Communication overhead and step times are checked against the job's own clock within 10 %: beside other test
# workers on two cores, an overlapped all-reduce measured 0.96 of a step against its own 0.82 (a fresh CI run).
pytestmark = pytest.mark.serial

torch = pytest.importorskip("torch", reason="torch (CPU) is a test extra: pip install -e '.[test]'")

TRAIN = TESTS / "jobs" / "train.py"
HANG_TIMEOUT_S = 3.0
INTERVAL_S = 0.5  # the agent's sampling period in these tests


@dataclass
class Stack:
    base: str
    client_port: int
    tmp: Path

    def get(self, path: str, **params: object) -> object:
        resp = httpx.get(f"{self.base}{path}", params=params, timeout=10)
        resp.raise_for_status()
        return resp.json()

    def job_id(self, name: str) -> int:
        jobs = self.get("/api/v1/jobs", name=name)
        assert jobs, f"job {name} is not known to the server"
        return jobs[0]["id"]

    def utilization(self, name: str) -> dict:
        return self.get(f"/api/v1/jobs/{self.job_id(name)}/utilization")

    def events(self, kind: str, job: str) -> list[dict]:
        return [e for e in self.get("/api/v1/events", kind=kind) if e["data"].get("job") == job]

    def env(self, job: str) -> dict[str, str]:
        """A training process's environment: its job name, its agent, its hang timeout; no GPUs
        (each rank's LOCAL_RANK then names its simulated GPU, which follows the rank's CPU use)."""
        env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        return env | {
            "GPUWATCH_JOB": job,
            "GPUWATCH_AGENT_URL": f"http://127.0.0.1:{self.client_port}",
            "GPUWATCH_HANG_TIMEOUT": str(HANG_TIMEOUT_S),
            "OMP_NUM_THREADS": "1",
        }

    def train(self, job: str, *args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], Path]:
        out = self.tmp / job
        out.mkdir()
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-port",
            str(free_port()),
            str(TRAIN),
            "--out",
            str(out),
            *args,
        ]
        done = subprocess.run(cmd, env=self.env(job), capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done, out

    def wait_for_steps(self, job: str, steps: int) -> dict:
        def all_in() -> dict | None:
            u = self.utilization(job)
            ranks = [r for r in u["ranks"] if r["rank"] >= 0]
            return u if len(ranks) == 2 and all(r["last_step"] == steps - 1 for r in ranks) else None

        return wait_until(all_in, timeout=30, what=f"all {steps} steps of {job} at the server")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("jobs")
    url = migrated_sqlite(tmp)
    port, client_port = free_port(), free_port()
    env = {"GPUWATCH_HANG_CHECK_S": "0.25", "GPUWATCH_STRAGGLER_MARGIN": "0.5", "GPUWATCH_STRAGGLER_MIN_S": "0.02"}
    server = start_server(tmp, port, tmp / "server.log", env)
    agent = Proc(
        [
            "agent",
            "--server",
            f"http://127.0.0.1:{port}",
            "--token",
            new_token(url, "trainer"),
            "--node",
            "trainer",
            "--simulate",
            "2",
            "--client-port",
            str(client_port),
            "--interval",
            str(INTERVAL_S),
            "--flush",
            "0.25",
            "--data-dir",
            str(tmp),
        ],
        tmp / "agent.log",
    )
    wait_until(
        lambda: httpx.get(f"http://127.0.0.1:{client_port}/v1/health").status_code == 200, what="the agent's local API"
    )
    yield Stack(f"http://127.0.0.1:{port}", client_port, tmp)
    agent.stop()
    server.stop()


def _own_ratio(out: Path, rank: int, what: str = "own_comm_s") -> float:
    own = json.loads((out / f"rank{rank}.json").read_text())
    assert own["client"]["dropped"] == 0
    return own[what] / own["own_step_s"]


@pytest.mark.slow
def test_comm_overhead_matches_an_independent_measurement(stack: Stack) -> None:
    ratios = {}
    for mode in ("heavy", "light"):
        job = f"overhead-{mode}"
        _, out = stack.train(job, "--mode", mode, "--steps", "30")
        u = stack.wait_for_steps(job, 30)
        for r in (r for r in u["ranks"] if r["rank"] >= 0):
            own = _own_ratio(out, r["rank"])
            assert r["comm_overhead"] == pytest.approx(own, rel=0.10), (mode, r, own)
            assert r["steps"] == 30 and r["tokens_per_s"] > 0
        ratios[mode] = u["comm_overhead"]
        print(
            f"{mode}: gpuwatch comm overhead per rank",
            [round(r["comm_overhead"], 4) for r in u["ranks"]],
            "own",
            [round(_own_ratio(out, r), 4) for r in (0, 1)],
        )
        assert u["tokens_per_s"] > 0 and u["step_s"] > 0
        assert stack.events("straggler", job) == [], "no straggler without a delay"
        # Blocking all-reduces on the training thread: all of the communication is exposed.
        assert u["comm_exposed"] == pytest.approx(u["comm_overhead"], rel=0.02)
        ar = u["collectives"]["all_reduce"]
        assert ar["count"] == 2 * 30 and ar["gpu_seconds"] is None, "gloo: host-timed"
        assert ar["algbw_bytes_per_s"] == pytest.approx(ar["bytes"] / ar["seconds"])
        assert ar["busbw_bytes_per_s"] == pytest.approx(ar["algbw_bytes_per_s"]), "2 ranks: factor 2(n-1)/n = 1"
    assert ratios["heavy"] > ratios["light"] * 1.5, ratios


@pytest.mark.slow
def test_exposed_communication_matches_the_time_the_steps_waited(stack: Stack) -> None:
    """An async all-reduce behind the step's compute: only the wait() is exposed, and gpuwatch's
    exposed ratio (API and /metrics) matches the job's own clock around its wait()s."""
    job = "overlap"
    _, out = stack.train(job, "--mode", "mixed", "--overlap", "--steps", "30")
    u = stack.wait_for_steps(job, 30)
    for r in (r for r in u["ranks"] if r["rank"] >= 0):
        own_exposed = _own_ratio(out, r["rank"], "own_exposed_s")
        own_comm = _own_ratio(out, r["rank"])
        exposed, total = r["comm_exposed"], r["comm_overhead"]
        rank = r["rank"]
        print(f"rank {rank}: exposed {exposed:.4f} (own {own_exposed:.4f}), total {total:.4f} (own {own_comm:.4f})")
        assert r["comm_exposed"] == pytest.approx(own_exposed, rel=0.10, abs=0.01)
        assert r["comm_overhead"] == pytest.approx(own_comm, rel=0.10, abs=0.01)
        assert r["comm_exposed"] < r["comm_overhead"], "the compute hid part of the all-reduce"
    text = httpx.get(f"{stack.base}/metrics").text
    for labels, expected in (('node="",rank="all"', u["comm_exposed"]), ('node="trainer",rank="0"', None)):
        line = next(
            x for x in text.splitlines() if x.startswith(f'gpuwatch_job_comm_exposed_ratio{{job="{job}",{labels}}}')
        )
        if expected is not None:
            assert float(line.rsplit(" ", 1)[1]) == pytest.approx(expected, rel=0.05)
    assert f'gpuwatch_job_comm_busbw_bytes_per_second{{job="{job}",op="all_reduce"}}' in text


@pytest.mark.slow
def test_a_slow_rank_is_named_a_straggler(stack: Stack) -> None:
    job = "straggler"
    stack.train(job, "--mode", "light", "--steps", "25", "--straggle-rank", "1", "--straggle-s", "0.15")
    events = wait_until(lambda: stack.events("straggler", job), what="a straggler event")
    assert len(events) == 1
    print("straggler event:", events[0]["message"])
    assert events[0]["data"]["rank"] == 1 and events[0]["data"]["node"] == "trainer"
    assert events[0]["data"]["step"] < 5 + 5, "named within N steps of the delay starting (N = 5, plus slack)"
    u = stack.wait_for_steps(job, 25)
    assert u["straggler_events"] == 1
    assert next(r for r in u["ranks"] if r["rank"] == 1)["straggler"] is True


@pytest.mark.slow
def test_a_rank_that_stops_stepping_raises_hang(stack: Stack) -> None:
    job = "hang"
    train = stack.tmp / job
    train.mkdir()
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-port",
            str(free_port()),
            str(TRAIN),
            "--out",
            str(train),
            "--mode",
            "light",
            "--steps",
            "20",
            "--hang-rank",
            "1",
            "--hang-after",
            "8",
            "--hang-s",
            "30",
        ],
        env=stack.env(job),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        marker = wait_until(
            lambda: (train / "rank1.progress").exists() and (train / "rank1.progress"),
            timeout=60,
            what="rank 1 to stop stepping",
        )
        hung_at = json.loads(marker.read_text())["hung_at"]
        events = wait_until(lambda: stack.events("hang", job), timeout=HANG_TIMEOUT_S + 15, what="a hang event")
        raised_at = time.time()
        assert len(events) == 1
        print(f"hang raised {raised_at - hung_at:.2f}s after the last step (timeout {HANG_TIMEOUT_S}s)")
        # The last step ended just before hung_at. The bound: the timeout, plus one sampling interval (to
        # see the GPUs idle), plus the server's check period (0.25 s), plus 0.5 s for this test's polling.
        assert raised_at - hung_at <= HANG_TIMEOUT_S + INTERVAL_S + 0.25 + 0.5, raised_at - hung_at
        assert raised_at - hung_at >= HANG_TIMEOUT_S - 0.5
        assert events[0]["data"]["timeout_s"] == HANG_TIMEOUT_S
    finally:
        os.killpg(runner.pid, 9)
        runner.wait()


@pytest.mark.slow
def test_a_long_but_busy_step_is_not_a_hang(stack: Stack) -> None:
    job = "long-step"
    stack.train(job, "--mode", "light", "--steps", "8", "--long-step-at", "3", "--long-step-s", str(HANG_TIMEOUT_S * 2))
    stack.wait_for_steps(job, 8)
    assert stack.events("hang", job) == []


@pytest.mark.slow
def test_job_series_on_metrics(stack: Stack) -> None:
    job = "metrics"
    # Long enough (several sampling intervals, on a loaded machine too) for each rank's simulated GPU to
    # be sampled while in use: 40 steps once ended before one rank's GPU was (a full suite's fresh CI).
    stack.train(job, "--mode", "heavy", "--steps", "100")
    stack.wait_for_steps(job, 100)
    wait_until(
        lambda: all(r["gpu_util_mean"] is not None for r in stack.utilization(job)["ranks"]),
        what="GPU samples attributed to both ranks",
    )
    text = httpx.get(f"{stack.base}/metrics").text
    names = ("gpuwatch_job_gpu_utilization", "gpuwatch_job_comm_overhead_ratio", "gpuwatch_job_comm_exposed_ratio")
    for name in (*names, "gpuwatch_job_step_seconds"):
        for rank in ("all", "0", "1"):
            assert f'{name}{{job="{job}",node="{"" if rank == "all" else "trainer"}",rank="{rank}"}}' in text, (
                name,
                rank,
            )
    assert f'gpuwatch_job_throughput{{job="{job}",unit="tokens"}}' in text
    assert f'gpuwatch_job_idle_gpu_hours_total{{job="{job}"}}' in text
    assert f'gpuwatch_straggler_events_total{{job="{job}"}} 0.0' in text
    assert f'gpuwatch_hang_events_total{{job="{job}"}} 0.0' in text
