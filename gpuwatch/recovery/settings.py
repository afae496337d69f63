"""The policy a job runs under: the `recovery_*` settings, then the job's own overrides."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any

from gpuwatch.config import Settings
from gpuwatch.recovery.policy import PolicyConfig

#: Keys a job may override (`gpuwatch run --max-restarts`, `--policy KEY=VALUE`), besides `overrides`.
JOB_KEYS = frozenset(f.name for f in fields(PolicyConfig)) - {"paused", "loop_exempt"}


def policy_config(settings: Settings, job: Mapping[str, Any] | None = None, *, paused: bool = False) -> PolicyConfig:
    """Settings first, the job's overrides on top; an unknown key is a ValueError naming it."""
    base = PolicyConfig(
        max_restarts=settings.recovery_max_restarts,
        window_s=settings.recovery_window_s,
        max_in_window=settings.recovery_max_in_window,
        backoff_base_s=settings.recovery_backoff_base_s,
        backoff_max_s=settings.recovery_backoff_max_s,
        crash_loop_n=settings.recovery_crash_loop_n,
        no_progress_n=settings.recovery_no_progress_n,
        exclude_ttl_s=settings.recovery_exclude_ttl_s,
        dry_run=settings.recovery_dry_run,
        paused=paused,
    )
    job = dict(job or {})
    unknown = set(job) - JOB_KEYS
    if unknown:
        raise ValueError(f"unknown recovery policy key(s): {', '.join(sorted(unknown))}")
    return replace(base, **job)
