"""The simulation's one configuration: `default.toml` (with its sources), a user's file over it, then
flags over both. Unknown keys and reasons outside the taxonomy are errors, named."""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gpuwatch.recovery.policy import PolicyConfig
from gpuwatch.taxonomy import REASONS

DAY = 86400.0


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    nodes: int
    gpus_per_node: int
    spare_fraction: float
    days: float
    seed: int

    @property
    def spares(self) -> int:
        return max(1, math.ceil(self.nodes * self.spare_fraction))


@dataclass(frozen=True, slots=True)
class JobsConfig:
    sizes: tuple[int, ...]
    weights: tuple[float, ...]
    step_s: float
    startup_s: float
    checkpoint_load_s: float
    checkpoint_interval_s: float
    checkpoint_blocking_s: float
    async_blocking_s: float
    async_write_s: float


@dataclass(frozen=True, slots=True)
class FailuresConfig:
    infra_per_1000_node_days: float
    infra_mix: Mapping[str, float]
    persistent: Mapping[str, float]
    refail_s: Mapping[str, float]
    repair_s: float
    user_errors_per_job_day: float
    user_size_exponent: float
    user_mix: Mapping[str, float]
    deterministic: Mapping[str, float]
    user_refail_s: float
    fix_median_s: float
    preemptions_per_job_day: float
    requeue_s: float
    hangs_per_1000_node_days: float
    hang_in_collective: float
    nccl_timeout_s: float
    hang_timeout_s: float

    def user_rate_per_day(self, gpus: int) -> float:
        """Framework and script errors per day of a job of ``gpus`` GPUs."""
        return self.user_errors_per_job_day * (gpus / 8) ** -self.user_size_exponent


@dataclass(frozen=True, slots=True)
class PeopleConfig:
    delay_median_s: float
    delay_sigma: float


@dataclass(frozen=True, slots=True)
class PoliciesConfig:
    torchrun_max_restarts: int
    decision_s: float
    gpuwatch: PolicyConfig


@dataclass(frozen=True, slots=True)
class SimConfig:
    cluster: ClusterConfig
    jobs: JobsConfig
    failures: FailuresConfig
    people: PeopleConfig
    policies: PoliciesConfig

    @property
    def horizon_s(self) -> float:
        return self.cluster.days * DAY


_SECTIONS = {
    "cluster": ClusterConfig,
    "jobs": JobsConfig,
    "failures": FailuresConfig,
    "people": PeopleConfig,
    "policies": PoliciesConfig,
}


def default_toml() -> str:
    return resources.files("simulate").joinpath("default.toml").read_text()


def load_config(path: Path | None = None, **overrides: Any) -> SimConfig:
    """The default configuration, ``path``'s values over it, then ``overrides`` (cluster keys:
    nodes, gpus_per_node, days, seed, spare_fraction; None means not given)."""
    raw = tomllib.loads(default_toml())
    if path is not None:
        _merge(raw, tomllib.loads(Path(path).read_text()), str(path))
    for key, value in overrides.items():
        if value is None:
            continue
        if key not in raw["cluster"]:
            raise ValueError(f"unknown override {key!r}")
        raw["cluster"][key] = value
    return from_dict(raw)


def from_dict(raw: Mapping[str, Any]) -> SimConfig:
    """A configuration from a complete dict of sections (the shape of default.toml)."""
    unknown = set(raw) - set(_SECTIONS)
    if unknown:
        raise ValueError(f"unknown section(s): {', '.join(sorted(unknown))}")
    built: dict[str, Any] = {}
    for name, cls in _SECTIONS.items():
        section = dict(raw.get(name, {}))
        names = {f.name for f in fields(cls)}
        extra, missing = set(section) - names, names - set(section)
        if extra or missing:
            raise ValueError(f"[{name}]: unknown {sorted(extra)}, missing {sorted(missing)}")
        if name == "policies":
            section["gpuwatch"] = replace(PolicyConfig(), **section["gpuwatch"])
        for key, value in section.items():
            if isinstance(value, list):
                section[key] = tuple(value)
            elif isinstance(value, dict):
                section[key] = MappingProxyType(dict(value))
        built[name] = cls(**section)
    config = SimConfig(**built)
    _validate(config)
    return config


def _merge(base: dict[str, Any], top: Mapping[str, Any], origin: str) -> None:
    for key, value in top.items():
        if key not in base:
            raise ValueError(f"{origin}: unknown key {key!r}")
        if isinstance(value, dict) and isinstance(base[key], dict) and key not in _WHOLE:
            _merge(base[key], value, f"{origin} [{key}]")
        else:
            base[key] = value


# Tables a user file replaces whole (a mix is one distribution, not keys to patch).
_WHOLE = frozenset({"infra_mix", "user_mix", "gpuwatch"})


def _validate(c: SimConfig) -> None:
    if c.cluster.nodes < 2 or c.cluster.gpus_per_node < 1 or c.cluster.days <= 0:
        raise ValueError("need at least 2 nodes, 1 GPU per node and a positive number of days")
    if c.cluster.spares >= c.cluster.nodes:
        raise ValueError("spare_fraction leaves no node for jobs")
    if len(c.jobs.sizes) != len(c.jobs.weights) or not c.jobs.sizes or min(c.jobs.sizes) < 1:
        raise ValueError("[jobs] sizes and weights must be non-empty lists of the same length")
    if c.jobs.step_s <= 0 or c.jobs.checkpoint_interval_s < c.jobs.step_s:
        raise ValueError("[jobs] step_s must be > 0 and checkpoint_interval_s at least one step")
    f = c.failures
    for table, category in (("infra_mix", "infrastructure"), ("user_mix", None)):
        mix: Mapping[str, float] = getattr(f, table)
        for reason in mix:
            want = REASONS.get(reason)
            if want is None:
                raise ValueError(f"[failures] {table}: {reason!r} is not a reason of the taxonomy")
            ok = want.category == category if category else want.category in ("framework", "script")
            if not ok or reason == "hang":
                raise ValueError(f"[failures] {table}: {reason!r} ({want.category}) does not belong there")
        if mix and (min(mix.values()) < 0 or sum(mix.values()) <= 0):
            raise ValueError(f"[failures] {table}: weights must be >= 0 and not all 0")
    for table in ("persistent", "refail_s", "deterministic"):
        for reason, value in getattr(f, table).items():
            if reason not in REASONS or value < 0:
                raise ValueError(f"[failures] {table}: {reason!r} = {value!r}")
