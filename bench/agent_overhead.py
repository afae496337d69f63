"""What the node agent costs its node: CPU share of one core and memory, over a long run.

Starts a real `gpuwatch server` (SQLite) and a real `gpuwatch agent` process with the simulated
collector: ``--gpus`` GPUs sampled every ``--interval`` s, tailing one job log that a writer thread
here appends ``--log-rate`` lines/s to, shipping with the default flush period. Every ``--every`` s,
for ``--duration`` s, it reads from /proc the agent's CPU time (utime + stime, its reaped children's,
and any live descendants') and memory (VmRSS; PSS and USS from smaps_rollup), and the same for
two idle baselines sampled the same way in the same run: a bare ``python -c 'sleep'`` and a python
that has imported what the agent imports. At the end the server's ingest counters say whether the
agent really shipped every sample and line.

The simulated collector costs no NVML calls; where ``bench/results/nvml-cost-*.json`` holds a
measured NVML pass (bench/nvml_cost.py on a real GPU), the projected NVML cost at the same rate is
printed as its own line.

    .venv/bin/python bench/agent_overhead.py [--duration 600] [--gpus 8] [--interval 1] [--log-rate 10]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from server.store.migrate import upgrade  # noqa: E402
from tests.helpers import Proc, free_port, metric_values, new_token, wait_until  # noqa: E402

KINDS = ("sample", "log", "event")

CLK_TCK = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024
#: Targets of issue 8, for the verdict line.
TARGET_CPU_PERCENT = 0.5
TARGET_RSS_MIB = 60.0
#: Samples before this many seconds are start-up (imports, registration), not "RSS at start".
SETTLED_S = 10.0
_AGENT_IMPORTS = "import gpuwatch.cli, agent.cli, agent.main, agent.agent, agent.collectors.simulated"


@dataclass(frozen=True, slots=True)
class Usage:
    """One reading of a process (and its live descendants) from /proc."""

    t: float  # seconds since the process was started
    cpu_s: float  # utime + stime + cutime + cstime, plus live descendants' utime + stime
    rss: int  # bytes
    pss: int | None
    uss: int | None
    threads: int


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = Path(f"/proc/{p}/task/{task}/children").read_text().split()
            except OSError:
                continue
            found += map(int, children)
            todo += map(int, children)
    return found


def _stat(pid: int, own: bool) -> tuple[int, int]:
    """(CPU ticks, threads) of ``pid``: with its reaped children's ticks when ``own``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    if own:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks, int(fields[17])


def _kib(text: str, key: str) -> int | None:
    m = re.search(rf"^{key}:\s+(\d+) kB", text, re.MULTILINE)
    return int(m.group(1)) * 1024 if m else None


def usage(pid: int, started: float) -> Usage:
    t = time.monotonic() - started
    ticks, threads = _stat(pid, own=True)
    rss = _kib(Path(f"/proc/{pid}/status").read_text(), "VmRSS") or 0
    pss = uss = None
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        pss = _kib(rollup, "Pss")
        clean, dirty = _kib(rollup, "Private_Clean"), _kib(rollup, "Private_Dirty")
        uss = None if clean is None or dirty is None else clean + dirty
    except OSError:
        pass
    for child in _descendants(pid):
        try:
            child_ticks, child_threads = _stat(child, own=False)
            child_rss = _kib(Path(f"/proc/{child}/status").read_text(), "VmRSS") or 0
        except OSError:
            continue  # exited between the listing and the read: its time is in cutime once reaped
        ticks, threads, rss = ticks + child_ticks, threads + child_threads, rss + child_rss
    return Usage(t, ticks / CLK_TCK, rss, pss, uss, threads)


class Watched:
    """A process sampled every few seconds; ``started`` is when it was spawned."""

    def __init__(self, name: str, popen: subprocess.Popen[bytes], started: float) -> None:
        self.name, self.popen, self.started = name, popen, started
        self.readings: list[Usage] = []

    def sample(self) -> None:
        if self.popen.poll() is None:
            self.readings.append(usage(self.popen.pid, self.started))

    def report(self, duration: float) -> dict[str, float]:
        """CPU share (whole life and the last 80 %), RSS start/median/max, RSS slope over the last 80 %."""
        rs = self.readings
        if len(rs) < 3:
            raise RuntimeError(f"{self.name}: too few readings ({len(rs)}); did it exit?\n")
        last = rs[-1]
        tail = [r for r in rs if r.t >= last.t - 0.8 * duration] or rs
        settled = [r for r in rs if r.t >= SETTLED_S] or rs
        slope = _slope([r.t for r in tail], [r.rss / MIB for r in tail]) * 3600  # MiB per hour
        return {
            "cpu_s": last.cpu_s,
            "elapsed_s": last.t,
            "cpu_percent": 100 * last.cpu_s / last.t,
            "cpu_percent_last80": 100 * (last.cpu_s - tail[0].cpu_s) / max(1e-9, last.t - tail[0].t),
            "cpu_percent_max_minute": 100 * _max_window(rs, 60.0),
            "rss_start_mib": settled[0].rss / MIB,
            "rss_median_mib": statistics.median(r.rss for r in settled) / MIB,
            "rss_max_mib": max(r.rss for r in rs) / MIB,
            "rss_end_mib": last.rss / MIB,
            "rss_slope_mib_per_h": slope,
            "pss_median_mib": _median_mib([r.pss for r in settled]),
            "uss_median_mib": _median_mib([r.uss for r in settled]),
            "threads": last.threads,
            "readings": len(rs),
        }


def _median_mib(values: list[int | None]) -> float:
    present = [v for v in values if v is not None]
    return statistics.median(present) / MIB if present else float("nan")


def _slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0


def _max_window(rs: list[Usage], window: float) -> float:
    """Highest CPU share (fraction of a core) over any ``window`` seconds between readings, after start-up."""
    best = 0.0
    settled = [r for r in rs if r.t >= SETTLED_S]
    j = 0
    for i, r in enumerate(settled):
        while j < i and r.t - settled[j + 1].t >= window:
            j += 1
        if r.t - settled[j].t >= window:
            best = max(best, (r.cpu_s - settled[j].cpu_s) / (r.t - settled[j].t))
    return best


class LogWriter(threading.Thread):
    """Appends training-log lines to ``path`` at ``rate`` lines/s, each flushed, until stopped."""

    def __init__(self, path: Path, rate: float) -> None:
        super().__init__(name="log-writer", daemon=True)
        self.path, self.rate, self.lines = path, rate, 0
        self.stop = threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        with open(self.path, "a") as f:
            while not self.stop.is_set():
                n = self.lines
                f.write(
                    f"[rank{n % 8}] iteration {n // 8:>7} | consumed samples {n * 512:>10} "
                    f"| lm loss 2.{n % 9973:04d}E+00 | grad norm 0.{n % 997:03d} | tokens/s 41235\n"
                )
                f.flush()
                self.lines += 1
                self.stop.wait(max(0.0, start + self.lines / self.rate - time.monotonic()))


def _spawn(args: list[str]) -> tuple[subprocess.Popen[bytes], float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL), time.monotonic()


def _ingest_counts(base: str) -> dict[str, float]:
    text = httpx.get(f"{base}/metrics", timeout=10).text
    counts = {f"{kind}s": sum(metric_values(text, "gpuwatch_ingest_items_total", kind=kind)) for kind in KINDS}
    counts["batches"] = sum(metric_values(text, "gpuwatch_ingest_batches_total", outcome="stored"))
    return counts


def _nvml_projection(gpus: int, interval: float) -> list[str]:
    """What NVML would cost instead of the simulated collector, from bench/nvml_cost.py's measured
    passes: the mean pass per GPU (the paced PCIe reads included) at this sampling rate."""
    lines = []
    for path in sorted((ROOT / "bench" / "results").glob("nvml-cost-*.json")):
        r = json.loads(path.read_text())
        cpu, wall = r["pass_cpu_per_gpu_s"], r["pass_per_gpu_s"]
        rate = gpus / interval
        lines.append(
            f"projected NVML collector, {gpus} GPUs at {1 / interval:g} Hz, from {path.name} ({r['gpu']}, "
            f"driver {r['driver']}{', under load' if r.get('load') else ', idle'}): "
            f"{100 * cpu['mean'] * rate:.3f} % of one core (mean pass {cpu['mean'] * 1e6:.0f} µs CPU per GPU), "
            f"{100 * wall['mean'] * rate:.3f} % of each second inside collect(); "
            "it stands in for the simulated collector, whose share the agent line includes"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=600.0, help="seconds to measure")
    ap.add_argument("--every", type=float, default=5.0, help="seconds between readings")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--interval", type=float, default=1.0, help="the agent's sampling period")
    ap.add_argument("--log-rate", type=float, default=10.0, help="lines/s appended to the tailed log")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="agent-overhead-") as tmp_name:
        tmp = Path(tmp_name)
        db = f"sqlite:///{tmp / 'server.db'}"
        upgrade(db)
        token = new_token(db, "bench-node")
        port = free_port()
        quiet = {"GPUWATCH_LOG_LEVEL": "WARNING"}
        server = Proc(
            ["server", "--port", str(port), "--data-dir", str(tmp / "server"), "--database-url", db],
            tmp / "server.log",
            quiet,
        )
        base = f"http://127.0.0.1:{port}"
        writer = LogWriter(tmp / "train.log", args.log_rate)
        agent: Proc | None = None
        watched: list[Watched] = []
        try:
            wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200, timeout=30, what="server")
            (tmp / "train.log").touch()
            writer.start()
            agent_args = ["agent", "--server", base, "--token", token, "--node", "bench-node"]
            agent_args += ["--simulate", str(args.gpus), "--interval", str(args.interval)]
            agent_args += ["--log-file", str(tmp / "train.log"), "--data-dir", str(tmp / "agent"), "--client-port", "0"]
            agent = Proc(agent_args, tmp / "agent.log", quiet)
            watched.append(Watched("agent", agent.popen, time.monotonic()))
            watched.append(Watched("idle python", *_spawn([sys.executable, "-c", "import time; time.sleep(1e9)"])))
            watched.append(
                Watched(
                    "idle python + agent imports",
                    *_spawn([sys.executable, "-c", f"{_AGENT_IMPORTS}\nimport time; time.sleep(1e9)"]),
                )
            )
            watched.append(Watched("server (context)", server.popen, time.monotonic()))
            end = time.monotonic() + args.duration
            while True:
                for w in watched:
                    w.sample()
                if agent.popen.poll() is not None:
                    raise RuntimeError(f"the agent exited with {agent.popen.returncode}:\n{agent.output()}")
                left = end - time.monotonic()
                if left <= 0:
                    break
                time.sleep(min(args.every, left))
            writer.stop.set()
            writer.join()
            lines_written = writer.lines
            time.sleep(5)  # the last flush (2 s) and its shipping
            shipped = _ingest_counts(base)
        finally:
            writer.stop.set()
            for w in watched[1:3]:
                w.popen.kill()
                w.popen.wait()
            if agent is not None:
                agent.stop()
            server.stop()
        agent_log = (tmp / "agent.log").read_text(errors="replace")

    reports = {w.name: w.report(args.duration) for w in watched}
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M')} {platform.node()}: {os.cpu_count()} CPUs ({_cpu_model()}), "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )
    print(
        f"# agent: simulated collector, {args.gpus} GPUs every {args.interval:g} s, one log tailed at "
        f"{args.log_rate:g} lines/s, default flush; {args.duration:g} s, read every {args.every:g} s"
    )
    print()
    print(
        "| process | CPU, whole run | CPU, last 80 % | busiest minute | RSS at 10 s | RSS median | RSS max "
        "| RSS slope, last 80 % | PSS median | USS median | threads |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in reports.items():
        print(
            f"| {name} | {r['cpu_percent']:.3f} % | {r['cpu_percent_last80']:.3f} % | "
            f"{r['cpu_percent_max_minute']:.3f} % | {r['rss_start_mib']:.1f} MiB | {r['rss_median_mib']:.1f} MiB | "
            f"{r['rss_max_mib']:.1f} MiB | {r['rss_slope_mib_per_h']:+.2f} MiB/h | {r['pss_median_mib']:.1f} MiB | "
            f"{r['uss_median_mib']:.1f} MiB | {r['threads']} |"
        )
    a, bare = reports["agent"], reports["idle python"]
    print()
    print(
        f"agent CPU over the last 80 %: {a['cpu_percent_last80']:.3f} % of one core "
        f"({a['cpu_percent_last80'] - bare['cpu_percent_last80']:.3f} % above an idle python); "
        f"target < {TARGET_CPU_PERCENT} %: {'met' if a['cpu_percent_last80'] < TARGET_CPU_PERCENT else 'MISSED'}"
    )
    print(
        f"agent RSS max: {a['rss_max_mib']:.1f} MiB ({a['rss_max_mib'] - bare['rss_max_mib']:.1f} MiB above an idle "
        f"python); target < {TARGET_RSS_MIB:g} MB ({TARGET_RSS_MIB * 1e6 / MIB:.1f} MiB): "
        f"{'met' if a['rss_max_mib'] * MIB < TARGET_RSS_MIB * 1e6 else 'MISSED'}"
    )
    want_samples = args.gpus * args.duration / args.interval
    print(
        f"shipped: {shipped['samples']:,.0f} GPU samples (~{want_samples:,.0f} expected), "
        f"{shipped['logs']:,.0f} of {lines_written:,} log lines, {shipped['batches']:,.0f} batches"
    )
    for line in _nvml_projection(args.gpus, args.interval):
        print(line)
    warnings = [line for line in agent_log.splitlines() if " WARNING " in line or " ERROR " in line]
    if warnings:
        print(f"agent log: {len(warnings)} warnings/errors, first: {warnings[0]}")
    if args.json:
        doc = {"args": vars(args) | {"json": str(args.json)}, "reports": reports, "shipped": shipped}
        args.json.write_text(json.dumps(doc, indent=1) + "\n")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


if __name__ == "__main__":
    main()
