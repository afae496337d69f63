"""How long a checkpoint stops the training loop: synchronous torch.save vs gpuwatch's AsyncCheckpointer.

A model state of ``--gib`` GiB (float32 tensors of 256 MiB, on the GPU with ``--cuda``) is saved
``--saves`` times each way into a temporary directory on ``--dir``'s file system:

- sync: ``torch.save`` into an open file, flush and fsync (what a crash-safe synchronous save costs);
- async: ``AsyncCheckpointer.save`` (copy into reused host buffers), then, while the background thread
  writes (torch.save, fsync, manifest), a loop of small matmul "training steps" that timestamps each
  step: how many ran during the write and the longest gap between two of them, against the same loop
  with nothing in the background;
- validate: how long ``gpuwatch.recovery.checkpoints.validate`` takes on the synchronous file and on
  the AsyncCheckpointer's directory (median of 20), and on a file of ``--members`` small tensors (the
  content checks read one local header per zip member, so their cost grows with the tensor count, not
  the bytes).

    .venv/bin/python bench/checkpoint.py [--gib 1] [--saves 5] [--dir /tmp] [--cuda]
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GPUWATCH_AGENT_URL", "http://127.0.0.1:9")  # no agent: reports are dropped

import torch  # noqa: E402

from gpuwatch.client import AsyncCheckpointer  # noqa: E402
from gpuwatch.recovery.checkpoints import Checkpoint, validate  # noqa: E402

TENSOR_ELEMS = 64 * 1024 * 1024  # 256 MiB of float32


def make_state(gib: float, device: str) -> dict[str, object]:
    n = max(1, round(gib * 4))
    model = {f"layer{i}.weight": torch.randn(TENSOR_ELEMS, device=device) for i in range(n)}
    return {"model": model, "step": 0, "rng": torch.get_rng_state()}


def sync_save(state: dict[str, object], path: Path) -> float:
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    return time.perf_counter() - t0


def steps_while(busy: object, a: torch.Tensor, b: torch.Tensor, min_steps: int = 0) -> list[float]:
    """Run matmul steps while ``busy()`` is true (and at least ``min_steps``); each step's end time."""
    stamps = [time.perf_counter()]
    while busy() or len(stamps) <= min_steps:  # type: ignore[operator]
        (a @ b).sum().item()
        stamps.append(time.perf_counter())
    return stamps


def validate_s(path: Path, runs: int = 20) -> float:
    """Median time of one validate() of ``path`` (which must be valid)."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        assert isinstance(validate(path, 1), Checkpoint)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def gaps(stamps: list[float]) -> list[float]:
    return [t1 - t0 for t0, t1 in itertools.pairwise(stamps)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--saves", type=int, default=5)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--cuda", action="store_true", help="state on the GPU (pinned host buffers)")
    parser.add_argument("--members", type=int, default=2000, help="tensors in the many-tensor validate case")
    args = parser.parse_args()
    device = "cuda" if args.cuda else "cpu"

    state = make_state(args.gib, device)
    model = state["model"]
    assert isinstance(model, dict)
    size = sum(t.numel() * t.element_size() for t in model.values())
    a, b = torch.randn(256, 256, device=device), torch.randn(256, 256, device=device)

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        sync_blocking = []
        for i in range(args.saves):
            path = Path(tmp) / f"sync_{i}.pt"
            sync_blocking.append(sync_save(state, path))
            if i < args.saves - 1:
                path.unlink()
        checked = {"torch.save file": validate_s(path)}
        many = Path(tmp) / "many.pt"
        torch.save({f"t{i}": torch.randn(1024) for i in range(args.members)}, many)
        checked[f"torch.save file, {args.members} tensors"] = validate_s(many)

        idle = gaps(steps_while(lambda: False, a, b, min_steps=2000))
        ckpt = AsyncCheckpointer(Path(tmp) / "async", keep=1)
        async_blocking, write_s, during, longest, busy_gaps = [], [], [], [], []
        for i in range(args.saves):
            state["step"] = i
            next(iter(model.values()))[0] += 1  # the loop changed the state since the last save
            ckpt.save(state, i)
            async_blocking.append(ckpt.stats()["blocking_s"])
            stamps = steps_while(ckpt.in_flight, a, b)
            ckpt.wait()
            write_s.append(ckpt.stats()["write_s"])
            during.append(len(stamps) - 1)
            longest.append(max(gaps(stamps), default=0.0))
            busy_gaps.extend(gaps(stamps))
        ckpt.close()
        last = ckpt.wait()
        assert last is not None
        checked["AsyncCheckpointer directory"] = validate_s(last)

    sync_med, async_med = statistics.median(sync_blocking), statistics.median(async_blocking)
    print(f"# {platform.node()} ({os.cpu_count()} CPUs), {platform.python_version()}, torch {torch.__version__}")
    when = time.strftime("%Y-%m-%d")
    print(f"# {when}, state {size / 2**30:.2f} GiB on {device}, {args.saves} saves each, dir {args.dir}")
    print()
    print("| save | blocking per save (median) | min | max | background write (median) |")
    print("|---|---|---|---|---|")
    print(f"| torch.save + fsync | {sync_med:.3f} s | {min(sync_blocking):.3f} s | {max(sync_blocking):.3f} s | - |")
    print(
        f"| AsyncCheckpointer | {async_med:.3f} s | {min(async_blocking):.3f} s | {max(async_blocking):.3f} s "
        f"| {statistics.median(write_s):.3f} s |"
    )
    print()
    print(f"blocking ratio sync/async: {sync_med / async_med:.1f}x (target >= 5x)")
    print(
        f"training steps during each background write: {during} "
        f"(idle loop: median step {statistics.median(idle) * 1e3:.2f} ms, longest gap {max(idle) * 1e3:.1f} ms)"
    )
    print(
        f"during writes: median step {statistics.median(busy_gaps or [0.0]) * 1e3:.2f} ms, "
        f"longest gap per save: {', '.join(f'{g * 1e3:.0f} ms' for g in longest)}"
    )
    print()
    print("| validate() | median |")
    print("|---|---|")
    for what, took in checked.items():
        print(f"| {what} | {took * 1e3:.2f} ms |")


if __name__ == "__main__":
    main()
