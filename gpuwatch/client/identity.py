"""Which job, rank and GPU a process belongs to, read from its environment alone.

A pure function of (environment, pid, hostname): the training client calls it on ``os.environ`` and
the agent calls it on ``/proc/<pid>/environ`` of the processes it finds on its GPUs, so both sides
attribute a process the same way.

Job name, first match wins:

1. ``GPUWATCH_JOB``, whatever the launcher (the scheduler fields below are still filled in).
2. Slurm (``SLURM_JOB_ID``): ``slurm-<id>``; ranks from ``SLURM_PROCID`` / ``SLURM_LOCALID`` /
   ``SLURM_NTASKS``.
3. Kubernetes (``KUBERNETES_SERVICE_HOST`` and a pod name in ``POD_NAME`` or ``HOSTNAME``): the pod
   name with its replica suffix stripped (see :func:`job_from_pod_name`), so every pod of one job
   gets one name.
4. torchrun and other ``env://`` launchers (``RANK`` and ``WORLD_SIZE``): ``torchrun-<TORCHELASTIC_RUN_ID>``,
   or ``torchrun-<MASTER_ADDR>-<MASTER_PORT>`` when the run id is missing or ``none``; a loopback
   MASTER_ADDR is replaced by the hostname, since every single-node run on every node uses it.

``RANK`` / ``LOCAL_RANK`` / ``WORLD_SIZE`` win over Slurm's values when both are set: under
``srun … torchrun`` Slurm's PROCID numbers the launchers, not the training processes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: `import gpuwatch.client` must not pull in pydantic
    from gpuwatch.protocol import JobProcess

_MAX_NAME = 255
_LOOPBACK = ("localhost", "::1", "0.0.0.0")

# Kubernetes' generateName alphabet (k8s.io/apimachinery/pkg/util/rand): no vowels, no 0, 1 or 3.
_K8S_RAND = "[bcdfghjklmnpqrstvwxz2456789]"
# <deployment>-<pod-template-hash>-<rand5> (ReplicaSet pods) or <job>-<rand5> (Job, MPIJob launcher).
_RAND_SUFFIX = re.compile(rf"(?:-{_K8S_RAND}{{6,10}})?-{_K8S_RAND}{{5}}$")
# Kubeflow / MPI operator replica roles, or a bare StatefulSet ordinal / indexed-Job completion index.
_REPLICA_SUFFIX = re.compile(r"-(?:(?:master|worker|launcher|chief|ps|evaluator|replica)-\d+|launcher|\d+)$")


def job_from_pod_name(pod: str) -> str:
    """The job a pod belongs to, so all replicas of one job share a name.

    Strips, in this order and at most once each: a generated ``-<5 random chars>`` suffix (with a
    ReplicaSet's ``-<pod-template-hash>`` before it), then ``-<role>-<n>`` (``worker``, ``master``,
    ``launcher``, ``chief``, ``ps``, ``evaluator``, ``replica``), ``-launcher`` or a bare ``-<n>``.
    ``llama-worker-3`` → ``llama``; ``bert-0`` → ``bert``; ``train-x7k2p`` → ``train``;
    ``mpi-launcher-x7k2p`` → ``mpi``; ``web-6d4cf56db6-x7k2p`` → ``web``. A name that would be
    stripped to nothing is kept whole. Set ``GPUWATCH_JOB`` where this guesses wrong.
    """
    name = _RAND_SUFFIX.sub("", pod) or pod
    return _REPLICA_SUFFIX.sub("", name) or name


def _int(env: Mapping[str, str], key: str, minimum: int = 0) -> int | None:
    """A non-negative (or >= minimum) int from the environment; anything else counts as absent."""
    raw = env.get(key)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        return None
    return value if value >= minimum else None


def _str(env: Mapping[str, str], key: str) -> str | None:
    value = (env.get(key) or "").strip()
    return value or None


def _device_list(raw: str | None) -> list[int] | None:
    """Indices from a CUDA_VISIBLE_DEVICES-style list, or None when they are not all numeric (UUIDs, MIG)."""
    if raw is None:
        return None
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts):
        return None
    return [int(p) for p in parts]


def _visible(index: int | None, raw: str | None) -> int | None:
    """Map a visible-device index through one ``*_VISIBLE_DEVICES`` list.

    A single-entry list maps every index to that entry: such a process can only use that GPU.
    """
    devices = _device_list(raw)
    if devices is None:
        return None
    if len(devices) == 1:
        return devices[0]
    if index is None or index >= len(devices):
        return None
    return devices[index]


def gpu_from_env(env: Mapping[str, str], local_rank: int | None) -> int | None:
    """The node-level GPU index the process drives, assuming it uses ``cuda:<local_rank>``.

    ``CUDA_VISIBLE_DEVICES`` maps the local rank to a device index; inside a container,
    ``NVIDIA_VISIBLE_DEVICES`` (set by the NVIDIA runtime / device plugin) maps that again to the
    host's index. UUID or MIG lists give None: an unknown GPU is better than a wrong one.
    """
    index: int | None = local_rank
    cuda = env.get("CUDA_VISIBLE_DEVICES")
    if cuda is not None:
        index = _visible(index, cuda)
    nvidia = (env.get("NVIDIA_VISIBLE_DEVICES") or "").strip().lower()
    if nvidia in ("none", "void"):
        return None
    if nvidia and nvidia != "all":
        index = _visible(index, nvidia)
    return index if index is not None and index <= 1023 else None


def _hang_timeout(env: Mapping[str, str]) -> float | None:
    raw = env.get("GPUWATCH_HANG_TIMEOUT")
    if raw is None:
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def _torchrun_job(env: Mapping[str, str], hostname: str) -> str:
    run_id = _str(env, "TORCHELASTIC_RUN_ID")
    if run_id and run_id.lower() != "none":
        return f"torchrun-{run_id}"
    addr = _str(env, "MASTER_ADDR") or hostname
    if addr in _LOOPBACK or addr.startswith("127."):
        addr = hostname
    return f"torchrun-{addr}-{_str(env, 'MASTER_PORT') or 'unknown'}"


def identity_from_env(env: Mapping[str, str], pid: int, hostname: str) -> JobProcess | None:
    """The job process described by ``env``, or None for a process no launcher or user named.

    ``pid`` and ``hostname`` are passed in rather than read so the agent can call this for other
    processes; nothing here touches the running process.
    """
    if pid < 1:
        return None
    explicit = _str(env, "GPUWATCH_JOB")
    job: str | None = None
    scheduler = "local"
    external_id: str | None = None
    rank = local_rank = world_size = None

    slurm_id = _str(env, "SLURM_JOB_ID")
    pod = _str(env, "POD_NAME") or _str(env, "HOSTNAME")
    has_env_ranks = "RANK" in env and "WORLD_SIZE" in env
    if slurm_id is not None:
        job, scheduler, external_id = f"slurm-{slurm_id}", "slurm", slurm_id
        rank, local_rank = _int(env, "SLURM_PROCID"), _int(env, "SLURM_LOCALID")
        world_size = _int(env, "SLURM_NTASKS", minimum=1)
    elif "KUBERNETES_SERVICE_HOST" in env and pod is not None:
        namespace = _str(env, "POD_NAMESPACE") or "default"
        job, scheduler, external_id = job_from_pod_name(pod), "kubernetes", f"{namespace}/{pod}"
    elif has_env_ranks:
        job, scheduler = _torchrun_job(env, hostname), "torchrun"

    # env:// ranks are the training processes' own, so they override a scheduler's task numbering.
    env_rank = _int(env, "RANK")
    env_local = _int(env, "LOCAL_RANK")
    env_world = _int(env, "WORLD_SIZE", minimum=1)
    rank = env_rank if env_rank is not None else rank
    local_rank = env_local if env_local is not None else local_rank
    world_size = env_world if env_world is not None else world_size

    job = explicit or job
    if job is None:
        return None
    from gpuwatch.protocol import JobProcess

    return JobProcess(
        job=job[:_MAX_NAME],
        pid=pid,
        rank=rank,
        local_rank=local_rank,
        world_size=world_size,
        gpu=gpu_from_env(env, local_rank),
        scheduler=scheduler,
        external_id=external_id[:_MAX_NAME] if external_id else None,
        hang_timeout_s=_hang_timeout(env),
    )
