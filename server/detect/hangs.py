"""Hangs: a job as a whole stopped making progress.

No rank has finished a step for the job's hang timeout, and every GPU sample attributed to the job is
idle (below the tracker's `idle_util`). A long step on busy GPUs is progress, not a hang. A job with
no GPU samples at all (CPU-only) is judged on its steps alone. The watchdog checks every
`hang_check_s`; a hung job opens a `hang` incident on its running run, decided once its ranks' stacks
are in (server/incidents/hang_stacks.py). A restart kills the hung run: its supervisor stops it when it
sees the decision, a scheduler's executor requeues it.
"""

from __future__ import annotations

import logging

from sqlalchemy import select

from gpuwatch.diagnosis.diagnose import diagnose_hang
from server.detect.detection import Detection
from server.incidents.context import IncidentContext
from server.incidents.pipeline import open_incident
from server.store.models import Incident, Job, Node, Run
from server.telemetry.job_tracker import JobTracker

log = logging.getLogger("gpuwatch.server.incidents")


class HangDetector:
    def __init__(self, tracker: JobTracker, *, default_timeout_s: float = 600.0) -> None:
        self._tracker = tracker
        self.default_timeout_s = default_timeout_s

    def check(self) -> list[Detection]:
        """Jobs that stopped stepping while their GPUs idle; each reported once per stall."""
        tracker = self._tracker
        now = tracker.clock()
        found = []
        with tracker.locked() as jobs:
            for job in jobs.values():
                stepping = [r for r in job.ranks.values() if r.last_progress is not None]
                if job.hung or not stepping:
                    continue
                last = max(r.last_progress for r in stepping)  # type: ignore[type-var]
                timeout = job.hang_timeout_s or self.default_timeout_s
                if now - last < timeout or not tracker.gpus_idle(job, now):
                    continue
                job.hung = True
                job.hang_events += 1
                stalled = min(stepping, key=lambda r: r.last_step)
                found.append(
                    Detection(
                        "hang",
                        job.name,
                        stalled.node,
                        tuple(sorted(r.rank for r in stepping)),
                        f"job {job.name} has not finished a step for {now - last:.0f}s (hang timeout "
                        f"{timeout:.0f}s) and its GPUs are idle; lowest step {stalled.last_step} on rank "
                        f"{stalled.rank} ({stalled.node})",
                        {
                            "idle_for_s": now - last,
                            "timeout_s": timeout,
                            "last_steps": {str(r.rank): r.last_step for r in stepping},
                        },
                    )
                )
        return found


def open_hang_incident(ctx: IncidentContext, job_name: str, node_name: str | None, message: str) -> int | None:
    """A hung job: a `hang` incident on its running run. It asks for the ranks' stacks and decides once they
    came or `hang_stacks_wait_s` passed (server/incidents/hang_stacks.py); at once when that is 0."""
    with ctx.sessions() as session:
        run = session.scalar(
            select(Run)
            .join(Job, Job.id == Run.job_id)
            .where(Job.name == job_name, Run.state == "running")
            .order_by(Run.id.desc())
            .limit(1)
        )
        if run is None or session.scalar(select(Incident.id).where(Incident.run_id == run.id)) is not None:
            return None  # not a run gpuwatch knows of, or already being dealt with
        node_id = session.scalar(select(Node.id).where(Node.name == node_name)) if node_name else None
        node_id = node_id or run.node_id
        run_id = run.id
    if node_id is None:
        return None
    log.warning("job %s hung: %s", job_name, message)
    if ctx.settings.server.hang_stacks_wait_s <= 0:
        return open_incident(
            ctx, node_id=node_id, trigger="hang", run_id=run_id, result=diagnose_hang(message, node_name)
        )
    return open_incident(ctx, node_id=node_id, trigger="hang", run_id=run_id, hang=message)
