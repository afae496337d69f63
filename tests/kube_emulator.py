"""A small Kubernetes API server on loopback, for driving the real `kubernetes` client in tests.

It keeps pods, nodes, batch Jobs and PyTorchJobs as plain JSON dicts and serves the endpoints the
Kubernetes executor calls, with the API server's answers: lists with equality label selectors, pod
deletion, node reads and merge patches, and `Status` bodies for errors. Every request is recorded,
and `faults` makes chosen requests fail with a status code, as a broken API server would.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubernetes.client import Configuration

Obj = dict[str, Any]
_REASONS = {400: "BadRequest", 404: "NotFound", 415: "UnsupportedMediaType", 500: "InternalError"}
_PATCH_TYPES = ("application/merge-patch+json", "application/strategic-merge-patch+json")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(name: str, *, labels: dict[str, str], phase: str, node: str | None = None, namespace: str = "train") -> Obj:
    """A pod as the API returns it (the fields the client's models require, and a few more)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "labels": labels,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"containers": [{"name": "trainer", "image": "trainer:1"}], "nodeName": node, "restartPolicy": "Never"},
        "status": {"phase": phase},
    }


def node(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"kubernetes.io/hostname": name}, "annotations": {}},
        "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def batch_job(name: str, *, namespace: str = "train", conditions: list[Obj] | None = None) -> Obj:
    uid = f"uid-{name}"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
            "template": {"spec": {"containers": [{"name": "trainer", "image": "trainer:1"}], "restartPolicy": "Never"}},
        },
        "status": {"conditions": conditions or []},
    }


def job_pod_labels(name: str) -> dict[str, str]:
    """The labels the Job controller (1.27+) puts on its pods."""
    uid = f"uid-{name}"
    return {"batch.kubernetes.io/controller-uid": uid, "controller-uid": uid, "job-name": name}


def pytorch_job(name: str, *, namespace: str = "train", conditions: list[Obj] | None = None) -> Obj:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}}},
        "status": {"conditions": conditions or [{"type": "Running", "status": "True"}]},
    }


class KubeEmulator:
    """The objects, by (namespace, name) or name, that the handler serves; tests read and change them."""

    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], Obj] = {}
        self.nodes: dict[str, Obj] = {}
        self.jobs: dict[tuple[str, str], Obj] = {}
        self.pytorchjobs: dict[tuple[str, str], Obj] = {}
        self.requests: list[str] = []  # "METHOD /path?query"
        self.faults: dict[str, int] = {}  # "METHOD /path" -> status to answer instead
        self.lock = threading.Lock()
        self.url = ""

    def add(self, *objs: Obj) -> None:
        for obj in objs:
            meta = obj["metadata"]
            store = {"Pod": self.pods, "Job": self.jobs, "PyTorchJob": self.pytorchjobs}.get(obj["kind"])
            if obj["kind"] == "Node":
                self.nodes[meta["name"]] = obj
            else:
                assert store is not None, obj["kind"]
                store[(meta["namespace"], meta["name"])] = obj

    def configuration(self) -> Configuration:
        """What a test gives the executor: the official client's Configuration, pointed at this server."""
        return Configuration(host=self.url)

    def handle(self, method: str, path: str, query: dict[str, list[str]], headers: Any, body: bytes) -> tuple[int, Obj]:
        with self.lock:
            self.requests.append(f"{method} {path}" + (f"?{_query(query)}" if query else ""))
            if f"{method} {path}" in self.faults:
                code = self.faults[f"{method} {path}"]
                return code, _status(code, "injected fault")
            return self._route(method, path, query, headers, body)

    def _route(self, method: str, path: str, query: dict[str, list[str]], headers: Any, body: bytes) -> tuple[int, Obj]:
        if m := re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods", path):
            if method != "GET":
                return 405, _status(405, "method not allowed")
            selector = _selector((query.get("labelSelector") or [""])[0])
            if selector is None:
                return 400, _status(400, "unable to parse requirement")
            items = [p for (ns, _), p in sorted(self.pods.items()) if ns == m[1] and selector(p)]
            return 200, {"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "1"}, "items": items}
        if m := re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)", path):
            found = self.pods.get((m[1], m[2]))
            if found is None:
                return 404, _status(404, f'pods "{m[2]}" not found', m[2], "pods")
            if method == "DELETE":
                del self.pods[(m[1], m[2])]
                found["metadata"]["deletionTimestamp"] = _now()
            return 200, found
        if m := re.fullmatch(r"/api/v1/nodes/([^/]+)", path):
            found = self.nodes.get(m[1])
            if found is None:
                return 404, _status(404, f'nodes "{m[1]}" not found', m[1], "nodes")
            if method == "PATCH":
                if headers.get("Content-Type") not in _PATCH_TYPES:
                    return 415, _status(
                        415, f"the body of the request was in an unknown format: {headers['Content-Type']}"
                    )
                _merge(found, json.loads(body))
            return 200, found
        if m := re.fullmatch(r"/apis/batch/v1/namespaces/([^/]+)/jobs/([^/]+)", path):
            found = self.jobs.get((m[1], m[2]))
            return (200, found) if found else (404, _status(404, f'jobs.batch "{m[2]}" not found', m[2], "jobs"))
        if m := re.fullmatch(r"/apis/kubeflow.org/v1/namespaces/([^/]+)/pytorchjobs/([^/]+)", path):
            found = self.pytorchjobs.get((m[1], m[2]))
            if found:
                return 200, found
            return 404, _status(404, f'pytorchjobs.kubeflow.org "{m[2]}" not found', m[2], "pytorchjobs")
        return 404, _status(404, "the server could not find the requested resource")


def _query(query: dict[str, list[str]]) -> str:
    return "&".join(f"{k}={v}" for k, values in sorted(query.items()) for v in values)


def _status(code: int, message: str, name: str | None = None, kind: str | None = None) -> Obj:
    status: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": _REASONS.get(code, "Unknown"),
        "code": code,
    }
    if name:
        status["details"] = {"name": name, "kind": kind}
    return status


def _selector(text: str) -> Any:
    """A predicate for an equality-based label selector ("a=b,c!=d,e"), None if it cannot be parsed."""
    rules = []
    for part in filter(None, text.split(",")):
        m = re.fullmatch(r"([\w./-]+)\s*(==|=|!=)\s*([\w.-]*)|([\w./-]+)", part.strip())
        if m is None:
            return None
        rules.append((m[1] or m[4], m[2] or "exists", m[3]))

    def matches(obj: Obj) -> bool:
        labels = obj["metadata"].get("labels") or {}
        for key, op, value in rules:
            if op == "exists" and key not in labels:
                return False
            if op in ("=", "==") and labels.get(key) != value:
                return False
            if op == "!=" and labels.get(key) == value:
                return False
        return True

    return matches


def _merge(target: Obj, patch: Obj) -> None:
    """JSON merge patch (RFC 7396), which is what a strategic merge patch is for these fields."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value


class _Handler(BaseHTTPRequestHandler):
    emulator: KubeEmulator

    def _serve(self) -> None:
        url = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        code, obj = self.emulator.handle(self.command, url.path, parse_qs(url.query), self.headers, body)
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_DELETE = do_PATCH = _serve

    def log_message(self, format: str, *args: Any) -> None:  # requests are in emulator.requests
        pass


@contextmanager
def kube_emulator() -> Iterator[KubeEmulator]:
    """Serve a fresh emulator on a free loopback port for the duration of the block."""
    emulator = KubeEmulator()
    handler = type("Handler", (_Handler,), {"emulator": emulator})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    emulator.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield emulator
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
