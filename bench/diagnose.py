"""Rules-engine throughput on a 1,000,000-line training log with one error near the end.

Three ways over the same lines, in the same run: gpuwatch's engine (prefilter, then rules on the few
lines that pass), a naive loop that normalises every line and tries every rule's patterns, and
drain3 template mining (what the LLM excerpt uses), which touches every line by design.

    .venv/bin/python bench/diagnose.py [--lines 1000000] [--repeats 3]

`--big` (issue 25): `gpuwatch diagnose --format json FILE` on big synthetic logs written to /tmp
(bench/big_log.py), against `grep -E -i -c` with the rules' keywords on the same file in the same run
(its output to a file), each a subprocess whose wall time and peak RSS are measured (its own rusage,
from wait4); rounds interleaved, medians. The answer is checked against the engine's in-memory path
(what `gpuwatch diagnose` did before it streamed; `--before-rev` runs that of another revision, say the
commit before this change), run once per file, measured the same way.

    .venv/bin/python bench/diagnose.py --big [--sizes 300,1000] [--repeats 3] [--dir /tmp] [--keep]
                                       [--no-before | --before-rev REV]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpuwatch.diagnosis.diagnose import read_sources
from gpuwatch.diagnosis.engine import diagnose_rules
from gpuwatch.diagnosis.model import LogSource
from gpuwatch.diagnosis.normalize import normalize
from gpuwatch.diagnosis.rules import load_rules


def training_log(n: int, seed: int = 7) -> list[str]:
    """Lines shaped like a Megatron/DeepSpeed run: iteration lines, throughput, warnings; the failure
    (a CUDA OOM traceback) 50 lines from the end."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        r = rng.random()
        if r < 0.7:
            lines.append(
                f"[rank{i % 8}]: iteration {i:>8}/ 500000 | consumed samples: {i * 256:>12} | elapsed time "
                f"per iteration (ms): {rng.uniform(900, 1100):.1f} | learning rate: 3.000E-04 | lm loss: "
                f"{rng.uniform(1.8, 2.4):.6E} | loss scale: 1.0 | grad norm: {rng.uniform(0.2, 1.5):.3f} |"
            )
        elif r < 0.95:
            lines.append(f"{i:>7}it [{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}, {rng.uniform(1, 3):.2f}it/s]")
        else:
            lines.append(
                f"[2024-06-01 10:{i // 60 % 60:02d}:{i % 60:02d},123] [INFO] [logging.py:96:log_dist] "
                f"[Rank 0] step={i}, skipped=0, lr=[0.0003], mom=[(0.9, 0.95)]"
            )
    tail = [
        "[rank3]: Traceback (most recent call last):",
        '[rank3]:   File "/work/pretrain_gpt.py", line 233, in <module>',
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB (GPU 3; 79.11 GiB total)",
    ]
    lines[n - 50 : n - 50 + len(tail)] = tail
    return lines


def naive(lines: list[str]) -> int:
    rules = load_rules()
    hits = 0
    for raw in lines:
        text, _ = normalize(raw)
        for rule in rules:
            if any(p.search(text) for p in rule.patterns):
                hits += 1
    return hits


def drain(lines: list[str]) -> int:
    from drain3 import TemplateMiner
    from drain3.template_miner_config import TemplateMinerConfig

    config = TemplateMinerConfig()
    config.profiling_enabled = False
    miner = TemplateMiner(config=config)
    for raw in lines:
        miner.add_log_message(raw)
    return len(miner.drain.clusters)


def timed(fn, lines: list[str], repeats: int) -> float:  # type: ignore[no-untyped-def]
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(lines)
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--big", action="store_true", help="big log files: the CLI against grep (issue 25)")
    ap.add_argument("--sizes", default="300,1000", help="with --big: file sizes in MB, comma-separated")
    ap.add_argument("--dir", default="/tmp", help="with --big: where the files are written")
    ap.add_argument("--keep", action="store_true", help="with --big: keep the files (and reuse them)")
    ap.add_argument("--no-before", action="store_true", help="with --big: skip the in-memory path's run")
    ap.add_argument("--before-rev", help="with --big: run the in-memory path of this git revision (say main)")
    args = ap.parse_args()
    if args.big:
        from big_log import run_big

        sizes = [int(s) for s in args.sizes.split(",")]
        run_big(sizes, args.repeats, Path(args.dir), args.keep, not args.no_before, args.before_rev)
        return
    lines = training_log(args.lines)
    source = [LogSource("train.log", lines)]
    result = diagnose_rules(source)
    assert result.reason == "gpu_oom" and result.evidence[0].line == args.lines - 50 + 3, result
    engine_s = timed(lambda ls: diagnose_rules([LogSource("train.log", ls)]), lines, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:  # the same lines as a file, streamed (gpuwatch diagnose)
        path = Path(tmp) / "train.log"
        path.write_text("".join(line + "\n" for line in lines))
        streamed = diagnose_rules(read_sources([path]))
        assert streamed.evidence[0].line == result.evidence[0].line and streamed.reason == result.reason, streamed
        stream_s = timed(lambda _: diagnose_rules(read_sources([path])), lines, args.repeats)
    sample = lines[: max(1, args.lines // 50)]  # the slow baselines run on a fiftieth, scaled per line
    naive_s = timed(naive, sample, 1) * len(lines) / len(sample)
    rows = [
        ("gpuwatch rules engine (prefilter), lines in memory", engine_s),
        ("gpuwatch rules engine, the file streamed as bytes", stream_s),
        ("naive: normalise + every rule on every line", naive_s),
    ]
    try:
        rows.append(("drain3 template mining", timed(drain, sample, 1) * len(lines) / len(sample)))
    except ImportError:
        print("drain3 not installed: skipped", file=sys.stderr)
    print(
        f"{args.lines:,} lines, one CUDA OOM traceback 50 lines from the end; median of {args.repeats} "
        "(baselines timed on a fiftieth of the lines and scaled)"
    )
    print("| method | seconds | lines/s | vs engine |")
    print("|---|---|---|---|")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.2f} | {args.lines / seconds:,.0f} | {seconds / engine_s:.2f}x |")


if __name__ == "__main__":
    main()
