"""A 2-rank gloo job with PyTorch's flight recorder on (TORCH_FR_BUFFER_SIZE > 0), for the agent's
flight recorder tests: both ranks run three all_reduces, then rank 0 enters a fourth (asynchronously,
so it can go on) that rank 1 never enters. Each rank then writes its recorder's dump where PyTorch's
watchdog would on a timeout (TORCH_FR_DUMP_TEMP_FILE + rank), says so in OUT/rankN.dumped, and waits.

    TORCH_FR_BUFFER_SIZE=2000 TORCH_FR_DUMP_TEMP_FILE=DIR/fr_ torchrun --nproc-per-node 2 fr_dump.py OUT
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist


def main() -> None:
    out = Path(sys.argv[1])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(16)
    for _ in range(3):
        dist.all_reduce(t)
    if rank == 0:
        dist.all_reduce(t, async_op=True)  # the collective rank 1 never enters
    Path(f"{os.environ['TORCH_FR_DUMP_TEMP_FILE']}{rank}").write_bytes(c10d._dump_fr_trace())
    (out / f"rank{rank}.dumped").write_text(str(os.getpid()))
    time.sleep(600)


if __name__ == "__main__":
    main()
