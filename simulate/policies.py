"""The four ways of handling a failed job that the simulation compares, and the people behind them.

- ``manual``: no automation. A person looks at every failure after a delay (lognormal, median from
  the configuration), then restarts the job, excluding the node when the reason says so
  (`restart_exclude_node`) or when the job failed on the same node the time before; a framework or
  script error goes to its owner, who fixes deterministic ones off the cluster before relaunching.
- ``torchrun``: torchrun-style elastic restarts: on any failure the whole job restarts at once on the
  same nodes, up to `torchrun_max_restarts` per launch; after that (and for what torchrun cannot see:
  preemption ends torchrun itself, a hang outside a collective never exits) it is the person's turn.
- ``gpuwatch``: the product's own path: the evidence goes through `gpuwatch.diagnosis` (rules engine,
  hang and silence diagnoses), the decision through `gpuwatch.recovery.policy.decide` with the job's
  real `Attempt` history and checkpoint step; restarts exclude the nodes it names. What it sends to a
  person (notify, crash loop, limits) the person handles as above.
- ``gpuwatch-async``: the same, with asynchronous checkpoints at the Young/Daly interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

from gpuwatch.diagnosis.diagnose import diagnose, diagnose_hang, diagnose_silence
from gpuwatch.diagnosis.model import Diagnosis
from gpuwatch.recovery.policy import Attempt, decide
from gpuwatch.taxonomy import REASONS
from simulate.checkpointing import Schedule, young_daly
from simulate.config import SimConfig
from simulate.evidence import Evidence
from simulate.trace import rng_for

USER_CATEGORIES = frozenset({"framework", "script"})
NODE_TIMEOUT_S = 30.0  # gpuwatch's node_timeout_s: how long a node is silent before it counts as down
_NOTIFY_RULES = frozenset({"notify", "unknown_repeated", "exit_93"})


@dataclass(frozen=True, slots=True)
class Failure:
    """One failure of one run, as it really was (the policies that diagnose see only `evidence`)."""

    key: str  # unique in the trace: the per-event randomness is drawn from it
    root: str  # the trace fault behind it (a bad node's or a bug's repeats share it)
    at: float
    reason: str
    node: str | None  # where it really happened
    kind: str  # "log" (evidence below), "hang" (the job tracker's), "silent" (a node stopped reporting)
    evidence: Evidence | None
    checkpoint_step: int | None  # the latest valid checkpoint at the failure
    code_bug: bool  # the job's code fails again on every restart until fixed


@dataclass(frozen=True, slots=True)
class Response:
    """What happens next: after ``after_s`` (the job's GPUs held idle meanwhile) it is relaunched,
    without ``exclude``; with ``fix`` its owner first takes it off the cluster to fix the code."""

    after_s: float
    by: str  # auto | on_call | owner
    exclude: tuple[str, ...] = ()
    fix: bool = False
    diagnosed: str | None = None
    rule: str | None = None


class JobHistory(Protocol):
    """What a policy may read and keep about a job between its failures."""

    attempts: list[Attempt]
    launch_restarts: int
    last_blamed: str | None


@dataclass(frozen=True, slots=True)
class People:
    """The people's reaction times, drawn per trace fault: the same problem gets the same person and
    the same fix time under every policy, however many failures it caused there."""

    seed: int
    delay_median_s: float
    delay_sigma: float
    fix_median_s: float

    def delay(self, failure: Failure) -> float:
        rng = rng_for(self.seed, "person", failure.root)
        return self.delay_median_s * math.exp(self.delay_sigma * rng.gauss(0.0, 1.0))

    def fix(self, failure: Failure) -> float:
        rng = rng_for(self.seed, "fix", failure.root)
        return self.fix_median_s * math.exp(rng.gauss(0.0, 1.0))


def person(config: SimConfig, people: People, job: JobHistory, failure: Failure, extra_s: float = 0.0) -> Response:
    """A person's handling of a failure that no automation restarted (they know the real cause)."""
    delay = extra_s + people.delay(failure)
    info = REASONS[failure.reason]
    if info.category in USER_CATEGORIES:
        return Response(delay, "owner", fix=failure.code_bug)
    if failure.reason == "preempted":
        delay = max(delay, config.failures.requeue_s)
    blame = failure.node is not None and (info.action == "restart_exclude_node" or job.last_blamed == failure.node)
    return Response(delay, "on_call", (failure.node,) if blame and failure.node else ())


class Policy:
    """A way of handling failures; subclasses decide. ``needs_evidence``: it reads the logs."""

    name = ""
    needs_evidence = False

    def __init__(self, config: SimConfig, people: People) -> None:
        self.config = config
        self.people = people

    def schedule(self, gpus: int, nodes: int) -> Schedule:
        j = self.config.jobs
        return Schedule(j.checkpoint_interval_s, j.checkpoint_blocking_s)

    def on_failure(self, job: JobHistory, failure: Failure) -> Response:
        raise NotImplementedError


class Manual(Policy):
    name = "manual"

    def on_failure(self, job: JobHistory, failure: Failure) -> Response:
        return person(self.config, self.people, job, failure)


class Torchrun(Policy):
    name = "torchrun"

    def on_failure(self, job: JobHistory, failure: Failure) -> Response:
        unseen = failure.reason == "preempted" or failure.kind == "hang"
        if unseen or job.launch_restarts >= self.config.policies.torchrun_max_restarts:
            return person(self.config, self.people, job, failure)
        job.launch_restarts += 1
        return Response(0.0, "auto")


@dataclass
class DiagnosisStats:
    """How the real diagnosis did against the injected reasons (gpuwatch policies)."""

    total: int = 0
    correct: int = 0
    confusion: dict[tuple[str, str], int] = field(default_factory=dict)

    def add(self, truth: str, got: str) -> None:
        self.total += 1
        self.correct += truth == got
        if truth != got:
            self.confusion[truth, got] = self.confusion.get((truth, got), 0) + 1


class Gpuwatch(Policy):
    name = "gpuwatch"
    needs_evidence = True

    def __init__(self, config: SimConfig, people: People) -> None:
        super().__init__(config, people)
        self.stats = DiagnosisStats()
        self.rules: dict[str, int] = {}

    def diagnose(self, failure: Failure) -> Diagnosis:
        if failure.kind == "hang":
            return diagnose_hang("no step progress and idle GPUs past the hang timeout", failure.node)
        if failure.kind == "silent" and failure.node is not None:
            silent = NODE_TIMEOUT_S + self.config.failures.refail_s.get("node_failure", 0.0)
            return diagnose_silence(failure.node, silent, NODE_TIMEOUT_S)
        assert failure.evidence is not None
        return diagnose(list(failure.evidence.sources))

    def on_failure(self, job: JobHistory, failure: Failure) -> Response:
        found = self.diagnose(failure)
        self.stats.add(failure.reason, found.reason)
        exit_code = failure.evidence.exit_code if failure.evidence is not None else None
        decision = decide(
            found.reason,
            history=job.attempts,
            config=self.config.policies.gpuwatch,
            now=failure.at,
            node=found.node,
            exit_code=exit_code,
            checkpoint_step=failure.checkpoint_step,
        )
        self.rules[decision.rule] = self.rules.get(decision.rule, 0) + 1
        job.attempts.append(
            Attempt(
                reason=found.reason,
                ended_at=failure.at,
                restarted=decision.restart,
                checkpoint_step=failure.checkpoint_step,
                excluded=decision.exclude_nodes if decision.restart else (),
            )
        )
        latency = self.config.policies.decision_s
        if decision.restart:
            wait = self.config.failures.requeue_s if failure.reason == "preempted" else 0.0
            return Response(
                latency + decision.delay_s + wait, "auto", decision.exclude_nodes, False, found.reason, "restart"
            )
        handled = person(self.config, self.people, job, failure, extra_s=latency)
        if decision.rule in _NOTIFY_RULES:  # the owner is told, with the diagnosis
            return Response(handled.after_s, "owner", (), handled.fix, found.reason, decision.rule)
        return Response(handled.after_s, handled.by, handled.exclude, handled.fix, found.reason, decision.rule)


class GpuwatchAsync(Gpuwatch):
    name = "gpuwatch-async"

    def schedule(self, gpus: int, nodes: int) -> Schedule:
        j, f = self.config.jobs, self.config.failures
        per_day = (
            nodes * (f.infra_per_1000_node_days + f.hangs_per_1000_node_days) / 1000
            + f.preemptions_per_job_day
            + f.user_rate_per_day(gpus)
        )
        mtbf = 86400.0 / per_day if per_day > 0 else 365 * 86400.0
        interval = young_daly(j.async_blocking_s, mtbf, j.step_s, floor_s=j.async_write_s)
        return Schedule(interval, j.async_blocking_s, j.async_write_s)


POLICIES: dict[str, type[Policy]] = {p.name: p for p in (Manual, Torchrun, Gpuwatch, GpuwatchAsync)}
