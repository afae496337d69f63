"""gpuwatch.client: identity from the environment, and steps reaching an agent on loopback (or not)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import gpuwatch.client as gw
from gpuwatch.client.identity import identity_from_env, job_from_pod_name
from gpuwatch.client.reporter import MAX_POST_STEPS, Reporter
from gpuwatch.protocol import MAX_BATCH_ITEMS, ClientReport, StepReport
from tests.gpuwatch.client.conftest import Capture
from tests.helpers import REPO, free_port, wait_until

ROOT = str(REPO)

# --- a stand-in agent ----------------------------------------------------------------------------


class FakeAgent:
    """A real HTTP server on loopback that takes ClientReports as the agent does (204), or fails."""

    def __init__(self, status: int = 204) -> None:
        self.status = status
        self.bodies: list[bytes] = []
        self.paths: list[str] = []
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                agent.paths.append(self.path)
                agent.bodies.append(body)
                self.send_response(agent.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeAgent:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reports(self) -> list[ClientReport]:
        return [ClientReport.model_validate_json(body) for body in list(self.bodies)]

    def steps(self) -> list[StepReport]:
        return [s for report in self.reports() for s in report.steps]


@pytest.fixture
def reporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[Reporter]:
    """A fresh reporter behind the public API, with no agent listening unless the test configures one."""
    rep = Reporter(env={"GPUWATCH_AGENT_URL": f"http://127.0.0.1:{free_port()}"})
    monkeypatch.setattr(gw, "_reporter", rep)
    yield rep
    rep.close(timeout_s=2.0)


# --- identity ------------------------------------------------------------------------------------


def ident(env: dict[str, str], pid: int = 4242, host: str = "node7") -> Any:
    return identity_from_env(env, pid, host)


def test_plain_process_has_no_job() -> None:
    assert ident({}) is None
    assert ident({"PATH": "/usr/bin", "HOME": "/root", "CUDA_VISIBLE_DEVICES": "0"}) is None
    assert ident({"GPUWATCH_JOB": ""}) is None


def test_gpuwatch_job_names_a_local_process() -> None:
    p = ident({"GPUWATCH_JOB": "my-run", "GPUWATCH_HANG_TIMEOUT": "300"})
    assert (p.job, p.scheduler, p.pid, p.rank, p.gpu, p.hang_timeout_s) == ("my-run", "local", 4242, None, None, 300.0)


def test_slurm_job_and_ranks() -> None:
    env = {
        "SLURM_JOB_ID": "81234",
        "SLURM_PROCID": "5",
        "SLURM_LOCALID": "1",
        "SLURM_NTASKS": "16",
        "CUDA_VISIBLE_DEVICES": "0,1,2,3",
    }
    p = ident(env)
    assert (p.job, p.scheduler, p.external_id) == ("slurm-81234", "slurm", "81234")
    assert (p.rank, p.local_rank, p.world_size, p.gpu) == (5, 1, 16, 1)


def test_gpuwatch_job_wins_over_slurm_but_keeps_the_scheduler() -> None:
    p = ident({"GPUWATCH_JOB": "llama", "SLURM_JOB_ID": "7", "SLURM_PROCID": "0"})
    assert (p.job, p.scheduler, p.external_id, p.rank) == ("llama", "slurm", "7", 0)


def test_torchrun_ranks_win_over_slurm_task_numbers() -> None:
    """Under `srun … torchrun`, SLURM_PROCID numbers the launchers; RANK numbers the trainers."""
    env = {"SLURM_JOB_ID": "9", "SLURM_PROCID": "1", "SLURM_LOCALID": "0", "SLURM_NTASKS": "2"}
    env |= {"RANK": "13", "LOCAL_RANK": "5", "WORLD_SIZE": "16", "TORCHELASTIC_RUN_ID": "r1"}
    p = ident(env)
    assert (p.job, p.scheduler, p.rank, p.local_rank, p.world_size, p.gpu) == ("slurm-9", "slurm", 13, 5, 16, 5)


@pytest.mark.parametrize(
    ("pod", "job"),
    [
        ("llama-worker-3", "llama"),
        ("llama-master-0", "llama"),
        ("bert-0", "bert"),
        ("train-x7k2p", "train"),
        ("train-2-x7k2p", "train"),  # indexed Job
        ("mpi-launcher-x7k2p", "mpi"),
        ("web-6d4cf56db6-x7k2p", "web"),  # Deployment
        ("llama-70b-worker-12", "llama-70b"),
        ("trainer", "trainer"),
        ("run-trainer", "run-trainer"),
        ("0", "0"),
    ],
)
def test_pod_name_suffixes_are_stripped_to_the_job(pod: str, job: str) -> None:
    assert job_from_pod_name(pod) == job


def test_kubernetes_pod() -> None:
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HOSTNAME": "llama-worker-3", "POD_NAMESPACE": "ml"}
    env |= {"RANK": "3", "LOCAL_RANK": "0", "WORLD_SIZE": "4"}
    p = ident(env)
    assert (p.job, p.scheduler, p.external_id) == ("llama", "kubernetes", "ml/llama-worker-3")
    assert (p.rank, p.local_rank, p.world_size, p.gpu) == (3, 0, 4, 0)


def test_kubernetes_pod_name_env_wins_and_namespace_defaults() -> None:
    p = ident({"KUBERNETES_SERVICE_HOST": "x", "HOSTNAME": "ignored", "POD_NAME": "bert-1"})
    assert (p.job, p.external_id) == ("bert", "default/bert-1")
    assert ident({"KUBERNETES_SERVICE_HOST": "x", "POD_NAME": "bert-1", "GPUWATCH_JOB": "b"}).job == "b"


def test_torchrun_job_from_run_id_or_rendezvous_address() -> None:
    base = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "MASTER_ADDR": "10.1.2.3", "MASTER_PORT": "29500"}
    p = ident(base | {"TORCHELASTIC_RUN_ID": "abc123"})
    assert (p.job, p.scheduler, p.rank, p.local_rank, p.world_size) == ("torchrun-abc123", "torchrun", 1, 1, 8)
    assert ident(base | {"TORCHELASTIC_RUN_ID": "none"}).job == "torchrun-10.1.2.3-29500"
    assert ident(base).job == "torchrun-10.1.2.3-29500"
    # Every single-node run on every node rendezvouses on localhost: the hostname tells them apart.
    assert ident(base | {"MASTER_ADDR": "127.0.0.1"}, host="gpu12").job == "torchrun-gpu12-29500"


@pytest.mark.parametrize(
    ("env", "gpu"),
    [
        ({"CUDA_VISIBLE_DEVICES": "4,5,6,7", "LOCAL_RANK": "2"}, 6),
        ({"LOCAL_RANK": "3"}, 3),  # unset: cuda:<local_rank> is the node's GPU
        ({"CUDA_VISIBLE_DEVICES": "GPU-8b1e0c1a-aaaa-bbbb-cccc-0123456789ab", "LOCAL_RANK": "0"}, None),
        ({"CUDA_VISIBLE_DEVICES": "MIG-0f1e2d3c-aaaa-bbbb-cccc-0123456789ab", "LOCAL_RANK": "0"}, None),
        ({"CUDA_VISIBLE_DEVICES": "", "LOCAL_RANK": "0"}, None),
        ({"CUDA_VISIBLE_DEVICES": "0,1", "LOCAL_RANK": "5"}, None),
        ({"CUDA_VISIBLE_DEVICES": "5", "LOCAL_RANK": "3"}, 5),  # one visible GPU: that one, whatever the rank
        ({"CUDA_VISIBLE_DEVICES": "2,3"}, None),
        ({"NVIDIA_VISIBLE_DEVICES": "4,6", "LOCAL_RANK": "1"}, 6),  # container: device plugin's host index
        ({"NVIDIA_VISIBLE_DEVICES": "GPU-8b1e0c1a", "LOCAL_RANK": "0"}, None),
        ({"NVIDIA_VISIBLE_DEVICES": "all", "LOCAL_RANK": "1"}, 1),
    ],
)
def test_gpu_index_mapping(env: dict[str, str], gpu: int | None) -> None:
    assert ident({"GPUWATCH_JOB": "j"} | env).gpu == gpu


def test_garbage_values_count_as_absent() -> None:
    p = ident({"GPUWATCH_JOB": "j", "RANK": "x", "LOCAL_RANK": "-1", "WORLD_SIZE": "0", "GPUWATCH_HANG_TIMEOUT": "nan"})
    assert (p.rank, p.local_rank, p.world_size, p.hang_timeout_s) == (None, None, None, None)
    assert ident({"GPUWATCH_JOB": "j"}, pid=0) is None


# --- the public API ------------------------------------------------------------------------------


def test_import_needs_neither_torch_nor_agent_nor_server_nor_pydantic() -> None:
    """A training script's ``import gpuwatch.client`` stays light: the wire models (pydantic), the HTTP
    client, logging and the checkpointer are imported when first used (docs/jobs.md)."""
    heavy = {"torch", "agent", "server", "httpx", "pydantic", "gpuwatch.protocol", "gpuwatch.recovery"}
    heavy |= {"gpuwatch.client.async_checkpoint", "http.client", "logging", "socket"}
    code = "import sys; before = set(sys.modules); import gpuwatch.client; print(*sorted(set(sys.modules) - before))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    assert "gpuwatch.client.reporter" in loaded  # the import did happen here
    assert heavy & loaded == set()


def test_the_checkpointer_is_imported_on_first_use() -> None:
    code = textwrap.dedent(
        """
        import sys
        from gpuwatch.client import *
        import gpuwatch.client as gw
        print(AsyncCheckpointer.__module__, issubclass(CheckpointError, Exception))
        print(gw.AsyncCheckpointer is AsyncCheckpointer, "gpuwatch.client.async_checkpoint" in sys.modules)
        try:
            gw.no_such_name
        except AttributeError as exc:
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        "gpuwatch.client.async_checkpoint True",
        "True True",
        "module 'gpuwatch.client' has no attribute 'no_such_name'",
    ]


def test_a_post_of_steps_fits_in_one_agent_batch() -> None:
    assert MAX_POST_STEPS <= MAX_BATCH_ITEMS


def test_steps_with_no_agent_listening_never_raise_and_are_counted_dropped(reporter: Reporter) -> None:
    for _ in range(1000):
        with gw.step(tokens=512):
            gw.record_collective("all_reduce", 0.001, 4096)
    stats = wait_until(lambda: (s := gw.stats())["buffered"] == 0 and s, timeout=10, what="the failed post")
    assert stats == {"sent": 0, "dropped": 1000, "buffered": 0}


def test_agent_receives_valid_reports_with_the_comm_time_of_each_step(reporter: Reporter) -> None:
    with FakeAgent() as agent:
        gw.configure(job="exp-1", rank=3, agent_url=agent.url, hang_timeout_s=120)
        gw.record_collective("all_reduce", 5.0)  # outside any step: belongs to none
        for i in range(20):
            with gw.step(tokens=1000 * i, samples=8):
                gw.record_collective("all_reduce", 0.010 * i, 1 << 20)
                gw.record_collective("all_reduce", 0.002, 1 << 20)
                with gw.collective("broadcast", nbytes=64):
                    pass
                # a collective timed by another thread (a comm hook's callback) counts too
                t = threading.Thread(target=gw.record_collective, args=("reduce_scatter", 0.003, 10))
                t.start()
                t.join()
        steps = wait_until(lambda: len(s := agent.steps()) == 20 and s, timeout=10, what="20 steps at the agent")
    assert set(agent.paths) == {"/v1/report"}
    reports = agent.reports()
    assert {(r.process.job, r.process.rank, r.process.pid, r.process.hang_timeout_s) for r in reports} == {
        ("exp-1", 3, os.getpid(), 120.0)
    }
    assert [s.step for s in steps] == list(range(20))
    for i, s in enumerate(steps):
        assert (s.job, s.rank, s.tokens, s.samples) == ("exp-1", 3, 1000.0 * i, 8.0)
        ar, bc, rs = s.collectives["all_reduce"], s.collectives["broadcast"], s.collectives["reduce_scatter"]
        assert (ar.count, ar.bytes, bc.count, bc.bytes, rs.count, rs.seconds) == (2, 2 << 20, 1, 64, 1, 0.003)
        assert ar.seconds == pytest.approx(0.010 * i + 0.002)
        assert s.comm_s == pytest.approx(ar.seconds + bc.seconds + rs.seconds)
        assert s.duration_s >= bc.seconds and s.ts > 0
    assert gw.stats() == {"sent": 20, "dropped": 0, "buffered": 0}


def test_the_agents_own_endpoint_accepts_what_the_client_sends(reporter: Reporter) -> None:
    from agent.local_api import LocalApi

    received: list[ClientReport] = []
    api = LocalApi(received.append, port=0).start()
    try:
        gw.configure(job="e2e", agent_url=f"http://127.0.0.1:{api.port}")
        for _ in range(50):
            with gw.step(tokens=10, samples=1):
                gw.record_collective("all_reduce", 0.001, 1 << 20)
        wait_until(lambda: sum(len(r.steps) for r in received) == 50, timeout=10, what="50 steps at the agent")
    finally:
        api.close()
    assert {r.process.job for r in received} == {"e2e"}
    assert gw.stats() == {"sent": 50, "dropped": 0, "buffered": 0}


def test_agent_answering_an_error_counts_the_steps_dropped(reporter: Reporter) -> None:
    with FakeAgent(status=500) as agent:
        gw.configure(agent_url=agent.url)
        for _ in range(30):
            with gw.step():
                pass
        stats = wait_until(lambda: (s := gw.stats())["buffered"] == 0 and s, timeout=10, what="the failed post")
    assert stats == {"sent": 0, "dropped": 30, "buffered": 0}
    assert len(agent.bodies) >= 1


def test_buffer_overflow_drops_the_oldest_and_counts_them(monkeypatch: pytest.MonkeyPatch) -> None:
    capture = Capture()
    rep = Reporter(maxlen=10, send=capture, env={}, autostart=False)
    monkeypatch.setattr(gw, "_reporter", rep)
    for _ in range(25):
        with gw.step():
            pass
    assert gw.stats() == {"sent": 0, "dropped": 15, "buffered": 10}
    assert rep.flush()
    assert gw.stats() == {"sent": 10, "dropped": 15, "buffered": 0}
    assert [s.step for s in capture.steps()] == list(range(15, 25))
    assert capture.reports[-1].dropped == 15


def test_failed_posts_drop_their_steps_and_later_ones_still_go(captured: tuple[Reporter, Capture]) -> None:
    rep, capture = captured
    capture.fail = True
    for _ in range(5):
        with gw.step():
            pass
    rep.flush()
    capture.fail = False
    with gw.step():
        pass
    rep.flush()
    assert gw.stats() == {"sent": 1, "dropped": 5, "buffered": 0}
    assert [s.step for s in capture.steps()] == [5]
    assert capture.reports[-1].dropped == 5


def test_decorator_and_context_manager_forms(captured: tuple[Reporter, Capture]) -> None:
    rep, capture = captured

    @gw.step(tokens=64)
    def train_step(x: int) -> int:
        gw.record_collective("all_reduce", 0.5)
        return x * 2

    @gw.step
    def bare(x: int) -> int:
        return x + 1

    assert train_step(21) == 42
    assert train_step.__name__ == "train_step"
    assert bare(1) == 2
    with gw.step(n=100) as s:
        s.samples = 4  # known only once the batch is in
    with gw.step():
        pass

    @gw.step(n=500)
    def numbered() -> None:
        pass

    numbered()
    numbered()
    rep.flush()
    steps = capture.steps()
    assert [(s.step, s.tokens, s.samples, s.comm_s) for s in steps] == [
        (0, 64.0, None, 0.5),
        (1, None, None, 0.0),
        (100, None, 4.0, 0.0),
        (101, None, None, 0.0),
        (500, None, None, 0.0),
        (501, None, None, 0.0),
    ]


def test_exceptions_inside_a_step_propagate_unchanged_and_the_step_is_recorded(
    captured: tuple[Reporter, Capture],
) -> None:
    rep, capture = captured
    boom = RuntimeError("CUDA error: an illegal memory access was encountered")

    @gw.step()
    def failing() -> None:
        raise boom

    with pytest.raises(RuntimeError) as excinfo:
        failing()
    assert excinfo.value is boom
    with pytest.raises(KeyError), gw.step(tokens=1), gw.collective("all_reduce", nbytes=8):
        raise KeyError("x")
    rep.flush()
    steps = capture.steps()
    assert [s.step for s in steps] == [0, 1]
    assert steps[1].collectives["all_reduce"].count == 1


def test_bad_counts_cost_the_field_not_the_step(captured: tuple[Reporter, Capture]) -> None:
    rep, capture = captured
    for tokens in (-1, "many", float("nan"), object(), 7):
        with gw.step(tokens=tokens):
            pass
    rep.flush()
    assert [s.tokens for s in capture.steps()] == [None, None, None, None, 7.0]


def test_a_bad_collective_timing_costs_only_its_step(captured: tuple[Reporter, Capture]) -> None:
    rep, capture = captured
    with gw.step():
        gw.record_collective("all_reduce", "slow")  # type: ignore[arg-type]
    with gw.step():
        gw.record_collective("all_reduce", 0.25)
    rep.flush()
    assert [(s.step, s.comm_s) for s in capture.steps()] == [(1, 0.25)]
    assert gw.stats() == {"sent": 1, "dropped": 1, "buffered": 0}


def test_configure_rejects_invalid_values_at_setup(captured: tuple[Reporter, Capture]) -> None:
    with pytest.raises(ValueError):
        gw.configure(rank=-1)
    with pytest.raises(ValueError):
        gw.configure(job="")
    gw.configure(job="ok")  # and the reporter still works afterwards
    with gw.step():
        pass
    captured[0].flush()
    assert captured[1].reports[0].process.job == "ok"


def test_default_identity_is_a_local_job_named_for_host_and_pid(captured: tuple[Reporter, Capture]) -> None:
    process = captured[0].process()
    assert process.job.startswith("local-") and process.job.endswith(f"-{os.getpid()}")
    assert (process.rank, process.scheduler) == (0, "local")


def test_last_steps_are_flushed_at_exit(tmp_path: Any) -> None:
    """A short script's steps arrive though it exits before the 0.5 s timer fires."""
    code = textwrap.dedent(
        """
        import gpuwatch.client as gw
        for i in range(7):
            with gw.step(tokens=i):
                pass
        """
    )
    with FakeAgent() as agent:
        env = os.environ | {"GPUWATCH_AGENT_URL": agent.url, "GPUWATCH_JOB": "short", "RANK": "1", "WORLD_SIZE": "2"}
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, timeout=60)
        steps = wait_until(lambda: len(s := agent.steps()) == 7 and s, timeout=10, what="the exit flush")
    assert [(s.job, s.rank, s.step) for s in steps] == [("short", 1, i) for i in range(7)]
    assert json.loads(agent.bodies[-1])["process"]["world_size"] == 2
