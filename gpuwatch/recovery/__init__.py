"""Automatic recovery, the pure half: which checkpoint to resume from and whether to restart at all.

The server, the supervisor (`gpuwatch run`) and the CLI all call this code, so the same failure gets
the same decision everywhere. Nothing here acts: executors restart, drain and notify.
"""

from gpuwatch.recovery.checkpoints import (
    DEFAULT_MARKERS,
    DEFAULT_PATTERNS,
    MANIFEST,
    Checkpoint,
    Skipped,
    latest_valid,
    scan,
    step_of,
    validate,
    write_manifest,
)
from gpuwatch.recovery.policy import Attempt, Decision, PolicyConfig, decide, exit_failed

__all__ = [
    "DEFAULT_MARKERS",
    "DEFAULT_PATTERNS",
    "MANIFEST",
    "Attempt",
    "Checkpoint",
    "Decision",
    "PolicyConfig",
    "Skipped",
    "decide",
    "exit_failed",
    "latest_valid",
    "scan",
    "step_of",
    "validate",
    "write_manifest",
]
