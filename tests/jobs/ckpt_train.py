"""A deterministic data-parallel training job for the recovery tests: real torch.distributed (gloo,
CPU) under torchrun, a checkpoint every K steps, resume from GPUWATCH_RESUME_FROM, an emergency
checkpoint on SIGTERM at the step boundary all ranks agree on, and injectable script failures.

The same seed gives bitwise the same parameters whether the run is interrupted or not: the data of
step s depends only on (s, rank), and a checkpoint holds the model, the optimizer (momentum) and the
step. Each attempt appends the steps it computed to OUT/steps.log, so a test can count steps redone.

    torchrun --nproc-per-node 2 tests/jobs/ckpt_train.py --steps 40 --every 5 --ckpt-dir C --out O

``--fork-ranks N`` starts the N ranks itself, forked after torch is imported, instead of torchrun: the
same job and process group at a third of the start-up (torch imported once, not by a launcher and each
rank), for the tests that run it dozens of times. As torchrun does, the first rank to fail ends the others
and the job's exit status is 1.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

import gpuwatch.client as gw


def batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(10_000 * step + rank)
    x = torch.randn(16, 32, generator=g)
    return x, x.roll(1, dims=1) * 0.5


def save(path: Path, step: int, model: torch.nn.Module, opt: torch.optim.Optimizer) -> Path:
    """Written to a temporary name and renamed: a crash mid-save never leaves a plausible file."""
    tmp = path.with_suffix(".tmp")
    torch.save({"step": step, "model": model.state_dict(), "opt": opt.state_dict()}, tmp)
    os.replace(tmp, path)
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--every", type=int, default=5, help="checkpoint every K steps")
    ap.add_argument("--ckpt-dir", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--step-s", type=float, default=0.05, help="extra time per step (room to inject faults)")
    ap.add_argument("--fail-at", type=int, default=-1, help="raise at this step")
    ap.add_argument("--fail", choices=["keyerror", "cuda"], default="keyerror")
    ap.add_argument("--fail-always", action="store_true", help="also after a resume (a crash loop)")
    ap.add_argument(
        "--bad-checkpoint-at",
        type=lambda v: {int(s) for s in v.split(",")},
        default=set(),
        help="steps whose checkpoint is whole but does not load (a model renamed since): first attempt only",
    )
    ap.add_argument("--hang-at", type=int, default=-1, help="rank 0 stops stepping here (alive, idle)")
    ap.add_argument("--fork-ranks", type=int, default=0, help="start this many ranks by fork, without torchrun")
    args = ap.parse_args()
    if args.fork_ranks:
        sys.exit(fork_ranks(args.fork_ranks, args))
    train(args)


def fork_ranks(n: int, args: argparse.Namespace) -> int:
    """Run ``train`` in ``n`` forked ranks; the first to fail ends the others. The job's exit status."""
    import torch._dynamo  # noqa: F401 - what an optimizer's first construction imports (2 s): once, for all ranks

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pids = []
    for rank in range(n):
        if (pid := os.fork()) == 0:
            ranks = {"RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": n, "LOCAL_WORLD_SIZE": n, "MASTER_PORT": port}
            os.environ.update({k: str(v) for k, v in ranks.items()} | {"MASTER_ADDR": "127.0.0.1"})
            code = 0
            try:
                train(args)
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        pids.append(pid)
    status = 0
    for _ in range(n):
        pid, raw = os.wait()
        if (code := os.waitstatus_to_exitcode(raw)) != 0 and status == 0:
            status = 1
            print(f"rank process {pid} failed (exit {code}); ending the others", flush=True)
            for other in pids:
                if other != pid:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(other, signal.SIGKILL)
    return status


def train(args: argparse.Namespace) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    args.out.mkdir(parents=True, exist_ok=True)
    args.ckpt_dir.mkdir(parents=True, exist_ok=True)
    (args.out / f"rank{rank}.pid").write_text(str(os.getpid()))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 32))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    start = 0
    resume = gw.resume_path()
    if resume:
        state = torch.load(resume, weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
        print(f"rank {rank}: resumed from {resume} at step {start}", flush=True)
    step = start
    if rank == 0:
        with open(args.out / "attempts.log", "a") as f:
            f.write(f"start={start} resume={resume or ''} exclude={os.environ.get('GPUWATCH_EXCLUDE_NODES', '')}\n")

    def emergency() -> str | None:
        if rank != 0:
            return None
        path = save(args.ckpt_dir / f"step_{step:06d}.pt", step, model, opt)
        gw.checkpoint_saved(path, step)
        return str(path)

    def agree(flag: bool) -> bool:
        t = torch.tensor([1 if flag else 0])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    gw.install_preemption_handler(emergency)
    while step < args.steps:
        if step == args.fail_at and (args.fail_always or not resume) and rank == 0:
            if args.fail == "keyerror":
                config: dict[str, float] = {"lr": 0.05}
                print(config["warmup_steps"])  # the script's own bug: a KeyError
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        if step == args.hang_at and not resume and rank == 0:
            time.sleep(3600)  # hung: alive, no step, idle (the other rank waits in its all-reduce)
        with gw.step(samples=16, n=step):  # numbered like the checkpoints, across restarts
            x, y = batch(step, rank)
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad.div_(world)
            opt.step()
            time.sleep(args.step_s)
        step += 1
        (args.out / f"rank{rank}.progress").write_text(str(step))
        if rank == 0 and step % args.every == 0:
            path = save(args.ckpt_dir / f"step_{step:06d}.pt", step, model, opt)
            if step in args.bad_checkpoint_at and not resume:
                renamed = {f"renamed.{k}": v for k, v in model.state_dict().items()}
                torch.save({"step": step, "model": renamed, "opt": opt.state_dict()}, path)
            gw.checkpoint_saved(path, step)
        if rank == 0:
            with open(args.out / "steps.log", "a") as f:
                f.write(f"{step}\n")
        gw.preemption_point(agree)
    dist.barrier()
    if rank == 0:
        torch.save({"step": step, "model": model.state_dict()}, args.out / "final.pt")
        print(f"training done at step {step}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
