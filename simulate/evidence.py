"""What a simulated failure leaves behind: the log lines, kernel (Xid) lines and exit codes a real one
would, in the formats the shipped rules (gpuwatch/diagnosis/rules.toml) and the Xid table know.

Each reason has a few variants (an Xid 79 and an Xid 48 are both `gpu_hardware`, and page differently).
A failure's evidence is the failing rank's log (the root cause, often inside a traceback, around
ordinary training lines), one or two peers' logs on other nodes with the cascade a real job shows (NCCL
watchdog timeouts, a remote process that exited), the node's kernel log for hardware faults, and a
scheduler line where Slurm would write one. The simulation runs it through the real diagnosis engine;
tests/simulate/test_simulate.py checks that the engine gives back the injected reason for most of it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from gpuwatch.diagnosis.model import LogSource

_STAMP = "2026-03-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}"


@dataclass(frozen=True, slots=True)
class Variant:
    """One shape of a reason's evidence; `xid` is the Xid code its kernel line carries, if any."""

    name: str
    xid: int | None = None


@dataclass(frozen=True, slots=True)
class Evidence:
    """A failure as the diagnosis sees it: logs (with node and exit status) and the Xid it raised."""

    sources: tuple[LogSource, ...]
    xid: int | None
    exit_code: int | None


@dataclass(frozen=True, slots=True)
class Where:
    """Where the failure happened: the failing node and rank, and two peers on other nodes (may repeat)."""

    node: str
    rank: int
    gpu: int
    peers: tuple[tuple[str, int], ...]
    job: str
    step: int


Lines = list[str]
_Root = Callable[[random.Random, Where], Lines]


def _pci(rng: random.Random, gpu: int) -> str:
    return f"0000:{0x18 + 0x10 * gpu:02x}:00"


def _uptime(rng: random.Random) -> str:
    return f"[{rng.randint(10_000, 2_000_000)}.{rng.randint(0, 999_999):06d}]"


def _traceback(user: bool, rng: random.Random) -> Lines:
    """The frames of a traceback: user code last, or the framework's."""
    frames = ["Traceback (most recent call last):", '  File "/workspace/train.py", line 412, in <module>', "    main()"]
    frames += ['  File "/workspace/train.py", line 377, in main', "    loss = train_step(model, batch)"]
    if not user:
        frames += [
            '  File "/usr/local/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1553, in _call_impl',
            "    return forward_call(*args, **kwargs)",
            '  File "/usr/local/lib/python3.11/site-packages/deepspeed/runtime/engine.py", line 1899, in backward',
            "    self.optimizer.backward(loss)",
        ]
    else:
        frames += [f'  File "/workspace/model/data.py", line {rng.randint(20, 300)}, in collate', "    x = batch[k]"]
    return frames


def _xid(code: int, text: str) -> _Root:
    def kernel(rng: random.Random, w: Where) -> Lines:
        return [f"{_uptime(rng)} NVRM: Xid (PCI:{_pci(rng, w.gpu)}): {code}, pid={rng.randint(1000, 99999)}, {text}"]

    return kernel


# Lines in the failing rank's log, by reason and variant; the kernel's own lines are in _KERNEL.
_RANK: dict[str, dict[str, _Root]] = {
    "gpu_hardware": {
        "xid79": lambda rng, w: ["RuntimeError: CUDA error: unspecified launch failure"],
        "xid48": lambda rng, w: ["RuntimeError: CUDA error: uncorrectable ECC error encountered"],
        "xid94": lambda rng, w: ["RuntimeError: CUDA error: uncorrectable ECC error encountered"],
        "xid119": lambda rng, w: ["RuntimeError: CUDA error: unspecified launch failure"],
        "nvml_lost": lambda rng, w: [
            f"pynvml.NVMLError_GpuIsLost: GPU is lost (NVML_ERROR_GPU_IS_LOST) on GPU {w.gpu}",
        ],
    },
    "nvlink_error": {
        "xid74": lambda rng, w: [
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
            "unhandled cuda error, NCCL version 2.21.5",
            "ncclUnhandledCudaError: Call to CUDA function failed.",
        ],
    },
    "node_failure": {
        "slurm": lambda rng, w: [],
        "bus_error": lambda rng, w: [
            "Fatal Python error: Bus error",
            "",
            "Current thread 0x00007f3a (most recent first):",
        ],
    },
    "cuda_error": {
        "illegal_access": lambda rng, w: [
            *_traceback(False, rng),
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
            "might be incorrect.",
            "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
        ],
        "cublas": lambda rng, w: [
            *_traceback(False, rng),
            "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, "
            "m, n, k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, CUDA_R_32F, "
            "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`",
        ],
        "launch_failure": lambda rng, w: [
            "terminate called after throwing an instance of 'c10::Error'",
            "  what():  CUDA error: unspecified launch failure",
        ],
    },
    "nccl_timeout": {
        "watchdog": lambda rng, w: [_watchdog(rng, w.rank)],
    },
    "nccl_error": {
        "system": lambda rng, w: [
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
            "1970, unhandled system error, NCCL version 2.19.3",
            "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
        ],
        "warn": lambda rng, w: [
            f"{w.node}:{rng.randint(1000, 9999)}:{rng.randint(1000, 9999)} [{w.gpu}] NCCL WARN Error: failed to "
            f"extend /dev/shm/nccl-{rng.randint(0, 0xFFFFFF):06x} to {rng.randint(10**6, 10**7)} bytes",
            "ncclInternalError: Internal check failed.",
        ],
    },
    "network_error": {
        "ib_completion": lambda rng, w: [
            f"{w.node}:{rng.randint(1000, 9999)}:{rng.randint(1000, 9999)} [{w.gpu}] NCCL WARN NET/IB : Got "
            f"completion from peer 10.0.{rng.randint(0, 9)}.{rng.randint(2, 250)}<{rng.randint(30000, 60000)}> with "
            "error 12, opcode 0, len 0, vendor err 129 (Recv)",
        ],
        "reset": lambda rng, w: [
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection reset by peer "
            f"[10.0.{rng.randint(0, 9)}.{rng.randint(2, 250)}]:{rng.randint(20000, 30000)}",
        ],
    },
    "storage_error": {
        "eio": lambda rng, w: [
            *_traceback(False, rng),
            f"OSError: [Errno 5] Input/output error: '/lustre/ckpt/{w.job}/step_{w.step:08d}/model_00.pt'",
        ],
        "stale": lambda rng, w: [
            f"OSError: [Errno 116] Stale file handle: '/nfs/data/shard_{rng.randint(0, 999):05d}'"
        ],
        "s3": lambda rng, w: [
            "botocore.exceptions.ReadTimeoutError: Read timeout on endpoint URL: "
            f'"https://s3.internal/{w.job}/shard-{rng.randint(0, 9999)}.tar"',
        ],
    },
    "preempted": {
        "slurm": lambda rng, w: [
            f"torch.distributed.elastic.multiprocessing.api.SignalException: Process {rng.randint(1000, 99999)} got "
            "signal: 15",
        ],
    },
    "gpu_oom": {
        "torch": lambda rng, w: [
            *_traceback(False, rng),
            f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {rng.choice((1, 2, 4, 8))}.00 GiB "
            f"(GPU {w.gpu}; 79.11 GiB total capacity; 71.20 GiB already allocated; 1.02 GiB free)",
        ],
    },
    "host_oom": {
        "dataloader_killed": lambda rng, w: [
            f"RuntimeError: DataLoader worker (pid {rng.randint(1000, 99999)}) is killed by signal: Killed.",
        ],
        "oom_killer": lambda rng, w: [],
    },
    "dataloader_error": {
        "exited": lambda rng, w: [
            *_traceback(False, rng),
            f"RuntimeError: DataLoader worker (pid(s) {rng.randint(1000, 99999)}) exited unexpectedly",
        ],
        "caught": lambda rng, w: [
            "PIL.UnidentifiedImageError: Caught UnidentifiedImageError in DataLoader worker process "
            f"{rng.randint(0, 7)}.",
        ],
    },
    "checkpoint_load_error": {
        "state_dict": lambda rng, w: [
            *_traceback(False, rng),
            "RuntimeError: Error(s) in loading state_dict for GPT:",
            '\tMissing key(s) in state_dict: "transformer.h.0.attn.bias", "transformer.h.1.attn.bias".',
        ],
        "unpickling": lambda rng, w: ["_pickle.UnpicklingError: invalid load key, '\\x00'."],
    },
    "loss_divergence": {
        "nan": lambda rng, w: [
            f" iteration {w.step:8d}/  500000 | lm loss: nan | loss scale: 1.0 | grad norm: nan |",
            "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
        ],
    },
    "framework_error": {
        "deepspeed_assert": lambda rng, w: [
            *_traceback(False, rng),
            "AssertionError: Expected all parameters to be on the same device in partition 0",
        ],
        "device_assert": lambda rng, w: ["RuntimeError: CUDA error: device-side assert triggered"],
    },
    "import_error": {
        "module": lambda rng, w: [
            *_traceback(True, rng)[:3],
            f"ModuleNotFoundError: No module named '{rng.choice(('flash_attn', 'apex', 'wandb', 'einops'))}'",
        ],
        "symbol": lambda rng, w: [
            "ImportError: /opt/conda/lib/python3.11/site-packages/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so:"
            " undefined symbol: _ZN3c104cuda9SetDeviceEi",
        ],
    },
    "syntax_error": {
        "syntax": lambda rng, w: [
            '  File "/workspace/train.py", line 88',
            "    if step % args.log_every = 0:",
            "                             ^",
            "SyntaxError: invalid syntax",
        ],
    },
    "file_not_found": {
        "data": lambda rng, w: [
            *_traceback(True, rng),
            "FileNotFoundError: [Errno 2] No such file or directory: "
            f"'/data/tokenized/train_{rng.randint(0, 99):03d}.bin'",
        ],
    },
    "permission_error": {
        "ckpt": lambda rng, w: [
            *_traceback(True, rng),
            f"PermissionError: [Errno 13] Permission denied: '/checkpoints/{w.job}/latest'",
        ],
    },
    "argument_error": {
        "argparse": lambda rng, w: [
            "usage: train.py [-h] [--lr LR] [--data-path DATA_PATH]",
            f"train.py: error: unrecognized arguments: --lr-warmup {rng.randint(10, 2000)}",
        ],
    },
    "script_error": {
        "key": lambda rng, w: [*_traceback(True, rng), "KeyError: 'attention_mask'"],
        "type": lambda rng, w: [
            *_traceback(True, rng),
            "TypeError: forward() got an unexpected keyword argument 'position_ids'",
        ],
        "name": lambda rng, w: [*_traceback(True, rng), "NameError: name 'cfg' is not defined"],
    },
}

# The node's kernel log, for the variants that have one.
_KERNEL: dict[tuple[str, str], _Root] = {
    ("gpu_hardware", "xid79"): _xid(79, "GPU has fallen off the bus."),
    ("gpu_hardware", "xid48"): _xid(
        48, "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0."
    ),
    ("gpu_hardware", "xid94"): _xid(94, "Contained: SM (0x1). RST: No, D-RST: No"),
    ("gpu_hardware", "xid119"): _xid(119, "Timeout after 6s of waiting for RPC response from GPU0 GSP!"),
    ("nvlink_error", "xid74"): _xid(74, "NVLink: fatal error detected on link 3(0x0, 0x0, 0x10000, 0x0, 0x0)"),
    ("host_oom", "oom_killer"): lambda rng, w: [
        f"{_uptime(rng)} python invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0",
        f"{_uptime(rng)} Out of memory: Killed process {rng.randint(1000, 99999)} (python) total-vm:412345678kB, "
        "anon-rss:398765432kB, file-rss:0kB",
    ],
}

# What the scheduler printed, for the variants where Slurm ended the job.
_SCHEDULER: dict[tuple[str, str], Callable[[random.Random, Where, str], Lines]] = {
    ("node_failure", "slurm"): lambda rng, w, at: [
        f"srun: error: Node failure on {w.node}",
        f"slurmstepd: error: *** JOB {rng.randint(10_000, 999_999)} ON {w.node} CANCELLED AT {at} DUE TO NODE "
        "FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***",
    ],
    ("preempted", "slurm"): lambda rng, w, at: [
        f"slurmstepd: error: *** JOB {rng.randint(10_000, 999_999)} ON {w.node} CANCELLED AT {at} DUE TO "
        "PREEMPTION ***",
    ],
}

# Exit status of the failing rank, where it is not 1.
_EXIT: dict[str, int] = {"preempted": 143, "host_oom": 137, "argument_error": 2, "node_failure": 135}
# Reasons after which the peers report a cascade (they were in a collective with the failed rank).
_NO_CASCADE = frozenset({"argument_error", "syntax_error", "import_error", "preempted", "nccl_timeout"})

#: Every variant, by reason: the trace picks one per failure. A variant named xidNN raises Xid NN.
VARIANTS: dict[str, tuple[Variant, ...]] = {
    reason: tuple(Variant(name, int(name[3:]) if name.startswith("xid") else None) for name in variants)
    for reason, variants in _RANK.items()
}


def _watchdog(rng: random.Random, rank: int) -> str:
    seq = rng.randint(1000, 90000)
    return (
        f"[rank{rank}]:[E ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation timeout: "
        f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn={rng.randint(1, 10**8)}, NumelOut=1, Timeout(ms)=600000) "
        f"ran for {600000 + rng.randint(10, 999)} milliseconds before timing out."
    )


def _training_lines(rng: random.Random, rank: int, step: int, n: int) -> Lines:
    """Ordinary progress lines, the bulk of any real log; none should match a rule."""
    out = []
    for i in range(n):
        it = max(1, step - n + i)
        out.append(
            f"[rank{rank}]: iteration {it:8d}/  500000 | consumed samples: {it * 512:12d} | elapsed time per "
            f"iteration (ms): {rng.uniform(900, 1100):.1f} | learning rate: 2.999E-04 | lm loss: "
            f"{rng.uniform(1.8, 2.6):.6E} | grad norm: {rng.uniform(0.2, 1.5):.3f} |"
        )
    return out


def generate(reason: str, variant: str, where: Where, rng: random.Random, *, day: int = 1) -> Evidence:
    """The evidence of one failure of ``reason`` (shape ``variant``) at ``where``."""
    root = _RANK[reason][variant]
    at = _STAMP.format(day=day, hour=rng.randint(0, 23), minute=rng.randint(0, 59), second=rng.randint(0, 59))
    exit_code = _EXIT.get(reason, 1)
    lines = _training_lines(rng, where.rank, where.step, rng.randint(3, 12))
    lines += root(rng, where)
    sources = [
        LogSource(
            file=f"{where.job}/rank{where.rank}.log", lines=lines, node=where.node, rank=where.rank, exit_code=exit_code
        )
    ]
    if reason not in _NO_CASCADE:
        for peer_node, peer_rank in where.peers:
            peer = _training_lines(rng, peer_rank, where.step, rng.randint(2, 6))
            peer.append(_cascade(reason, rng, peer_rank))
            sources.append(
                LogSource(
                    file=f"{where.job}/rank{peer_rank}.log", lines=peer, node=peer_node, rank=peer_rank, exit_code=1
                )
            )
    elif reason == "nccl_timeout":  # a hang in a collective: every rank's watchdog fires, nobody is the cause
        for peer_node, peer_rank in where.peers:
            sources.append(
                LogSource(
                    file=f"{where.job}/rank{peer_rank}.log",
                    lines=[_watchdog(rng, peer_rank)],
                    node=peer_node,
                    rank=peer_rank,
                    exit_code=1,
                )
            )
    kernel = _KERNEL.get((reason, variant))
    if kernel is not None:
        sources.append(LogSource(file=f"{where.node}/kern.log", lines=kernel(rng, where), node=where.node))
    scheduler = _SCHEDULER.get((reason, variant))
    if scheduler is not None:
        sources.append(LogSource(file=f"{where.job}/slurm.out", lines=scheduler(rng, where, at), node=where.node))
    xid = next((v.xid for v in VARIANTS[reason] if v.name == variant), None)
    return Evidence(sources=tuple(sources), xid=xid, exit_code=exit_code)


def _cascade(reason: str, rng: random.Random, rank: int) -> str:
    """What a peer of the failed rank reports: it lost the connection, or its collective timed out."""
    if reason == "network_error":
        return f"[rank{rank}]: RuntimeError: Connection reset by peer [10.0.{rng.randint(0, 9)}.{rng.randint(2, 250)}]"
    if rng.random() < 0.7:
        return _watchdog(rng, rank)
    return (
        f"[rank{rank}]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL version 2.21.5"
    )
