"""What PyTorch's flight recorder costs a job (docs/jobs.md): the host time of a small all_reduce and the
memory the ring buffer grows to, with the recorder off (TORCH_FR_BUFFER_SIZE=0, the baseline) and on, in
the same run, launches alternated. A 2-rank gloo job on this CPU: the recorder records gloo collectives
too (torch 2.13), with the same entries (and the same Python stack capture per call) as NCCL's.

    .venv/bin/python bench/flight_recorder_cost.py [--calls 3000] [--repeats 3] [--buffer 2000]

Prints, per setting, the median per-call time over all calls of all repeats, and the median growth of
each rank's resident memory from after the warm-up to the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

JOB = r"""
import json, os, sys, time, torch, torch.distributed as dist

def rss_kib():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024

calls, out = int(sys.argv[1]), sys.argv[2]
dist.init_process_group("gloo")
t = torch.ones(1)
for _ in range(200):
    dist.all_reduce(t)
before = rss_kib()
times = []
for _ in range(calls):
    start = time.perf_counter()
    dist.all_reduce(t)
    times.append(time.perf_counter() - start)
after = rss_kib()
with open(f"{out}.{dist.get_rank()}", "w") as f:
    json.dump({"times": times, "rss_growth_kib": after - before}, f)
dist.destroy_process_group()
"""


def run(buffer: int, calls: int, tmp: Path, n: int) -> list[dict]:
    script = tmp / "job.py"
    script.write_text(JOB)
    out = tmp / f"out{n}"
    env = {**os.environ, "TORCH_FR_BUFFER_SIZE": str(buffer), "OMP_NUM_THREADS": "1"}
    env.pop("TORCH_NCCL_TRACE_BUFFER_SIZE", None)
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    subprocess.run([*launcher, str(script), str(calls), str(out)], env=env, check=True, capture_output=True)
    return [json.loads(Path(f"{out}.{r}").read_text()) for r in (0, 1)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--buffer", type=int, default=2000, help="TORCH_FR_BUFFER_SIZE when on")
    args = ap.parse_args()
    results: dict[int, list[dict]] = {0: [], args.buffer: []}
    with tempfile.TemporaryDirectory() as d:
        n = 0
        for _ in range(args.repeats):
            for buffer in results:  # alternated: drift on a shared machine hits both alike
                n += 1
                results[buffer] += run(buffer, args.calls, Path(d), n)
    base = None
    for buffer, ranks in results.items():
        per_call = statistics.median(t for r in ranks for t in r["times"]) * 1e6
        growth = statistics.median(r["rss_growth_kib"] for r in ranks)
        base = per_call if base is None else base
        print(
            f"TORCH_FR_BUFFER_SIZE={buffer:<5} all_reduce median {per_call:7.1f} µs/call "
            f"({per_call - base:+.1f} µs against off)  RSS growth over {args.calls} calls: {growth:,.0f} KiB "
            f"(median of {len(ranks)} rank runs)"
        )


if __name__ == "__main__":
    main()
