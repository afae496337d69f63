"""What the NVML collector costs per GPU: one full collection pass, and each NVML call in it.

Runs the agent's own ``NvmlCollector`` on this machine's GPUs (needs an NVIDIA driver):

- ``--passes`` full ``collect()`` passes, each timed in wall-clock and in this thread's CPU time
  (an NVML call may wait on the driver without using the CPU; the agent's CPU share is the latter);
- the same passes through a proxy of ``pynvml`` that times every call the collector makes, keyed by
  function and arguments, so the pass splits into NVML calls and the collector's own Python (building
  and validating the ``GpuSample``). The proxy's own overhead is measured and subtracted.

Figures are per GPU (a pass over N GPUs divided by N): median, p99 and mean. The collector reads PCIe
throughput (20 ms a call) only every 10 s for one GPU at a time; the passes are told they are 1 s apart,
so the mean is the cost per second at 1 Hz. ``--load`` keeps the GPUs busy with bf16 matmuls in a child
process meanwhile (NVML answers from a busy GPU can be slower).

    python3 bench/nvml_cost.py [--passes 1000] [--load] [--json PATH]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pynvml  # noqa: E402

from agent.collectors.nvml import NvmlCollector  # noqa: E402

# The argument constants the collector passes, per function and position, to name them in the table.
_ARG_NAMES = {
    "nvmlDeviceGetTemperature": (("NVML_TEMPERATURE_GPU",),),
    "nvmlDeviceGetClockInfo": (("NVML_CLOCK_SM", "NVML_CLOCK_MEM"),),
    "nvmlDeviceGetTotalEccErrors": (
        ("NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"),
        ("NVML_VOLATILE_ECC", "NVML_AGGREGATE_ECC"),
    ),
    "nvmlDeviceGetRetiredPages": (
        (
            "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS",
            "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR",
        ),
    ),
    "nvmlDeviceGetPcieThroughput": (("NVML_PCIE_UTIL_TX_BYTES", "NVML_PCIE_UTIL_RX_BYTES"),),
}

_LOAD = """
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn_like(a)
print("busy", flush=True)
while True:
    a @ b
    torch.cuda.synchronize()
"""


def _arg_name(fn: str, position: int, value: Any) -> str:
    names = _ARG_NAMES.get(fn, ())
    if position < len(names):
        for name in names[position]:
            if getattr(pynvml, name, None) == value:
                return name.removeprefix("NVML_")
    if isinstance(value, list):
        return f"[{len(value)} ids]"
    return repr(value)


class TimedNvml:
    """``pynvml`` with every ``nvml*`` function timed; constants, errors and structs pass through."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = defaultdict(list)
        self.recording = False
        self._wrapped: dict[str, Callable[..., Any]] = {}

    def __getattr__(self, name: str) -> Any:
        wrapped = self._wrapped.get(name)
        if wrapped is not None:
            return wrapped
        value = getattr(pynvml, name)
        if not (name.startswith("nvml") and callable(value)) or isinstance(value, type):
            return value
        wrapped = self._wrapped[name] = self._timed(name, value)
        return wrapped

    def _timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        times = self.times
        clock = time.perf_counter_ns

        def call(*args: Any, **kwargs: Any) -> Any:
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                dt = clock() - t0
                if self.recording:
                    extra = [_arg_name(name, i, a) for i, a in enumerate(args[1:])]
                    extra += [f"{k}={v}" for k, v in kwargs.items() if k != "version"]
                    times[f"{name}({', '.join(extra)})" if extra else name].append(dt / 1e9)

        return call


def _proxy_overhead() -> float:
    """Seconds the proxy adds per call: a timed no-op against a plain one."""
    proxy = TimedNvml()
    proxy._wrapped["nvmlNoop"] = proxy._timed("nvmlNoop", lambda h: None)
    proxy.recording = True
    noop, n = proxy.nvmlNoop, 100_000
    t0 = time.perf_counter()
    for _ in range(n):
        noop(None)
    timed = time.perf_counter() - t0

    def plain(h: Any) -> None:
        return None

    t0 = time.perf_counter()
    for _ in range(n):
        plain(None)
    return max(0.0, (timed - (time.perf_counter() - t0)) / n)


def _quantiles(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {
        "median": statistics.median(xs),
        "p99": xs[min(len(xs) - 1, round(0.99 * (len(xs) - 1)))],
        "mean": statistics.fmean(xs),
        "max": xs[-1],
    }


def _passes(collector: NvmlCollector, n: int, clock: Iterator[int]) -> tuple[list[float], list[float], int]:
    """(wall seconds, thread CPU seconds) of ``n`` collect() passes, and the samples per pass.

    The passes run back to back, but each is told it is 1 s after the last (``clock``), so the
    collector paces its slow PCIe reads as it would at 1 Hz: the mean is the cost per second."""
    wall, cpu, samples = [], [], 0
    for _ in range(n):
        now = next(clock)
        c0, t0 = time.thread_time(), time.perf_counter()
        reading = collector.collect(now=now)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
        samples = len(reading.samples)
    return wall, cpu, samples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passes", type=int, default=1000)
    ap.add_argument("--load", action="store_true", help="bf16 matmuls on GPU 0 meanwhile (needs torch)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()

    load = None
    if args.load:
        load = subprocess.Popen([sys.executable, "-c", _LOAD], stdout=subprocess.PIPE, text=True)
        assert load.stdout is not None and load.stdout.readline().strip() == "busy", "load did not start"
        time.sleep(2)  # clocks and power settle
    try:
        plain = NvmlCollector()
        proxy = TimedNvml()
        timed = NvmlCollector(nvml=proxy)
        try:
            inventory = plain.inventory()
            gpus = len(inventory)
            if not gpus:
                sys.exit("NVML sees no GPU")
            driver = plain.driver_version()
            plain_clock, timed_clock = itertools.count(int(time.time())), itertools.count(int(time.time()))
            _passes(plain, 20, plain_clock)  # warm-up, and the first reading of every GPU's PCIe throughput
            _passes(timed, 20, timed_clock)
            wall, cpu, samples = _passes(plain, args.passes, plain_clock)
            proxy.recording = True
            timed_wall, _, _ = _passes(timed, args.passes, timed_clock)
            proxy.recording = False
        finally:
            plain.close()
            timed.close()
    finally:
        if load is not None:
            load.kill()
            load.wait()
    overhead = _proxy_overhead()

    per_gpu = [w / gpus for w in wall]
    cpu_per_gpu = [c / gpus for c in cpu]
    calls = {
        key: _quantiles([max(0.0, t - overhead) for t in ts])
        for key, ts in sorted(proxy.times.items(), key=lambda kv: -statistics.median(kv[1]))
    }
    calls_per_pass = sum(len(ts) for ts in proxy.times.values()) / args.passes / gpus
    # Per pass and GPU: all the time spent in NVML calls, over the passes.
    nvml_per_gpu = sum(sum(ts) - overhead * len(ts) for ts in proxy.times.values()) / args.passes / gpus
    pass_q, cpu_q = _quantiles(per_gpu), _quantiles(cpu_per_gpu)
    result = {
        "host": platform.node(),
        "gpu": inventory[0].name,
        "gpus": gpus,
        "driver": driver,
        "pynvml": getattr(pynvml, "__version__", None) or _dist_version("nvidia-ml-py"),
        "python": platform.python_version(),
        "load": bool(args.load),
        "passes": args.passes,
        "samples_per_pass": samples,
        "pass_per_gpu_s": pass_q,
        "pass_cpu_per_gpu_s": cpu_q,
        "nvml_calls_per_gpu_s": nvml_per_gpu,
        "calls_per_pass_per_gpu": calls_per_pass,
        "proxy_overhead_s": overhead,
        "timed_pass_per_gpu_median_s": statistics.median(timed_wall) / gpus,
        "calls": calls,
    }

    when = time.strftime("%Y-%m-%d")
    print(f"# {when} {platform.node()} ({os.cpu_count()} CPUs), Python {platform.python_version()}")
    print(f"# {gpus} x {inventory[0].name}, driver {driver}, nvidia-ml-py {result['pynvml']}")
    print(f"# {args.passes} passes{' under a bf16 matmul load' if args.load else ' (GPU idle)'}; per GPU")
    print()
    print("| per GPU | median | p99 | mean | max |")
    print("|---|---|---|---|---|")
    for label, q in (("collect() pass, wall", pass_q), ("collect() pass, CPU time", cpu_q)):
        print(f"| {label} | {_us(q['median'])} | {_us(q['p99'])} | {_us(q['mean'])} | {_us(q['max'])} |")
    print()
    print(
        f"NVML calls: {calls_per_pass:.1f} per GPU per pass, {_us(nvml_per_gpu)} of the mean pass; the rest "
        f"({_us(pass_q['mean'] - nvml_per_gpu)}) is the collector's Python (GpuSample etc.). "
        f"Proxy overhead {overhead * 1e9:.0f} ns per call, subtracted."
    )
    print(
        f"At 1 Hz (mean pass, so the paced PCIe reads are in it): {100 * cpu_q['mean']:.3f} % of one core per GPU "
        f"(CPU time), {800 * cpu_q['mean']:.3f} % for 8 GPUs; in wall time {100 * pass_q['mean']:.3f} % / "
        f"{800 * pass_q['mean']:.3f} % of each second."
    )
    print()
    print("| NVML call | calls/pass/GPU | median | p99 | max | per pass (mean) |")
    print("|---|---|---|---|---|---|")
    for key, q in calls.items():
        n = len(proxy.times[key]) / args.passes / gpus
        row = f"| `{key}` | {n:g} | {_us(q['median'])} | {_us(q['p99'])} | {_us(q['max'])} | {_us(q['mean'] * n)} |"
        print(row)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs"


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    main()
