"""What a simulation found, per policy, in plain data (JSON-ready).

ETTR (effective training time ratio) follows the period report's definition (server/reports/period.py:
productive time over wall time), weighted by GPUs across jobs: Σ gpus · productive / Σ gpus · wall.
Productive time is training that was kept (not redone after a failure) and not spent blocked in a
checkpoint save. Wall time is the whole period, less the time a job's owner had it off the cluster to
fix its code (that time is the owner's, and no policy changes it; detecting and reporting the error is
counted).

Lost GPU time by kind: ``redo`` (training since the last valid checkpoint, lost at a failure),
``restart`` (start-up and checkpoint load), ``down`` (waiting for a decision, a person, the
scheduler or a spare node), ``hang`` (hung before anything noticed), ``checkpoint`` (blocked saving).
Each is charged to the real reason of the failure that caused it (checkpoints to ``checkpointing``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gpuwatch.taxonomy import REASONS

CHECKPOINTING = "checkpointing"


@dataclass
class PolicyResult:
    policy: str
    ettr: float
    wall_gpu_hours: float
    productive_gpu_hours: float
    lost_gpu_hours: float
    lost_by_reason: dict[str, float]
    lost_by_kind: dict[str, float]
    failures: int
    failures_by_reason: dict[str, int]
    restarts: dict[str, int]  # by who relaunched: auto, on_call, owner
    crash_loops: int  # runs of >= 3 failures of a job for the same reason without checkpoint progress
    exclusions: int
    healthy_excluded: int
    pages: dict[str, int]
    checkpoint_interval_s: float  # GPU-weighted mean
    diagnosis: dict[str, Any] = field(default_factory=dict)  # gpuwatch policies: the engine vs the truth
    decisions: dict[str, int] = field(default_factory=dict)  # gpuwatch policies: by rule of decide()
    crash_loops_avoided: int = 0  # vs torchrun on the same trace

    @property
    def pages_total(self) -> int:
        return sum(self.pages.values())

    @property
    def restarts_total(self) -> int:
        return sum(self.restarts.values())

    @property
    def on_call_actions(self) -> int:
        return self.restarts.get("on_call", 0)

    def lost_by_category(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for reason, hours in self.lost_by_reason.items():
            category = CHECKPOINTING if reason == CHECKPOINTING else REASONS[reason].category
            out[category] = out.get(category, 0.0) + hours
        return out

    def failure_share(self, category: str) -> float:
        """Share of the GPU time lost to failures (checkpointing left out) that ``category`` caused."""
        by = self.lost_by_category()
        total = sum(v for k, v in by.items() if k != CHECKPOINTING)
        return by.get(category, 0.0) / total if total else 0.0

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["pages_total"] = self.pages_total
        out["restarts_total"] = self.restarts_total
        out["on_call_actions"] = self.on_call_actions
        out["lost_by_category"] = self.lost_by_category()
        out["infrastructure_share_of_failure_loss"] = self.failure_share("infrastructure")
        return out


@dataclass
class SimResult:
    seed: int
    nodes: int
    gpus_per_node: int
    days: float
    jobs: list[int]  # GPUs of each job
    spares: int
    faults: dict[str, int]  # injected, by reason (absorbed ones included)
    policies: list[PolicyResult]

    def get(self, policy: str) -> PolicyResult:
        return next(p for p in self.policies if p.policy == policy)

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "days": self.days,
            "jobs": self.jobs,
            "spares": self.spares,
            "faults": self.faults,
            "policies": [p.to_json() for p in self.policies],
        }
