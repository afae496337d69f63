"""The restart decision, rule by rule, with concrete job histories; then the precedence between rules
when several apply at once; then every taxonomy reason's default action."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gpuwatch.recovery.policy import Attempt, Decision, PolicyConfig, decide, exit_failed
from gpuwatch.taxonomy import REASONS

NOW = 1_000_000.0
HOUR = 3600.0


def _decide(
    reason: str, history: list[Attempt] | None = None, config: PolicyConfig | None = None, **kw: object
) -> Decision:
    return decide(reason, history=history or [], config=config or PolicyConfig(), now=NOW, **kw)  # type: ignore[arg-type]


def _failures(*reasons: str, every_s: float = 600.0, steps: list[int | None] | None = None) -> list[Attempt]:
    """Restarted failures ending `every_s` apart, the last one `every_s` before NOW."""
    steps = steps or [None] * len(reasons)
    n = len(reasons)
    return [
        Attempt(reason=r, ended_at=NOW - (n - i) * every_s, restarted=True, checkpoint_step=s)
        for i, (r, s) in enumerate(zip(reasons, steps, strict=True))
    ]


# --- the taxonomy's actions --------------------------------------------------------------------------


@pytest.mark.parametrize("reason", sorted(REASONS))
def test_first_failure_follows_the_taxonomy_default_action(reason: str) -> None:
    d = _decide(reason, node="node-7", checkpoint_step=500)
    expected = REASONS[reason].action
    assert d.action == expected
    assert d.restart is (expected != "notify")
    assert d.alert is (expected == "notify")
    assert d.exclude_nodes == (("node-7",) if expected == "restart_exclude_node" else ())
    assert d.rule == ("notify" if expected == "notify" else "restart")
    assert d.outcome == expected
    assert (d.reason, d.node, d.checkpoint_step, d.at, d.dry_run, d.delay_s) == (reason, "node-7", 500, NOW, False, 0.0)
    assert d.why.startswith(reason)


def test_restart_says_where_it_resumes_from() -> None:
    assert (
        _decide("nccl_timeout", checkpoint_step=1200).why
        == "nccl_timeout (infrastructure): restarting from step 1200 now"
    )
    assert _decide("preempted").why == "preempted (preemption): restarting from the start (no valid checkpoint) now"


def test_notify_reason_alerts_the_owner_and_does_not_restart() -> None:
    d = _decide("gpu_oom")
    assert (d.restart, d.alert, d.outcome) == (False, True, "notify")
    assert d.why == "gpu_oom (framework) needs a person (the taxonomy says notify): not restarting"


def test_job_overrides_change_the_action() -> None:
    config = PolicyConfig(
        overrides={"gpu_oom": "restart", "nccl_error": "notify", "network_error": "restart_exclude_node"}
    )
    assert _decide("gpu_oom", config=config).restart is True
    d = _decide("nccl_error", config=config)
    assert (d.restart, d.action) == (False, "notify")
    assert "this job's override says notify" in d.why
    assert _decide("network_error", config=config, node="n3").exclude_nodes == ("n3",)
    assert config.action("cuda_error") == "restart"


def test_config_is_validated_naming_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="override gpu_oom='reboot'"):
        PolicyConfig(overrides={"gpu_oom": "reboot"})
    with pytest.raises(ValueError, match="'oom'"):
        PolicyConfig(overrides={"oom": "notify"})
    with pytest.raises(ValueError, match="loop_exempt 'spot'"):
        PolicyConfig(loop_exempt=frozenset({"spot"}))
    with pytest.raises(ValueError, match="crash_loop_n"):
        PolicyConfig(crash_loop_n=1)
    with pytest.raises(ValueError, match="max_in_window"):
        PolicyConfig(max_in_window=-1)
    with pytest.raises(ValueError, match="window_s"):
        PolicyConfig(window_s=0)
    with pytest.raises(ValueError, match="backoff_base_s"):
        PolicyConfig(backoff_base_s=-1)
    with pytest.raises(ValueError, match="'segfault' is not a reason"):
        _decide("segfault")


def test_overrides_cannot_be_changed_after_the_config_is_built() -> None:
    overrides = {"gpu_oom": "restart"}
    config = PolicyConfig(overrides=overrides)
    overrides["gpu_oom"] = "notify"
    assert config.action("gpu_oom") == "restart"
    with pytest.raises(TypeError):
        config.overrides["hang"] = "notify"  # type: ignore[index]


# --- one test per rule -------------------------------------------------------------------------------


def test_exit_status_93_is_never_restarted_whatever_the_reason() -> None:
    for reason in ("preempted", "gpu_hardware", "unknown"):
        d = _decide(reason, exit_code=93, node="n1")
        assert (d.restart, d.alert, d.rule, d.outcome, d.exclude_nodes) == (False, True, "exit_93", "notify", ())
        assert d.why == f"exit status 93: the job asked not to be restarted ({reason})"
    assert _decide("preempted", exit_code=143).restart is True


def test_unknown_is_restarted_once_and_a_second_in_a_row_notifies() -> None:
    assert _decide("unknown").restart is True
    assert _decide("unknown", _failures("nccl_error", "unknown", "nccl_error")).restart is True  # not in a row
    d = _decide("unknown", _failures("nccl_error", "unknown"))
    assert (d.restart, d.alert, d.action, d.rule, d.outcome) == (False, True, "notify", "unknown_repeated", "notify")
    assert "second unknown failure in a row" in d.why


def test_an_explicit_override_for_unknown_replaces_restart_once() -> None:
    config = PolicyConfig(overrides={"unknown": "restart"}, crash_loop_n=0)
    assert _decide("unknown", _failures("unknown", "unknown"), config).restart is True


def test_max_restarts_in_the_jobs_lifetime_stops_and_alerts() -> None:
    spread = _failures(*["nccl_error", "preempted"] * 5, every_s=HOUR)  # 10 restarts, one an hour
    d = _decide("hang", spread)
    assert (d.restart, d.alert, d.rule, d.outcome) == (False, True, "max_restarts", "stop")
    assert d.why == "10 restarts already (max_restarts 10): stopping"
    assert _decide("hang", spread[1:]).restart is True
    not_restarted = [*spread[:-1], Attempt("gpu_oom", NOW - 60, restarted=False)]  # a stop does not count
    assert _decide("hang", not_restarted).restart is True


def test_max_restarts_per_window_stops_and_alerts() -> None:
    burst = _failures("nccl_error", "hang", "cuda_error", "nccl_timeout", "storage_error", every_s=600)  # 5 in 50 min
    d = _decide("network_error", burst)
    assert (d.restart, d.alert, d.rule) == (False, True, "max_in_window")
    assert d.why == "5 restarts in the last 3600 s (max_in_window 5): stopping"
    older = _failures(
        "nccl_error", "hang", "cuda_error", "nccl_timeout", "storage_error", every_s=750
    )  # first 62.5 min ago
    assert _decide("network_error", older).restart is True


def test_same_reason_n_times_in_a_row_is_a_crash_loop() -> None:
    d = _decide("nccl_error", _failures("cuda_error", "nccl_error", "nccl_error"))
    assert (d.restart, d.alert, d.rule, d.outcome) == (False, True, "crash_loop", "stop")
    assert d.why == "nccl_error 3 times in a row (crash_loop_n 3): a crash loop"
    assert _decide("nccl_error", _failures("nccl_error", "cuda_error", "nccl_error")).restart is True
    assert _decide("nccl_error", _failures("nccl_error", "nccl_error"), PolicyConfig(crash_loop_n=0)).restart is True


def test_preemptions_in_a_row_are_not_a_crash_loop_unless_configured() -> None:
    history = _failures("preempted", "preempted", every_s=HOUR)
    assert _decide("preempted", history).restart is True
    assert _decide("preempted", history, PolicyConfig(loop_exempt=frozenset())).rule == "crash_loop"


def test_checkpoint_not_advancing_across_n_restarts_stops() -> None:
    reasons = ("nccl_error", "hang", "cuda_error")
    d = _decide("nccl_timeout", _failures(*reasons, steps=[100, 100, 100]), checkpoint_step=100)
    assert (d.restart, d.alert, d.rule) == (False, True, "no_progress")
    assert d.why == "the latest valid checkpoint is still step 100 after 3 restarts (no_progress_n 3): stopping"
    assert _decide("nccl_timeout", _failures(*reasons, steps=[90, 100, 100]), checkpoint_step=100).restart is True
    assert _decide("nccl_timeout", _failures(*reasons, steps=[100, 100, 100]), checkpoint_step=150).restart is True
    # no checkpoint known: progress is unknown, the other guards bound the restarts
    assert _decide("nccl_timeout", _failures(*reasons), checkpoint_step=None).restart is True
    off = PolicyConfig(no_progress_n=0)
    assert _decide("nccl_timeout", _failures(*reasons, steps=[100, 100, 100]), off, checkpoint_step=100).restart is True


def test_backoff_doubles_with_failures_in_a_row_up_to_the_cap() -> None:
    config = PolicyConfig(backoff_base_s=10, backoff_max_s=60, max_in_window=100, max_restarts=100)
    reasons = ["nccl_error", "hang", "cuda_error", "nccl_timeout", "storage_error"]
    delays = [_decide("network_error", _failures(*reasons[:n], every_s=60), config).delay_s for n in range(5)]
    assert delays == [10, 20, 40, 60, 60]
    endless = replace(config, max_restarts=5000, max_in_window=5000, crash_loop_n=0)
    assert _decide("hang", _failures(*["hang"] * 2000, every_s=1), endless).delay_s == 60  # no float overflow
    d = _decide("network_error", _failures(*reasons[:2], every_s=60, steps=[7, 7]), config, checkpoint_step=7)
    assert d.why == "network_error (infrastructure): restarting from step 7 after 40 s (failure 3 in a row)"


def test_backoff_starts_again_after_progress_or_a_quiet_window() -> None:
    config = PolicyConfig(backoff_base_s=10, backoff_max_s=300)
    progressed = _failures("nccl_error", "hang", every_s=60, steps=[100, 200])
    assert _decide("cuda_error", progressed, config, checkpoint_step=300).delay_s == 10
    assert _decide("cuda_error", progressed, config, checkpoint_step=200).delay_s == 20  # since step 200: 2 in a row
    first_checkpoint = _failures("nccl_error", "hang", every_s=60)  # none then, one now: progress
    assert _decide("cuda_error", first_checkpoint, config, checkpoint_step=50).delay_s == 10
    quiet = _failures("nccl_error", "hang", every_s=2 * HOUR)
    assert _decide("cuda_error", quiet, config).delay_s == 10


def test_first_restart_is_immediate_with_a_zero_base() -> None:
    history = _failures("nccl_error", "hang", "cuda_error", every_s=60)
    assert _decide("storage_error", history, PolicyConfig(backoff_base_s=0)).delay_s == 0.0


def test_blamed_node_is_excluded_and_no_node_means_a_plain_restart() -> None:
    d = _decide("gpu_hardware", node="gpu-node-12")
    assert (d.restart, d.exclude_nodes, d.outcome) == (True, ("gpu-node-12",), "restart_exclude_node")
    assert d.why.endswith(", excluding gpu-node-12")
    d = _decide("node_failure")
    assert (d.restart, d.exclude_nodes, d.action, d.outcome) == (True, (), "restart_exclude_node", "restart")
    assert d.why.endswith(", excluding no node: none was blamed")
    assert _decide("nccl_error", node="gpu-node-12").exclude_nodes == ()  # a plain restart does not exclude


def test_excluded_nodes_stay_excluded_for_the_ttl() -> None:
    earlier = [Attempt("gpu_hardware", NOW - 1800, restarted=True, excluded=("n1",))]
    d = _decide("nccl_error", earlier)
    assert d.exclude_nodes == ("n1",)
    assert d.why.endswith("; still excluding n1 from earlier failures")
    assert _decide("nvlink_error", earlier, node="n2").exclude_nodes == ("n1", "n2")
    expired = [Attempt("gpu_hardware", NOW - 2 * HOUR, restarted=True, excluded=("n1",))]
    assert _decide("nccl_error", expired).exclude_nodes == ()


def test_an_executor_confined_to_the_excluded_node_does_not_restart_there() -> None:
    """The local executor restarts only on its own node: excluding it leaves nowhere to go."""
    d = _decide("gpu_hardware", node="n1", restart_nodes=("n1",))
    assert (d.restart, d.alert, d.rule, d.outcome, d.exclude_nodes) == (False, True, "no_node", "stop", ())
    assert d.why == (
        "gpu_hardware (infrastructure): not restarting, the executor can restart only on n1, which is "
        "excluded; move the job to another node"
    )
    earlier = [Attempt("gpu_hardware", NOW - 1800, restarted=True, excluded=("n1",))]
    assert _decide("cuda_error", earlier, restart_nodes=("n1",)).rule == "no_node", "excluded by an earlier failure"
    assert _decide("gpu_hardware", node="n2", restart_nodes=("n1",)).restart, "another node blamed: n1 is fine"
    assert _decide("cuda_error", node="n1", restart_nodes=("n1",)).restart, "a plain restart excludes nothing"
    assert _decide("gpu_hardware", node="n1").restart, "a scheduler places the restart elsewhere"


def test_a_node_whose_agent_is_silent_is_never_restarted_onto() -> None:
    """Its logs are unseen, so a plain restart excludes it too; confined to it, the executor stops."""
    d = _decide("cuda_error", node="n1", silent_nodes=("n2",))
    assert (d.restart, d.exclude_nodes, d.outcome) == (True, ("n2",), "restart_exclude_node")
    assert d.why.endswith(", excluding n2 (agent silent: its logs unseen)")
    d = _decide("gpu_hardware", node="n1", silent_nodes=("n1", "n3"))
    assert d.exclude_nodes == ("n1", "n3") and d.why.endswith(
        ", excluding n1, excluding n3 (agent silent: its logs unseen)"
    )
    d = _decide("cuda_error", restart_nodes=("n1",), silent_nodes=("n1",))
    assert (d.restart, d.rule) == (False, "no_node")
    assert d.why == (
        "cuda_error (infrastructure): not restarting, the executor can restart only on n1, which is excluded "
        "(its agent is silent: what it logged is unseen); move the job to another node"
    )


def test_pause_switch_stops_every_restart_and_alerts() -> None:
    d = _decide("preempted", config=PolicyConfig(paused=True))
    assert (d.restart, d.alert, d.rule, d.outcome) == (False, True, "paused", "stop")
    assert d.why == "restarts are paused cluster-wide: not restarting after preempted (restart)"


def test_dry_run_decides_everything_but_restarts_nothing() -> None:
    config = PolicyConfig(dry_run=True, backoff_base_s=5)
    d = _decide("gpu_hardware", _failures("hang", steps=[9]), config, node="n4", checkpoint_step=9)
    assert (d.restart, d.dry_run, d.alert, d.outcome, d.rule) == (False, True, True, "dry_run", "restart")
    assert (d.delay_s, d.exclude_nodes) == (10, ("n4",))
    assert d.why == (
        "dry run, nothing done; would have: gpu_hardware (infrastructure): restarting from step 9 after 10 s "
        "(failure 2 in a row), excluding n4"
    )
    stop = _decide("gpu_oom", config=config)
    assert (stop.restart, stop.dry_run, stop.rule) == (False, True, "notify")
    assert stop.why.startswith("dry run, nothing done; would have: gpu_oom (framework) needs a person")


# --- precedence --------------------------------------------------------------------------------------


def test_rules_apply_in_a_defined_order() -> None:
    """A failure that breaks every rule at once; switching off the rule that decided exposes the next."""
    history = _failures(*["hang"] * 10, every_s=60, steps=[5] * 10)  # 10 restarts in 10 min, stuck at step 5
    config = PolicyConfig(overrides={"hang": "notify"}, paused=True)
    exit_code: int | None = 93
    order = []
    for switch_off in (
        {},  # exit status 93: given with the failure, not configured
        {"overrides": {}},
        {"paused": False},
        {"max_restarts": 100},
        {"max_in_window": 100},
        {"crash_loop_n": 0},
        {"no_progress_n": 0},
    ):
        d = _decide("hang", history, config, exit_code=exit_code, checkpoint_step=5)
        assert (d.restart, d.alert) == (False, True)
        order.append(d.rule)
        exit_code = None
        config = replace(config, **switch_off)
    assert order == ["exit_93", "notify", "paused", "max_restarts", "max_in_window", "crash_loop", "no_progress"]
    assert _decide("hang", history, config, checkpoint_step=5).rule == "restart"


def test_a_second_unknown_is_reported_as_such_even_when_paused() -> None:
    assert _decide("unknown", _failures("unknown"), PolicyConfig(paused=True)).rule == "unknown_repeated"


# --- storage -----------------------------------------------------------------------------------------


def test_a_checkpoint_that_fails_to_load_falls_back_to_the_previous_one_once() -> None:
    first = _decide("checkpoint_load_error", _failures("cuda_error"), resumed_from="/c/step_20.pt", checkpoint_step=20)
    assert (first.restart, first.rule, first.outcome, first.skip_checkpoint) == (
        True,
        "checkpoint_fallback",
        "restart",
        "/c/step_20.pt",
    )
    assert first.why == (
        "checkpoint_load_error (framework): /c/step_20.pt failed to load: restarting from the checkpoint before it now"
    )
    attempt = Attempt.from_json(json.loads(json.dumps(first.to_json())))  # as stored and read back after a restart
    assert attempt.skip_checkpoint == "/c/step_20.pt"

    second = _decide("checkpoint_load_error", [*_failures("cuda_error"), attempt], resumed_from="/c/step_10.pt")
    assert (second.restart, second.rule, second.outcome, second.alert) == (
        False,
        "checkpoint_fallback_failed",
        "notify",
        True,
    )
    assert "/c/step_10.pt failed to load after falling back from /c/step_20.pt" in second.why


def test_a_load_error_falls_back_only_from_a_checkpoint_and_the_job_can_say_notify() -> None:
    assert _decide("checkpoint_load_error").rule == "notify"  # started from scratch: nothing to fall back from
    override = PolicyConfig(overrides={"checkpoint_load_error": "notify"})
    assert _decide("checkpoint_load_error", config=override, resumed_from="/c/s.pt").rule == "notify"
    paused = _decide("checkpoint_load_error", config=PolicyConfig(paused=True), resumed_from="/c/s.pt")
    assert (paused.restart, paused.rule) == (False, "paused")


def test_decision_json_round_trips_into_the_next_attempt() -> None:
    d = _decide("gpu_hardware", node="n9", checkpoint_step=42, config=PolicyConfig(backoff_base_s=1))
    data = json.loads(json.dumps(d.to_json()))
    assert data == {
        "reason": "gpu_hardware",
        "category": "infrastructure",
        "action": "restart_exclude_node",
        "rule": "restart",
        "outcome": "restart_exclude_node",
        "restart": True,
        "delay_s": 1.0,
        "exclude_nodes": ["n9"],
        "alert": False,
        "why": "gpu_hardware (infrastructure): restarting from step 42 after 1 s, excluding n9",
        "dry_run": False,
        "checkpoint_step": 42,
        "node": "n9",
        "at": NOW,
        "skip_checkpoint": None,
    }
    assert Attempt.from_json(data) == Attempt("gpu_hardware", NOW, restarted=True, checkpoint_step=42, excluded=("n9",))
    dry = _decide("gpu_hardware", node="n9", config=PolicyConfig(dry_run=True)).to_json()
    assert Attempt.from_json(dry).excluded == ()  # nothing was excluded for real


@pytest.mark.parametrize(
    ("code", "signal", "failed"),
    [(0, None, False), (None, None, False), (1, None, True), (None, 9, True), (0, 15, True), (-11, None, True)],
)
def test_a_process_failed_when_a_signal_ended_it_or_its_code_is_not_zero(code, signal, failed) -> None:  # type: ignore[no-untyped-def]
    """One answer for the supervisor and the server (both call this)."""
    assert exit_failed(code, signal) is failed


@pytest.mark.parametrize("config", [PolicyConfig(), PolicyConfig(dry_run=True), PolicyConfig(paused=True)])
def test_a_supervisor_told_to_stop_decides_a_stop_before_every_other_rule(config: PolicyConfig) -> None:
    d = _decide("preempted", config=config, stopped=True, exit_code=93)
    assert (d.rule, d.outcome, d.restart, d.alert, d.dry_run) == ("stopped", "stop", False, False, False)
    assert "told to stop" in d.why
    assert Decision.from_json(json.loads(json.dumps(d.to_json()))) == d
