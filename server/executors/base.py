"""What the server asks of a scheduler when the recovery policy decides: restart a job, keep a node out.

Every method returns a result instead of raising: a failing `scontrol`, a missing binary, a timeout or
an API error becomes ``ActionResult(ok=False, detail=...)``, which the incident code records as is.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

UNKNOWN = "unknown"  # job_state when the scheduler cannot say (no such job, scheduler unreachable)


@dataclass(frozen=True, slots=True)
class JobTarget:
    """Where a job runs: ``executor`` is "local", "slurm" or "kubernetes"; ``ref`` is the Slurm job id,
    or "namespace/name" of a batch Job or a Kubeflow PyTorchJob (None for a local job)."""

    executor: str
    ref: str | None


@dataclass(frozen=True, slots=True)
class ActionResult:
    """The outcome of one action; ``commands`` is what was run or called, in order, for the audit log."""

    ok: bool
    detail: str
    commands: tuple[str, ...] = ()


class Executor(Protocol):
    name: str

    def restart(self, target: JobTarget, *, exclude_nodes: Sequence[str], reason: str) -> ActionResult:
        """Restart the whole job, keeping it off ``exclude_nodes`` (which may be empty)."""
        ...

    def exclude_node(self, node: str, *, reason: str) -> ActionResult:
        """Stop new work from landing on ``node`` (Slurm drain, Kubernetes cordon)."""
        ...

    def release_node(self, node: str) -> ActionResult:
        """Undo ``exclude_node`` when the exclusion expires; a node someone else excluded stays excluded."""
        ...

    def job_state(self, target: JobTarget) -> str:
        """The scheduler's word for the job now (RUNNING, PENDING, FAILED, ...), or "unknown"."""
        ...

    def job_nodes(self, target: JobTarget) -> set[str] | None:
        """The nodes the scheduler runs the job on now, or None when it cannot say: the server lets a
        node join another node's job only on the scheduler's word (docs/security.md)."""
        ...


def render(argv: Sequence[str]) -> str:
    """A command line as a shell would need it, for ``ActionResult.commands``."""
    return shlex.join(argv)
