"""A seeded week of GPU-cluster life for the period report's tests: jobs restarting through failures of
every kind, their diagnoses, decisions, restarts and lost work, rollups with idle GPU time, node-level
incidents, and incidents just outside the week.

`generate_week` writes it and returns the totals the report must find, computed here while
generating, in whole seconds relative to the start, with no call into `server.reports.period`.
Lost work is a whole number of quarter-quarter-hours (225 s) on a whole number of GPUs, so every
GPU-hour figure is a multiple of 1/16 and sums exactly in binary floating point: totals can be
compared with ``==``, and only divisions (shares, MTBF, ETTR) need an approximate comparison.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpuwatch.taxonomy import REASONS
from server.store.models import Action, Diagnosis, Incident, Job, JobRollup, Node, Run

WEEK = 7 * 86400
Q = 225  # seconds; gpus * k * Q / 3600 = gpus * k / 16
PRICE = 3.0  # per GPU-hour, exact in binary
CURRENCY = "USD"
HOUR = 3600
UNDIAGNOSED = "undiagnosed"

# Per-reason weights by category, after the Acme table: infrastructure failures are the rarest kind ...
_WEIGHT = {"infrastructure": 1, "preemption": 3, "framework": 3, "script": 4, "unknown": 2}
# ... and the costliest: they strike long runs (seconds, low-high) and lose more work (at most k * Q).
_DURATION = {
    "infrastructure": (2 * HOUR, 30 * HOUR),
    "preemption": (2 * HOUR, 20 * HOUR),
    "unknown": (1 * HOUR, 10 * HOUR),
    "framework": (10 * 60, 6 * HOUR),
    "script": (4 * 60, 30 * 60),
}
_MAX_LOST_Q = {"infrastructure": 16, "preemption": 8, "unknown": 8, "framework": 8, "script": 4}


@dataclass
class JobExpected:
    runs: int = 0
    run_s: int = 0
    failures: int = 0
    lost_s: int = 0
    gpu_hours: float = 0.0
    first: int | None = None  # earliest clipped run start (seconds from the start)
    last: int | None = None  # latest clipped run end

    @property
    def wall_s(self) -> int:
        return 0 if self.first is None or self.last is None else self.last - self.first

    @property
    def productive_s(self) -> int:
        return max(0, self.run_s - self.lost_s)

    @property
    def mtbf_s(self) -> float | None:
        return self.run_s / self.failures if self.failures else None

    @property
    def ettr(self) -> float | None:
        return self.productive_s / self.wall_s if self.wall_s else None


@dataclass
class NodeExpected:
    run_s: int = 0
    failures: int = 0
    gpu_hours: float = 0.0

    @property
    def mtbf_s(self) -> float | None:
        return self.run_s / self.failures if self.failures else None


@dataclass
class Outside:
    """An incident written outside the week, to prove the bounds."""

    incident_id: int
    offset_s: int  # opened_at - start
    failure: bool  # it has a run
    trigger: str


@dataclass
class Expected:
    since: datetime
    until: datetime
    failures: int = 0
    node_incidents: dict[str, int] = field(default_factory=dict)
    gpu_hours_lost: float = 0.0
    cost: float = 0.0
    restarts: int = 0
    restarts_succeeded: int = 0
    by_reason: dict[str, tuple[str, int, float]] = field(default_factory=dict)  # reason → (category, n, GPU-h)
    by_category: dict[str, tuple[int, float]] = field(default_factory=dict)
    jobs: dict[str, JobExpected] = field(default_factory=dict)
    nodes: dict[str, NodeExpected] = field(default_factory=dict)
    idle_gpu_seconds: int = 0
    outside: list[Outside] = field(default_factory=list)

    @property
    def ettr(self) -> float | None:
        wall = sum(j.wall_s for j in self.jobs.values())
        return sum(j.productive_s for j in self.jobs.values()) / wall if wall else None

    @property
    def top_nodes(self) -> list[str]:
        failing = [(n, e) for n, e in self.nodes.items() if e.failures]
        return [n for n, e in sorted(failing, key=lambda x: (-x[1].failures, -x[1].gpu_hours, x[0]))][:10]


@dataclass
class _Week:
    session: Session
    rng: random.Random
    start: datetime
    exp: Expected
    nodes: dict[str, Node]
    # restarts done for incidents in the week: (job, attempt restarted); resolved at the end
    restarted: list[tuple[str, int]] = field(default_factory=list)
    runs: dict[tuple[str, int], tuple[int, int | None, str]] = field(default_factory=dict)

    def at(self, offset_s: int) -> datetime:
        return self.start + timedelta(seconds=offset_s)

    def run(self, job: Job, attempt: int, node: str, begin: int, end: int | None, state: str) -> Run:
        """Store a run and add its time inside the week to its job and node."""
        run = Run(
            job_id=job.id,
            attempt=attempt,
            state=state,
            started_at=self.at(begin),
            ended_at=None if end is None else self.at(end),
            exit_code=None if state == "running" else (0 if state == "succeeded" else 1),
            node_id=self.nodes[node].id,
        )
        self.session.add(run)
        self.session.flush()
        self.runs[(job.name, attempt)] = (begin, end, state)
        lo, hi = max(begin, 0), min(WEEK if end is None else end, WEEK)
        if hi > lo:
            je = self.exp.jobs.setdefault(job.name, JobExpected())
            je.runs += 1
            je.run_s += hi - lo
            je.first = lo if je.first is None else min(je.first, lo)
            je.last = hi if je.last is None else max(je.last, hi)
            self.exp.nodes.setdefault(node, NodeExpected()).run_s += hi - lo
        return run

    def failure(
        self,
        job: Job,
        run: Run,
        node: str,
        opened: int,
        reason: str | None,
        blamed: str | None,
        cost: dict[str, Any] | None,
        trigger: str = "run_failed",
    ) -> Incident:
        """Store a failure incident (and its diagnosis unless ``reason`` is None) and count it."""
        incident = Incident(
            job_id=job.id,
            run_id=run.id,
            node_id=self.nodes[node].id,
            trigger=trigger,
            state="open" if reason is None else "decided",
            opened_at=self.at(opened),
            cost=cost,
        )
        self.session.add(incident)
        self.session.flush()
        if reason is not None:
            if self.rng.random() < 0.25:  # a first guess, superseded: the report must use the latest row
                other = self.rng.choice(sorted(self.nodes))
                self._diagnosis(incident.id, "unknown", other, opened + 1, 0.3)
            self._diagnosis(incident.id, reason, blamed, opened + 5, 0.9)
        if not 0 <= opened < WEEK:
            self.exp.outside.append(Outside(incident.id, opened, True, trigger))
            return incident
        key = reason or UNDIAGNOSED
        category = REASONS[reason].category if reason else UNDIAGNOSED
        gh = float(cost["gpu_hours"]) if cost else 0.0
        money = float(cost["cost"]) if cost else 0.0
        e = self.exp
        e.failures += 1
        e.gpu_hours_lost += gh
        e.cost += money
        _, n, h = e.by_reason.get(key, (category, 0, 0.0))
        e.by_reason[key] = (category, n + 1, h + gh)
        n, h = e.by_category.get(category, (0, 0.0))
        e.by_category[category] = (n + 1, h + gh)
        je = e.jobs.setdefault(job.name, JobExpected())
        je.failures += 1
        je.lost_s += int(cost["wall_s"]) if cost else 0
        je.gpu_hours += gh
        if blamed is not None:
            ne = e.nodes.setdefault(blamed, NodeExpected())
            ne.failures += 1
            ne.gpu_hours += gh
        return incident

    def _diagnosis(self, incident_id: int, reason: str, node: str | None, when: int, confidence: float) -> None:
        info = REASONS[reason]
        self.session.add(
            Diagnosis(
                incident_id=incident_id,
                reason=reason,
                category=info.category,
                action=info.action,
                confidence=confidence,
                source="rules",
                node_name=node,
                evidence=[{"file": "rank0.log", "line": 1, "text": f"{reason} here"}],
                created_at=self.at(when),
            )
        )
        self.session.flush()

    def node_incident(self, node: str, trigger: str, opened: int, job: Job | None = None) -> None:
        incident = Incident(
            job_id=job.id if job else None,
            node_id=self.nodes[node].id,
            trigger=trigger,
            state="decided",
            opened_at=self.at(opened),
        )
        self.session.add(incident)
        self.session.flush()
        reason = "gpu_hardware" if trigger == "xid" else "node_failure"
        self._diagnosis(incident.id, reason, node, opened + 2, 1.0)
        if 0 <= opened < WEEK:
            self.exp.node_incidents[trigger] = self.exp.node_incidents.get(trigger, 0) + 1
        else:
            self.exp.outside.append(Outside(incident.id, opened, False, trigger))

    def actions(self, incident: Incident, job: Job, run: Run, reason: str, restart: str | None, opened: int) -> None:
        """The decision and, when ``restart`` is a status, the restart (and exclusion) actions."""
        info = REASONS[reason]
        when = self.at(opened + 6)
        self.session.add(
            Action(
                incident_id=incident.id,
                job_id=job.id,
                kind="decision",
                params={"reason": reason, "action": info.action, "restart": restart is not None, "run_id": run.id},
                status="done",
                created_at=when,
            )
        )
        if restart is None:
            return
        if info.action == "restart_exclude_node":
            self.session.add(
                Action(incident_id=incident.id, job_id=job.id, kind="exclude_node", status="done", created_at=when)
            )
        self.session.add(
            Action(
                incident_id=incident.id,
                job_id=job.id,
                kind="restart",
                executor="local",
                params={"run_id": run.id, "delay_s": 0, "exclude_nodes": []},
                status=restart,
                created_at=when,
            )
        )
        if restart == "done" and 0 <= opened < WEEK:
            self.exp.restarts += 1
            self.restarted.append((job.name, run.attempt))

    def resolve_restarts(self) -> None:
        """A restart succeeded when the next attempt started in the week and succeeded or outlived it."""
        for job, attempt in self.restarted:
            nxt = self.runs.get((job, attempt + 1))
            if nxt is None:
                continue
            begin, end, state = nxt
            if begin < WEEK and (state == "succeeded" or end is None or end >= WEEK):
                self.exp.restarts_succeeded += 1


def _cost(gpus: int, wall_q: int, down_q: int | None) -> dict[str, Any]:
    quarters = wall_q + (down_q or 0)
    gpu_hours = gpus * quarters / 16  # == gpus * (wall_s + downtime_s) / 3600, exactly
    return {
        "gpus": gpus,
        "steps": 50 * wall_q,
        "wall_s": float(wall_q * Q),
        "downtime_s": None if down_q is None else float(down_q * Q),
        "gpu_hours": gpu_hours,
        "cost": gpu_hours * PRICE,
        "currency": CURRENCY,
    }


def _reason(rng: random.Random, scripts: bool) -> str:
    """A weighted reason; ``scripts`` False after an automatic restart: the same code already ran."""
    reasons = sorted(r for r in REASONS if scripts or REASONS[r].category != "script")
    return rng.choices(reasons, weights=[_WEIGHT[REASONS[r].category] for r in reasons])[0]


def _random_job(w: _Week, index: int, seed: int) -> None:
    rng = w.rng
    job = Job(name=f"w{seed}-train-{index}", world_size=rng.choice([8, 16, 32, 64]), state="running")
    w.session.add(job)
    w.session.flush()
    gpus = job.world_size or 8
    names = sorted(w.nodes)
    node = rng.choice(names)
    t = rng.randint(-8 * HOUR, 2 * 86400)
    attempt, restarted = 1, False
    while True:
        succeed = attempt >= 2 and rng.random() < (0.4 if restarted else 0.2)
        reason = None if succeed else _reason(rng, scripts=not restarted)
        category = "framework" if reason is None else REASONS[reason].category
        lo, hi = _DURATION[category]
        end = t + rng.randint(lo, hi)
        if end >= WEEK and rng.random() < 0.5:  # still running when the week ends
            w.run(job, attempt, node, t, None, "running")
            return
        run = w.run(job, attempt, node, t, end, "succeeded" if succeed else "failed")
        if reason is None:
            return
        info = REASONS[reason]
        opened = end + rng.randint(0, 20)
        lost_q = rng.randint(1, max(1, min((end - t) // Q, _MAX_LOST_Q[category])))
        restart = None
        if info.action != "notify":
            restart = "done" if rng.random() < 0.9 else "failed"
        down_q = rng.randint(1, 8) if restart == "done" else None
        cost = _cost(gpus, lost_q, down_q)
        if info.category == "infrastructure" and not (reason == "network_error" and rng.random() < 0.5):
            blamed: str | None = node
        else:
            blamed = None
        trigger = "hang" if reason == "hang" else "run_failed"
        if reason == "node_failure" and rng.random() < 0.5:
            trigger = "node_silent"
        incident = w.failure(job, run, node, opened, reason, blamed, cost, trigger)
        w.actions(incident, job, run, reason, restart, opened)
        if end >= WEEK:
            return
        attempt, restarted = attempt + 1, restart == "done"
        if restarted:
            t = end + (down_q or 0) * Q
            if info.action == "restart_exclude_node":
                node = rng.choice([n for n in names if n != node])
            if t >= WEEK:  # restarted after the week: does not count as a success
                w.run(job, attempt, node, t, None, "running")
                return
        elif rng.random() < 0.7:  # a person resubmits it
            t = end + rng.randint(HOUR, 12 * HOUR)
            if t >= WEEK:
                return
        else:
            return


def _edge_jobs(w: _Week, seed: int) -> None:
    """Fixed jobs around the bounds and the rows with missing data."""
    n0, n1 = sorted(w.nodes)[:2]
    edge = Job(name=f"w{seed}-edge", world_size=8, state="running")
    old = Job(name=f"w{seed}-old", world_size=4, state="failed")
    w.session.add_all([edge, old])
    w.session.flush()
    # a failure opened one second before the week (its restart not counted) ...
    r1 = w.run(edge, 1, n0, -4 * HOUR, -60, "failed")
    inc = w.failure(edge, r1, n0, -1, "gpu_hardware", n0, _cost(8, 16, 8))
    w.actions(inc, edge, r1, "gpu_hardware", "done", -1)
    # ... a run across the whole week, failing 30 s before its end, opened exactly at the end ...
    r2 = w.run(edge, 2, n1, -60 + 8 * Q, WEEK - 30, "failed")
    inc = w.failure(edge, r2, n1, WEEK, "cuda_error", n1, _cost(8, 4, 4))
    w.actions(inc, edge, r2, "cuda_error", "done", WEEK)
    w.run(edge, 3, n1, WEEK - 30 + 4 * Q, None, "running")
    # an undiagnosed failure without a cost (counts 0 GPU-hours), then a diagnosed one without a cost
    r1 = w.run(old, 1, n1, HOUR, 2 * HOUR, "failed")
    w.failure(old, r1, n1, 2 * HOUR, None, None, None)
    r2 = w.run(old, 2, n1, 3 * HOUR, 3 * HOUR + 1800, "failed")
    inc = w.failure(old, r2, n1, 3 * HOUR + 1800, "script_error", None, None)
    w.actions(inc, old, r2, "script_error", None, 3 * HOUR + 1800)
    # node-level incidents, two of them just outside
    w.node_incident(n0, "xid", -1)
    w.node_incident(n1, "node_silent", WEEK)


def _rollups(w: _Week, jobs: list[Job]) -> None:
    rng = w.rng
    for job in jobs:
        rows: dict[tuple[int, int], int] = {}
        for minute in [-60, 0, WEEK - 60, WEEK] + [60 * rng.randrange(-60, WEEK // 60 + 60) for _ in range(40)]:
            rows[(rng.randint(-1, 3), minute)] = rng.randint(0, 60)
        for (rank, minute), idle in rows.items():
            w.session.add(
                JobRollup(
                    job_id=job.id,
                    rank=rank,
                    minute=w.at(minute),
                    steps=rng.randint(0, 100),
                    gpu_seconds=60.0,
                    idle_gpu_seconds=float(idle),
                )
            )
            if 0 <= minute < WEEK:
                w.exp.idle_gpu_seconds += idle
    w.session.flush()


def generate_week(session: Session, seed: int, start: datetime) -> Expected:
    """Write a week [start, start + 7 days) of cluster history; return what the period report must say.

    ``start`` must be timezone-aware and on a whole minute. The caller commits.
    """
    if start.tzinfo is None or start.second or start.microsecond:
        raise ValueError("start must be timezone-aware and on a whole minute")
    rng = random.Random(seed)
    nodes = {f"w{seed}-gpu-{i:02d}": Node(name=f"w{seed}-gpu-{i:02d}") for i in range(rng.randint(3, 6))}
    session.add_all(nodes.values())
    session.flush()
    w = _Week(session, rng, start, Expected(since=start, until=start + timedelta(seconds=WEEK)), nodes)
    _edge_jobs(w, seed)
    for i in range(rng.randint(3, 6)):
        _random_job(w, i, seed)
    names = sorted(w.nodes)
    for _ in range(rng.randint(2, 4)):
        w.node_incident(rng.choice(names), rng.choice(["xid", "node_silent"]), rng.randrange(0, WEEK))
    w.resolve_restarts()
    _rollups(w, list(session.scalars(select(Job).order_by(Job.id))))
    return w.exp
