"""A 2-rank torch.distributed job (gloo, CPU) in which one rank stops taking part: for the hang
localisation tests. Every rank steps (instrumented with gpuwatch.client) until ``--hang-after``; then
``--rank`` either spins in a Python busy loop (``--how busy``) or sleeps inside its data-loading function
(``--how sleep``), while the others wait in their all_reduce. OUT/hung.json says when and where.

    torchrun --nproc-per-node 2 tests/jobs/hang_rank.py --how busy --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist

import gpuwatch.client as gw


def busy_loop() -> None:
    """Never returns, never sleeps: a rank stuck computing."""
    n = 0
    while True:
        n = (n + 1) % 1_000_003


def load_batch(hang: bool) -> torch.Tensor:
    """The data loader: a rank whose storage stopped answering waits here."""
    if hang:
        time.sleep(3600)
    return torch.ones(1_000)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--how", choices=["busy", "sleep"], required=True)
    ap.add_argument("--rank", type=int, default=1, help="the rank that stops taking part")
    ap.add_argument("--hang-after", type=int, default=8)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"rank{rank}.pid").write_text(str(os.getpid()))
    for step in range(10_000):
        hang = rank == args.rank and step == args.hang_after
        if hang:
            (args.out / "hung.json").write_text(json.dumps({"at": time.time(), "rank": rank, "step": step}))
        with gw.step(samples=8, n=step):
            if hang and args.how == "busy":
                busy_loop()
            grad = load_batch(hang and args.how == "sleep")
            dist.all_reduce(grad)
            time.sleep(0.05)
        (args.out / f"rank{rank}.progress").write_text(str(step + 1))


if __name__ == "__main__":
    main()
