"""The failure taxonomy of ../shared/failure-taxonomy.md, as code: every diagnosis names exactly one
of these reasons, and its category and default action follow from it.

`tests/gpuwatch/test_taxonomy.py` checks this table against the contract file whenever that file is present.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Category = Literal["infrastructure", "preemption", "framework", "script", "unknown"]
Action = Literal["restart", "restart_exclude_node", "notify"]


@dataclass(frozen=True, slots=True)
class ReasonInfo:
    category: Category
    action: Action


REASONS: dict[str, ReasonInfo] = {
    "gpu_hardware": ReasonInfo("infrastructure", "restart_exclude_node"),
    "nvlink_error": ReasonInfo("infrastructure", "restart_exclude_node"),
    "cuda_error": ReasonInfo("infrastructure", "restart"),
    "nccl_timeout": ReasonInfo("infrastructure", "restart"),
    "nccl_error": ReasonInfo("infrastructure", "restart"),
    "network_error": ReasonInfo("infrastructure", "restart"),
    "node_failure": ReasonInfo("infrastructure", "restart_exclude_node"),
    "storage_error": ReasonInfo("infrastructure", "restart"),
    "preempted": ReasonInfo("preemption", "restart"),
    "gpu_oom": ReasonInfo("framework", "notify"),
    "host_oom": ReasonInfo("framework", "notify"),
    "dataloader_error": ReasonInfo("framework", "notify"),
    "checkpoint_load_error": ReasonInfo("framework", "notify"),
    "loss_divergence": ReasonInfo("framework", "notify"),
    "framework_error": ReasonInfo("framework", "notify"),
    "import_error": ReasonInfo("script", "notify"),
    "syntax_error": ReasonInfo("script", "notify"),
    "file_not_found": ReasonInfo("script", "notify"),
    "permission_error": ReasonInfo("script", "notify"),
    "argument_error": ReasonInfo("script", "notify"),
    "script_error": ReasonInfo("script", "notify"),
    "hang": ReasonInfo("infrastructure", "restart"),
    "unknown": ReasonInfo("unknown", "restart"),
}

#: Exit status by which a job asks not to be restarted whatever the reason (NVIDIA resiliency convention).
NO_RESTART_EXIT_CODE = 93


def info(reason: str) -> ReasonInfo:
    """Category and action of ``reason``; KeyError for anything outside the taxonomy."""
    return REASONS[reason]
