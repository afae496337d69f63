"""The Slurm executor against a real single-node Slurm (tests/slurm_cluster.py): real jobs requeued,
real nodes drained and resumed, real scontrol error messages."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from server.executors import JobTarget, executor_for
from server.executors.slurm import SlurmExecutor
from tests.helpers import wait_until
from tests.slurm_cluster import GHOST, NODE, SlurmCluster


@pytest.fixture
def executor(slurm: SlurmCluster) -> SlurmExecutor:
    return SlurmExecutor(slurm_conf=slurm.conf)


def _running(slurm: SlurmCluster, job: str) -> dict[str, str]:
    return wait_until(lambda: (j := slurm.job(job))["JobState"] == "RUNNING" and j, what=f"job {job} to run")


@pytest.mark.slurm
def test_requeue_with_exclusion_restarts_the_job_at_once(slurm: SlurmCluster, executor: SlurmExecutor) -> None:
    job = slurm.sbatch("sleep 300")
    first = _running(slurm, job)

    started = time.monotonic()
    result = executor.restart(JobTarget("slurm", job), exclude_nodes=[GHOST], reason="xid 79 on ghost")

    assert result.ok, result
    assert f"scontrol requeue {job}" in result.commands
    assert f"scontrol update JobId={job} ExcNodeList={GHOST}" in result.commands
    assert result.commands[-1] == f"scontrol update JobId={job} StartTime=now"
    again = wait_until(
        lambda: (j := slurm.job(job))["JobState"] == "RUNNING" and j["StartTime"] != first["StartTime"] and j,
        timeout=60,
        what="the requeued job to run again",
    )
    # without StartTime a requeued job waits ~2 minutes before it is eligible
    assert time.monotonic() - started < 60
    assert again["Restarts"] == "1"
    assert again["ExcNodeList"] == GHOST
    assert again["NodeList"] == NODE
    assert executor.job_state(JobTarget("slurm", job)) == "RUNNING"


@pytest.mark.slurm
def test_a_requeued_job_is_not_launched_within_the_second_of_its_requeue(
    slurm: SlurmCluster, executor: SlurmExecutor
) -> None:
    """slurmd refuses a batch launch whose credential is no newer, to the second, than the kill of the
    job's previous run ("Job credential revoked"), and slurmctld then ends the job FAILED for good
    instead of running it. Slurm's own requeue delay avoids this; a restart that skips it must too."""
    runs = slurm.root / "jobs" / "killed-runs.txt"
    # Like a training job, it takes a moment to stop when Slurm's SIGTERM comes.
    job = slurm.sbatch(f"trap 'sleep 0.3; exit 143' TERM; echo run >> {runs}; sleep 300 & wait")
    _running(slurm, job)
    wait_until(lambda: runs.exists() and runs.read_text().count("run") == 1, what="the first run")
    # Begin at the start of a second, so that requeue and release fall within one.
    wait_until(lambda: time.time() % 1 < 0.05, timeout=5, what="the start of a second", every=0.005)
    second = int(time.time())

    result = executor.restart(JobTarget("slurm", job), exclude_nodes=[], reason="xid 79")

    assert result.ok, result
    eligible = slurm.job(job)["EligibleTime"]
    assert time.mktime(time.strptime(eligible, "%Y-%m-%dT%H:%M:%S")) > second, (eligible, second, result)
    try:
        wait_until(lambda: runs.read_text().count("run") == 2, timeout=60, what="the requeued job's second run")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{slurm.describe(job)}") from None
    assert _running(slurm, job)["Restarts"] == "1"


@pytest.mark.slurm
def test_restart_of_a_failed_job_runs_it_again(slurm: SlurmCluster, executor: SlurmExecutor) -> None:
    runs = slurm.root / "jobs" / "runs.txt"
    job = slurm.sbatch(f"echo run >> {runs}; exit 1")
    wait_until(lambda: slurm.job(job)["JobState"] == "FAILED", what="the job to fail")
    assert executor.job_state(JobTarget("slurm", job)) == "FAILED"

    result = executor.restart(JobTarget("slurm", job), exclude_nodes=[], reason="exit 1")

    assert result.ok, result
    assert not any("ExcNodeList" in c for c in result.commands)
    wait_until(lambda: runs.read_text().count("run") == 2, timeout=60, what="the job's second run")
    final = wait_until(lambda: (j := slurm.job(job))["JobState"] == "FAILED" and j, what="the second failure")
    assert final["Restarts"] == "1"
    assert final["ExcNodeList"] == "(null)"


@pytest.mark.slurm
def test_exclusions_add_to_the_jobs_own(slurm: SlurmCluster, executor: SlurmExecutor) -> None:
    job = slurm.sbatch("sleep 300", f"--exclude={GHOST}")
    _running(slurm, job)

    # excluding the only real node too: the job is requeued and has nowhere to go, so it stays pending
    result = executor.restart(JobTarget("slurm", job), exclude_nodes=[NODE, GHOST], reason="xid 79")

    assert result.ok, result
    info = slurm.job(job)
    assert info["JobState"] == "PENDING"
    assert set(info["ExcNodeList"].split(",")) == {GHOST, NODE}
    assert info["Restarts"] == "1"

    # a pending job is not requeued again, only its exclusions change; ExcNodeList keeps its hostlist syntax
    again = executor.restart(JobTarget("slurm", job), exclude_nodes=[NODE], reason="again")
    assert again.ok, again
    assert not any("requeue" in c or "ExcNodeList" in c for c in again.commands)
    assert "pending already" in again.detail
    assert slurm.job(job)["Restarts"] == "1"


@pytest.mark.slurm
def test_drain_and_resume_a_node(slurm: SlurmCluster, executor: SlurmExecutor) -> None:
    result = executor.exclude_node(NODE, reason="Xid 79 (GPU fell off the bus)\non GPU 3")

    assert result.ok, result
    assert result.commands[-1] == (
        f"scontrol update NodeName={NODE} State=DRAIN 'Reason=gpuwatch: Xid 79 (GPU fell off the bus) on GPU 3'"
    )
    assert slurm.node_info() == ("drained", "gpuwatch: Xid 79 (GPU fell off the bus) on GPU 3")
    job = slurm.sbatch("true")
    assert slurm.job(job)["JobState"] == "PENDING"  # a drained node takes no new work

    released = executor.release_node(NODE)

    assert released.ok, released
    assert released.commands[-1] == f"scontrol update NodeName={NODE} State=RESUME"
    wait_until(lambda: slurm.node_info()[0].startswith(("idle", "mixed", "allocated")), what="the node to resume")
    wait_until(lambda: slurm.job(job)["JobState"] == "COMPLETED", timeout=30, what="the waiting job to run")
    again = executor.release_node(NODE)
    assert again.ok and "not drained" in again.detail


@pytest.mark.slurm
def test_a_drain_by_someone_else_is_left_alone(slurm: SlurmCluster, executor: SlurmExecutor) -> None:
    slurm.run("scontrol", "update", f"NodeName={NODE}", "State=DRAIN", "Reason=bios upgrade")

    drained = executor.exclude_node(NODE, reason="xid 48")
    released = executor.release_node(NODE)

    assert drained.ok and "someone else" in drained.detail
    assert released.ok and "someone else" in released.detail
    assert not any("update" in c for c in drained.commands + released.commands)
    assert slurm.node_info() == ("drained", "bios upgrade")


@pytest.mark.slurm
def test_scontrol_errors_are_results(slurm: SlurmCluster, executor: SlurmExecutor) -> None:
    missing = executor.restart(JobTarget("slurm", "999999"), exclude_nodes=[], reason="x")
    assert not missing.ok
    assert "Invalid job id specified" in missing.detail
    assert executor.job_state(JobTarget("slurm", "999999")) == "unknown"

    unknown_node = executor.exclude_node("nosuchnode", reason="x")
    assert not unknown_node.ok
    assert "nosuchnode not found" in unknown_node.detail

    job = slurm.sbatch("sleep 300")
    _running(slurm, job)
    bad_exclusion = executor.restart(JobTarget("slurm", job), exclude_nodes=["nosuchnode"], reason="x")
    assert not bad_exclusion.ok
    assert "Invalid node name specified" in bad_exclusion.detail
    assert "requeued" in bad_exclusion.detail  # the requeue happened: the audit log must say so
    assert slurm.job(job)["Restarts"] == "1"

    for ref in (None, "12; rm -rf /", "ns/name"):
        result = executor.restart(JobTarget("slurm", ref), exclude_nodes=[], reason="x")
        assert not result.ok and "not a Slurm job id" in result.detail and result.commands == ()


def test_missing_binary_and_timeout_are_results(tmp_path: Path) -> None:
    absent = SlurmExecutor(scontrol=str(tmp_path / "scontrol"), squeue=str(tmp_path / "squeue"))
    result = absent.restart(JobTarget("slurm", "1"), exclude_nodes=[], reason="x")
    assert not result.ok and "command not found" in result.detail
    assert not absent.exclude_node("n1", reason="x").ok
    assert absent.job_state(JobTarget("slurm", "1")) == "unknown"

    hanging = tmp_path / "hanging"
    hanging.write_text("#!/bin/sh\nsleep 30\necho never\n")  # sleep is a grandchild: killed too
    hanging.chmod(0o755)
    slow = SlurmExecutor(scontrol=str(hanging), timeout_s=0.3)
    started = time.monotonic()
    result = slow.exclude_node("n1", reason="x")
    assert not result.ok and "timed out after 0.3s" in result.detail
    assert time.monotonic() - started < 10


def test_factory() -> None:
    assert isinstance(executor_for("slurm", scontrol="/opt/slurm/bin/scontrol"), SlurmExecutor)
    with pytest.raises(ValueError, match="supervisor"):
        executor_for("local")
    with pytest.raises(ValueError, match="unknown executor"):
        executor_for("pbs")
