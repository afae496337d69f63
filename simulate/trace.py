"""The seeded failure trace: which jobs run where, and what strikes when — the same for every policy.

Jobs are drawn from the size mix until every node but the spares is taken; each owns whole nodes for
the whole period (the reserved partitions of a training cluster). Then, independently:

- infrastructure faults strike each node as a Poisson process (`infra_per_1000_node_days`), with a
  reason from `infra_mix`, a shape of evidence (`evidence.VARIANTS`) and whether the node stays bad;
- hangs strike each node likewise; some are in a collective (the NCCL watchdog ends them);
- framework and script errors strike each job (more often in small ones), and some are deterministic
  (the same code fails again on every restart until its owner fixes it);
- preemptions strike each job.

A fault on a node that runs no job at that moment is absorbed by the simulation (a bad spare stays
bad). Every stream has its own seeded generator (by node, by job), so a fault's time does not depend
on how many other nodes or jobs there are.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from simulate.config import DAY, SimConfig
from simulate.evidence import VARIANTS

HANG = "hang"
K = TypeVar("K", int, str)


@dataclass(frozen=True, slots=True)
class JobSpec:
    name: str
    gpus: int
    nodes: tuple[str, ...]  # where it starts


@dataclass(frozen=True, slots=True)
class Fault:
    """One thing that goes wrong. Node faults and hangs name a node; user errors and preemptions a job."""

    id: int
    at: float
    reason: str
    variant: str
    node: str | None = None
    job: str | None = None
    persistent: bool = False  # the node stays bad, or the code stays broken
    in_collective: bool = False  # a hang the NCCL watchdog ends


@dataclass(frozen=True, slots=True)
class Trace:
    seed: int
    nodes: tuple[str, ...]
    jobs: tuple[JobSpec, ...]
    spares: tuple[str, ...]
    faults: tuple[Fault, ...]  # by time


def rng_for(seed: int, *key: object) -> random.Random:
    """A generator of its own for one stream or one event, the same whatever else happened."""
    return random.Random("/".join(map(str, (seed, *key))))


def node_name(i: int) -> str:
    return f"node{i:04d}"


def generate(config: SimConfig) -> Trace:
    c, f = config.cluster, config.failures
    nodes = tuple(node_name(i) for i in range(c.nodes))
    usable = c.nodes - c.spares
    jobs = _jobs(config, nodes[:usable])
    horizon = config.horizon_s
    raw: list[Fault] = []
    for node in nodes:
        rng = rng_for(c.seed, "node", node)
        for at in _poisson(rng, f.infra_per_1000_node_days / 1000, horizon):
            reason = _pick(rng, f.infra_mix)
            raw.append(
                Fault(
                    0,
                    at,
                    reason,
                    rng.choice(VARIANTS[reason]).name,
                    node=node,
                    persistent=rng.random() < f.persistent.get(reason, 0.0),
                )
            )
        rng = rng_for(c.seed, "hang", node)
        for at in _poisson(rng, f.hangs_per_1000_node_days / 1000, horizon):
            raw.append(Fault(0, at, HANG, "", node=node, in_collective=rng.random() < f.hang_in_collective))
    for job in jobs:
        rng = rng_for(c.seed, "user", job.name)
        for at in _poisson(rng, f.user_rate_per_day(job.gpus), horizon):
            reason = _pick(rng, f.user_mix)
            variant = rng.choice(VARIANTS[reason]).name
            deterministic = rng.random() < f.deterministic.get(reason, 0.0)
            raw.append(Fault(0, at, reason, variant, job=job.name, persistent=deterministic))
        rng = rng_for(c.seed, "preempt", job.name)
        for at in _poisson(rng, f.preemptions_per_job_day, horizon):
            raw.append(Fault(0, at, "preempted", "slurm", job=job.name))
    raw.sort(key=lambda x: (x.at, x.node or "", x.job or "", x.reason))
    faults = tuple(
        Fault(i, x.at, x.reason, x.variant, x.node, x.job, x.persistent, x.in_collective) for i, x in enumerate(raw)
    )
    return Trace(seed=c.seed, nodes=nodes, jobs=jobs, spares=nodes[usable:], faults=faults)


def _jobs(config: SimConfig, usable: tuple[str, ...]) -> tuple[JobSpec, ...]:
    """Jobs drawn from the size mix (among the sizes that still fit) until the nodes are taken."""
    gpn = config.cluster.gpus_per_node
    rng = rng_for(config.cluster.seed, "jobs")
    need = {size: max(1, math.ceil(size / gpn)) for size in config.jobs.sizes}
    jobs: list[JobSpec] = []
    free = len(usable)
    while free:
        fits = [(s, w) for s, w in zip(config.jobs.sizes, config.jobs.weights, strict=True) if need[s] <= free]
        n = need[_pick(rng, dict(fits))] if fits else free
        start = len(usable) - free
        jobs.append(JobSpec(name=f"job{len(jobs):03d}", gpus=n * gpn, nodes=usable[start : start + n]))
        free -= n
    return tuple(jobs)


def _poisson(rng: random.Random, per_day: float, horizon: float) -> list[float]:
    out: list[float] = []
    if per_day <= 0:
        return out
    t = rng.expovariate(per_day / DAY)
    while t < horizon:
        out.append(t)
        t += rng.expovariate(per_day / DAY)
    return out


def _pick(rng: random.Random, weights: Mapping[K, float]) -> K:
    keys = sorted(weights)
    return rng.choices(keys, weights=[weights[k] for k in keys])[0]
