"""The policy a job runs under: the `recovery` settings (a `PolicyConfig` themselves), then the job's own
overrides."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any

from gpuwatch.recovery.policy import PolicyConfig

#: Keys a job may override (`gpuwatch run --max-restarts`, `--policy KEY=VALUE`), besides `overrides`.
#: `silent_node_wait_s` is the server's, bounded by every supervisor's decision timeout: not a job's.
JOB_KEYS = frozenset(f.name for f in fields(PolicyConfig)) - {"paused", "loop_exempt", "silent_node_wait_s"}


def policy_config(base: PolicyConfig, job: Mapping[str, Any] | None = None, *, paused: bool = False) -> PolicyConfig:
    """The cluster's policy (the `recovery` settings), the job's overrides on top; an unknown key is a
    ValueError naming it."""
    job = dict(job or {})
    unknown = set(job) - JOB_KEYS
    if unknown:
        raise ValueError(f"unknown recovery policy key(s): {', '.join(sorted(unknown))}")
    return replace(base, paused=paused, **job)
