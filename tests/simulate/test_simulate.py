"""gpuwatch simulate: the evidence it generates, its clock and checkpoints, the policies on hand-made
traces, and the published shapes on the default trace."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from gpuwatch.diagnosis.diagnose import diagnose
from gpuwatch.recovery.checkpoints import latest_valid
from gpuwatch.taxonomy import REASONS
from simulate.checkpointing import CheckpointDir, Schedule, quiet_skips, young_daly
from simulate.cluster import POLICIES, load_config, simulate
from simulate.config import DAY, default_toml, from_dict
from simulate.engine import Engine
from simulate.evidence import VARIANTS, Where, generate
from simulate.pages import Records, pages
from simulate.policies import People
from simulate.report import plot_png, to_markdown
from simulate.trace import Fault, JobSpec, Trace
from simulate.trace import generate as make_trace

CLI = [sys.executable, "-m", "gpuwatch"]


def small(**failures: object) -> dict:
    """A small cluster's configuration as a dict, with failure settings replaced."""
    raw = tomllib.loads(default_toml())
    raw["cluster"].update(nodes=24, days=7)
    raw["failures"].update(failures)
    return raw


def quiet() -> dict:
    return small(
        infra_per_1000_node_days=0.0,
        user_errors_per_job_day=0.0,
        preemptions_per_job_day=0.0,
        hangs_per_1000_node_days=0.0,
    )


def run_trace(raw: dict, trace: Trace, policy: str, tmp_path: Path) -> Engine:
    config = from_dict(raw)
    f = config.failures
    people = People(1, config.people.delay_median_s, config.people.delay_sigma, f.fix_median_s)
    engine = Engine(config, trace, POLICIES[policy](config, people), tmp_path)
    with quiet_skips():
        engine.result = engine.run()  # type: ignore[attr-defined]
    return engine


def one_job_trace(*faults: Fault, nodes: int = 4, spares: int = 2) -> Trace:
    names = tuple(f"node{i:04d}" for i in range(nodes + spares))
    job = JobSpec("job000", nodes * 8, names[:nodes])
    return Trace(seed=1, nodes=names, jobs=(job,), spares=names[nodes:], faults=faults)


# --- evidence ---------------------------------------------------------------------------------------


def test_rules_engine_diagnoses_generated_evidence_back_to_the_injected_reason() -> None:
    results: Counter[tuple[str, str]] = Counter()
    blamed = blamed_ok = 0
    for reason, variants in VARIANTS.items():
        for variant in variants:
            for i in range(6):
                rng = random.Random(f"{reason}/{variant.name}/{i}")
                where = Where("node0007", 61, 5, (("node0003", 24), ("node0011", 90)), "job003", 1200)
                evidence = generate(reason, variant.name, where, rng)
                found = diagnose(list(evidence.sources))
                results[reason, found.reason] += 1
                if REASONS[reason].action == "restart_exclude_node" and found.reason == reason:
                    blamed += 1
                    blamed_ok += found.node == "node0007"
    total = sum(results.values())
    correct = sum(n for (want, got), n in results.items() if want == got)
    confusion = {f"{want} -> {got}": n for (want, got), n in sorted(results.items()) if want != got}
    print(f"\nsimulated evidence: {correct}/{total} diagnosed as injected; confused: {confusion}")
    assert correct / total >= 0.9, confusion
    assert {want for want, _ in results} == set(REASONS) - {"hang", "unknown"}
    assert blamed and blamed_ok / blamed >= 0.9, "the node to exclude is the one the fault struck"


def test_fatal_xid_variants_carry_their_code_in_the_kernel_line() -> None:
    where = Where("node0001", 9, 1, (("node0002", 17),), "job001", 10)
    evidence = generate("gpu_hardware", "xid79", where, random.Random(0))
    assert evidence.xid == 79
    kernel = [s for s in evidence.sources if s.file.endswith("kern.log")]
    assert kernel and "NVRM: Xid (PCI:" in kernel[0].lines[0] and "): 79," in kernel[0].lines[0]


# --- clock and checkpoints ----------------------------------------------------------------------------


def test_schedule_progress_and_which_saves_are_valid() -> None:
    sync = Schedule(interval_s=100, blocking_s=10)
    assert sync.progress(250) == (200 + 30, 20)  # two full cycles (110 s) then 30 s of training
    assert sync.progress(105) == (100, 5)  # in the middle of the first save
    assert sync.saves(105, 105) == (0, 1)  # the first save has begun, not finished
    assert sync.saves(250, 250) == (2, 2)
    background = Schedule(interval_s=100, blocking_s=1, write_s=50)
    assert background.saves(120, 120) == (0, 1)  # copied at 101 s, written at 151 s
    assert background.saves(120, 200) == (1, 1)  # a hang at 120 s: the write still completes
    hung = Schedule(interval_s=100, blocking_s=10)
    assert hung.saves(105, 400) == (0, 1)  # a synchronous save cut short by a hang never completes


def test_the_real_checkpoint_check_skips_the_partial_save(tmp_path: Path) -> None:
    store = CheckpointDir(tmp_path / "job")
    with quiet_skips():
        assert store.resume_step(None, None) is None
        assert store.resume_step(180, 360) == 180
        found, skipped = latest_valid(tmp_path / "job")
        assert found is not None and found.step == 180 and found.layout == "manifest"
        assert [s.step for s in skipped] == [360]
        assert store.resume_step(360, None) == 360  # the save completed: the partial directory is now whole
    assert sorted(p.name for p in (tmp_path / "job").iterdir()) == ["step_000000360"]


def test_young_daly_interval() -> None:
    assert young_daly(4.4, 86400, 10) == pytest.approx(880, abs=10)  # sqrt(2 * 4.4 * 86400) = 872 s
    assert young_daly(4.4, 86400, 10, floor_s=1200) == 1200
    assert young_daly(0.0, 86400, 10) == 10


# --- policies on hand-made traces ---------------------------------------------------------------------


def test_bad_gpu_is_excluded_by_gpuwatch_and_crash_loops_torchrun(tmp_path: Path) -> None:
    fault = Fault(0, 3 * 3600.0, "gpu_hardware", "xid79", node="node0002", persistent=True)
    trace = one_job_trace(fault)
    gw = run_trace(quiet(), trace, "gpuwatch", tmp_path / "gw").result  # type: ignore[attr-defined]
    tr = run_trace(quiet(), trace, "torchrun", tmp_path / "tr").result  # type: ignore[attr-defined]
    assert gw.failures == 1 and gw.exclusions == 1 and gw.decisions == {"restart": 1}
    assert gw.restarts == {"auto": 1, "on_call": 0, "owner": 0}
    # torchrun restarts on the same GPU three times, then a person relaunches without the node
    assert tr.failures == 4 and tr.crash_loops == 1 and tr.restarts == {"auto": 3, "on_call": 1, "owner": 0}
    assert tr.exclusions == 1
    assert tr.pages["GpuwatchJobRestartLoop"] == 1 and gw.pages["GpuwatchJobRestartLoop"] == 0
    assert gw.ettr > tr.ettr


def test_deterministic_bug_notifies_under_gpuwatch_and_loops_under_torchrun(tmp_path: Path) -> None:
    bug = Fault(0, 5 * 3600.0, "script_error", "key", job="job000", persistent=True)
    trace = one_job_trace(bug)
    gw = run_trace(quiet(), trace, "gpuwatch", tmp_path / "gw").result  # type: ignore[attr-defined]
    tr = run_trace(quiet(), trace, "torchrun", tmp_path / "tr").result  # type: ignore[attr-defined]
    manual = run_trace(quiet(), trace, "manual", tmp_path / "m").result  # type: ignore[attr-defined]
    assert gw.decisions == {"notify": 1} and gw.failures == 1 and gw.restarts["owner"] == 1
    assert gw.diagnosis["correct"] == 1
    assert tr.failures == 4 and tr.crash_loops == 1
    assert manual.failures == 1 and manual.crash_loops == 0
    assert gw.lost_by_reason["script_error"] < tr.lost_by_reason["script_error"]
    # the owner's reaction and fix are the same; gpuwatch adds its decision latency (1 s)
    assert gw.ettr == pytest.approx(manual.ettr, abs=1e-5)


def test_a_silent_hang_is_restarted_by_gpuwatch_at_the_hang_timeout(tmp_path: Path) -> None:
    hang = Fault(0, 10 * 3600.0, "hang", "", node="node0001")
    trace = one_job_trace(hang)
    gw = run_trace(quiet(), trace, "gpuwatch", tmp_path / "gw").result  # type: ignore[attr-defined]
    manual = run_trace(quiet(), trace, "manual", tmp_path / "m").result  # type: ignore[attr-defined]
    gpus = trace.jobs[0].gpus
    assert gw.decisions == {"restart": 1} and gw.pages["GpuwatchJobHang"] == 1
    assert gw.lost_by_kind["hang"] == pytest.approx(gpus * 600 / 3600)  # hang_timeout_s
    assert manual.lost_by_kind["down"] > gw.lost_by_kind["down"]  # a person reacts to the page later


def test_time_adds_up_for_every_job(tmp_path: Path) -> None:
    raw = small()
    config = from_dict(raw)
    trace = make_trace(config)
    for policy in POLICIES:
        engine = run_trace(raw, trace, policy, tmp_path / policy)
        for job in engine.jobs.values():
            total = job.productive + sum(job.lost.values()) + job.off
            assert total == pytest.approx(config.horizon_s, abs=1e-3), (policy, job.spec.name)


# --- the whole simulation -----------------------------------------------------------------------------


def test_same_seed_same_result_and_another_seed_another() -> None:
    config = from_dict(small())
    first = simulate(config).to_json()
    assert simulate(config).to_json() == first
    other = from_dict(small() | {"cluster": {**small()["cluster"], "seed": 2}})
    assert simulate(other).to_json() != first


def test_without_failures_ettr_is_one_minus_checkpoint_overhead() -> None:
    result = simulate(from_dict(quiet()))
    j = from_dict(quiet()).jobs
    for name in ("manual", "torchrun", "gpuwatch"):
        p = result.get(name)
        assert p.failures == 0 and p.restarts_total == 0 and p.pages_total == 0
        overhead = j.checkpoint_blocking_s / (j.checkpoint_interval_s + j.checkpoint_blocking_s)
        assert p.ettr == pytest.approx(1 - overhead, abs=2e-3)
        assert set(p.lost_by_reason) == {"checkpointing"}
    assert result.get("gpuwatch-async").ettr > 0.999  # without failures the optimal interval is long


def test_default_trace_orders_the_policies_as_published() -> None:
    result = simulate(load_config())
    manual, torchrun, gw, gw_async = (result.get(p) for p in ("manual", "torchrun", "gpuwatch", "gpuwatch-async"))
    print("\n" + to_markdown(result))
    assert gw_async.ettr >= gw.ettr >= torchrun.ettr
    assert gw.ettr > manual.ettr
    assert gw.crash_loops_avoided > 0 and torchrun.crash_loops > gw.crash_loops
    assert gw.pages_total < torchrun.pages_total
    assert gw.on_call_actions < manual.on_call_actions
    # The Acme study: infrastructure, about 11% of failed jobs, about 82% of the GPU time they cost
    share = manual.failure_share("infrastructure")
    assert 0.65 <= share <= 0.95, share
    infra = sum(n for r, n in manual.failures_by_reason.items() if REASONS[r].category == "infrastructure")
    assert 0.05 <= infra / manual.failures <= 0.2
    assert gw.diagnosis["accuracy"] >= 0.9


def test_cli_prints_json_and_writes_a_plot(tmp_path: Path) -> None:
    png = tmp_path / "sim.png"
    out = subprocess.run(
        [*CLI, "simulate", "--nodes", "16", "--days", "3", "--seed", "5", "--format", "json", "--plot", str(png)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    data = json.loads(out.stdout)
    assert [p["policy"] for p in data["policies"]] == list(POLICIES)
    assert data["nodes"] == 16 and data["seed"] == 5
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = subprocess.run([*CLI, "simulate", "--policy", "nope"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--policy must be one of" in bad.stderr


def test_plot_is_the_same_bytes_for_the_same_result() -> None:
    result = simulate(from_dict(small()), ["manual", "gpuwatch"])
    assert plot_png(result) == plot_png(result)


# --- configuration and pages --------------------------------------------------------------------------


def test_config_file_overrides_and_rejects_what_it_does_not_know(tmp_path: Path) -> None:
    path = tmp_path / "sim.toml"
    path.write_text("[cluster]\nnodes = 64\n[failures]\nuser_mix = { gpu_oom = 1.0 }\n")
    config = load_config(path, days=3)
    assert (
        config.cluster.nodes == 64 and config.cluster.days == 3 and dict(config.failures.user_mix) == {"gpu_oom": 1.0}
    )
    assert config.horizon_s == 3 * DAY
    path.write_text("[cluster]\nnodez = 64\n")
    with pytest.raises(ValueError, match="nodez"):
        load_config(path)
    path.write_text("[failures]\ninfra_mix = { gpu_oom = 1.0 }\n")
    with pytest.raises(ValueError, match="does not belong"):
        load_config(path)
    path.write_text("[policies]\ngpuwatch = { crash_loop_n = 1 }\n")
    with pytest.raises(ValueError, match="crash_loop_n"):
        load_config(path)
    assert config.policies.gpuwatch.crash_loop_n == 3  # the product's default, untouched by the file


def test_pages_count_firing_episodes() -> None:
    records = Records()
    records.restarts = [(0.0, "a"), (600.0, "a"), (1200.0, "a"), (1500.0, "a"), (9000.0, "a"), (9100.0, "b")]
    records.xids = [(0.0, "n1", 48), (1800.0, "n1", 48), (9000.0, "n1", 48), (100.0, "n2", 74)]
    records.xids += [(50.0, "n3", 79), (5000.0, "n3", 79)]
    records.repaired = [(4000.0, "n3")]
    found = pages(records)
    assert found["GpuwatchJobRestartLoop"] == 1  # one episode: a's 3rd and 4th restarts within the hour
    assert found["GpuFatalXid"] == 2  # Xid 48 at 0 and 1800 s is one episode, at 9000 s another
    assert found["GpuUncorrectableEccErrors"] == 1  # until a repair that never came
    assert found["GpuNvlinkError"] == 1
    assert found["GpuFellOffTheBus"] == 2  # the repair at 4000 s ended the first episode


# --- real time against a real server ------------------------------------------------------------------


def test_live_replay_measures_detection_and_decisions_on_a_real_server(tmp_path: Path) -> None:
    from gpuwatch.config import Settings
    from simulate.live import LiveSettings, replay
    from tests.helpers import InProcessServer, migrated_sqlite, new_admin_token, new_token

    url = migrated_sqlite(tmp_path)
    raw = small()
    raw["cluster"].update(nodes=4, gpus_per_node=2)
    config = from_dict(raw)
    faults = (
        Fault(0, 0.3, "gpu_hardware", "xid79", node="node0001", persistent=True),
        Fault(1, 0.6, "script_error", "key", job="job000", persistent=True),
        Fault(2, 0.9, "node_failure", "slurm", node="node0002", persistent=True),
        Fault(3, 1.2, "nccl_error", "system", node="node0000"),
    )
    settings = Settings(
        data_dir=tmp_path, database_url=url, incident_settle_s=0.1, node_timeout_s=1.0, hang_check_s=0.1
    )
    tokens = {f"node{i:04d}": new_token(url, f"node{i:04d}") for i in range(4)}
    live = LiveSettings(flush_s=0.25, sample_s=0.25, poll_s=0.02, settle_s=60, faults=faults)
    with InProcessServer(settings) as server:
        result = replay(server.url, tokens, config, live, admin_token=new_admin_token(url))
    summary = result.summary()
    print("\n" + json.dumps(summary, indent=1))
    assert result.missed == []
    assert result.batches > 20 and result.batch_errors == 0
    assert sorted(result.detection_s) == ["node_silent", "run_failed", "xid"]
    assert len(result.detection_s["run_failed"]) == 3 and len(result.decision_s) == 3
    assert result.diagnosed == [
        ("gpu_hardware", "gpu_hardware"),
        ("script_error", "script_error"),
        ("nccl_error", "nccl_error"),
    ]
    # The Xid 79 job runs under the local executor, which can restart it only where its supervisor runs:
    # on the node the Xid excludes, so it stops (rule no_node) for a person to move it.
    assert result.decisions == {"notify": 1, "restart": 1, "no_node": 1}
    # How fast is bench/simulate_live.py's to measure; here only that each decision came, after its fault.
    assert all(0 < s < 30 for s in result.decision_s)
    # 1.5 x node_timeout_s, then the next check; last_seen_at is written with batches (server/store/nodes.py)
    assert 1.0 <= result.detection_s["node_silent"][0] < 30
