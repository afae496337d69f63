"""The ingest API against the real app on loopback: auth, limits, validation, atomicity, idempotence."""

from __future__ import annotations

import gzip
import json
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, Event, GpuInfo, GpuSample, GpuSeries, LogLine, RegisterRequest, to_series
from server.store.db import _SQLITE_WRITERS
from server.store.models import EventRow, Gpu, GpuRollup, LogLineRow, Node
from tests.helpers import InProcessServer, new_token, wait_until


@pytest.fixture
def node(live_server: InProcessServer) -> httpx.Client:
    token = new_token(live_server.services.settings.effective_database_url, "node-a")
    client = httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    yield client
    client.close()


def _batch(batch_id: int, lines: range = range(5), ts: float | None = None) -> Batch:
    ts = ts or time.time()
    return Batch(
        batch_id=batch_id,
        samples=[GpuSample(ts=ts, gpu=i, uuid=f"GPU-{i}", util_gpu=50.0 + i, power_w=300.0) for i in range(2)],
        logs=[LogLine(stream="file:/train.log", seq=n, ts=ts, text=f"step {n}") for n in lines],
        events=[Event(stream="gpu:sim", seq=0, ts=ts, kind="xid", gpu=1, message="Xid 79", data={"xid": 79})],
    )


def _post(client: httpx.Client, batch: Batch | bytes, gz: bool = False) -> httpx.Response:
    body = batch if isinstance(batch, bytes) else batch.model_dump_json().encode()
    headers = {"Content-Type": "application/json"}
    if gz:
        body, headers["Content-Encoding"] = gzip.compress(body), "gzip"
    return client.post("/api/v1/ingest", content=body, headers=headers)


def _count(srv: InProcessServer, model: type) -> int:
    with srv.services.sessions() as s:
        return s.scalar(select(func.count()).select_from(model))


def test_gzip_batch_is_stored_and_listed(live_server: InProcessServer, node: httpx.Client) -> None:
    resp = _post(node, _batch(1), gz=True)
    assert resp.status_code == 200, resp.text
    ack = resp.json()
    assert abs(ack.pop("server_time") - time.time()) < 60  # the agents measure their clock's offset by it
    assert ack == {"batch_id": 1, "duplicate": False, "samples": 2, "logs": 5, "events": 1, "stack_tasks": 0}
    lines = node.get("/api/v1/logs", params={"node": "node-a"}).json()
    assert [ln["seq"] for ln in lines] == [0, 1, 2, 3, 4]
    assert [ln["text"] for ln in lines][-1] == "step 4"
    gpus = node.get("/api/v1/gpus").json()
    assert {(g["node"], g["index"], g["sample"]["util_gpu"]) for g in gpus} == {
        ("node-a", 0, 50.0),
        ("node-a", 1, 51.0),
    }
    events = node.get("/api/v1/events", params={"node": "node-a", "kind": "xid"}).json()
    assert events[0]["data"] == {"xid": 79} and events[0]["gpu_index"] == 1


def test_replayed_batch_stores_nothing_twice(live_server: InProcessServer, node: httpx.Client) -> None:
    batch = _batch(7)
    assert _post(node, batch).json()["duplicate"] is False
    again = _post(node, batch, gz=True)
    assert again.status_code == 200 and again.json()["duplicate"] is True
    # The same lines re-batched under a new id (an agent restarted mid-flush) are not stored again either.
    rebatched = _post(node, _batch(8, lines=range(3, 8))).json()
    assert rebatched["logs"] == 3 and rebatched["events"] == 0
    assert _count(live_server, LogLineRow) == 8
    assert _count(live_server, EventRow) == 1
    live_server.services.writer.flush_rollups()  # rollups are buffered (GPUWATCH_ROLLUP_FLUSH_S); the replay added none
    with live_server.services.sessions() as s:
        assert s.scalar(select(func.sum(GpuRollup.samples))) == 4  # batches 7 and 8 once each, 2 GPUs
    metrics = node.get("/metrics").text
    assert 'gpuwatch_ingest_batches_total{outcome="duplicate"} 1.0' in metrics
    assert 'gpuwatch_ingest_duplicate_items_total{kind="log"} 7.0' in metrics


def _xid_counts(client: httpx.Client) -> dict[tuple[str, str, str], float]:
    """gpuwatch_xid_events_total by (instance, gpu, xid)."""
    return {
        (s.labels["instance"], s.labels["gpu"], s.labels["xid"]): s.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for s in family.samples
        if s.name == "gpuwatch_xid_events_total"
    }


def test_xid_events_are_counted_once_by_node_gpu_and_code(node: httpx.Client) -> None:
    assert _xid_counts(node) == {}
    ts = time.time()
    batch = _batch(1, ts=ts)
    batch.events += [
        Event(stream="gpu:sim", seq=1, ts=ts, kind="xid", gpu=1, message="Xid 13", data={"xid": 13}),
        Event(
            stream="gpu:sim", seq=2, ts=ts, kind="xid", gpu=None, message="Xid 48 on an unknown GPU", data={"xid": 48}
        ),
        Event(stream="gpu:sim", seq=3, ts=ts, kind="gpu_lost", gpu=1, message="GPU 1 lost", data={"xid": 79}),
    ]
    assert _post(node, batch).json()["events"] == 4
    counted = {("node-a", "1", "79"): 1.0, ("node-a", "1", "13"): 1.0, ("node-a", "", "48"): 1.0}
    assert _xid_counts(node) == counted
    # A replay of the batch, and its Xid re-batched under a new id, count nothing.
    assert _post(node, batch).json()["duplicate"] is True
    rebatched = _batch(2, lines=range(5, 6), ts=ts)  # the same Xid event (gpu:sim, 0) as batch 1's
    assert _post(node, rebatched).json()["events"] == 0
    assert _xid_counts(node) == counted
    # A new Xid 79 on the same GPU adds to its series.
    again = Batch(batch_id=3, events=[Event(stream="gpu:sim", seq=4, ts=ts, kind="xid", gpu=1, data={"xid": 79})])
    assert _post(node, again).json()["events"] == 1
    assert _xid_counts(node) == {**counted, ("node-a", "1", "79"): 2.0}


def test_malformed_json_is_422_naming_the_field(node: httpx.Client) -> None:
    raw = json.loads(_batch(1).model_dump_json())
    raw["samples"][1]["util_gpu"] = "very busy"
    resp = _post(node, json.dumps(raw).encode())
    assert resp.status_code == 422
    locs = [e["loc"] for e in resp.json()["detail"]]
    assert ["body", "samples", 1, "util_gpu"] in locs
    broken = _post(node, b'{"batch_id": 1, "logs": [')
    assert broken.status_code == 422 and broken.json()["detail"][0]["type"] == "json_invalid"


def test_one_bad_item_stores_nothing_from_the_batch(live_server: InProcessServer, node: httpx.Client) -> None:
    raw = json.loads(_batch(1, lines=range(100)).model_dump_json())
    raw["logs"][57]["seq"] = -1
    resp = _post(node, json.dumps(raw).encode())
    assert resp.status_code == 422
    assert ["body", "logs", 57, "seq"] in [e["loc"] for e in resp.json()["detail"]]
    assert _count(live_server, LogLineRow) == 0
    assert _count(live_server, EventRow) == 0
    assert node.get("/api/v1/gpus").json() == []
    # The same batch, fixed, is then accepted whole: the refused attempt did not claim its id.
    assert _post(node, _batch(1, lines=range(100))).json()["logs"] == 100


@pytest.mark.parametrize("header", [None, "Bearer gwn_not-a-token", "Basic dXNlcjpwdw==", "Bearer"])
def test_missing_or_wrong_token_is_401(live_server: InProcessServer, header: str | None) -> None:
    headers = {"Authorization": header} if header is not None else {}
    resp = httpx.post(f"{live_server.url}/api/v1/ingest", content=_batch(1).model_dump_json(), headers=headers)
    assert resp.status_code == 401
    assert resp.headers["WWW-Authenticate"] == "Bearer"
    assert _count(live_server, LogLineRow) == 0


def test_revoked_token_is_401(live_server: InProcessServer, node: httpx.Client) -> None:
    from server.store.db import transaction
    from server.store.nodes import revoke_tokens

    assert _post(node, _batch(1)).status_code == 200
    with transaction(live_server.services.sessions) as s:
        assert revoke_tokens(s, "node-a") == 1
    # Refused once the server's token cache (GPUWATCH_TOKEN_CACHE_S, 0.2 s here) lets go of it.
    wait_until(lambda: _post(node, _batch(2)).status_code == 401, timeout=5, what="the revoked token refused")


def test_body_over_limit_is_413(live_server: InProcessServer, node: httpx.Client) -> None:
    limit = live_server.services.settings.server.max_body_bytes
    big = _batch(1, lines=range(2000))
    assert len(big.model_dump_json()) > limit
    assert _post(node, big).status_code == 413
    # Small on the wire, huge once inflated (a gzip bomb): refused after inflating at most limit+1 bytes.
    bomb = gzip.compress(b'{"batch_id": 1, "logs": [' + b" " * (limit * 20) + b"]}")
    assert len(bomb) < limit
    resp = node.post("/api/v1/ingest", content=bomb, headers={"Content-Encoding": "gzip"})
    assert resp.status_code == 413
    assert _count(live_server, LogLineRow) == 0


def test_corrupt_gzip_is_400_and_unknown_encoding_415(node: httpx.Client) -> None:
    assert node.post("/api/v1/ingest", content=b"not gzip", headers={"Content-Encoding": "gzip"}).status_code == 400
    assert node.post("/api/v1/ingest", content=b"{}", headers={"Content-Encoding": "br"}).status_code == 415


def test_newer_protocol_version_is_refused(node: httpx.Client) -> None:
    raw = json.loads(_batch(1).model_dump_json())
    raw["version"] = 99
    resp = _post(node, json.dumps(raw).encode())
    assert resp.status_code == 422 and ["body", "version"] in [e["loc"] for e in resp.json()["detail"]]


def test_registration_lists_gpus_before_samples(node: httpx.Client) -> None:
    req = RegisterRequest(
        hostname="host-a",
        collector="simulated",
        gpus=[GpuInfo(index=i, uuid=f"GPU-{i}", name="NVIDIA H100 80GB HBM3") for i in range(4)],
    )
    resp = node.post("/api/v1/nodes/register", content=req.model_dump_json())
    assert resp.status_code == 200 and resp.json()["node"] == "node-a"
    gpus = node.get("/api/v1/gpus", params={"node": "node-a"}).json()
    assert [(g["index"], g["model"], g["sample"]) for g in gpus] == [
        (i, "NVIDIA H100 80GB HBM3", None) for i in range(4)
    ]
    nodes = node.get("/api/v1/nodes").json()
    assert nodes[0]["name"] == "node-a" and nodes[0]["gpus"] == 4 and nodes[0]["up"] is True


def test_metrics_use_dcgm_names_and_labels(node: httpx.Client) -> None:
    _post(node, _batch(1))
    text = node.get("/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    util = {s.labels["gpu"]: s for s in families["DCGM_FI_DEV_GPU_UTIL"].samples}
    assert util["1"].value == 51.0
    assert util["1"].labels == {
        "gpu": "1",
        "UUID": "GPU-1",
        "device": "nvidia1",
        "modelName": "unknown",
        "Hostname": "node-a",
        "instance": "node-a",
    }
    assert families["DCGM_FI_DEV_POWER_USAGE"].type == "gauge"
    assert [s.value for s in families["DCGM_FI_DEV_XID_ERRORS"].samples] == [0.0, 0.0]
    assert families["gpuwatch_node_up"].samples[0].value == 1.0
    # A field the GPU did not report is absent, not zero.
    assert "DCGM_FI_DEV_GPU_TEMP" not in families


def test_dead_database_is_503_and_stores_nothing(live_server: InProcessServer, node: httpx.Client) -> None:
    """A database that cannot take writes (here: a lock held by another process's connection) gives
    503 with Retry-After, which the agent treats as 'keep the batch and retry'."""
    db_path = live_server.services.settings.effective_database_url.removeprefix("sqlite:///")
    assert _post(node, _batch(1)).status_code == 200
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        resp = _post(node, _batch(2, lines=range(5, 10)))
        assert resp.status_code == 503
        assert resp.headers["Retry-After"] == "5"
        assert "nothing was stored" in resp.json()["detail"]
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert _post(node, _batch(2, lines=range(5, 10))).json()["logs"] == 5
    assert _count(live_server, LogLineRow) == 10


def test_read_endpoints_404_on_unknown_things(node: httpx.Client) -> None:
    assert node.get("/api/v1/logs", params={"node": "nope"}).status_code == 404
    assert node.get("/api/v1/jobs/12345").status_code == 404
    assert node.get("/api/v1/runs/12345").status_code == 404
    assert node.get("/api/v1/jobs").json() == []


def test_health_and_readiness(live_server: InProcessServer) -> None:
    assert httpx.get(f"{live_server.url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{live_server.url}/readyz").json() == {"status": "ready"}
    assert httpx.get(f"{live_server.url}/docs").status_code == 200


def test_series_and_rows_of_the_same_samples_store_the_same(live_server: InProcessServer, node: httpx.Client) -> None:
    """Protocol 2's columns and protocol 1's rows are two spellings of one thing: same acks, same rollups,
    same latest sample. Two GPUs, a job ending half-way and a minute boundary in the middle."""
    url = live_server.services.settings.effective_database_url
    other = httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {new_token(url, 'node-b')}"})
    start = (time.time() // 60 - 1) * 60 - 2  # two seconds before a minute boundary
    rows = [
        GpuSample(
            ts=start + k * 0.5,
            gpu=g,
            uuid=f"GPU-{g}",
            util_gpu=None if k == 3 else float(10 * k),
            power_w=100.0 + k,
            temp_c=40.0 + k,
            fb_used_mib=1000.0 * g,
            period_s=0.5,
            job="train" if k < 6 else None,
            rank=g if k < 6 else None,
        )
        for k in range(10)
        for g in range(2)
    ]
    as_rows = Batch(batch_id=1, samples=rows)
    theirs = [r.model_copy(update={"uuid": f"B-{r.uuid}"}) for r in rows]  # a GPU's uuid is unique
    as_series = Batch(batch_id=1, series=to_series(theirs, GpuSeries))
    try:
        acks = [_post(node, as_rows, gz=True).json(), _post(other, as_series, gz=True).json()]
        for ack in acks:
            ack.pop("server_time")
        gpus = other.get("/api/v1/gpus").json()
    finally:
        other.close()
    assert (
        acks[0]
        == acks[1]
        == {
            "batch_id": 1,
            "duplicate": False,
            "samples": 20,
            "logs": 0,
            "events": 0,
            "stack_tasks": 0,
        }
    )
    live_server.services.writer.flush_rollups()
    with live_server.services.sessions() as s:
        stored = s.execute(
            select(Node.name, Gpu.index, GpuRollup)
            .select_from(GpuRollup)
            .join(Gpu, Gpu.id == GpuRollup.gpu_id)
            .join(Node, Node.id == Gpu.node_id)
        ).all()
    by_node: dict[str, set[tuple]] = {"node-a": set(), "node-b": set()}
    for name, index, r in stored:
        by_node[name].add(
            (
                index,
                r.minute,
                r.samples,
                r.util_sum,
                r.util_max,
                r.power_sum_w,
                r.gpu_seconds,
                r.idle_seconds,
                r.unallocated_seconds,
                r.energy_j,
                r.fb_used_max_mib,
                r.temp_max_c,
            )
        )
    assert len(by_node["node-a"]) == 4  # two GPUs, two minutes
    assert by_node["node-a"] == by_node["node-b"]
    latest = {(g["node"], g["index"]): g["sample"] for g in gpus}
    assert latest[("node-a", 1)] == {**latest[("node-b", 1)], "uuid": "GPU-1"}
    assert latest[("node-b", 1)]["ts"] == start + 4.5 and latest[("node-b", 1)]["job"] is None


def test_a_series_column_of_the_wrong_length_is_refused_whole(live_server: InProcessServer, node: httpx.Client) -> None:
    body = json.loads(_batch(1).model_dump_json())
    body["series"] = [{"gpu": 0, "uuid": "GPU-0", "ts": [time.time(), time.time() + 1], "util_gpu": [50.0]}]
    resp = _post(node, json.dumps(body).encode())
    assert resp.status_code == 422, resp.text
    assert ["body", "series", 0, "util_gpu"] in [e["loc"] for e in resp.json()["detail"]]
    assert _count(live_server, LogLineRow) == 0


def test_a_full_ingest_queue_is_503_with_retry_after_and_the_queued_batch_is_stored(settings: Settings) -> None:
    """The writer refuses past `ingest_queue_bytes`; over HTTP that is 503 + Retry-After, which the agent
    honours by keeping the batch. Held: the SQLite writer lock, so the first batch waits in the queue."""
    first, second = _batch(0).model_dump_json().encode(), _batch(1).model_dump_json().encode()
    with InProcessServer(settings.replace(ingest_queue_bytes=len(first))) as srv:
        token = new_token(settings.effective_database_url, "node-a")
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        lock = _SQLITE_WRITERS[srv.services.engine]
        with httpx.Client(base_url=srv.url, headers=headers, timeout=30) as http, ThreadPoolExecutor(1) as pool:
            lock.acquire()
            try:
                waiting = pool.submit(http.post, "/api/v1/ingest", content=first)
                wait_until(lambda: srv.services.writer.queued_bytes() > 0, what="the first batch to be queued")
                refused = http.post("/api/v1/ingest", content=second)
            finally:
                lock.release()
            stored = waiting.result(timeout=30)
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
    assert "queue full" in refused.json()["detail"]
    assert stored.status_code == 200 and stored.json()["logs"] == 5


def test_refused_batches_are_answered_by_the_apps_handlers_and_counted(
    live_server: InProcessServer, node: httpx.Client
) -> None:
    """The batch route runs ahead of the app's middleware (`IngestFastPath`): its refusals still have
    the app's bodies and headers, and are counted as every other route's are."""
    invalid = _post(node, b'{"batch_id": "x"}')
    assert invalid.status_code == 422 and invalid.json()["detail"][0]["loc"][:2] == ["body", "batch_id"]
    anonymous = httpx.post(f"{live_server.url}/api/v1/ingest", content=b"{}")
    assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"] == "Bearer"
    assert "missing bearer token" in anonymous.json()["detail"]
    garbage = node.post("/api/v1/ingest", content=b"not gzip", headers={"Content-Encoding": "gzip"})
    assert garbage.status_code == 400 and garbage.json()["detail"].startswith("body is not valid gzip")
    assert node.get("/api/v1/ingest").status_code == 405  # another method goes on to the router
    assert _post(node, _batch(1)).status_code == 200
    families = {f.name: f for f in text_string_to_metric_families(httpx.get(f"{live_server.url}/metrics").text)}
    rejected = {s.labels["status"]: s.value for s in families["gpuwatch_ingest_rejected_requests"].samples}
    assert rejected == {"422": 1.0, "401": 1.0, "400": 1.0, "405": 1.0}
    batches = {
        s.labels["outcome"]: s.value for s in families["gpuwatch_ingest_batches"].samples if s.name.endswith("_total")
    }
    assert batches["rejected"] == 4.0 and batches["stored"] == 1.0  # the GET too, as the router counts it
