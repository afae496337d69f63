"""Make real failures happen on a real GPU and keep their logs, for diagnosis at first sight.

    python3 bench/gpu_failures.py OUT_DIR [--only NAME ...]

Each scenario is a short training-like program that fails the way jobs fail on a cluster (CUDA OOM, an
illegal memory access from a Triton kernel, a device-side assert, NaN gradients, a corrupt checkpoint,
SIGTERM and SIGKILL under torchrun, DataLoader workers killed by signals, a rendezvous that never completes,
NCCL refusing two ranks on one GPU). It writes OUT_DIR/NAME/train.log (stdout and stderr as the launcher
printed them) and OUT_DIR/NAME/meta.json (the label chosen before the run, by the corpus README's rules; the
exit status; the command). Nothing here reads gpuwatch: the logs are diagnosed afterwards, elsewhere, and the
first answer is recorded before any rule is changed for them. The kernel's Xid lines, when the VM lets us
read them, go to OUT_DIR/dmesg.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

TRAIN_PRELUDE = """
import os, sys, time, torch
torch.manual_seed(0)
def log(step, loss):
    print(f"step {step} | loss {loss:.4f} | lr 3.0e-04", flush=True)
"""


@dataclass
class Scenario:
    """One failure: the program, how it is launched, the label chosen before it runs."""

    name: str
    expected: str
    code: str
    torchrun: int = 0  # processes under torchrun; 0 runs plain python
    env: dict[str, str] = field(default_factory=dict)
    kill_after: str | None = None  # a line that, once printed, makes us send `kill_signal` to the launcher
    kill_signal: int = signal.SIGTERM


SCENARIOS = [
    Scenario(
        "cuda-oom-growing-batch",
        "gpu_oom",
        TRAIN_PRELUDE
        + """
model = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192) for _ in range(4)]).cuda()
opt = torch.optim.AdamW(model.parameters())
batch = 1024
for step in range(100):
    x = torch.randn(batch, 8192, device="cuda")
    acts = [x]
    for layer in model:
        acts.append(layer(acts[-1]))
    loss = acts[-1].pow(2).mean()
    loss.backward(); opt.step(); opt.zero_grad()
    log(step, loss.item())
    batch *= 2
    keep = [torch.empty(batch, 8192, 8, device="cuda")]
""",
        torchrun=1,
    ),
    Scenario(
        "oom-survived-then-keyerror",
        "script_error",
        TRAIN_PRELUDE
        + """
model = torch.nn.Linear(4096, 4096).cuda()
batch = 1 << 25  # 512 GiB of input: halved until it fits (64 GiB on an H200, 32 GiB on an H100)
while True:
    try:
        y = model(torch.randn(batch, 4096, device="cuda"))
        break
    except torch.cuda.OutOfMemoryError as e:
        print(f"WARNING: {e}", file=sys.stderr, flush=True)
        print(f"WARNING: batch {batch} does not fit, retrying with {batch // 2}", file=sys.stderr, flush=True)
        batch //= 2
        torch.cuda.empty_cache()
for step in range(3):
    log(step, y[:1024].pow(2).mean().item())  # a slice: nothing more to allocate after the OOMs
metrics = {"loss": 1.0}
print(metrics["val_loss"])
""",
    ),
    Scenario(
        "triton-kernel-illegal-address",
        "cuda_error",
        TRAIN_PRELUDE
        + """
import triton, triton.language as tl
@triton.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs * 1_000_000_000, tl.load(x_ptr + offs) * 2.0)
x = torch.randn(1 << 20, device="cuda")
out = torch.empty_like(x)
for step in range(5):
    log(step, x.mean().item())
scale[(x.numel() // 1024,)](x, out, x.numel(), BLOCK=1024)
print(out.sum().item())
""",
        torchrun=1,
    ),
    Scenario(
        "embedding-device-side-assert",
        "framework_error",
        TRAIN_PRELUDE
        + """
emb = torch.nn.Embedding(32000, 512).cuda()
for step in range(3):
    ids = torch.randint(0, 32000, (8, 128), device="cuda")
    log(step, emb(ids).pow(2).mean().item())
ids = torch.randint(0, 32000, (8, 128), device="cuda")
ids[3, 7] = 32003  # a tokenizer with added tokens and an embedding never resized
print(emb(ids).sum().item())
""",
    ),
    Scenario(
        "anomaly-nan-backward",
        "loss_divergence",
        TRAIN_PRELUDE
        + """
torch.autograd.set_detect_anomaly(True)
w = torch.nn.Parameter(torch.tensor([1.0, 2.0], device="cuda"))
opt = torch.optim.SGD([w], lr=10.0)
for step in range(50):
    loss = torch.sqrt(w).sum() + w.pow(2).sum()
    log(step, loss.item())
    opt.zero_grad(); loss.backward(); opt.step()
""",
    ),
    Scenario(
        "bf16-fp32-matmul-mismatch",
        "script_error",
        TRAIN_PRELUDE
        + """
model = torch.nn.Linear(1024, 1024).cuda().to(torch.bfloat16)
head = torch.randn(1024, 10, device="cuda")
for step in range(2):
    h = model(torch.randn(4, 1024, device="cuda", dtype=torch.bfloat16))
    logits = h @ head
""",
    ),
    Scenario(
        "cpu-input-cuda-model",
        "script_error",
        TRAIN_PRELUDE
        + """
model = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 2)).cuda()
x = torch.randn(16, 128)
print(model(x))
""",
    ),
    Scenario(
        "set-device-beyond-visible",
        "argument_error",
        TRAIN_PRELUDE
        + """
local_rank = int(os.environ.get("LOCAL_RANK", "0")) + 3
torch.cuda.set_device(local_rank)
x = torch.randn(4, device="cuda")
""",
        torchrun=1,
    ),
    Scenario(
        "nccl-two-ranks-one-gpu",
        "framework_error",
        TRAIN_PRELUDE
        + """
import torch.distributed as dist
dist.init_process_group("nccl")
torch.cuda.set_device(0)
t = torch.ones(1 << 20, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
print("sum", t[0].item())
""",
        torchrun=2,
    ),
    Scenario(
        "truncated-checkpoint-resume",
        "checkpoint_load_error",
        TRAIN_PRELUDE
        + """
import tempfile
model = torch.nn.Linear(1024, 1024).cuda()
path = os.path.join(tempfile.mkdtemp(), "checkpoint-1000.pt")
torch.save({"model": model.state_dict(), "step": 1000}, path)
with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) // 2)  # the write that a full disk or a killed job left behind
print(f"resuming from {path}", flush=True)
state = torch.load(path, map_location="cuda")
""",
        torchrun=1,
    ),
    Scenario(
        "state-dict-shape-mismatch",
        "checkpoint_load_error",
        TRAIN_PRELUDE
        + """
import tempfile
path = os.path.join(tempfile.mkdtemp(), "model.pt")
torch.save(torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.Linear(1024, 10)).state_dict(), path)
model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.Linear(2048, 10)).cuda()
model.load_state_dict(torch.load(path, map_location="cuda"))
""",
    ),
    Scenario(
        "torchrun-sigterm-preempted",
        "preempted",
        TRAIN_PRELUDE
        + """
x = torch.randn(4096, 4096, device="cuda")
for step in range(100000):
    x = torch.tanh(x @ x.T / 64)
    if step % 50 == 0:
        log(step, x.mean().item())
""",
        torchrun=2,
        kill_after="step 100 ",
    ),
    Scenario(
        "torchrun-worker-sigkill",
        "host_oom",
        TRAIN_PRELUDE
        + """
import signal
x = torch.randn(2048, 2048, device="cuda")
for step in range(200):
    x = torch.tanh(x @ x.T / 64)
    if step % 20 == 0:
        log(step, x.mean().item())
    if step == 150 and int(os.environ["RANK"]) == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's OOM killer does
""",
        torchrun=2,
    ),
    Scenario(
        "dataloader-worker-sigkill",
        "host_oom",
        TRAIN_PRELUDE
        + """
import signal
from torch.utils.data import DataLoader, Dataset
class Shards(Dataset):
    def __len__(self): return 10_000
    def __getitem__(self, i):
        if i == 700: os.kill(os.getpid(), signal.SIGKILL)
        return torch.randn(256)
model = torch.nn.Linear(256, 1).cuda()
for step, x in enumerate(DataLoader(Shards(), batch_size=32, num_workers=4)):
    loss = model(x.cuda()).pow(2).mean()
    if step % 5 == 0: log(step, loss.item())
""",
    ),
    Scenario(
        "dataloader-worker-segfault",
        "dataloader_error",
        TRAIN_PRELUDE
        + """
import ctypes
from torch.utils.data import DataLoader, Dataset
class Frames(Dataset):
    def __len__(self): return 10_000
    def __getitem__(self, i):
        if i == 500: ctypes.string_at(0)  # a video decoder's NULL read
        return torch.randn(3, 32, 32)
model = torch.nn.Conv2d(3, 8, 3).cuda()
for step, x in enumerate(DataLoader(Frames(), batch_size=16, num_workers=2)):
    loss = model(x.cuda()).mean()
    if step % 5 == 0: log(step, loss.item())
""",
    ),
    Scenario(
        "rendezvous-peer-never-joins",
        "network_error",
        TRAIN_PRELUDE
        + """
import datetime, torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
print("rank 0 of 2 waiting for rank 1 (node gpu-b, which never started)", flush=True)
dist.init_process_group("nccl", rank=0, world_size=2, timeout=datetime.timedelta(seconds=15))
""",
    ),
]


def _command(s: Scenario, program: Path) -> list[str]:
    if not s.torchrun:
        return [sys.executable, str(program)]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={s.torchrun}",
        str(program),
    ]


def run(s: Scenario, out: Path, deadline_s: float) -> dict:
    """Run one scenario; return its meta record."""
    out.mkdir(parents=True, exist_ok=True)
    program = out / "train.py"
    program.write_text(s.code)
    env = dict(os.environ, PYTHONUNBUFFERED="1", **s.env)
    cmd = _command(s, program)
    started = time.monotonic()
    with open(out / "train.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        killed = False
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            log.flush()
            if s.kill_after and not killed and s.kill_after.encode() in line:
                proc.send_signal(s.kill_signal)
                killed = True
            if time.monotonic() - started > deadline_s:
                proc.kill()
                log.write(b"[gpu_failures.py: deadline, killed]\n")
                break
        rc = proc.wait()
    meta = {
        "name": s.name,
        "expected": s.expected,
        "rc": rc,
        "seconds": round(time.monotonic() - started, 2),
        "command": " ".join(["python3", *(Path(c).name if c == str(program) else c for c in cmd[1:])]),
        "signal_sent": signal.Signals(s.kill_signal).name if killed else None,
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds per scenario")
    args = parser.parse_args()
    for s in SCENARIOS:
        if args.only and s.name not in args.only:
            continue
        meta = run(s, args.out / s.name, args.deadline)
        print(f"{s.name}: rc {meta['rc']} in {meta['seconds']} s (label {s.expected})", flush=True)
    dmesg = subprocess.run(["dmesg", "-T"], capture_output=True, text=True)
    lines = [line for line in (dmesg.stdout + dmesg.stderr).splitlines() if "NVRM" in line or "dmesg" in line]
    (args.out / "dmesg.txt").write_text("\n".join(lines[-200:]) + "\n")


if __name__ == "__main__":
    main()
