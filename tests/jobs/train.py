"""A small data-parallel training job for the tests: real torch.distributed (gloo, CPU), launched
by torchrun, instrumented with gpuwatch.client, and measuring its own communication time
independently (its own perf_counter around the same collectives) to check gpuwatch against: the
time in the all-reduce, and the time the step waited for it (with ``--overlap``, the all-reduce runs
async behind the step's compute and only its ``wait()`` is waited for).

    torchrun --nproc-per-node 2 tests/jobs/train.py --mode heavy --steps 30 --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist

import gpuwatch.client as gw
from gpuwatch.client.torch import instrument


def busy(seconds: float) -> None:
    """Keep the CPU (and so this rank's simulated GPU) busy, as a long kernel would."""
    end = time.perf_counter() + seconds
    x = torch.ones(64, 64)
    while time.perf_counter() < end:
        x = (x @ x).clamp_(-1, 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["heavy", "light", "mixed"], default="light")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--straggle-rank", type=int, default=-1)
    ap.add_argument("--straggle-s", type=float, default=0.0)
    ap.add_argument("--hang-rank", type=int, default=-1, help="this rank stops stepping (alive, idle)")
    ap.add_argument("--hang-after", type=int, default=10)
    ap.add_argument("--hang-s", type=float, default=60.0)
    ap.add_argument("--long-step-at", type=int, default=-1, help="this step runs busy for --long-step-s")
    ap.add_argument("--long-step-s", type=float, default=0.0)
    ap.add_argument("--overlap", action="store_true", help="all-reduce async, behind the step's compute")
    args = ap.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    instrument()
    torch.manual_seed(rank)
    if args.mode == "heavy":  # much communication, little compute
        grad, work = torch.ones(4_000_000), torch.randn(64, 64)
    elif args.mode == "mixed":  # much of both (for --overlap: compute to hide the all-reduce behind)
        grad, work = torch.ones(4_000_000), torch.randn(384, 384)
    else:  # little communication, much compute
        grad, work = torch.ones(1_000), torch.randn(384, 384)
    own_comm = own_step = own_exposed = 0.0
    done: dict[int, float] = {}  # --overlap: each step's all-reduce, from the call to its completion
    waited: dict[int, tuple[float, float]] = {}  # --overlap: each step's wait(), from the call's start
    progress = args.out / f"rank{rank}.progress"
    for n in range(args.steps):
        if rank == args.hang_rank and n == args.hang_after:
            progress.write_text(json.dumps({"hung_at": time.time(), "step": n}))
            time.sleep(args.hang_s)  # alive and idle: no step, no collective
        t_step = time.perf_counter()
        with gw.step(samples=32, tokens=32 * 512):
            if args.overlap:
                t_comm = time.perf_counter()
                pending = dist.all_reduce(grad, async_op=True)
                pending.get_future().then(lambda _, t=t_comm, n=n: done.__setitem__(n, time.perf_counter() - t))
                own_exposed += time.perf_counter() - t_comm  # the launch call: no compute meanwhile
            y = work
            for _ in range(3 if args.mode == "heavy" else 6):
                y = torch.tanh(y @ work)
            if n == args.long_step_at:
                busy(args.long_step_s)
            if rank == args.straggle_rank:
                time.sleep(args.straggle_s)
            t = time.perf_counter()
            if args.overlap:
                pending.wait()
                own_exposed += time.perf_counter() - t
                waited[n] = (t - t_comm, time.perf_counter() - t_comm)
            else:
                dist.all_reduce(grad)
                own_comm += time.perf_counter() - t
                own_exposed += time.perf_counter() - t
            grad.div_(dist.get_world_size())
        own_step += time.perf_counter() - t_step
    dist.barrier()
    for n, seconds in done.items():
        # As gpuwatch defines it for the step: a collective waited for while it still ran lasted until
        # the wait returned (on a loaded machine the training thread may resume well after the callback).
        wait_from, wait_to = waited.get(n, (seconds, seconds))
        own_comm += max(seconds, wait_to) if wait_from <= seconds else seconds
    (args.out / f"rank{rank}.json").write_text(
        json.dumps(
            {
                "rank": rank,
                "steps": args.steps,
                "own_comm_s": own_comm,
                "own_step_s": own_step,
                "own_exposed_s": own_exposed,
                "pid": os.getpid(),
                "client": gw.stats(),
            }
        )
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
