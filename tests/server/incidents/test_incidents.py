"""A run fails with an Xid 79 in its node's kernel log: the server opens an incident and diagnoses it
from the logs the agent streamed, within 2 s of the exit (issue 4, acceptance 4)."""

from __future__ import annotations

import itertools
import json
import re
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, LogLine
from tests.helpers import InProcessServer, Proc, free_port, migrated_sqlite, new_token, start_server, wait_until
from tests.llm_server import FakeLlmServer

JOB_LINES = [
    "[rank0]: iteration      100/  500000 | lm loss: 2.131E+00 | grad norm: 0.412 |",
    "[rank0]: iteration      101/  500000 | lm loss: 2.127E+00 | grad norm: 0.409 |",
    "[rank0]: RuntimeError: CUDA error: unspecified launch failure",
    "[rank0]: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
    "might be incorrect.",
    "[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=8812, "
    "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.",
]
KERNEL_LINE = "[ 8812.113321] NVRM: Xid (PCI:0000:3a:00): 79, pid=4471, name=python, GPU has fallen off the bus."


@pytest.mark.slow
def test_failed_run_is_diagnosed_from_streamed_logs(tmp_path: Path) -> None:
    url = migrated_sqlite(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    token = new_token(url, "gpu-node-07")
    job_log, kern_log = tmp_path / "train.log", tmp_path / "kern.log"
    job_log.touch()
    kern_log.write_text("[    1.000000] Linux version 6.1.0\n")
    server = start_server(tmp_path, port, tmp_path / "server.log", {"GPUWATCH_INCIDENT_SETTLE_S": "0.75"})
    agent = Proc(
        [
            "agent",
            "--server",
            base,
            "--token",
            token,
            "--node",
            "gpu-node-07",
            "--simulate",
            "1",
            "--client-port",
            "0",
            "--flush",
            "0.25",
            "--log-file",
            str(job_log),
            "--kernel-log",
            str(kern_log),
            "--data-dir",
            str(tmp_path),
        ],
        tmp_path / "agent.log",
    )
    auth = {"Authorization": f"Bearer {token}"}
    try:
        wait_until(lambda: httpx.get(f"{base}/api/v1/gpus").json(), what="the agent")
        run = httpx.post(
            f"{base}/api/v1/runs", json={"job": "llama-70b", "command": "torchrun train.py"}, headers=auth
        ).json()
        with open(job_log, "a") as f:
            f.write("\n".join(JOB_LINES) + "\n")
        with open(kern_log, "a") as f:
            f.write(KERNEL_LINE + "\n")
        exited = time.monotonic()
        resp = httpx.post(
            f"{base}/api/v1/runs/{run['id']}/exit", json={"exit_code": 1, "streams": [f"file:{job_log}"]}, headers=auth
        )
        assert resp.status_code == 202 and resp.json()["state"] == "failed"
        incident_id = resp.json()["incident_id"]

        def diagnosed() -> dict | None:
            incident = httpx.get(f"{base}/api/v1/incidents/{incident_id}").json()
            return incident if incident["diagnosis"] else None

        # How soon is measured by bench/alert_latency.py (exit -> alert), not asserted in a test: a loaded CI
        # machine stretches any deadline. Here, that the diagnosis comes and is right.
        incident = wait_until(diagnosed, timeout=60, what="the incident's diagnosis", every=0.02)
        took = time.monotonic() - exited
        print(f"diagnosed {took:.2f}s after the exit")
        d = incident["diagnosis"]
        assert (d["reason"], d["category"], d["action"], d["node"]) == (
            "gpu_hardware",
            "infrastructure",
            "restart_exclude_node",
            "gpu-node-07",
        )
        # Line 1: the kernel log is read from the run's start; the boot line, older, is not part of it.
        (xid_line,) = [e for e in d["evidence"] if (e["file"], e["line"], e["text"]) == ("kernel", 1, KERNEL_LINE)]
        assert xid_line["ts"] is not None and abs(xid_line["ts"] - time.time()) < 60, "when the agent read it"
        assert incident["run_id"] == run["id"] and incident["node"] == "gpu-node-07"
        decided = wait_until(
            lambda: httpx.get(f"{base}/api/v1/runs/{run['id']}/decision", params={"wait": 2}).json()["decision"],
            what="the recovery decision",
        )
        # A local job restarts only on its own node, the one blamed: it stops instead (issue 22, point 5).
        assert (decided["outcome"], decided["rule"], decided["exclude_nodes"]) == ("stop", "no_node", [])
        families = {f.name: f for f in text_string_to_metric_families(httpx.get(f"{base}/metrics").text)}
        failures = {
            (s.labels["reason"], s.labels["category"]): s.value
            for s in families["gpuwatch_failures"].samples
            if s.name == "gpuwatch_failures_total" and s.value
        }
        assert failures == {("gpu_hardware", "infrastructure"): 1.0}
        ok = httpx.post(f"{base}/api/v1/runs", json={"job": "llama-70b"}, headers=auth).json()
        assert ok["attempt"] == 2
        done = httpx.post(f"{base}/api/v1/runs/{ok['id']}/exit", json={"exit_code": 0}, headers=auth).json()
        assert done == {"run_id": ok["id"], "state": "succeeded", "incident_id": None}
        # Exit codes per rank: a rank killed with nothing in its logs is diagnosed from its status alone.
        third = httpx.post(f"{base}/api/v1/runs", json={"job": "llama-70b"}, headers=auth).json()
        killed = httpx.post(
            f"{base}/api/v1/runs/{third['id']}/exit",
            headers=auth,
            json={"exit_code": 1, "ranks": [{"rank": 3, "exit_code": 137, "stream": "file:/logs/rank3.log"}]},
        ).json()
        later = wait_until(
            lambda: httpx.get(f"{base}/api/v1/incidents/{killed['incident_id']}").json()["diagnosis"],
            timeout=5,
            what="the second diagnosis",
        )
        # 137 with no preemption: the host's OOM killer. The first run's Xid is not this run's evidence.
        assert (later["reason"], later["rank"]) == ("host_oom", 3)
        assert httpx.post(f"{base}/api/v1/runs/999/exit", json={"exit_code": 1}, headers=auth).status_code == 404
        assert httpx.post(f"{base}/api/v1/runs", json={"job": "x"}).status_code == 401
    finally:
        agent.stop()
        server.stop()


def test_an_xid_logged_before_the_run_started_is_not_blamed(settings: Settings) -> None:
    """The node's kernel log is read from the run's start: an Xid of an earlier run explains that run's
    failure, not this one's; the same Xid logged while the run ran does."""
    fast = settings.replace(incident_settle_s=0.05)
    cuda = "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered"
    with InProcessServer(fast) as srv:
        token = new_token(fast.effective_database_url, "gpu-node-08")
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as node:
            batches = itertools.count(1)

            def ship(*logs: LogLine) -> None:
                resp = node.post(
                    "/api/v1/ingest", content=Batch(batch_id=next(batches), logs=list(logs)).model_dump_json()
                )
                assert resp.status_code == 200, resp.text

            def failed_run(stream: str, xid_during_run: bool) -> dict:
                run = node.post("/api/v1/runs", json={"job": "llama-70b"}).json()
                if xid_during_run:
                    ship(LogLine(stream="kernel", seq=1, ts=time.time(), text=KERNEL_LINE))
                ship(LogLine(stream=stream, seq=0, ts=time.time(), text=cuda))
                ended = node.post(f"/api/v1/runs/{run['id']}/exit", json={"exit_code": 1, "streams": [stream]}).json()
                return wait_until(
                    lambda: node.get(f"/api/v1/incidents/{ended['incident_id']}").json()["diagnosis"],
                    what="the run's diagnosis",
                )

            ship(LogLine(stream="kernel", seq=0, ts=time.time() - 60, text=KERNEL_LINE))  # the attempt before
            d = failed_run("run/a/stderr", xid_during_run=False)
            assert d["reason"] == "cuda_error" and [e["file"] for e in d["evidence"]] == ["run/a/stderr"]
            d = failed_run("run/b/stderr", xid_during_run=True)
            assert (d["reason"], d["node"]) == ("gpu_hardware", "gpu-node-08")
            assert [e["text"] for e in d["evidence"] if e["file"] == "kernel"] == [KERNEL_LINE]


def test_the_server_asks_the_llm_once_for_the_same_failure_in_two_incidents(settings: Settings) -> None:
    """The composition root builds one LLM analyser for the process, so its cache of answers outlives an
    incident: the same unexplained failure in a second run is answered without asking the model again."""
    odd = "[rank0]: worker stopped: E_WEIRD_42 in the data service"

    def script(request: dict) -> tuple[int, str]:
        question = [m["content"] for m in request["messages"] if m["role"] == "user"][-1]
        lid = re.search(r"^(L\d+) \| .*E_WEIRD_42", question, re.M)
        assert lid is not None
        return 200, json.dumps({"reason": "dataloader_error", "confidence": 0.9, "evidence": [lid.group(1)]})

    with FakeLlmServer(script) as llm:
        fast = settings.replace(incident_settle_s=0.05, llm_base_url=llm.base_url, llm_model="m")
        with InProcessServer(fast) as srv:
            analyser = srv.services.incidents.llm
            assert analyser is not None and analyser.model == "m"
            token = new_token(fast.effective_database_url, "gpu-node-09")
            with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as node:
                diagnoses = []
                for k, stream in enumerate(("run/a/stderr", "run/b/stderr")):
                    run = node.post("/api/v1/runs", json={"job": "llama-70b"}).json()
                    lines = [f"[rank0]: step {k * 100 + i} loss {2 - i / 100:.2f}" for i in range(5)] + [odd]
                    logs = [LogLine(stream=stream, seq=i, ts=time.time(), text=t) for i, t in enumerate(lines)]
                    batch = Batch(batch_id=k + 1, logs=logs)
                    assert node.post("/api/v1/ingest", content=batch.model_dump_json()).status_code == 200
                    ended = node.post(f"/api/v1/runs/{run['id']}/exit", json={"exit_code": 1, "streams": [stream]})
                    incident = ended.json()["incident_id"]
                    diagnoses.append(
                        wait_until(
                            lambda incident=incident: node.get(f"/api/v1/incidents/{incident}").json()["diagnosis"],
                            what="the run's diagnosis",
                        )
                    )
            assert srv.services.incidents.llm is analyser and len(analyser.cache) == 1
    assert len(llm.requests) == 1, "the second incident's answer came from the cache"
    for d in diagnoses:
        assert (d["reason"], d["source"]) == ("dataloader_error", "llm")
        assert [e["text"] for e in d["evidence"]] == [odd]
