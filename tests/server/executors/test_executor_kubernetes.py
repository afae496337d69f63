"""The Kubernetes executor through the real `kubernetes` client against an API emulator on loopback
(tests/kube_emulator.py): which pods go, which stay, what the node looks like afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import ApiClient, Configuration

from server.executors import JobTarget, executor_for
from server.executors.kubernetes import ANNOTATION, KubernetesExecutor
from tests.helpers import free_port
from tests.kube_emulator import (
    KubeEmulator,
    batch_job,
    job_pod_labels,
    kube_emulator,
    node,
    pod,
    pytorch_job,
)

PT_LABELS = {"training.kubeflow.org/job-name": "llama", "training.kubeflow.org/operator-name": "pytorchjob-controller"}


@pytest.fixture
def api() -> Iterator[KubeEmulator]:
    with kube_emulator() as emulator:
        emulator.add(node("gpu-1"), node("gpu-2"), node("gpu-3"))
        yield emulator


@pytest.fixture
def executor(api: KubeEmulator) -> Iterator[KubernetesExecutor]:
    ex = KubernetesExecutor(configuration=api.configuration(), timeout_s=5)
    yield ex
    ex.close()


def test_pytorchjob_restart_deletes_the_whole_gang(api: KubeEmulator, executor: KubernetesExecutor) -> None:
    api.add(
        pytorch_job("llama"),
        pod("llama-master-0", labels=PT_LABELS, phase="Running", node="gpu-1"),
        pod("llama-worker-0", labels=PT_LABELS, phase="Failed", node="gpu-2"),
        pod("llama-worker-1", labels=PT_LABELS, phase="Running", node="gpu-3"),
        pod("other-0", labels={"training.kubeflow.org/job-name": "other"}, phase="Running", node="gpu-1"),
    )
    terminating = pod("llama-worker-2", labels=PT_LABELS, phase="Running", node="gpu-2")
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    api.add(terminating)
    assert executor.job_state(JobTarget("kubernetes", "train/llama")) == "FAILED"  # one rank down fails the gang

    result = executor.restart(JobTarget("kubernetes", "train/llama"), exclude_nodes=["gpu-2"], reason="xid 79")

    assert result.ok, result
    assert sorted(name for _, name in api.pods) == ["llama-worker-2", "other-0"]
    assert "GET /apis/kubeflow.org/v1/namespaces/train/pytorchjobs/llama" in result.commands
    assert "GET /api/v1/namespaces/train/pods?labelSelector=training.kubeflow.org/job-name=llama" in result.commands
    deletes = [c for c in result.commands if c.startswith("DELETE")]
    assert sorted(deletes) == [
        f"DELETE /api/v1/namespaces/train/pods/llama-{p}" for p in ("master-0", "worker-0", "worker-1")
    ]
    assert "llama-worker-0 (Failed on gpu-2)" in result.detail
    # the operator has not recreated the pods yet: the only one left is terminating, so the job is pending
    assert executor.job_state(JobTarget("kubernetes", "train/llama")) == "PENDING"


def test_job_restart_deletes_failed_pods_and_those_on_excluded_nodes(
    api: KubeEmulator, executor: KubernetesExecutor
) -> None:
    labels = job_pod_labels("bert")
    api.add(
        batch_job("bert"),
        pod("bert-a", labels=labels, phase="Failed", node="gpu-1"),
        pod("bert-b", labels=labels, phase="Running", node="gpu-2"),
        pod("bert-c", labels=labels, phase="Running", node="gpu-3"),
        pod("bert-d", labels=labels, phase="Succeeded", node="gpu-2"),
        # a pod of an earlier Job of the same name: same job-name label, another controller-uid
        pod("bert-old", labels={**job_pod_labels("bert"), "batch.kubernetes.io/controller-uid": "x"}, phase="Failed"),
    )
    assert executor.job_state(JobTarget("kubernetes", "train/bert")) == "RUNNING"

    result = executor.restart(JobTarget("kubernetes", "train/bert"), exclude_nodes=["gpu-2"], reason="xid 48")

    assert result.ok, result
    assert sorted(name for _, name in api.pods) == ["bert-c", "bert-d", "bert-old"]
    assert "kept bert-c (Running), bert-d (Succeeded)" in result.detail
    assert (
        "GET /api/v1/namespaces/train/pods?labelSelector=batch.kubernetes.io/controller-uid=uid-bert" in result.commands
    )
    assert not any("pytorchjobs" in c for c in result.commands)  # found as a Job first


def test_a_job_that_has_failed_for_good_is_not_restarted(api: KubeEmulator, executor: KubernetesExecutor) -> None:
    api.add(
        batch_job("gpt", conditions=[{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]),
        pod("gpt-a", labels=job_pod_labels("gpt"), phase="Failed", node="gpu-1"),
    )

    result = executor.restart(JobTarget("kubernetes", "train/gpt"), exclude_nodes=[], reason="exit 1")

    assert not result.ok
    assert "is FAILED" in result.detail and "resubmit" in result.detail
    assert ("train", "gpt-a") in api.pods
    assert executor.job_state(JobTarget("kubernetes", "train/gpt")) == "FAILED"


def test_cordon_and_uncordon(api: KubeEmulator, executor: KubernetesExecutor) -> None:
    result = executor.exclude_node("gpu-2", reason="Xid 79\nGPU fell off the bus")

    assert result.ok, result
    gpu2 = api.nodes["gpu-2"]
    assert gpu2["spec"]["unschedulable"] is True
    assert gpu2["metadata"]["annotations"][ANNOTATION] == "Xid 79 GPU fell off the bus"
    assert api.nodes["gpu-1"]["spec"] == {}
    assert result.commands[-1].startswith("PATCH /api/v1/nodes/gpu-2 ")

    released = executor.release_node("gpu-2")

    assert released.ok, released
    assert "unschedulable" not in gpu2["spec"]
    assert ANNOTATION not in gpu2["metadata"]["annotations"]
    again = executor.release_node("gpu-2")
    assert again.ok and "not cordoned" in again.detail
    assert not any(c.startswith("PATCH") for c in again.commands)


def test_a_cordon_by_someone_else_is_left_alone(api: KubeEmulator, executor: KubernetesExecutor) -> None:
    api.nodes["gpu-3"]["spec"]["unschedulable"] = True  # `kubectl cordon gpu-3` by an administrator

    excluded = executor.exclude_node("gpu-3", reason="xid 48")
    released = executor.release_node("gpu-3")

    assert excluded.ok and "someone else" in excluded.detail
    assert released.ok and "someone else" in released.detail
    assert api.nodes["gpu-3"]["spec"]["unschedulable"] is True
    assert ANNOTATION not in api.nodes["gpu-3"]["metadata"]["annotations"]
    assert not any(r.startswith("PATCH") for r in api.requests)


def test_missing_job_and_node_are_results(api: KubeEmulator, executor: KubernetesExecutor) -> None:
    result = executor.restart(JobTarget("kubernetes", "train/nope"), exclude_nodes=[], reason="x")
    assert not result.ok
    assert result.detail == "no Job or PyTorchJob train/nope"
    assert result.commands == (
        "GET /apis/batch/v1/namespaces/train/jobs/nope",
        "GET /apis/kubeflow.org/v1/namespaces/train/pytorchjobs/nope",
    )
    assert executor.job_state(JobTarget("kubernetes", "train/nope")) == "unknown"

    cordon = executor.exclude_node("gpu-9", reason="x")
    assert not cordon.ok
    assert cordon.detail == 'GET /api/v1/nodes/gpu-9: 404 Not Found: nodes "gpu-9" not found'

    bad_node = executor.exclude_node("gpu-1/../../namespaces", reason="x")
    assert not bad_node.ok and "not a Kubernetes node name" in bad_node.detail and bad_node.commands == ()

    for ref in (None, "no-namespace", "Train/x", "train/"):
        bad = executor.restart(JobTarget("kubernetes", ref), exclude_nodes=[], reason="x")
        assert not bad.ok and "not a Kubernetes job reference" in bad.detail and bad.commands == ()


def test_server_errors_are_results(api: KubeEmulator, executor: KubernetesExecutor) -> None:
    api.add(
        pytorch_job("llama"),
        pod("llama-master-0", labels=PT_LABELS, phase="Running", node="gpu-1"),
        pod("llama-worker-0", labels=PT_LABELS, phase="Failed", node="gpu-2"),
    )
    api.faults["DELETE /api/v1/namespaces/train/pods/llama-master-0"] = 500
    api.faults["PATCH /api/v1/nodes/gpu-1"] = 500

    result = executor.restart(JobTarget("kubernetes", "train/llama"), exclude_nodes=[], reason="x")

    assert not result.ok
    assert "deleted llama-worker-0 (Failed)" in result.detail  # the rest of the gang is still deleted
    assert (
        "DELETE /api/v1/namespaces/train/pods/llama-master-0: 500 Internal Server Error: injected fault"
        in result.detail
    )
    assert ("train", "llama-master-0") in api.pods

    cordon = executor.exclude_node("gpu-1", reason="x")
    assert not cordon.ok and "500 Internal Server Error" in cordon.detail
    assert "unschedulable" not in api.nodes["gpu-1"]["spec"]

    api.faults["GET /api/v1/namespaces/train/pods"] = 500
    assert executor.job_state(JobTarget("kubernetes", "train/llama")) == "unknown"


def test_unreachable_api_server_is_a_result() -> None:
    with ApiClient(Configuration(host=f"http://127.0.0.1:{free_port()}", retries=False)) as client:
        executor = executor_for("kubernetes", api_client=client, timeout_s=2)
        result = executor.exclude_node("gpu-1", reason="x")
    assert not result.ok
    assert result.detail.startswith("GET /api/v1/nodes/gpu-1: ")
    assert "Connection refused" in result.detail


def test_without_configuration_the_factory_says_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ValueError, match="no Kubernetes configuration"):
        executor_for("kubernetes", kubeconfig=str(tmp_path / "missing"))
