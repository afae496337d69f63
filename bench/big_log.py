"""`bench/diagnose.py --big`: big synthetic training logs, `gpuwatch diagnose` on them against grep.

The log is shaped like a long Megatron/DeepSpeed run written to a file: NCCL's start-up lines, iteration
lines on eight ranks, tqdm bars redrawn with "\\r", DeepSpeed's step lines, now and then a Python
warning; early on, rank 2 runs out of memory and goes on (a survived failure: the progress after it
makes it a cascade); near the end rank 2 dies of an illegal memory access, the others time out in NCCL
and torchrun reports the failure. The answer is `cuda_error` on rank 2, with the traceback's line.
"""

from __future__ import annotations

import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXPECTED_REASON = "cuda_error"


def _iteration(rng: random.Random, i: int) -> str:
    return (
        f"[rank{i % 8}]: iteration {i:>8}/ 5000000 | consumed samples: {i * 256:>12} | elapsed time per "
        f"iteration (ms): {rng.uniform(900, 1100):.1f} | learning rate: 3.000E-04 | lm loss: "
        f"{rng.uniform(1.8, 2.4):.6E} | loss scale: 1.0 | grad norm: {rng.uniform(0.2, 1.5):.3f} |\n"
    )


def _tqdm(rng: random.Random, i: int) -> str:
    """A tqdm bar redrawn a few times on one terminal line ("\\r" between), then a newline."""
    total, out = 4900, []
    done = i % total
    for k in range(4):
        n = min(total, done + k)
        filled = n * 10 // total
        out.append(
            f"\rEpoch {i // total}: {n * 100 // total:3d}%|{'█' * filled}{' ' * (10 - filled)}| {n}/{total} "
            f"[{n // 60:02d}:{n % 60:02d}<{(total - n) // 60:02d}:{(total - n) % 60:02d}, "
            f"{rng.uniform(1, 3):.2f}it/s, loss={rng.uniform(0.5, 0.7):.3f}]"
        )
    return "".join(out) + "\n"


def _deepspeed(i: int) -> str:
    return (
        f"[2024-06-01 10:{i // 60 % 60:02d}:{i % 60:02d},123] [INFO] [logging.py:96:log_dist] [Rank 0] "
        f"step={i}, skipped=0, lr=[0.0003], mom=[(0.9, 0.95)]\n"
    )


_WARNING = (
    "/usr/lib/python3/dist-packages/torch/utils/checkpoint.py:61: UserWarning: None of the inputs have "
    "requires_grad=True. Gradients will be None\n"
)
_SURVIVED = [
    "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB (GPU 2; 79.11 GiB total "
    "capacity; 61.20 GiB already allocated)\n",
    "[rank2]: [trainer] skipping the batch after the allocation failure; continuing\n",
]
_FAILURE = [
    "[rank2]: Traceback (most recent call last):\n",
    '[rank2]:   File "/work/pretrain_gpt.py", line 233, in <module>\n',
    "[rank2]:     pretrain(train_valid_test_datasets_provider, model_provider, forward_step)\n",
    '[rank2]:   File "/usr/lib/python3/dist-packages/torch/autograd/__init__.py", line 251, in backward\n',
    "[rank2]:     Variable._execution_engine.run_backward(\n",
    "[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered\n",
    "[rank2]: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
    "below might be incorrect.\n",
    "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=912345, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600041 "
    "milliseconds before timing out.\n",
    "[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=912345, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600043 "
    "milliseconds before timing out.\n",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n",
    "============================================================\n",
    "pretrain_gpt.py FAILED\n",
    "------------------------------------------------------------\n",
    "Root Cause (first observed failure):\n",
    "[0]:\n",
    "  time      : 2024-06-03_04:11:52\n",
    "  host      : gpu-a07\n",
    "  rank      : 2 (local_rank: 2)\n",
    "  exitcode  : 1 (pid: 41233)\n",
    "============================================================\n",
]


def write_log(path: Path, size_mb: int, seed: int = 25) -> int:
    """Write a log of about ``size_mb`` MiB; return the 1-based line (as `str.splitlines` counts, each
    "\\r" too) of the final exception, the evidence the answer must cite."""
    rng = random.Random(seed)
    target = size_mb << 20
    written, lines, i = 0, 0, 0
    survived_at = target // 30
    with open(path, "w", encoding="utf-8", newline="") as f:
        block = [
            f"gpu-a07:41233:41233 [{r}] NCCL INFO Channel {c:02d}/32 : 0 1 2 3 4 5 6 7\n"
            for r in range(8)
            for c in range(32)
        ]
        while True:
            for _ in range(20_000):
                r = rng.random()
                if r < 0.7:
                    block.append(_iteration(rng, i))
                elif r < 0.95:
                    block.append(_tqdm(rng, i))
                elif r < 0.99995:
                    block.append(_deepspeed(i))
                else:
                    block.append(_WARNING)
                i += 1
            if survived_at is not None and written >= survived_at:
                block += _SURVIVED
                survived_at = None
            text = "".join(block)
            f.write(text)
            written += len(text.encode())
            lines += len(text.splitlines())
            block = []
            if written >= target - (1 << 20):
                break
        tail = [_iteration(rng, i + k) for k in range(2000)]
        failure_line = lines + len("".join(tail).splitlines()) + 6
        f.write("".join(tail + _FAILURE + [_iteration(rng, i + 2000 + k) for k in range(40)]))
    return failure_line


def _measure(cmd: list[str], out: Path, env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MB) and CPU seconds (user + system) of one command, its stdout to ``out``.

    GNU time runs it and reads its rusage: a child forked from this Python process would report this
    process's RSS as its own peak (Linux keeps the larger of the old and the new image's at exec)."""
    usage = out.with_suffix(".usage")
    with open(out, "wb") as sink:
        proc = subprocess.run(["/usr/bin/time", "-f", "%e %M %U %S", "-o", str(usage), *cmd], stdout=sink, env=env)
    if proc.returncode not in (0, 1):  # grep -c exits 1 when nothing matches
        raise RuntimeError(f"{cmd[0]} exited {proc.returncode}")
    wall, rss_kb, user, system = (float(x) for x in usage.read_text().split()[-4:])
    return wall, rss_kb / 1024, user + system


def grep_pattern() -> str:
    """The rules' keywords (the prefilter's) as one extended regular expression."""
    sys.path.insert(0, str(ROOT))
    from gpuwatch.diagnosis.engine import _ruleset

    return "|".join(re.sub(r"([][().*+?{}|^$\\])", r"\\\1", k) for k in _ruleset(None).keywords)


_BEFORE = """
import json, sys
from gpuwatch.diagnosis.engine import diagnose_rules
from gpuwatch.diagnosis.model import LogSource
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    lines = f.read().splitlines()
print(json.dumps(diagnose_rules([LogSource(file=sys.argv[1], lines=lines)]).to_json()))
"""


def _answer(path: Path) -> dict:
    d = json.loads(path.read_text())
    return {k: d[k] for k in ("reason", "node", "rank", "evidence", "rule")}


def _checkout(rev: str, into: Path) -> dict[str, str]:
    """The environment that imports revision ``rev``'s gpuwatch (extracted into ``into``)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "gpuwatch"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return {**os.environ, "PYTHONPATH": str(into)}


def run_big(sizes: list[int], repeats: int, where: Path, keep: bool, before: bool, before_rev: str | None) -> None:
    pattern = grep_pattern()
    gpuwatch = str(Path(sys.executable).with_name("gpuwatch"))
    rows = []
    with tempfile.TemporaryDirectory(dir=where) as scratch:
        out = Path(scratch)
        env = _checkout(before_rev, out) if before and before_rev else None
        for size in sizes:
            log = where / f"gpuwatch-bench-{size}mb.log"
            t0 = time.perf_counter()
            if not (keep and log.exists()):
                log.with_suffix(".line").write_text(str(write_log(log, size)))
            failure_line = int(log.with_suffix(".line").read_text())
            print(f"{log}: {log.stat().st_size / 1e6:,.0f} MB, written in {time.perf_counter() - t0:.0f} s", flush=True)
            grep_cmd = ["grep", "-E", "-i", "-c", "-e", pattern, str(log)]
            ours_cmd = [gpuwatch, "diagnose", "--format", "json", str(log)]
            before_s = before_mb = None
            if before:
                before_s, before_mb, _ = _measure([sys.executable, "-c", _BEFORE, str(log)], out / "before.json", env)
            grep_runs, ours_runs = [], []
            for _ in range(repeats):  # interleaved, so both meet the same machine
                grep_runs.append(_measure(grep_cmd, out / "grep.txt"))
                ours_runs.append(_measure(ours_cmd, out / "ours.json"))
            answer = _answer(out / "ours.json")
            assert answer["reason"] == EXPECTED_REASON and answer["rank"] == 2, answer
            assert answer["evidence"][0]["line"] == failure_line, (answer["evidence"][0], failure_line)
            if before:
                assert answer == _answer(out / "before.json"), (answer, _answer(out / "before.json"))
            g_s, g_mb, g_cpu = (statistics.median(x) for x in zip(*grep_runs, strict=True))
            o_s, o_mb, o_cpu = (statistics.median(x) for x in zip(*ours_runs, strict=True))
            ratio = statistics.median(o[0] / g[0] for o, g in zip(ours_runs, grep_runs, strict=True))
            rows.append((log.stat().st_size, g_s, g_mb, g_cpu, o_s, o_mb, o_cpu, ratio, before_s, before_mb))
            print(f"  grep {grep_runs}\n  gpuwatch {ours_runs}\n  before {before_s} s {before_mb} MB", flush=True)
            if not keep:
                log.unlink()
    where_ = f"{answer['evidence'][0]['file']}:{answer['evidence'][0]['line']}"
    same = ", the same as before" if before else ""
    print(f"\nmedians of {repeats}, interleaved; the answer: {answer['reason']}, rank {answer['rank']}, {where_}{same}")
    print(
        "| log | grep -E -i -c: wall / CPU / peak RSS | gpuwatch diagnose: wall / CPU / peak RSS "
        "| wall ratio (median of rounds) | before, in memory: wall / peak RSS |"
    )
    print("|---|---|---|---|---|")
    for nbytes, g_s, g_mb, g_cpu, o_s, o_mb, o_cpu, ratio, b_s, b_mb in rows:
        prior = f"{b_s:.2f} s / {b_mb:,.0f} MB" if b_s is not None else "-"
        print(
            f"| {nbytes / 1e6:,.0f} MB | {g_s:.2f} s / {g_cpu:.2f} s / {g_mb:.0f} MB "
            f"| {o_s:.2f} s / {o_cpu:.2f} s / {o_mb:.0f} MB | {ratio:.2f} | {prior} |"
        )
