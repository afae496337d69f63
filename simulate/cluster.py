"""Replay at cluster scale: weeks of a simulated cluster through the real diagnosis, restart policy and
checkpoint code, to compare what failure handling does to ETTR and to on-call's pages.

    result = simulate(load_config(nodes=128, days=28), ["manual", "torchrun", "gpuwatch", "gpuwatch-async"])

Pure: no network, no server; a temporary directory holds the tiny checkpoints the real checkpoint
check reads. `gpuwatch simulate` is the command line.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from simulate.checkpointing import quiet_skips
from simulate.config import SimConfig, load_config
from simulate.engine import Engine
from simulate.policies import POLICIES, People
from simulate.results import PolicyResult, SimResult
from simulate.trace import Trace, generate

__all__ = ["POLICIES", "PolicyResult", "SimConfig", "SimResult", "Trace", "generate", "load_config", "simulate"]


def simulate(config: SimConfig, policies: Sequence[str] = tuple(POLICIES), trace: Trace | None = None) -> SimResult:
    """Every policy over the same seeded trace (generated from ``config`` unless given)."""
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise ValueError(f"unknown policy {unknown[0]!r}; one of {', '.join(POLICIES)}")
    trace = trace or generate(config)
    f = config.failures
    people = People(config.cluster.seed, config.people.delay_median_s, config.people.delay_sigma, f.fix_median_s)
    results: list[PolicyResult] = []
    with tempfile.TemporaryDirectory(prefix="gpuwatch-simulate-", dir=_scratch()) as tmp, quiet_skips():
        for name in policies:
            results.append(Engine(config, trace, POLICIES[name](config, people), Path(tmp)).run())
    baseline = next((r for r in results if r.policy == "torchrun"), None)
    if baseline is not None:
        for r in results:
            r.crash_loops_avoided = baseline.crash_loops - r.crash_loops
    c = config.cluster
    return SimResult(
        seed=c.seed,
        nodes=c.nodes,
        gpus_per_node=c.gpus_per_node,
        days=c.days,
        jobs=[j.gpus for j in trace.jobs],
        spares=len(trace.spares),
        faults=dict(sorted(Counter(x.reason for x in trace.faults).items())),
        policies=results,
    )


def _scratch() -> str | None:
    """Memory-backed scratch space where there is some: the checkpoints are tiny but many, and a disk's
    fsync and unlink would be most of the run time."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
