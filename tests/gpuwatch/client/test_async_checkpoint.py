"""gpuwatch.client.AsyncCheckpointer: real torch, real files, real processes (and a real full disk)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import gpuwatch.client as gw
from gpuwatch.client import AsyncCheckpointer, CheckpointError
from gpuwatch.client.reporter import Reporter
from gpuwatch.protocol import CheckpointReport, ClientReport
from gpuwatch.recovery import MANIFEST, Checkpoint, latest_valid, validate
from tests.gpuwatch.client.test_client import FakeAgent
from tests.helpers import REPO, wait_until

ROOT = REPO


class Capture:
    """A reporter transport that keeps every ClientReport."""

    def __init__(self) -> None:
        self.reports: list[ClientReport] = []

    def __call__(self, url: str, body: bytes) -> None:
        self.reports.append(ClientReport.model_validate_json(body))

    def checkpoints(self) -> list[CheckpointReport]:
        return [c for r in self.reports for c in r.checkpoints]


@pytest.fixture
def capture(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Reporter, Capture]]:
    """The process's reporter swapped for one with no thread, shipping to ``Capture`` on flush()."""
    cap = Capture()
    rep = Reporter(send=cap, env={"GPUWATCH_JOB": "ckpt-test"}, autostart=False)
    monkeypatch.setattr(gw, "_reporter", rep)
    yield rep, cap


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, threading.Event]]:
    """Holds every background torch.save until ``release`` is set; ``writing`` says one started."""
    writing, release = threading.Event(), threading.Event()
    real_save = torch.save

    def held_save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        writing.set()
        assert release.wait(30), "test never released the write"
        real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", held_save)
    yield writing, release
    release.set()


def assert_same(a: Any, b: Any, where: str = "state") -> None:
    """Bitwise equality of nested states: tensors by torch.equal (and dtype), everything else by ==."""
    assert type(a) is type(b), f"{where}: {type(a)} != {type(b)}"
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, b), where
    else:
        assert a == b, where


def make_model(seed: int = 0) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def train(model: torch.nn.Module, opt: torch.optim.Optimizer, steps: int, gen: torch.Generator) -> None:
    for _ in range(steps):
        x = torch.randn(8, 16, generator=gen)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def full_state(model: torch.nn.Module, opt: torch.optim.Optimizer, step: int, gen: torch.Generator) -> dict[str, Any]:
    return {
        "model": model.state_dict(),
        "optim": opt.state_dict(),
        "step": step,
        "rng": {"torch": torch.get_rng_state(), "data": gen.get_state(), "python": random.getstate()},
        "np": np.random.default_rng(3).bit_generator.state,
        "history": [1.5, (2, "x"), None, [torch.arange(5)]],
    }


# --- 1. round trip ------------------------------------------------------------------------------------


def test_async_checkpoint_loads_bitwise_equal_to_torch_save(tmp_path: Path, capture: Any) -> None:
    model, opt = make_model()
    gen = torch.Generator().manual_seed(1)
    train(model, opt, 5, gen)
    state = full_state(model, opt, 5, gen)
    torch.save(state, tmp_path / "sync.pt")

    ckpt = AsyncCheckpointer(tmp_path / "async")
    assert ckpt.save(state, 5) is True
    path = ckpt.wait()
    assert path == tmp_path / "async" / "step_000005"
    train(model, opt, 3, gen)  # the training loop moves on; the checkpoint must not follow it

    assert_same(torch.load(path / "state.pt", weights_only=False), torch.load(tmp_path / "sync.pt", weights_only=False))
    found = validate(path)
    assert isinstance(found, Checkpoint) and found.layout == "manifest" and found.step == 5
    assert (path / MANIFEST).exists()
    stats = ckpt.stats()
    assert stats["saves"] == 1 and stats["failed"] == 0 and stats["size_bytes"] == found.size_bytes
    assert stats["blocking_s"] > 0 and stats["write_s"] > 0
    ckpt.close()


def test_resuming_from_async_and_sync_checkpoints_gives_identical_parameters(tmp_path: Path) -> None:
    model, opt = make_model()
    gen = torch.Generator().manual_seed(7)
    train(model, opt, 10, gen)
    state = full_state(model, opt, 10, gen)
    torch.save(state, tmp_path / "sync.pt")
    with AsyncCheckpointer(tmp_path / "async", reporter=Reporter(send=Capture(), autostart=False)) as ckpt:
        ckpt.save(state, 10)
        async_path = ckpt.wait()
    assert async_path is not None

    def resume(file: Path) -> list[torch.Tensor]:
        loaded = torch.load(file, weights_only=False)
        m, o = make_model(seed=99)  # different init: everything must come from the checkpoint
        m.load_state_dict(loaded["model"])
        o.load_state_dict(loaded["optim"])
        g = torch.Generator()
        g.set_state(loaded["rng"]["data"])
        train(m, o, 20, g)
        return [p.detach().clone() for p in m.parameters()]

    from_async, from_sync = resume(async_path / "state.pt"), resume(tmp_path / "sync.pt")
    for a, s in zip(from_async, from_sync, strict=True):
        assert torch.equal(a, s)
    train(model, opt, 20, gen)  # and both equal the run that never stopped
    for a, p in zip(from_async, model.parameters(), strict=True):
        assert torch.equal(a, p.detach())


def test_host_buffers_are_reused_while_shapes_match(tmp_path: Path, capture: Any) -> None:
    ckpt = AsyncCheckpointer(tmp_path, keep=5)
    t = torch.ones(1000)
    ckpt.save({"w": t}, 1)
    ckpt.wait()
    first = ckpt._copier._buffers[("w",)]
    t.mul_(3)
    ckpt.save({"w": t}, 2)
    ckpt.wait()
    assert ckpt._copier._buffers[("w",)] is first  # no new allocation per save
    ckpt.save({"w": torch.ones(10)}, 3)  # a new shape gets a new buffer
    ckpt.wait()
    assert ckpt._copier._buffers[("w",)].shape == (10,)
    assert torch.equal(torch.load(tmp_path / "step_000001" / "state.pt")["w"], torch.ones(1000))
    assert torch.equal(torch.load(tmp_path / "step_000002" / "state.pt")["w"], torch.full((1000,), 3.0))


# --- 2. crash in the middle of a background write ----------------------------------------------------

CRASH_CHILD = textwrap.dedent(
    """
    import sys, threading
    from pathlib import Path
    import torch
    from gpuwatch.client import AsyncCheckpointer

    directory, marker = Path(sys.argv[1]), Path(sys.argv[2])
    real_save = torch.save

    class SlowFile:
        # Passes writes through; after 50 MB it says so and stalls, so the kill lands mid-file.
        def __init__(self, f):
            self.f, self.n = f, 0
        def write(self, b):
            n = self.f.write(b)
            self.n += len(b)
            if self.n > 50_000_000:
                self.f.flush()
                marker.touch()
                threading.Event().wait()
            return n
        def flush(self):
            self.f.flush()

    def save(obj, f, *a, **k):
        if obj["step"] == 2:
            f = SlowFile(f)
        real_save(obj, f, *a, **k)

    torch.save = save
    ckpt = AsyncCheckpointer(directory)
    ckpt.save({"w": torch.full((1000,), 1.0), "step": 1}, 1)
    ckpt.wait()
    big = {"w%d" % i: torch.full((10_000_000,), float(i)) for i in range(5)}  # 200 MB
    ckpt.save({**big, "step": 2}, 2)
    print("saving step 2", flush=True)
    threading.Event().wait()  # training would go on; the test kills us
    """
)


@pytest.mark.slow
def test_kill_during_background_write_leaves_the_previous_checkpoint_valid(tmp_path: Path) -> None:
    directory, marker = tmp_path / "ckpt", tmp_path / "writing"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GPUWATCH_AGENT_URL": "http://127.0.0.1:9"}
    proc = subprocess.Popen([sys.executable, "-c", CRASH_CHILD, str(directory), str(marker)], env=env)
    try:
        wait_until(lambda: marker.exists() or proc.poll() is not None, timeout=60, what="the step-2 write")
        assert proc.poll() is None, f"child exited with {proc.returncode} before the write"
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    half = directory / "step_000002" / "state.pt"
    assert half.stat().st_size > 50_000_000  # really half-written: data on disk, no manifest
    assert not (directory / "step_000002" / MANIFEST).exists()
    found, skipped = latest_valid(directory)
    assert found is not None and found.step == 1 and found.path == directory / "step_000001"
    assert [s.step for s in skipped] == [2] and "did not finish" in skipped[0].why
    assert torch.load(found.path / "state.pt")["step"] == 1


# --- 3. errors: never silent, never fatal --------------------------------------------------------------


def test_background_error_surfaces_on_next_call_and_training_goes_on(tmp_path: Path, capture: Any) -> None:
    rep, cap = capture
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the checkpoint directory should be")
    ckpt = AsyncCheckpointer(blocker / "ckpt")
    assert ckpt.save({"w": torch.ones(4)}, 1) is True  # the failure happens in the background
    with pytest.raises(CheckpointError) as err:
        ckpt.wait()
    assert "ENOTDIR" in str(err.value) and str(blocker) in str(err.value) and err.value.step == 1
    ckpt.wait()  # raised once: training continues
    assert ckpt.stats()["failed"] == 1 and ckpt.stats()["saves"] == 0
    blocker.unlink()
    assert ckpt.save({"w": torch.ones(4)}, 2) is True
    assert ckpt.wait() == blocker / "ckpt" / "step_000002"
    rep.flush()
    assert [(c.step, c.ok, c.job) for c in cap.checkpoints()] == [(1, False, "ckpt-test"), (2, True, "ckpt-test")]
    assert "ENOTDIR" in (cap.checkpoints()[0].error or "")


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str = "4m") -> Iterator[Path]:
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_full_disk_is_reported_and_the_previous_checkpoint_survives(tmp_path: Path, capture: Any) -> None:
    rep, cap = capture
    with small_tmpfs(tmp_path / "tiny") as tiny:
        ckpt = AsyncCheckpointer(tiny, keep=1)
        ckpt.save({"w": torch.ones(10_000), "step": 1}, 1)  # 40 KB: fits
        assert ckpt.wait() == tiny / "step_000001"
        assert ckpt.save({"w": torch.ones(2_000_000), "step": 2}, 2) is True  # 8 MB: does not
        with pytest.raises(CheckpointError) as err:
            ckpt.save({"w": torch.ones(10), "step": 3}, 3)  # the next call says why, and saves nothing
        assert "ENOSPC" in str(err.value) and "step_000002" in str(err.value)
        assert err.value.errno == 28
        assert not (tiny / "step_000003").exists()
        stats = ckpt.stats()
        assert (stats["saves"], stats["failed"]) == (1, 1)

        found, _ = latest_valid(tiny)  # keep=1 pruned nothing for the failed save
        assert found is not None and found.step == 1
        assert torch.load(found.path / "state.pt")["step"] == 1
        assert not (tiny / "step_000002").exists()  # the half-written save's space is given back

        rep.flush()
        reports = cap.checkpoints()
        assert [(c.step, c.ok) for c in reports] == [(1, True), (2, False)]
        assert "ENOSPC" in (reports[1].error or "") and reports[1].size_bytes == 0

        # Training goes on: the same checkpointer saves small states again, another disk works too.
        assert ckpt.save({"w": torch.ones(10), "step": 4}, 4) is True
        assert ckpt.wait() == tiny / "step_000004"
        ckpt.close()
    with AsyncCheckpointer(tmp_path / "elsewhere") as other:
        other.save({"w": torch.ones(2_000_000), "step": 5}, 5)
        assert other.wait() == tmp_path / "elsewhere" / "step_000005"


# --- 4. pruning, policies, close ------------------------------------------------------------------------


def test_keeps_the_newest_complete_checkpoints(tmp_path: Path, capture: Any) -> None:
    ckpt = AsyncCheckpointer(tmp_path, keep=2)
    (tmp_path / "notes.txt").write_text("not ours")
    (tmp_path / "step_000099").mkdir()  # a newer, incomplete leftover: not older, so not pruned
    for step in range(1, 6):
        ckpt.save({"step": step, "w": torch.full((3,), float(step))}, step)
        ckpt.wait()
        names = sorted(p.name for p in tmp_path.iterdir())
        expected = [f"step_{s:06d}" for s in range(max(1, step - 1), step + 1)]
        assert names == ["notes.txt", *expected, "step_000099"]
    found, skipped = latest_valid(tmp_path)
    assert found is not None and found.step == 5 and [s.step for s in skipped] == [99]


def test_skip_policy_skips_while_a_save_is_in_flight(tmp_path: Path, capture: Any, gate: Any) -> None:
    writing, release = gate
    ckpt = AsyncCheckpointer(tmp_path, policy="skip")
    assert ckpt.save({"step": 1}, 1) is True
    assert writing.wait(10)
    assert ckpt.in_flight()
    assert ckpt.save({"step": 2}, 2) is False
    assert ckpt.stats()["skipped"] == 1
    release.set()
    assert ckpt.wait() == tmp_path / "step_000001"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_000001"]
    assert ckpt.save({"step": 3}, 3) is True  # nothing in flight now
    assert ckpt.wait() == tmp_path / "step_000003"


def test_wait_policy_waits_for_the_save_in_flight(tmp_path: Path, capture: Any, gate: Any) -> None:
    writing, release = gate
    ckpt = AsyncCheckpointer(tmp_path, policy="wait")
    ckpt.save({"step": 1}, 1)
    assert writing.wait(10)
    second_done = threading.Event()
    results: list[bool] = []

    def second() -> None:
        results.append(ckpt.save({"step": 2}, 2))
        second_done.set()

    t = threading.Thread(target=second)
    t.start()
    assert not second_done.is_set()  # it cannot return: the first write is held
    assert not (tmp_path / "step_000002").exists()
    release.set()
    assert second_done.wait(10) and results == [True]
    t.join()
    assert ckpt.wait() == tmp_path / "step_000002"
    assert ckpt.stats()["saves"] == 2 and ckpt.stats()["skipped"] == 0
    assert isinstance(validate(tmp_path / "step_000001"), Checkpoint)


def test_close_waits_for_the_save_in_flight(tmp_path: Path, capture: Any, gate: Any) -> None:
    writing, release = gate
    ckpt = AsyncCheckpointer(tmp_path)
    ckpt.save({"step": 1, "w": torch.ones(100)}, 1)
    assert writing.wait(10)
    threading.Thread(target=release.set).start()  # released from elsewhere, while close() waits
    ckpt.close()
    assert not ckpt.in_flight()
    assert isinstance(validate(tmp_path / "step_000001"), Checkpoint)


def test_emergency_save_on_preemption_is_complete_before_exit(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import os, signal, sys, torch
        import gpuwatch.client as gw
        ckpt = gw.AsyncCheckpointer(sys.argv[1], policy="skip")
        state = {"step": 0, "w": torch.zeros(1_000_000)}
        gw.install_preemption_handler(lambda: ckpt.save_and_wait(state, state["step"]))
        for step in range(1, 1000):
            state["step"] = step
            state["w"].add_(1)
            if step == 1:
                ckpt.save(state, step)
            if step == 3:
                os.kill(os.getpid(), signal.SIGTERM)
            gw.preemption_point()
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GPUWATCH_AGENT_URL": "http://127.0.0.1:9"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 143, done.stderr
    assert f"emergency checkpoint saved to {tmp_path / 'step_000003'}" in done.stdout
    found, _ = latest_valid(tmp_path)
    assert found is not None and found.step == 3
    state = torch.load(found.path / "state.pt")
    assert state["step"] == 3 and torch.equal(state["w"], torch.full((1_000_000,), 3.0))


def test_checkpoint_saved_reaches_the_supervisor_log(tmp_path: Path, capture: Any, monkeypatch: Any) -> None:
    log = tmp_path / "ckpt.log"
    monkeypatch.setenv("GPUWATCH_CHECKPOINT_LOG", str(log))
    with AsyncCheckpointer(tmp_path / "c") as ckpt:
        ckpt.save({"step": 4}, 4)
        path = ckpt.wait()
    line = json.loads(log.read_text())
    assert (line["path"], line["step"]) == (str(path), 4)


# --- 5. reports reach the agent ------------------------------------------------------------------------


def test_checkpoint_reports_reach_the_agent(tmp_path: Path) -> None:
    with FakeAgent() as agent:
        rep = Reporter(env={"GPUWATCH_AGENT_URL": agent.url, "GPUWATCH_JOB": "run-9"}, interval_s=0.05)
        try:
            with AsyncCheckpointer(tmp_path, reporter=rep) as ckpt:
                for step in (10, 20):
                    ckpt.save({"step": step, "w": torch.ones(1000)}, step)
                    ckpt.wait()

            def delivered() -> list[CheckpointReport]:
                found = [c for r in agent.reports() for c in r.checkpoints]
                return found if len(found) == 2 else []

            got = wait_until(delivered, timeout=10, what="two checkpoint reports at the agent")
        finally:
            rep.close(timeout_s=2.0)
    assert set(agent.paths) == {"/v1/report"}
    assert [(c.job, c.step, c.ok, c.path) for c in got] == [
        ("run-9", 10, True, str(tmp_path / "step_000010")),
        ("run-9", 20, True, str(tmp_path / "step_000020")),
    ]
    assert all(c.size_bytes > 4000 and c.write_s > 0 and c.blocking_s > 0 and c.error is None for c in got)


def test_reporter_keeps_checkpoint_reports_while_the_agent_is_away(tmp_path: Path) -> None:
    cap = Capture()
    failing = [True]

    def send(url: str, body: bytes) -> None:
        if failing[0]:
            raise ConnectionRefusedError("agent away")
        cap(url, body)

    rep = Reporter(send=send, env={"GPUWATCH_JOB": "away"}, autostart=False)
    report = CheckpointReport(job="away", rank=0, step=1, ts=1.0, path="/x", ok=True)
    rep.record_checkpoint(report)
    assert rep.flush() is False  # the post failed: still queued
    failing[0] = False
    assert rep.flush() is True
    assert cap.checkpoints() == [report]


# --- 5. a real GPU ---------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_cuda_state_round_trips_bitwise_and_blocks_only_for_the_copy(tmp_path: Path, capture: Any) -> None:
    """512 MiB of CUDA tensors (float32, bf16, int64, a strided view) beside CPU values: saved through
    pinned host buffers, loaded bitwise equal, even though training changes the GPU tensors the moment
    ``save()`` returns; and ``save()`` blocks for far less than torch.save + fsync of the same state."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    torch.manual_seed(0)
    dev = torch.device("cuda")
    weights = {f"layer{i}.weight": torch.randn(32 * 1024 * 1024, device=dev) for i in range(4)}  # 4 x 128 MiB
    big = torch.randn(1024, 2048, device=dev)
    state = {
        "model": {
            **weights,
            "embed.bf16": torch.randn(4096, 1024, device=dev, dtype=torch.bfloat16),
            "counts": torch.randint(0, 2**40, (4096,), device=dev, dtype=torch.int64),
            "transposed": big.t(),  # not contiguous: the host buffer holds the view's values only
        },
        "cpu": torch.arange(1000, dtype=torch.float64),
        "step": 7,
        "rng": {"cuda": torch.cuda.get_rng_state(), "cpu": torch.get_rng_state()},
    }

    def on_host(obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            return obj.cpu().clone()
        if isinstance(obj, dict):
            return {k: on_host(v) for k, v in obj.items()}
        return obj

    def train_step() -> None:  # queued on the GPU right after save() returns: must not leak into the checkpoint
        for t in weights.values():
            t.mul_(1.5).add_(1.0)
        big.add_(1.0)
        state["model"]["counts"].add_(1)

    with open(tmp_path / "sync.pt", "wb") as f:  # the synchronous, crash-safe save of the same state
        t0 = time.perf_counter()
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
        sync_s = time.perf_counter() - t0

    ckpt = AsyncCheckpointer(tmp_path / "async", keep=1)
    blocking, expected = [], []
    for step in (1, 2, 3):  # the first save allocates the pinned buffers; later ones reuse them
        state["step"] = step
        expected.append(on_host(state))
        assert ckpt.save(state, step) is True
        blocking.append(ckpt.stats()["blocking_s"])
        train_step()
        path = ckpt.wait()
        assert path == tmp_path / "async" / f"step_{step:06d}"
        assert_same(torch.load(path / "state.pt", weights_only=False), expected[-1])
    torch.cuda.synchronize()

    buffers = ckpt._copier._buffers
    assert all(b.is_pinned() for b in buffers.values()), "CUDA tensors must be copied into pinned host memory"
    assert buffers[("model", "transposed")].shape == (2048, 1024)
    ckpt.close()
    reused = statistics.median(blocking[1:])
    print(f"\ntorch.save+fsync {sync_s:.3f} s; AsyncCheckpointer blocking {[round(b, 4) for b in blocking]} s")
    assert reused * 5 < sync_s, f"save() blocked {reused:.3f} s vs torch.save+fsync {sync_s:.3f} s"


def test_checkpoint_saved_reports_the_save_to_the_agent_too(tmp_path: Path, capture: Any) -> None:
    """A job that saves by itself and calls checkpoint_saved() gets a checkpoint age at the server."""
    rep, cap = capture
    saved = tmp_path / "step_7.pt"
    saved.write_bytes(b"x")
    gw.checkpoint_saved(saved, 7)
    rep.flush()
    (report,) = cap.checkpoints()
    assert (report.job, report.step, report.ok, report.path) == ("ckpt-test", 7, True, str(saved.resolve()))
