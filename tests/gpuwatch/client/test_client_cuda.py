"""gpuwatch.client.torch on a real GPU: a 1-rank NCCL job whose all-reduce is timed by CUDA events.

An NCCL call returns once its kernels are queued, so the host sees only the launch; the events
see the transfer. With one rank NCCL runs an in-place SUM as a no-op, but a floating-point AVG as a
kernel over the whole buffer (a pre-multiplied sum), so a 1 GiB AVG all-reduce takes the GPU a
memory pass over 1 GiB, far longer than its launch. Skipped without CUDA and NCCL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.gpuwatch.client.test_client import ROOT, FakeAgent
from tests.helpers import free_port, wait_until

torch = pytest.importorskip("torch", reason="torch is not installed: gpuwatch.client.torch needs it")

pytestmark = pytest.mark.gpu

STEPS = 10
ELEMENTS = 256 * 1024 * 1024  # 1 GiB of float32


def _rank_main(out: str) -> None:
    """The job: one NCCL rank, STEPS steps of one 1 GiB all-reduce each, its own host clock around each call."""
    import time

    import torch
    import torch.distributed as dist

    import gpuwatch.client as gw
    from gpuwatch.client.torch import instrument

    instrument()
    torch.cuda.set_device(0)
    dist.init_process_group("nccl")
    x = torch.ones(ELEMENTS, device="cuda")
    dist.all_reduce(x, op=dist.ReduceOp.AVG)  # warm-up (NCCL's first call sets up the communicator)
    torch.cuda.synchronize()
    launches = []
    for _ in range(STEPS):
        with gw.step():
            t0 = time.perf_counter()
            dist.all_reduce(x, op=dist.ReduceOp.AVG)
            launches.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    passes = []  # the same memory pass without NCCL: an in-place scale of the buffer, timed by CUDA events
    for _ in range(STEPS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        x.mul_(1.0)
        end.record()
        end.synchronize()
        passes.append(start.elapsed_time(end) / 1e3)
    Path(out).write_text(json.dumps({"launches": launches, "passes": passes, "device": torch.cuda.get_device_name(0)}))
    dist.destroy_process_group()


def test_nccl_all_reduce_gpu_time_is_far_longer_than_its_launch(tmp_path: Path) -> None:
    if not torch.cuda.is_available() or not torch.distributed.is_nccl_available():
        pytest.skip("no CUDA device with NCCL")
    with FakeAgent() as agent:
        env = os.environ | {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(free_port()),
            "RANK": "0",
            "LOCAL_RANK": "0",
            "WORLD_SIZE": "1",
            "GPUWATCH_JOB": "nccl-1rank",
            "GPUWATCH_AGENT_URL": agent.url,
        }
        out = tmp_path / "rank0.json"
        code = f"from tests.gpuwatch.client.test_client_cuda import _rank_main; _rank_main({str(out)!r})"
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        steps = wait_until(lambda: len(s := agent.steps()) == STEPS and s, timeout=30, what=f"{STEPS} steps")
    mine: dict[str, Any] = json.loads(out.read_text())
    launch = sorted(mine["launches"])[STEPS // 2]
    memory_pass = sorted(mine["passes"])[STEPS // 2]
    gpu = sorted(s.collectives["all_reduce"].gpu_seconds or 0.0 for s in steps)[STEPS // 2]
    nbytes = ELEMENTS * 4
    print(
        f"{mine['device']}: 1 GiB AVG all_reduce, 1 rank: median launch {launch * 1e6:.1f} us, "
        f"GPU time {gpu * 1e6:.1f} us, algbw {nbytes / gpu / 1e9:.1f} GB/s; "
        f"the same buffer scaled in place {memory_pass * 1e6:.1f} us"
    )
    for s in steps:
        stat = s.collectives["all_reduce"]
        assert stat.count == 1 and stat.bytes == nbytes
        assert stat.gpu_seconds is not None, "timed by CUDA events, not the host"
        assert s.comm_s == pytest.approx(stat.gpu_seconds)
        assert stat.bus_bytes == 0.0, "one rank: nccl-tests' factor 2(n-1)/n is 0"
        assert s.exposed_s == pytest.approx(stat.gpu_seconds), "a blocking call is waited for all along"
    # The kernel reads and writes the whole buffer, so it takes at least about what a plain in-place pass over it
    # takes; a host timer around the launch alone would read a fraction of that (on an H200: 114 us of launch,
    # 724 us of all-reduce, bench/results/gpu-smoke-h200.txt).
    assert gpu > 0.5 * memory_pass, (gpu, memory_pass)
    assert gpu > 2 * launch, (gpu, launch)
    assert nbytes / gpu < 20e12, "no GPU reads and writes 1 GiB faster than 20 TB/s: the events time the kernel"
