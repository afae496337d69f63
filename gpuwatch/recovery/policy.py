"""The restart decision: one pure function from a diagnosed failure and the job's history to what to do.

This is the one entry point of every restart decision: the server's, and the supervisor's own when
the server is away or when it was told to stop. The rules, first match wins (the precedence is part of
the contract; tests/gpuwatch/recovery/test_recovery_policy.py pins it):

0. stopped: the supervisor was told to stop (SIGTERM/SIGINT from a scheduler or a person): the job was
   ended from outside, and nothing restarts it.
1. exit status 93: the job asked not to be restarted, whatever the reason.
2. the action is `notify` (the taxonomy's, or the job's override), or this is a second `unknown` in a
   row: the failure needs a person, so the owner hears that and not some limit it would have hit.
   Except a run that failed to load the checkpoint it resumed from (`checkpoint_load_error`, no override):
   it is restarted from the previous valid checkpoint, skipping that one (`skip_checkpoint`), once; when
   the run resumed from that fallback fails to load too, the owner is told (`checkpoint_fallback_failed`).
   A checkpoint that passes every content check can still fail to load (a half-synced tensor, a model
   changed since), and the previous one costs only the steps between them.
3. the cluster-wide pause switch.
4. `max_restarts` restarts in the job's lifetime.
5. `max_in_window` restarts within the last `window_s`.
6. crash loop: the same reason `crash_loop_n` times in a row, this one included (reasons in
   `loop_exempt`, preemption by default, are not the job's doing and never count as a loop).
7. no progress: the latest valid checkpoint's step has not advanced across `no_progress_n` restarts.
8. no node left: the executor can restart only on given nodes (the local executor: the supervisor's
   own) and every one of them is excluded (blamed now, or by an earlier attempt within
   `exclude_ttl_s`). A restart there would run on the hardware just blamed, and waiting helps no one
   (the exclusion lasts until a person has repaired the node), so it stops and tells the owner to move
   the job.
9. otherwise restart, after `backoff_base_s * 2**(failures in a row - 1)` capped at `backoff_max_s`,
   excluding the blamed node when the action is `restart_exclude_node`, plus the nodes excluded by
   earlier attempts within `exclude_ttl_s`.

Every stop alerts the owner; a restart does not. Dry run decides everything the same way, then
restarts nothing (`restart` False, `dry_run` True, `why` saying what would have been done) and alerts,
because the job is down and nobody else will bring it back.

"Failures in a row" for the backoff: this one and the previous ones, walking back, until the job made
progress (its checkpoint advanced) or ran for longer than `window_s` between two failures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from gpuwatch.taxonomy import NO_RESTART_EXIT_CODE, REASONS

ACTIONS = ("restart", "restart_exclude_node", "notify")

#: Which rule decided (`Decision.rule`), grouped by outcome as the metrics label them.
_NOTIFY_RULES = frozenset({"exit_93", "notify", "unknown_repeated", "checkpoint_fallback_failed"})
FALLBACK_REASON = "checkpoint_load_error"
_STOP_RULES = frozenset({"stopped", "paused", "max_restarts", "max_in_window", "crash_loop", "no_progress", "no_node"})


def exit_failed(exit_code: int | None, signal: int | None) -> bool:
    """Whether a process that ended so failed: killed by a signal, or a non-zero exit code (no code and
    no signal: it did not say, which is not a failure). The supervisor and the server both ask this."""
    return bool(signal) or exit_code not in (0, None)


@dataclass(frozen=True, slots=True)
class Attempt:
    """A previous failure of the same job and what was decided about it (oldest first in a history)."""

    reason: str
    ended_at: float
    restarted: bool
    checkpoint_step: int | None = None  # the latest valid checkpoint when it failed
    excluded: tuple[str, ...] = ()  # nodes its restart excluded
    skip_checkpoint: str | None = None  # the checkpoint its restart fell back from

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Attempt:
        """An attempt from a stored `Decision.to_json()`."""
        return cls(
            reason=str(data["reason"]),
            ended_at=float(data["at"]),
            restarted=bool(data["restart"]),
            checkpoint_step=data.get("checkpoint_step"),
            excluded=tuple(data.get("exclude_nodes") or ()) if data.get("restart") else (),
            skip_checkpoint=data.get("skip_checkpoint") or None,
        )


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """The knobs of `decide`; a job may carry its own. 0 disables `crash_loop_n` and `no_progress_n`."""

    max_restarts: int = 10
    window_s: float = 3600.0
    max_in_window: int = 5
    backoff_base_s: float = 0.0
    backoff_max_s: float = 300.0
    crash_loop_n: int = 3
    no_progress_n: int = 3
    exclude_ttl_s: float = 3600.0
    overrides: Mapping[str, str] = field(default_factory=dict)  # reason → action, for this job
    loop_exempt: frozenset[str] = frozenset({"preempted"})
    paused: bool = False
    dry_run: bool = False
    #: The server's wait, before diagnosing a failed run, for a node of the run whose agent is silent (its
    #: evidence unseen); well under the supervisor's `decision_timeout_s` (30 s), which would decide alone.
    silent_node_wait_s: float = 15.0

    def __post_init__(self) -> None:
        for reason, action in self.overrides.items():
            if reason not in REASONS:
                raise ValueError(f"override for {reason!r}: not a reason of the taxonomy")
            if action not in ACTIONS:
                raise ValueError(f"override {reason}={action!r}: the action must be one of {', '.join(ACTIONS)}")
        for reason in self.loop_exempt:
            if reason not in REASONS:
                raise ValueError(f"loop_exempt {reason!r}: not a reason of the taxonomy")
        for name in ("max_restarts", "max_in_window", "no_progress_n"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.crash_loop_n == 1 or self.crash_loop_n < 0:
            raise ValueError(f"crash_loop_n must be 0 (off) or >= 2, got {self.crash_loop_n}")
        if self.window_s <= 0:
            raise ValueError(f"window_s must be > 0, got {self.window_s}")
        for name in ("backoff_base_s", "backoff_max_s", "exclude_ttl_s", "silent_node_wait_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        object.__setattr__(self, "overrides", MappingProxyType(dict(self.overrides)))
        object.__setattr__(self, "loop_exempt", frozenset(self.loop_exempt))

    def action(self, reason: str) -> str:
        """The job's action for `reason`: its override, else the taxonomy's."""
        return self.overrides.get(reason, REASONS[reason].action)


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do about one failure, and why in one sentence for the owner and the audit log."""

    reason: str
    action: str  # the taxonomy's or the override's action (`notify` for a repeated `unknown`)
    rule: str  # which rule decided: exit_93 notify unknown_repeated paused max_restarts ... restart
    restart: bool
    delay_s: float
    exclude_nodes: tuple[str, ...]
    alert: bool
    why: str
    dry_run: bool
    checkpoint_step: int | None
    node: str | None
    at: float
    skip_checkpoint: str | None = None  # resume from the newest valid checkpoint other than this one

    @property
    def outcome(self) -> str:
        """The `gpuwatch_recovery_decisions` label: restart, restart_exclude_node, notify, stop or dry_run."""
        if self.dry_run:
            return "dry_run"
        if self.restart:
            return "restart_exclude_node" if self.exclude_nodes else "restart"
        return "notify" if self.rule in _NOTIFY_RULES else "stop"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Decision:
        """A decision from its `to_json()` (sent by a supervisor, or by the server to one).
        KeyError, TypeError or ValueError on a malformed object or a reason outside the taxonomy."""
        reason = str(data["reason"])
        if reason not in REASONS:
            raise ValueError(f"{reason!r} is not a reason of the taxonomy")
        return cls(
            reason=reason,
            action=str(data["action"]),
            rule=str(data["rule"]),
            restart=bool(data["restart"]),
            delay_s=float(data.get("delay_s", 0.0)),
            exclude_nodes=tuple(str(n) for n in data.get("exclude_nodes", ())),
            alert=bool(data.get("alert", False)),
            why=str(data.get("why", "")),
            dry_run=bool(data.get("dry_run", False)),
            checkpoint_step=data.get("checkpoint_step"),
            node=data.get("node"),
            at=float(data["at"]),
            skip_checkpoint=str(data["skip_checkpoint"]) if data.get("skip_checkpoint") else None,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "category": REASONS[self.reason].category,
            "action": self.action,
            "rule": self.rule,
            "outcome": self.outcome,
            "restart": self.restart,
            "delay_s": self.delay_s,
            "exclude_nodes": list(self.exclude_nodes),
            "alert": self.alert,
            "why": self.why,
            "dry_run": self.dry_run,
            "checkpoint_step": self.checkpoint_step,
            "node": self.node,
            "at": self.at,
            "skip_checkpoint": self.skip_checkpoint,
        }


def decide(
    reason: str,
    *,
    history: Sequence[Attempt],
    config: PolicyConfig,
    now: float,
    node: str | None = None,
    exit_code: int | None = None,
    checkpoint_step: int | None = None,
    restart_nodes: Sequence[str] | None = None,
    silent_nodes: Sequence[str] = (),
    stopped: bool = False,
    resumed_from: str | None = None,
) -> Decision:
    """Decide about one failure of a job. `history`: its earlier failures, oldest first.
    `checkpoint_step`: its latest valid checkpoint now (None: none, or unknown). `restart_nodes`: the
    only nodes its executor can restart it on (the local executor: its own node); None: a scheduler
    places it. `silent_nodes`: nodes of the run whose agent is silent, so what they logged is unseen: never
    restarted onto, excluded like a blamed node. `stopped`: its supervisor was told to stop, so the exit is
    the one asked for, not a failure to recover from. `resumed_from`: the checkpoint the failed run was
    started from (None: from the start)."""
    if reason not in REASONS:
        raise ValueError(f"{reason!r} is not a reason of the taxonomy")
    action = config.action(reason)
    category = REASONS[reason].category
    previous = history[-1] if history else None
    restarts = sum(1 for a in history if a.restarted)
    in_window = sum(1 for a in history if a.restarted and now - a.ended_at < config.window_s)
    same_in_row = 1 + _trailing(history, lambda a: a.reason == reason)
    stalled = _stalled(history, checkpoint_step)
    step_text = f"step {checkpoint_step}" if checkpoint_step is not None else "the start (no valid checkpoint)"

    def stop(rule: str, why: str, *, as_action: str = action) -> Decision:
        return _finish(config, reason, as_action, rule, why, node, checkpoint_step, now)

    if stopped:  # asked for from outside: nobody to alert, nothing to restart
        why = f"the supervisor was told to stop (the job was ended from outside): not restarting ({reason})"
        return Decision(reason, action, "stopped", False, 0.0, (), False, why, False, checkpoint_step, node, now)
    if exit_code == NO_RESTART_EXIT_CODE:
        return stop("exit_93", f"exit status {NO_RESTART_EXIT_CODE}: the job asked not to be restarted ({reason})")
    fallback = reason == FALLBACK_REASON and reason not in config.overrides and resumed_from is not None
    if fallback and previous is not None and previous.skip_checkpoint:
        return stop(
            "checkpoint_fallback_failed",
            f"{reason}: {resumed_from} failed to load after falling back from {previous.skip_checkpoint}: "
            "not falling back again, the owner should look",
        )
    if action == "notify" and not fallback:
        source = "this job's override" if reason in config.overrides else "the taxonomy"
        return stop("notify", f"{reason} ({category}) needs a person ({source} says notify): not restarting")
    if reason == "unknown" and "unknown" not in config.overrides and previous and previous.reason == "unknown":
        return stop(
            "unknown_repeated",
            "a second unknown failure in a row: not restarting again, the owner should look",
            as_action="notify",
        )
    if config.paused:
        return stop("paused", f"restarts are paused cluster-wide: not restarting after {reason} ({action})")
    if restarts >= config.max_restarts:
        return stop("max_restarts", f"{restarts} restarts already (max_restarts {config.max_restarts}): stopping")
    if in_window >= config.max_in_window:
        return stop(
            "max_in_window",
            f"{in_window} restarts in the last {config.window_s:g} s (max_in_window {config.max_in_window}): stopping",
        )
    if config.crash_loop_n and reason not in config.loop_exempt and same_in_row >= config.crash_loop_n:
        return stop(
            "crash_loop", f"{reason} {same_in_row} times in a row (crash_loop_n {config.crash_loop_n}): a crash loop"
        )
    if config.no_progress_n and stalled >= config.no_progress_n:
        return stop(
            "no_progress",
            f"the latest valid checkpoint is still step {checkpoint_step} after {stalled} restarts "
            f"(no_progress_n {config.no_progress_n}): stopping",
        )

    streak = _streak(history, now, checkpoint_step, config.window_s)
    delay = min(config.backoff_max_s, config.backoff_base_s * 2.0 ** min(streak - 1, 64))  # base 0: immediate
    earlier = {n for a in history if now - a.ended_at < config.exclude_ttl_s for n in a.excluded}
    blamed = node if action == "restart_exclude_node" and node else None
    silent = set(silent_nodes) - {blamed}
    why = f"{reason} ({category}): restarting from {step_text}"
    if fallback:
        why = f"{reason} ({category}): {resumed_from} failed to load: restarting from the checkpoint before it"
    why += f" after {delay:g} s" if delay else " now"
    if streak > 1:
        why += f" (failure {streak} in a row)"
    if blamed:
        why += f", excluding {blamed}"
    elif action == "restart_exclude_node":
        why += ", excluding no node: none was blamed"
    if silent:
        why += f", excluding {', '.join(sorted(silent))} (agent silent: its logs unseen)"
    if earlier - {blamed} - silent:
        why += f"; still excluding {', '.join(sorted(earlier - {blamed} - silent))} from earlier failures"
    excluded = (earlier | {blamed} if blamed else earlier) | silent
    if restart_nodes and set(restart_nodes) <= excluded:
        nodes = ", ".join(sorted(set(restart_nodes)))
        silence = " (its agent is silent: what it logged is unseen)" if set(restart_nodes) <= silent else ""
        return stop(
            "no_node",
            f"{reason} ({category}): not restarting, the executor can restart only on {nodes}, which is "
            f"excluded{silence}; move the job to another node",
        )
    decision = Decision(
        reason=reason,
        action=action,
        rule="checkpoint_fallback" if fallback else "restart",
        restart=True,
        delay_s=float(delay),
        exclude_nodes=tuple(sorted(excluded)),
        alert=False,
        why=why,
        dry_run=False,
        checkpoint_step=checkpoint_step,
        node=node,
        at=now,
        skip_checkpoint=resumed_from if fallback else None,
    )
    return _dry(decision) if config.dry_run else decision


def _finish(
    config: PolicyConfig,
    reason: str,
    action: str,
    rule: str,
    why: str,
    node: str | None,
    checkpoint_step: int | None,
    now: float,
) -> Decision:
    decision = Decision(
        reason=reason,
        action=action,
        rule=rule,
        restart=False,
        delay_s=0.0,
        exclude_nodes=(),
        alert=True,
        why=why,
        dry_run=False,
        checkpoint_step=checkpoint_step,
        node=node,
        at=now,
    )
    return _dry(decision) if config.dry_run else decision


def _dry(decision: Decision) -> Decision:
    """The same decision, not carried out: what would have been done goes into `why`."""
    why = f"dry run, nothing done; would have: {decision.why}"
    return replace(decision, restart=False, alert=True, why=why, dry_run=True)


def _trailing(history: Sequence[Attempt], match: Callable[[Attempt], bool]) -> int:
    """How many of the most recent attempts, in a row, match."""
    n = 0
    for attempt in reversed(history):
        if not match(attempt):
            break
        n += 1
    return n


def _advanced(old: int | None, new: int | None) -> bool:
    return new is not None and (old is None or new > old)


def _stalled(history: Sequence[Attempt], step: int | None) -> int:
    """Restarts in a row across which the latest valid checkpoint stayed at `step` (None: unknown, 0)."""
    if step is None:
        return 0
    return _trailing(history, lambda a: a.checkpoint_step is not None and not _advanced(a.checkpoint_step, step))


def _streak(history: Sequence[Attempt], now: float, step: int | None, window_s: float) -> int:
    """This failure plus the earlier ones in a row: no progress and no quiet `window_s` between them."""
    n, t, s = 1, now, step
    for attempt in reversed(history):
        if t - attempt.ended_at >= window_s or _advanced(attempt.checkpoint_step, s):
            break
        n, t, s = n + 1, attempt.ended_at, attempt.checkpoint_step
    return n
