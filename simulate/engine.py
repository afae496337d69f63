"""The discrete-event loop: one policy over one trace, on a simulated clock (a heap of timed events).

A job is RUNNING (training, saving on its schedule), HUNG (alive, no progress), DOWN (failed, waiting
for whatever the policy said: a decision, a person, the scheduler, a spare node, or its owner's fix)
or STARTING (launch and checkpoint load). A failure rolls the job back to the checkpoint that the
real checkpoint code finds on disk, asks the policy, and schedules the relaunch. A relaunch on a bad
node fails again after that node's `refail_s`; code with a deterministic bug fails `user_refail_s`
after start-up until its owner fixed it. An excluded node is swapped for a spare; a bad one comes back
repaired after `repair_s`, a healthy one after the policy's exclusion TTL. A job that needs a spare
when there is none waits, down, for one.

Time is accounted per job, in seconds, into productive, lost (kind, reason) and off (see results.py);
the three add up to the period for every job.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuwatch.recovery.policy import Attempt
from gpuwatch.taxonomy import REASONS
from simulate.checkpointing import CheckpointDir, Schedule
from simulate.config import SimConfig
from simulate.evidence import VARIANTS, Where, generate
from simulate.pages import Records, pages
from simulate.policies import Failure, Gpuwatch, Policy, Response
from simulate.results import CHECKPOINTING, PolicyResult
from simulate.trace import HANG, Fault, JobSpec, Trace, rng_for

RUNNING, HUNG, DOWN, STARTING = "running", "hung", "down", "starting"
_ACTIVE = (RUNNING, HUNG, STARTING)
_DEFAULT_REFAIL_S = 600.0
_REBOOT_S = 600.0  # a node that failed but is not bad is back after a reboot


@dataclass
class Job:
    spec: JobSpec
    nodes: list[str]
    schedule: Schedule
    store: CheckpointDir
    state: str = RUNNING
    gen: int = 0
    seg_start: float = 0.0  # when the current run started training
    seg_p0: float = 0.0  # training done at that moment (the checkpoint it resumed from)
    resume_step: int | None = None  # the latest valid checkpoint
    hang_at: float | None = None
    broken: Fault | None = None  # a deterministic bug in its code, until fixed
    since: float = 0.0  # start of the current DOWN or STARTING period
    cause: str = ""  # the reason being recovered from
    pending: Response | None = None
    fix_s: float = 0.0
    off_since: float | None = None
    attempts: list[Attempt] = field(default_factory=list)
    launch_restarts: int = 0
    last_blamed: str | None = None
    streak: tuple[str, int | None] = ("", None)
    streak_len: int = 0
    relaunches: int = 0
    productive: float = 0.0
    off: float = 0.0
    lost: dict[tuple[str, str], float] = field(default_factory=dict)

    def charge(self, kind: str, reason: str, seconds: float) -> None:
        if seconds > 0:
            self.lost[kind, reason] = self.lost.get((kind, reason), 0.0) + seconds


@dataclass
class Node:
    name: str
    job: str | None = None
    bad: Fault | None = None
    drained: bool = False
    refails: int = 0


class Engine:
    """Runs one policy over one trace; `run()` once."""

    def __init__(self, config: SimConfig, trace: Trace, policy: Policy, workdir: Path) -> None:
        self.config, self.trace, self.policy = config, trace, policy
        self.horizon = config.horizon_s
        self.step_s = config.jobs.step_s
        self.nodes = {n: Node(n) for n in trace.nodes}
        self.spares = sorted(trace.spares)
        self.jobs: dict[str, Job] = {}
        for spec in trace.jobs:
            job = Job(
                spec=spec,
                nodes=list(spec.nodes),
                schedule=policy.schedule(spec.gpus, len(spec.nodes)),
                store=CheckpointDir(workdir / policy.name / spec.name),
            )
            self.jobs[spec.name] = job
            for n in spec.nodes:
                self.nodes[n].job = spec.name
        self.records = Records()
        self.waiting: list[str] = []
        self.failures: dict[str, int] = {}
        self.crash_loops = 0
        self.exclusions = 0
        self.healthy_excluded = 0
        self.relaunched: dict[str, int] = {"auto": 0, "on_call": 0, "owner": 0}
        self._heap: list[tuple[float, int, str, tuple[Any, ...]]] = []
        self._seq = 0

    # --- the loop -----------------------------------------------------------------------------

    def _push(self, at: float, kind: str, *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, kind, args))

    def run(self) -> PolicyResult:
        for fault in self.trace.faults:
            self._push(fault.at, "fault", fault)
        handlers = {
            "fault": self._fault,
            "kill": self._kill,
            "ready": self._ready,
            "restart": self._restart,
            "takeoff": self._takeoff,
            "back": self._back,
        }
        while self._heap and self._heap[0][0] <= self.horizon:
            at, _, kind, args = heapq.heappop(self._heap)
            handlers[kind](at, *args)
        self._finish()
        return self._result()

    def _current(self, job: Job, gen: int) -> bool:
        return job.gen == gen

    # --- what happens -------------------------------------------------------------------------

    def _fault(self, at: float, fault: Fault) -> None:
        if fault.job is not None:
            job = self.jobs[fault.job]
            if job.state in (RUNNING, STARTING) or (fault.reason == "preempted" and job.state == HUNG):
                if fault.persistent:
                    job.broken = fault
                node = job.nodes[rng_for(self.trace.seed, "where", fault.id).randrange(len(job.nodes))]
                self._fail(job, at, fault.reason, fault.variant, node, str(fault.id), code_bug=fault.persistent)
            return
        assert fault.node is not None
        node = self.nodes[fault.node]
        if node.drained:
            return
        owner = self.jobs[node.job] if node.job else None
        if fault.reason == HANG:
            if owner is not None and owner.state == RUNNING:
                owner.state, owner.hang_at = HUNG, at
                owner.gen += 1
                f = self.config.failures
                timeout = f.nccl_timeout_s if fault.in_collective else f.hang_timeout_s
                self._push(at + timeout, "kill", owner.spec.name, owner.gen, "hang", fault)
            return
        if fault.persistent:
            node.bad = fault
        code = _xid(fault.reason, fault.variant)
        if code is not None:
            self.records.xids.append((at, node.name, code))
        if fault.reason == "node_failure" and owner is not None:
            self.records.node_down.append((at, node.name))
            if not fault.persistent:
                self.records.repaired.append((at + _REBOOT_S, node.name))
        if owner is not None and owner.state in _ACTIVE:
            self._fail(owner, at, fault.reason, fault.variant, node.name, str(fault.id))

    def _kill(self, at: float, name: str, gen: int, cause: str, fault: Fault | None = None) -> None:
        job = self.jobs[name]
        if not self._current(job, gen):
            return
        if cause == "node":
            assert fault is not None and fault.node is not None
            node = self.nodes[fault.node]
            if node.bad is not fault or node.job != name:
                return
            key = f"{fault.id}.r{node.refails}"
            code = _xid(fault.reason, fault.variant)
            if code is not None:
                self.records.xids.append((at, node.name, code))
            kind = "silent" if fault.reason == "node_failure" else "log"
            self._fail(job, at, fault.reason, fault.variant, node.name, key, kind=kind)
        elif cause == "code":
            bug = job.broken
            assert bug is not None
            node = job.nodes[rng_for(self.trace.seed, "where", bug.id, job.relaunches).randrange(len(job.nodes))]
            self._fail(job, at, bug.reason, bug.variant, node, f"{bug.id}.c{job.relaunches}", code_bug=True)
        elif cause == "hang":
            assert fault is not None
            if fault.in_collective:
                self._fail(job, at, "nccl_timeout", "watchdog", fault.node, str(fault.id))
            else:
                self.records.hangs.append((at, name))
                self._fail(job, at, HANG, "", fault.node, str(fault.id), kind="hang")

    def _fail(
        self,
        job: Job,
        at: float,
        reason: str,
        variant: str,
        node: str | None,
        key: str,
        *,
        kind: str = "log",
        code_bug: bool = False,
    ) -> None:
        self._roll_back(job, at, reason)
        evidence = None
        if self.policy.needs_evidence and kind == "log":
            evidence = generate(reason, variant, self._where(job, node), rng_for(self.trace.seed, "evidence", key))
        root = key.split(".", 1)[0]
        failure = Failure(key, root, at, reason, node, kind, evidence, job.resume_step, code_bug)
        self.failures[reason] = self.failures.get(reason, 0) + 1
        if job.streak == (reason, job.resume_step):
            job.streak_len += 1
            self.crash_loops += job.streak_len == 3
        else:
            job.streak, job.streak_len = (reason, job.resume_step), 1
        job.state, job.since, job.cause = DOWN, at, reason
        job.gen += 1
        response = self.policy.on_failure(job, failure)
        job.last_blamed = node if REASONS[reason].category == "infrastructure" else None
        job.pending = response
        if response.fix:
            job.fix_s = self.policy.people.fix(failure)
            self._push(at + response.after_s, "takeoff", job.spec.name, job.gen)
        else:
            self._push(at + response.after_s, "restart", job.spec.name, job.gen)

    def _roll_back(self, job: Job, at: float, reason: str) -> None:
        """Charge the time up to the failure; roll the job back to its latest valid checkpoint."""
        if job.state == STARTING:
            job.charge("restart", job.cause, at - job.since)
            return
        frozen = (job.hang_at if job.state == HUNG and job.hang_at is not None else at) - job.seg_start
        done, blocked = job.schedule.progress(frozen)
        valid, started = job.schedule.saves(frozen, at - job.seg_start)
        interval = job.schedule.interval_s
        valid_step = self._step(job.seg_p0 + valid * interval) if valid else job.resume_step
        partial_step = self._step(job.seg_p0 + started * interval) if started > valid else None
        job.resume_step = job.store.resume_step(valid_step, partial_step)
        resumed = job.resume_step * self.step_s if job.resume_step is not None else 0.0
        job.productive += resumed - job.seg_p0
        job.charge("redo", reason, job.seg_p0 + done - resumed)
        job.charge("checkpoint", CHECKPOINTING, blocked)
        if job.state == HUNG and job.hang_at is not None:
            job.charge("hang", reason, at - job.hang_at)
            job.hang_at = None

    def _takeoff(self, at: float, name: str, gen: int) -> None:
        """The owner takes the job off the cluster to fix it; it comes back when fixed."""
        job = self.jobs[name]
        if not self._current(job, gen):
            return
        job.charge("down", job.cause, at - job.since)
        job.off_since = at
        self._push(at + job.fix_s, "restart", name, gen)

    def _restart(self, at: float, name: str, gen: int) -> None:
        job = self.jobs[name]
        if not self._current(job, gen):
            return
        if job.off_since is not None:
            job.off += at - job.off_since
            job.off_since, job.since, job.broken = None, at, None
        response = job.pending
        assert response is not None
        out = [n for n in response.exclude if n in job.nodes]
        if len(out) > len(self.spares):
            if name not in self.waiting:
                self.waiting.append(name)
            return
        for n in out:
            self._exclude(at, job, n)
        job.charge("down", job.cause, at - job.since)
        if response.by != "auto":  # a person submits it again: a new job to the policy
            job.attempts, job.launch_restarts = [], 0
        self.records.restarts.append((at, name))
        self.relaunched[response.by] += 1
        job.relaunches += 1
        job.state, job.since = STARTING, at
        job.gen += 1
        j = self.config.jobs
        ready = at + j.startup_s + (j.checkpoint_load_s if job.resume_step is not None else 0.0)
        self._push(ready, "ready", name, job.gen)
        bad = [self.nodes[n] for n in job.nodes if self.nodes[n].bad is not None]
        if bad:
            soonest: tuple[float, Fault] | None = None
            for node in bad:
                assert node.bad is not None
                mean = self.config.failures.refail_s.get(node.bad.reason, _DEFAULT_REFAIL_S)
                delay = rng_for(self.trace.seed, "refail", node.name, node.refails).expovariate(1.0) * mean
                node.refails += 1
                if soonest is None or delay < soonest[0]:
                    soonest = (delay, node.bad)
            assert soonest is not None
            self._push(at + soonest[0], "kill", name, job.gen, "node", soonest[1])
        if job.broken is not None:
            self._push(ready + self.config.failures.user_refail_s, "kill", name, job.gen, "code")

    def _exclude(self, at: float, job: Job, name: str) -> None:
        spare = self.spares.pop(0)
        job.nodes[job.nodes.index(name)] = spare
        self.nodes[spare].job = job.spec.name
        node = self.nodes[name]
        node.job, node.drained = None, True
        self.exclusions += 1
        if node.bad is None:
            self.healthy_excluded += 1
            ttl = self.policy.config.policies.gpuwatch.exclude_ttl_s
            self._push(at + ttl, "back", name)
        else:
            self._push(at + self.config.failures.repair_s, "back", name)

    def _back(self, at: float, name: str) -> None:
        """A drained node is back in the spare pool, repaired; waiting jobs get their chance."""
        node = self.nodes[name]
        if node.bad is not None:
            self.records.repaired.append((at, name))
        node.bad, node.drained, node.refails = None, False, 0
        self.spares.append(name)
        self.spares.sort()
        waiting, self.waiting = self.waiting, []
        for job_name in waiting:
            self._restart(at, job_name, self.jobs[job_name].gen)

    def _ready(self, at: float, name: str, gen: int) -> None:
        job = self.jobs[name]
        if not self._current(job, gen):
            return
        job.charge("restart", job.cause, at - job.since)
        job.state, job.seg_start = RUNNING, at
        job.seg_p0 = job.resume_step * self.step_s if job.resume_step is not None else 0.0

    # --- the end ------------------------------------------------------------------------------

    def _finish(self) -> None:
        end = self.horizon
        for job in self.jobs.values():
            if job.state in (RUNNING, HUNG):
                frozen = (job.hang_at if job.state == HUNG and job.hang_at is not None else end) - job.seg_start
                done, blocked = job.schedule.progress(frozen)
                job.productive += done
                job.charge("checkpoint", CHECKPOINTING, blocked)
                if job.state == HUNG and job.hang_at is not None:
                    job.charge("hang", HANG, end - job.hang_at)
            elif job.state == STARTING:
                job.charge("restart", job.cause, end - job.since)
            elif job.off_since is not None:
                job.off += end - job.off_since
            else:
                job.charge("down", job.cause, end - job.since)

    def _result(self) -> PolicyResult:
        lost_by_reason: dict[str, float] = {}
        lost_by_kind: dict[str, float] = {}
        wall = productive = interval = 0.0
        for job in self.jobs.values():
            g = job.spec.gpus / 3600.0
            wall += g * (self.horizon - job.off)
            productive += g * job.productive
            interval += job.spec.gpus * job.schedule.interval_s
            for (kind, reason), seconds in job.lost.items():
                lost_by_reason[reason] = lost_by_reason.get(reason, 0.0) + g * seconds
                lost_by_kind[kind] = lost_by_kind.get(kind, 0.0) + g * seconds
        gpus = sum(j.spec.gpus for j in self.jobs.values())
        result = PolicyResult(
            policy=self.policy.name,
            ettr=productive / wall if wall else 0.0,
            wall_gpu_hours=wall,
            productive_gpu_hours=productive,
            lost_gpu_hours=sum(lost_by_reason.values()),
            lost_by_reason=dict(sorted(lost_by_reason.items(), key=lambda kv: -kv[1])),
            lost_by_kind=dict(sorted(lost_by_kind.items())),
            failures=sum(self.failures.values()),
            failures_by_reason=dict(sorted(self.failures.items())),
            restarts=dict(self.relaunched),
            crash_loops=self.crash_loops,
            exclusions=self.exclusions,
            healthy_excluded=self.healthy_excluded,
            pages=pages(self.records),
            checkpoint_interval_s=interval / gpus if gpus else 0.0,
        )
        if isinstance(self.policy, Gpuwatch):
            stats = self.policy.stats
            result.diagnosis = {
                "total": stats.total,
                "correct": stats.correct,
                "accuracy": stats.correct / stats.total if stats.total else 1.0,
                "confusion": {f"{a} -> {b}": n for (a, b), n in sorted(stats.confusion.items())},
            }
            result.decisions = dict(sorted(self.policy.rules.items()))
        return result

    def _step(self, progress: float) -> int:
        return round(progress / self.step_s)

    def _where(self, job: Job, node: str | None) -> Where:
        gpn = self.config.cluster.gpus_per_node
        node = node if node in job.nodes else job.nodes[0]
        i = job.nodes.index(node)
        rng = rng_for(self.trace.seed, "ranks", job.spec.name, job.relaunches)
        gpu = rng.randrange(gpn)
        others = [k for k in range(len(job.nodes)) if k != i] or [i]
        peers = tuple((job.nodes[k], k * gpn + rng.randrange(gpn)) for k in rng.sample(others, min(2, len(others))))
        step = job.resume_step or 0
        return Where(node=node, rank=i * gpn + gpu, gpu=gpu, peers=peers, job=job.spec.name, step=max(1, step))


def _xid(reason: str, variant: str) -> int | None:
    return next((v.xid for v in VARIANTS.get(reason, ()) if v.name == variant), None)
