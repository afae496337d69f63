"""A stand-in training job for the demo and the report tests: it steps, checkpoints, fails once, and
resumes — through the same client API a real job uses, with no torch and no GPU.

    python -m simulate.demo_job --steps 20 --every 5 --fail-at 12 --ckpt-dir DIR

Each step takes `--step-s` seconds of CPU work (so a simulated GPU bound to this process looks busy).
A checkpoint is a small file `step_NNNNNN.ckpt` written atomically every `--every` steps and reported
with `checkpoint_saved`. The first attempt (no GPUWATCH_RESUME_FROM) prints a CUDA error at step
`--fail-at` and exits 1, as a real job does when its GPU fails under it; a restarted attempt resumes
from the checkpoint it is given and finishes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import gpuwatch.client as gw


def _work(seconds: float) -> None:
    end = time.perf_counter() + seconds
    x = 1.0
    while time.perf_counter() < end:
        x = (x * 1.000001) % 7.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--fail-at", type=int, default=12)
    ap.add_argument("--step-s", type=float, default=0.2)
    ap.add_argument("--ckpt-dir", type=Path, required=True)
    args = ap.parse_args(argv)
    args.ckpt_dir.mkdir(parents=True, exist_ok=True)
    resume = gw.resume_path()
    step = json.loads(Path(resume).read_text())["step"] if resume else 0
    print(f"demo job: {'resuming at step ' + str(step) if resume else 'starting'}", flush=True)
    while step < args.steps:
        if step == args.fail_at and not resume:
            print("RuntimeError: CUDA error: an illegal memory access was encountered", file=sys.stderr, flush=True)
            return 1
        with gw.step(samples=32, n=step):
            _work(args.step_s)
        step += 1
        print(f"step {step}/{args.steps}", flush=True)
        if step % args.every == 0:
            path = args.ckpt_dir / f"step_{step:06d}.ckpt"
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"step": step}))
            os.replace(tmp, path)
            gw.checkpoint_saved(path, step)
    print("demo job: done", flush=True)
    gw.stats()  # (the client ships its last steps in the background)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
