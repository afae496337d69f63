"""Stragglers: the rank that makes every other rank wait.

Synchronous collectives make every rank's *wall* step time the same (the fast ranks wait inside
all_reduce for the slow one), so a straggler is found by its *compute* time, the step minus the time
spent in collectives: a rank whose compute time exceeds the median of the other ranks' by more than
`margin` (and `min_s`) for `steps` steps in a row. Checked on each batch's step reports, against the
per-step compute times the job tracker keeps.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from server.detect.detection import Detection
from server.telemetry.job_tracker import JobState, JobTracker


class StragglerDetector:
    def __init__(self, tracker: JobTracker, *, margin: float = 0.2, steps: int = 5, min_s: float = 0.005) -> None:
        self._tracker = tracker
        self.margin, self.steps, self.min_s = margin, steps, min_s

    def check(self, jobs: Iterable[str]) -> list[Detection]:
        """The stragglers the steps just reported for ``jobs`` reveal; each once per streak."""
        found: list[Detection] = []
        with self._tracker.locked() as state:
            for name in jobs:
                if (job := state.get(name)) is not None and job.pending:
                    found.extend(self._evaluate(job))
        return found

    def _evaluate(self, job: JobState) -> list[Detection]:
        expected = max(2, job.world_size or 0, len([r for r in job.ranks if r >= 0]))
        latest = max(job.pending)
        found = []
        for step in sorted(job.pending):
            computes = job.pending[step]
            complete = len(computes) >= expected
            if not complete and step > latest - 50:
                continue  # wait for the other ranks' reports of this step
            del job.pending[step]
            if len(computes) < 2:
                continue
            for rank, compute in computes.items():
                others = statistics.median(c for r, c in computes.items() if r != rank)
                state = job.rank(rank)
                slow = compute > others * (1 + self.margin) and compute - others > self.min_s
                state.streak = state.streak + 1 if slow else 0
                if slow and state.streak >= self.steps and not state.straggling:
                    state.straggling = True
                    job.straggler_events += 1
                    found.append(
                        Detection(
                            "straggler",
                            job.name,
                            state.node,
                            (rank,),
                            f"rank {rank} on {state.node} is a straggler: its compute time per step is "
                            f"{compute:.3f}s against {others:.3f}s for the other ranks, {state.streak} steps in a row",
                            {"rank": rank, "node": state.node, "step": step, "compute_s": compute, "others_s": others},
                        )
                    )
                elif not slow:
                    state.straggling = False
        return found
