"""Recovery on Kubernetes through the API server: delete a job's pods so its controller recreates them,
cordon a node so the scheduler keeps new pods off it.

A target is "namespace/name" of a batch/v1 Job or of a Kubeflow PyTorchJob (kubeflow.org/v1). Which
pods `restart` deletes (see README.md here for why):
- PyTorchJob, a gang: every pod not Succeeded and not already terminating. A replacement rank could
  not join the others' rendezvous, and the survivors would block in their next collective anyway.
- Job, independent pods: those that failed (phase Failed or Unknown) and those on an excluded node.
A job whose own status is terminal (Job Failed/Complete, PyTorchJob Failed/Succeeded) is not touched:
its controller would not recreate the pods, so the restart is reported as impossible instead.

Cordons carry the annotation ``gpuwatch/exclusion-reason``; `release_node` uncordons only nodes with
it, so a cordon by an administrator or by another tool is never undone.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import urllib3
from kubernetes import config as kube_config
from kubernetes.client import ApiClient, BatchV1Api, Configuration, CoreV1Api, CustomObjectsApi, V1Node, V1Pod
from kubernetes.client.exceptions import ApiException

from server.executors.base import UNKNOWN, ActionResult, JobTarget

ANNOTATION = "gpuwatch/exclusion-reason"
JOB_LABEL = "job-name"  # set by the Job controller on every version (batch.kubernetes.io/job-name from 1.27)
PYTORCHJOB_LABEL = "training.kubeflow.org/job-name"
PYTORCHJOB = ("kubeflow.org", "v1", "pytorchjobs")
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
T = TypeVar("T")


class _Failed(Exception):
    """An API call went wrong; its message is the ActionResult's detail."""


class KubernetesExecutor:
    """Restarts Jobs and PyTorchJobs by deleting pods, and cordons nodes, with the official client."""

    name = "kubernetes"

    def __init__(
        self,
        *,
        api_client: ApiClient | None = None,
        configuration: Configuration | None = None,
        kubeconfig: str | None = None,
        context: str | None = None,
        timeout_s: float = 15.0,
    ) -> None:
        """Talks through ``api_client``, or one made from ``configuration``; with neither, from the pod's
        service account when running in a cluster, else from ``kubeconfig`` (default ~/.kube/config)."""
        if api_client is None:
            api_client = ApiClient(configuration or load_configuration(kubeconfig, context))
        self.api_client = api_client
        self.timeout_s = timeout_s
        self._core = CoreV1Api(api_client)
        self._batch = BatchV1Api(api_client)
        self._custom = CustomObjectsApi(api_client)

    def close(self) -> None:
        self.api_client.close()

    # -- the Executor interface -------------------------------------------------------------------

    def restart(self, target: JobTarget, *, exclude_nodes: Sequence[str], reason: str) -> ActionResult:
        log: list[str] = []
        try:
            namespace, name = _parse(target)
            kind, selector, terminal = self._job(namespace, name, log)
            if terminal:
                return ActionResult(
                    False,
                    f"{kind} {namespace}/{name} is {terminal}: its controller recreates no pods; resubmit it",
                    tuple(log),
                )
            pods = self._pods(namespace, selector, log)
        except _Failed as exc:
            return ActionResult(False, str(exc), tuple(log))
        if not pods:
            return ActionResult(False, f"{kind} {namespace}/{name} has no pods (selector {selector})", tuple(log))
        excluded = set(exclude_nodes)
        live = [p for p in pods if p.metadata is not None and p.metadata.deletion_timestamp is None]
        if kind == "PyTorchJob":
            victims = [p for p in live if _phase(p) != "Succeeded"]
        else:
            victims = [p for p in live if _phase(p) in ("Failed", "Unknown") or _on(p, excluded)]
        deleted, errors = [], []
        for pod in victims:
            pod_name = _name(pod)
            try:
                path = f"/api/v1/namespaces/{namespace}/pods/{pod_name}"
                self._call(
                    log, f"DELETE {path}", self._core.delete_namespaced_pod, pod_name, namespace, missing_ok=True
                )
                where = f" on {pod.spec.node_name}" if pod.spec and _on(pod, excluded) else ""
                deleted.append(f"{pod_name} ({_phase(pod)}{where})")
            except _Failed as exc:
                errors.append(str(exc))
        kept = [f"{_name(p)} ({_phase(p)})" for p in live if p not in victims]
        detail = f"{kind} {namespace}/{name}: " + (f"deleted {', '.join(deleted)}" if deleted else "no pod to delete")
        if kept:
            detail += f"; kept {', '.join(kept)}"
        if errors:
            return ActionResult(False, f"{detail}; failed: {'; '.join(errors)}", tuple(log))
        return ActionResult(True, detail, tuple(log))

    def exclude_node(self, node: str, *, reason: str) -> ActionResult:
        log: list[str] = []
        try:
            current = self._node(node, log)
            spec, annotations = current.spec, (current.metadata.annotations if current.metadata else None) or {}
            if spec is not None and spec.unschedulable and ANNOTATION not in annotations:
                return ActionResult(True, f"node {node} already cordoned by someone else: left as it is", tuple(log))
            text = " ".join(reason.split())
            body = {"spec": {"unschedulable": True}, "metadata": {"annotations": {ANNOTATION: text}}}
            self._call(log, f"PATCH /api/v1/nodes/{node}", self._core.patch_node, node, body, note=json.dumps(body))
        except _Failed as exc:
            return ActionResult(False, str(exc), tuple(log))
        return ActionResult(True, f"node {node} cordoned ({ANNOTATION}: {text})", tuple(log))

    def release_node(self, node: str) -> ActionResult:
        log: list[str] = []
        try:
            current = self._node(node, log)
            annotations = (current.metadata.annotations if current.metadata else None) or {}
            cordoned = bool(current.spec is not None and current.spec.unschedulable)
            if cordoned and ANNOTATION not in annotations:
                return ActionResult(True, f"node {node} cordoned by someone else: left cordoned", tuple(log))
            if not cordoned and ANNOTATION not in annotations:
                return ActionResult(True, f"node {node} not cordoned: nothing to release", tuple(log))
            body = {"spec": {"unschedulable": None}, "metadata": {"annotations": {ANNOTATION: None}}}
            self._call(log, f"PATCH /api/v1/nodes/{node}", self._core.patch_node, node, body, note=json.dumps(body))
        except _Failed as exc:
            return ActionResult(False, str(exc), tuple(log))
        was = annotations.get(ANNOTATION, "")
        return ActionResult(True, f"node {node} uncordoned (was: {was})", tuple(log))

    def job_state(self, target: JobTarget) -> str:
        """The job's own terminal condition if it has one, else what its pods say (see `_state`)."""
        try:
            namespace, name = _parse(target)
            kind, selector, terminal = self._job(namespace, name, [])
            if terminal:
                return terminal
            return _state(kind, self._pods(namespace, selector, []))
        except _Failed:
            return UNKNOWN

    def job_nodes(self, target: JobTarget) -> set[str] | None:
        """The nodes the job's pods are scheduled on."""
        try:
            namespace, name = _parse(target)
            _, selector, _ = self._job(namespace, name, [])
            return {
                pod.spec.node_name for pod in self._pods(namespace, selector, []) if pod.spec and pod.spec.node_name
            }
        except _Failed:
            return None

    # -- API calls --------------------------------------------------------------------------------

    def _call(
        self,
        log: list[str],
        what: str,
        fn: Callable[..., T],
        *args: Any,
        note: str = "",
        missing_ok: bool = False,
        **kw: Any,
    ) -> T | None:
        """``fn(*args, **kw)`` with the timeout; ``what`` ("METHOD path", plus ``note``) goes to the audit log.
        None for a 404 when ``missing_ok``; any other failure raises _Failed."""
        log.append(f"{what} {note}".strip())
        try:
            return fn(*args, _request_timeout=self.timeout_s, **kw)
        except ApiException as exc:
            if missing_ok and exc.status == 404:
                return None
            raise _Failed(f"{what}: {exc.status} {exc.reason}: {_message(exc)}") from exc
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:  # unreachable, timed out, bad response
            raise _Failed(f"{what}: {type(exc).__name__}: {exc}") from exc

    def _job(self, namespace: str, name: str, log: list[str]) -> tuple[str, str, str]:
        """(kind, pod label selector, terminal state or "") of the Job or PyTorchJob called ``name``."""
        path = f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}"
        job = self._call(log, f"GET {path}", self._batch.read_namespaced_job, name, namespace, missing_ok=True)
        if job is not None:
            conditions = (job.status.conditions if job.status else None) or []
            done = {c.type for c in conditions if c.status == "True"}
            terminal = "FAILED" if "Failed" in done else "COMPLETED" if "Complete" in done else ""
            labels = (job.spec.selector.match_labels if job.spec and job.spec.selector else None) or {}
            # the controller's own selector (controller-uid) excludes pods of an earlier Job of the same name
            selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or f"{JOB_LABEL}={name}"
            return "Job", selector, terminal
        group, version, plural = PYTORCHJOB
        path = f"/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}"
        read = self._custom.get_namespaced_custom_object
        obj = self._call(log, f"GET {path}", read, group, version, namespace, plural, name, missing_ok=True)
        if obj is None:
            raise _Failed(f"no Job or PyTorchJob {namespace}/{name}")
        conditions = (obj.get("status") or {}).get("conditions") or []
        done = {c.get("type") for c in conditions if c.get("status") == "True"}
        terminal = "FAILED" if "Failed" in done else "COMPLETED" if "Succeeded" in done else ""
        return "PyTorchJob", f"{PYTORCHJOB_LABEL}={name}", terminal

    def _pods(self, namespace: str, selector: str, log: list[str]) -> list[V1Pod]:
        what = f"GET /api/v1/namespaces/{namespace}/pods?labelSelector={selector}"
        pods = self._call(log, what, self._core.list_namespaced_pod, namespace, label_selector=selector)
        return list(pods.items or []) if pods is not None else []

    def _node(self, node: str, log: list[str]) -> V1Node:
        if not _NAME.fullmatch(node):
            raise _Failed(f"not a Kubernetes node name: {node!r}")
        got = self._call(log, f"GET /api/v1/nodes/{node}", self._core.read_node, node)
        assert got is not None  # only missing_ok calls return None
        return got


def load_configuration(kubeconfig: str | None = None, context: str | None = None) -> Configuration:
    """The service account's configuration inside a pod (unless a kubeconfig is named), else the kubeconfig's."""
    configuration = Configuration()
    try:
        if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            kube_config.load_incluster_config(client_configuration=configuration)
        else:
            kube_config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=configuration, persist_config=False
            )
    except (kube_config.ConfigException, OSError) as exc:
        raise ValueError(f"no Kubernetes configuration: {exc}") from exc
    return configuration


def _parse(target: JobTarget) -> tuple[str, str]:
    namespace, _, name = (target.ref or "").partition("/")
    if not (_NAMESPACE.fullmatch(namespace) and _NAME.fullmatch(name)):
        raise _Failed(f"not a Kubernetes job reference (namespace/name): {target.ref!r}")
    return namespace, name


def _name(pod: V1Pod) -> str:
    return (pod.metadata.name if pod.metadata else None) or "?"


def _phase(pod: V1Pod) -> str:
    return (pod.status.phase if pod.status else None) or "Unknown"


def _on(pod: V1Pod, nodes: set[str]) -> bool:
    """True for a pod not yet finished on one of ``nodes``."""
    return bool(pod.spec and pod.spec.node_name in nodes and _phase(pod) != "Succeeded")


def _state(kind: str, pods: list[V1Pod]) -> str:
    """A job's state from its live pods, in Slurm's words: one failed rank fails a PyTorchJob; a Job's
    failed pods are history once the controller has replaced them."""
    phases = {_phase(p) for p in pods if p.metadata is None or p.metadata.deletion_timestamp is None}
    if kind == "PyTorchJob" and "Failed" in phases:
        return "FAILED"
    if "Pending" in phases or not phases:
        return "PENDING"  # no pods: the controller is (re)creating them
    if "Running" in phases:
        return "RUNNING"
    if phases == {"Succeeded"}:
        return "COMPLETED"
    return "FAILED" if "Failed" in phases else UNKNOWN


def _message(exc: ApiException) -> str:
    """The Status message the API server sent, or the raw body."""
    try:
        return str(json.loads(exc.body or "")["message"])
    except (ValueError, KeyError, TypeError):
        return (exc.body or "").strip()[:300] or str(exc.reason)
