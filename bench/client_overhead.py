"""Hot-path cost of `gpuwatch.client`: what one `with step():` adds to a training loop.

With no agent listening (the worst case for the client: every post fails, the buffer overflows and
the background thread keeps backing off), it times loops of ``with step(): pass`` and of a step with
one ``record_collective`` inside against a ``contextlib.nullcontext()`` loop in the same process.
Each loop is timed in blocks of ``--block`` iterations; the figure is the median block's time per
iteration (robust to the background thread taking the GIL now and then), over ``--repeats`` runs.

Then, with torch, the collectives: a 1-rank process group in this process (gloo on CPU tensors, or
``--device cuda``: NCCL on CUDA tensors, timed by CUDA events), the same collectives called through
``gpuwatch.client.torch.instrument()``'s wrappers and through the original functions, interleaved
in the same run: a blocking all_reduce, an async all_reduce and its wait(), and a step of two
blocking and one async all_reduce inside ``with step():`` (against ``nullcontext()``). The step's
added time is compared with a 10 ms step (the acceptance bound: under 1 %).

    .venv/bin/python bench/client_overhead.py [--iterations 200000] [--repeats 7] [--block 1000]
        [--coll-iterations 20000] [--coll-block 200] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import socket
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _unused_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


os.environ["GPUWATCH_AGENT_URL"] = f"http://127.0.0.1:{_unused_port()}"

import gpuwatch.client as gw  # noqa: E402

Loop = Callable[[int], None]


def baseline(n: int) -> None:
    null = contextlib.nullcontext
    for _ in range(n):
        with null():
            pass


def plain_step(n: int) -> None:
    step = gw.step
    for _ in range(n):
        with step():
            pass


def step_with_collective(n: int) -> None:
    step, record = gw.step, gw.record_collective
    for _ in range(n):
        with step():
            record("all_reduce", 1e-3, 4096)


def measure(loop: Loop, iterations: int, block: int) -> list[float]:
    """ns per iteration of each block of ``block`` iterations."""
    out = []
    for _ in range(iterations // block):
        t0 = time.perf_counter_ns()
        loop(block)
        out.append((time.perf_counter_ns() - t0) / block)
    return out


def _table(medians: dict[str, list[float]], unit: str, baselines: dict[str, str]) -> dict[str, float]:
    """Print the rows (median of the repeats' medians); the added time of each row over its baseline."""
    print(f"| loop | median {unit}/iter | min-max of repeat medians | added vs baseline |")
    print("|---|---|---|---|")
    added: dict[str, float] = {}
    for name, values in medians.items():
        med = statistics.median(values)
        base = baselines.get(name)
        if base is not None:
            added[name] = med - statistics.median(medians[base])
        extra = "—" if base is None else f"{added[name]:,.2f} {unit}"
        print(f"| {name} | {med:,.2f} | {min(values):,.2f}-{max(values):,.2f} | {extra} |")
    return added


def collectives(args: argparse.Namespace) -> None:
    """Instrumented vs original torch.distributed collectives, and a step of them, in one process."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print("torch is not installed: no collective figures")
        return
    from gpuwatch.client.torch import instrument

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_unused_port()))
    cuda = args.device == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
    instrument()
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    grad = torch.ones(1024, device=device)
    timed_ar = dist.all_reduce
    plain_ar = timed_ar.__gpuwatch_wrapped__  # the original, as without instrument()
    step, null = gw.step, contextlib.nullcontext

    def blocking(ar: Callable[..., Any]) -> Loop:
        def loop(n: int) -> None:
            for _ in range(n):
                ar(grad)

        return loop

    def async_wait(ar: Callable[..., Any]) -> Loop:
        def loop(n: int) -> None:
            for _ in range(n):
                ar(grad, async_op=True).wait()

        return loop

    def training_step(ar: Callable[..., Any], ctx: Callable[[], Any]) -> Loop:
        def loop(n: int) -> None:
            for _ in range(n):
                with ctx():
                    ar(grad)
                    ar(grad)
                    ar(grad, async_op=True).wait()

        return loop

    loops: dict[str, Loop] = {
        "blocking all_reduce, original": blocking(plain_ar),
        "blocking all_reduce, instrumented": blocking(timed_ar),
        "async all_reduce + wait(), original": async_wait(plain_ar),
        "async all_reduce + wait(), instrumented": async_wait(timed_ar),
        "step of 3 all_reduce, original, `nullcontext()`": training_step(plain_ar, null),
        "step of 3 all_reduce, instrumented, `with step()`": training_step(timed_ar, step),
    }
    names = list(loops)
    baselines = {names[i + 1]: names[i] for i in range(0, len(names), 2)}
    for loop in loops.values():
        loop(args.coll_block * 5)
    if cuda:
        torch.cuda.synchronize()
    medians: dict[str, list[float]] = {name: [] for name in loops}
    for _ in range(args.repeats):
        for name, loop in loops.items():
            values = measure(loop, args.coll_iterations, args.coll_block)
            medians[name].append(statistics.median(values) / 1e3)
            if cuda:
                torch.cuda.synchronize()  # between loops only: the timed loops never synchronize
    print()
    print(f"collectives: {args.device}, backend {dist.get_backend()}, 1 rank, 4 KiB all_reduce; ", end="")
    print(f"{args.repeats} repeats x {args.coll_iterations:,} iterations, blocks of {args.coll_block:,}")
    print()
    added = _table(medians, "µs", baselines)
    per_step = added[names[-1]]
    print()
    print(f"per collective: +{added[names[1]]:.2f} µs blocking, +{added[names[3]]:.2f} µs async + wait; ", end="")
    print(f"per step of 3: +{per_step:.2f} µs = {per_step / 10_000 * 100:.3f} % of a 10 ms step (bound: 1 %)")
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--block", type=int, default=1_000)
    parser.add_argument("--coll-iterations", type=int, default=20_000)
    parser.add_argument("--coll-block", type=int, default=200)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args()

    loops: dict[str, Loop] = {
        "`with nullcontext()` (baseline)": baseline,
        "`with step()`": plain_step,
        "`with step()` + 1 `record_collective`": step_with_collective,
    }
    for loop in loops.values():  # warm up, and start the reporter thread before timing
        loop(args.block * 10)
    medians: dict[str, list[float]] = {name: [] for name in loops}
    for _ in range(args.repeats):
        for name, loop in loops.items():  # interleaved, so drift hits every variant alike
            medians[name].append(statistics.median(measure(loop, args.iterations, args.block)))

    base = statistics.median(next(iter(medians.values())))
    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; ", end="")
    print(f"{args.repeats} repeats x {args.iterations:,} iterations, blocks of {args.block:,}; no agent listening")
    print()
    print("| loop | median ns/iter | min-max of repeat medians | added vs baseline |")
    print("|---|---|---|---|")
    for name, values in medians.items():
        med = statistics.median(values)
        added = "—" if values is next(iter(medians.values())) else f"{med - base:,.0f} ns"
        print(f"| {name} | {med:,.0f} | {min(values):,.0f}-{max(values):,.0f} | {added} |")
    stats = gw.stats()
    print()
    print(f"client stats afterwards: {stats} (every step dropped or still buffered: nothing listens)")
    collectives(args)


if __name__ == "__main__":
    main()
