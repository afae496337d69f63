"""Checkpoints in simulated time: when a job saves, what it can resume from, and the real check of it.

A run saves every `interval_s` of training; a save stops training for `blocking_s` (all of a
synchronous save, the host copy of an asynchronous one) and is valid `write_s` after that (0 when the
blocking part is the whole write). A failure therefore finds on disk the newest valid checkpoint and
perhaps a newer one still being written. That state is written as tiny checkpoint directories (a
shard and, for complete ones, gpuwatch's manifest by `write_manifest`), and the step to resume from is
what `gpuwatch.recovery.checkpoints.latest_valid` says: the same code the supervisor and the server
run, which skips the half-written one.
"""

from __future__ import annotations

import contextlib
import logging
import math
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpuwatch.recovery.checkpoints import latest_valid, write_manifest


@dataclass(frozen=True, slots=True)
class Schedule:
    """A run's checkpoint cadence, in seconds of wall time since the run started training."""

    interval_s: float  # training between two saves, a whole number of steps
    blocking_s: float
    write_s: float = 0.0

    @property
    def cycle_s(self) -> float:
        return self.interval_s + self.blocking_s

    def progress(self, elapsed: float) -> tuple[float, float]:
        """Training done and time blocked by saves, ``elapsed`` seconds into the run."""
        n = math.floor(elapsed / self.cycle_s)
        rest = elapsed - n * self.cycle_s
        return n * self.interval_s + min(rest, self.interval_s), n * self.blocking_s + max(0.0, rest - self.interval_s)

    def saves(self, frozen: float, now: float) -> tuple[int, int]:
        """(valid, started): how many saves are complete and how many had begun, for a run that stopped
        training ``frozen`` seconds in (a hang, or the failure itself) and is looked at ``now`` seconds in.
        A background write goes on while the run hangs; a blocking part cut short never completes."""
        started = math.floor((frozen + self.blocking_s) / self.cycle_s)
        blocked = math.floor(frozen / self.cycle_s)
        written = math.floor((now - self.write_s) / self.cycle_s) if now >= self.write_s else 0
        return max(0, min(blocked, written)), max(0, started)


def young_daly(blocking_s: float, mtbf_s: float, step_s: float, floor_s: float = 0.0) -> float:
    """The interval that minimises lost time, sqrt(2 · blocking · MTBF) (Young 1974, Daly 2006),
    rounded to whole steps and no shorter than ``floor_s`` (the background write of the previous save)."""
    interval = math.sqrt(2 * blocking_s * mtbf_s)
    return max(step_s, math.ceil(max(interval, floor_s) / step_s) * step_s)


class CheckpointDir:
    """One job's checkpoint directory, kept to the newest valid checkpoint and the newest partial one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.path.mkdir(parents=True, exist_ok=True)
        self._on_disk: dict[int, bool] = {}  # step -> complete
        self._found: int | None = None
        self._checked = False  # _found is latest_valid's answer for what is on disk now

    def resume_step(self, valid: int | None, partial: int | None) -> int | None:
        """Write the state (the newest valid checkpoint's step, a newer partial one's) and return the step
        that `latest_valid` resumes from (None: no valid checkpoint)."""
        want = {s: True for s in (valid,) if s is not None}
        if partial is not None and partial != valid:
            want[partial] = False
        for step in [s for s in self._on_disk if want.get(s) != self._on_disk[s]]:
            shutil.rmtree(self._dir(step))
            del self._on_disk[step]
            self._checked = False
        for step, complete in want.items():
            if step in self._on_disk:
                continue
            self._checked = False
            directory = self._dir(step)
            directory.mkdir()
            (directory / "model_00.bin").write_bytes(step.to_bytes(8, "little"))
            if complete:
                write_manifest(directory, step, fsync=False)
            self._on_disk[step] = complete
        if not self._checked:  # the directory changed: ask the real check again
            found, _ = latest_valid(self.path)
            self._found, self._checked = (found.step if found is not None else None), True
        return self._found

    def _dir(self, step: int) -> Path:
        return self.path / f"step_{step:09d}"


@contextlib.contextmanager
def quiet_skips() -> Iterator[None]:
    """`latest_valid` logs every partial checkpoint it skips; a simulation skips thousands on purpose."""
    logger = logging.getLogger("gpuwatch.recovery.checkpoints")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
