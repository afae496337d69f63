"""Hot-path cost of `gpuwatch.client`: what one `with step():` adds to a training loop.

With no agent listening (the worst case for the client: every post fails, the buffer overflows and
the background thread keeps backing off), it times loops of ``with step(): pass`` and of a step with
one ``record_collective`` inside against a ``contextlib.nullcontext()`` loop in the same process.
Each loop is timed in blocks of ``--block`` iterations; the figure is the median block's time per
iteration (robust to the background thread taking the GIL now and then), over ``--repeats`` runs.

    .venv/bin/python bench/client_overhead.py [--iterations 200000] [--repeats 7] [--block 1000]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--block", type=int, default=1_000)
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


if __name__ == "__main__":
    main()
