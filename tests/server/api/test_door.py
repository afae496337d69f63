"""Validation at the door (issue 21, items 4, 5, 6 and 9): whatever one node sends is bounded and typed
before it is stored, so that nothing it stores breaks a shared path later (the rollup flush, the read
API, post-mortems, /metrics), and one node cannot grow the server's memory or /metrics without bound.

Over real HTTP, on SQLite and (where the test takes ``db_url``) PostgreSQL too."""

from __future__ import annotations

import gzip
import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from gpuwatch.config import Settings
from server.store.models import EventRow, GpuRollup, IngestBatch, JobRollup, LogLineRow, Node
from tests.helpers import InProcessServer, new_admin_token, new_token

NODE_A, NODE_B = "node-a", "node-b"


@dataclass
class Door:
    srv: InProcessServer
    a: httpx.Client
    b: httpx.Client
    admin: httpx.Client
    anon: httpx.Client

    def sessions(self) -> Any:
        return self.srv.services.sessions


def _client(srv: InProcessServer, token: str | None) -> httpx.Client:
    return httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"} if token else {}, timeout=30)


@pytest.fixture
def door_settings(tmp_path: Path, db_url: str) -> Settings:
    return Settings(data_dir=tmp_path, database_url=db_url, rollup_flush_s=3600, incident_settle_s=0)


@pytest.fixture
def door(door_settings: Settings) -> Iterator[Door]:
    url = door_settings.effective_database_url
    with InProcessServer(door_settings) as srv:
        d = Door(
            srv,
            _client(srv, new_token(url, NODE_A)),
            _client(srv, new_token(url, NODE_B)),
            _client(srv, new_admin_token(url)),
            _client(srv, None),
        )
        yield d
        for c in (d.a, d.b, d.admin, d.anon):
            c.close()


def _series(job: str = "job", uuid: str = "GPU-0", ts: float | None = None) -> dict[str, Any]:
    return {"gpu": 0, "uuid": uuid, "job": job, "rank": 0, "ts": [ts or time.time()], "util_gpu": [50.0]}


def _batch(batch_id: int, **parts: Any) -> dict[str, Any]:
    return {"batch_id": batch_id, **parts}


def _line(seq: int, text: str = "ok", ts: float | None = None) -> dict[str, Any]:
    return {"stream": "file:/train.log", "seq": seq, "ts": ts or time.time(), "text": text}


def _event(seq: int, ts: float | None = None, kind: str = "xid", **data: Any) -> dict[str, Any]:
    return {"stream": "kmsg", "seq": seq, "ts": ts or time.time(), "kind": kind, "gpu": 0, "data": data}


def _stored(door: Door, model: Any) -> int:
    with door.sessions()() as session:
        return session.scalar(select(func.count()).select_from(model)) or 0


def _refused(resp: httpx.Response, *loc: Any) -> None:
    """A 422 naming the field at ``loc`` (under ``body``)."""
    assert resp.status_code == 422, resp.text
    locs = [tuple(e["loc"]) for e in resp.json()["detail"]]
    assert ("body", *loc) in locs or any(lo[: len(loc) + 1] == ("body", *loc) for lo in locs), locs


# --- item 4: NUL -----------------------------------------------------------------------------------------


def test_a_nul_in_any_string_of_a_batch_never_reaches_the_database_and_rollups_still_flush(door: Door) -> None:
    """A NUL anywhere (a series' job and uuid, a log line, an event's message and data, a dropped key)
    is stored as U+FFFD: PostgreSQL's text columns cannot hold it, and one batch that kept it stopped
    every node's rollup flush until a restart."""
    nul = _batch(
        1,
        series=[_series(job="job\x00x", uuid="GPU-\x00")],
        logs=[_line(1, "a\x00b")],
        events=[{**_event(1, kind="ecc", note="x\x00"), "message": "m\x00", "data": {"k\x00": ["v\x00"]}}],
        dropped={"log\x00": 1},
        steps=[{"job": "job\x00x", "rank": 0, "step": 1, "ts": time.time(), "duration_s": 1.0}],
    )
    assert door.a.post("/api/v1/ingest", json=nul).status_code == 200
    other = _batch(1, series=[_series(job="other", uuid="GPU-b")])
    assert door.b.post("/api/v1/ingest", json=other).status_code == 200
    door.srv.services.writer.flush_rollups()  # raised DataError on PostgreSQL, for every node's rollups
    assert _stored(door, GpuRollup) == 2 and _stored(door, JobRollup) == 2
    (line,) = door.a.get("/api/v1/logs", params={"node": NODE_A}).json()
    assert line["text"] == "a\ufffdb"
    (event,) = door.a.get("/api/v1/events").json()
    assert event["message"] == "m\ufffd" and event["data"] == {"k\ufffd": ["v\ufffd"]}
    with door.sessions()() as session:
        assert session.scalar(select(Node.dropped).where(Node.name == NODE_A)) == {"log\ufffd": 1}
    assert "\\u0000" not in door.anon.get("/metrics").text and "\x00" not in door.anon.get("/metrics").text


def test_a_nul_in_other_requests_bodies_never_reaches_the_database(door: Door) -> None:
    reg = {"hostname": "h\x00", "gpus": [{"index": 0, "uuid": "GPU-\x00", "name": "H100\x00"}]}
    assert door.a.post("/api/v1/nodes/register", json=reg).status_code == 200
    started = door.a.post("/api/v1/runs", json={"job": "j\x00", "command": "python\x00"})
    assert started.status_code == 201, started.text
    gpus = door.anon.get("/api/v1/gpus").json()
    assert gpus[0]["uuid"] == "GPU-\ufffd"
    assert door.anon.get("/api/v1/jobs").json()[0]["name"] == "j\ufffd"


def test_an_escaped_backslash_before_u0000_is_text_not_a_nul(door: Door) -> None:
    raw = b'{"batch_id": 1, "logs": [{"stream": "s", "seq": 1, "ts": %d, "text": "C:\\\\u0000"}]}' % time.time()
    assert door.a.post("/api/v1/ingest", content=raw).status_code == 200
    assert door.anon.get("/api/v1/logs", params={"node": NODE_A}).json()[0]["text"] == "C:\\u0000"


# --- item 5: what every reader can read ------------------------------------------------------------------


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize("depth", [40, 250, 1000])
def test_event_data_nested_too_deep_is_refused_whole(door: Door, depth: int) -> None:
    batch = json.dumps(_batch(1, logs=[_line(1)], events=[_event(1, kind="ecc", nested="@")]))
    body = batch.replace('"@"', '{"a": ' * depth + "1" + "}" * depth)  # past json.dumps's own recursion limit
    resp = door.a.post("/api/v1/ingest", content=body)
    if depth < 500:
        _refused(resp, "events", 0, "data")
    else:  # past the JSON parsers' own nesting limits: refused before any field is known
        assert resp.status_code == 422, resp.text
    assert _stored(door, LogLineRow) == 0 and _stored(door, IngestBatch) == 0  # refused means nothing stored
    assert door.anon.get("/api/v1/events").status_code == 200


def test_event_data_too_large_is_refused(door: Door) -> None:
    batch = _batch(1, events=[_event(1, kind="ecc", blob="x" * 70_000)])
    _refused(door.a.post("/api/v1/ingest", json=batch), "events", 0, "data")


def test_event_data_at_the_limits_is_stored(door: Door) -> None:
    batch = _batch(1, events=[_event(1, kind="ecc", nested=_deep(7), blob="x" * 1000)])
    assert door.a.post("/api/v1/ingest", json=batch).status_code == 200
    assert door.anon.get("/api/v1/events").json()[0]["data"]["nested"] == _deep(7)


@pytest.mark.parametrize("xid", ["79abc", "79", 79.5, -1, None, True, 2**40])
def test_an_xid_event_needs_an_integer_code(door: Door, xid: Any) -> None:
    """``data.xid: "79abc"`` was stored, then the node's post-mortems and plots answered 500 and its Xid
    incident never opened."""
    batch = _batch(1, events=[_event(1, xid=xid)])
    _refused(door.a.post("/api/v1/ingest", json=batch), "events", 0, "data", "xid")
    assert _stored(door, EventRow) == 0


def test_an_integer_xid_opens_its_incident(door: Door) -> None:
    assert door.a.post("/api/v1/ingest", json=_batch(1, events=[_event(1, xid=79)])).status_code == 200
    deadline = time.monotonic() + 10
    while not door.anon.get("/api/v1/incidents").json() and time.monotonic() < deadline:
        time.sleep(0.05)
    (incident,) = door.anon.get("/api/v1/incidents").json()
    assert incident["trigger"] == "xid"
    assert door.anon.get(f"/api/v1/incidents/{incident['id']}/report").status_code == 200


@pytest.mark.parametrize(
    "where",
    [
        ("logs", 0, "ts"),
        ("events", 0, "ts"),
        ("series", 0, "ts", 0),
        ("samples", 0, "ts"),
        ("steps", 0, "ts"),
        ("checkpoints", 0, "ts"),
        ("ib", 0, "ts"),
    ],
)
@pytest.mark.parametrize("ts", [1e12, 1.0, time.time() + 3 * 86400], ids=["year-33658", "1970", "three-days-ahead"])
def test_a_timestamp_outside_the_window_around_the_servers_clock_is_refused(
    door: Door, where: tuple[Any, ...], ts: float
) -> None:
    now = time.time()
    kinds = {
        "logs": _line(1, ts=now),
        "events": _event(1, kind="ecc", ts=now),
        "series": _series(ts=now),
        "samples": {"ts": now, "gpu": 0, "uuid": "GPU-0"},
        "steps": {"job": "j", "rank": 0, "step": 1, "ts": now, "duration_s": 1.0},
        "checkpoints": {"job": "j", "rank": 0, "step": 1, "ts": now, "path": "/c", "ok": True},
        "ib": {"ts": now, "device": "mlx5_0", "port": 1},
    }
    batch: dict[str, Any] = _batch(1, **{where[0]: [kinds[where[0]]]})
    batch.setdefault("logs", []).append(_line(9, ts=now))  # a valid line, stored with the batch or not at all
    target: Any = batch
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = ts
    _refused(door.a.post("/api/v1/ingest", json=batch), *where)
    assert _stored(door, LogLineRow) == 0
    assert door.anon.get("/api/v1/logs", params={"node": NODE_A}).status_code == 200


def test_timestamps_inside_the_window_are_stored(door: Door) -> None:
    now = time.time()
    batch = _batch(1, logs=[_line(1, ts=now - 300 * 86400), _line(2, ts=now + 3600)])
    assert door.a.post("/api/v1/ingest", json=batch).status_code == 200


@pytest.mark.parametrize("where", [("series", 0, "util_gpu", 0), ("series", 0, "power_w", 0), ("events", 0, "data")])
def test_a_number_past_float_range_is_refused(door: Door, where: tuple[Any, ...]) -> None:
    """1e400 parses as infinity: it reached /metrics as ``inf``."""
    now = time.time()
    body = json.dumps(_batch(1, series=[_series(ts=now)], events=[_event(1, kind="ecc", ts=now)]))
    series = '"util_gpu": [50.0]' if where[2] == "util_gpu" else '"util_gpu": [50.0], "power_w": [1]'
    if where[0] == "series":
        body = body.replace('"util_gpu": [50.0]', series.replace("50.0", "1e400").replace("[1]", "[1e400]"))
    else:
        body = body.replace('"data": {}', '"data": {"x": 1e400}')
    _refused(door.a.post("/api/v1/ingest", content=body), *where[:2])
    values = [ln.rsplit(" ", 1)[-1] for ln in door.anon.get("/metrics").text.splitlines() if not ln.startswith("#")]
    assert not [v for v in values if not math.isfinite(float(v))]


# --- item 6: bounded cardinality and reads -------------------------------------------------------------


def test_dropped_counts_cannot_be_negative(door: Door) -> None:
    _refused(door.a.post("/api/v1/ingest", json=_batch(1, dropped={"log": -5})), "dropped")
    _refused(door.a.post("/api/v1/nodes/heartbeat", json={"ts": time.time(), "dropped": {"log": -5}}), "dropped")


def test_too_many_dropped_kinds_are_refused(door: Door) -> None:
    many = {f"kind{i}": 1 for i in range(10_000)}
    _refused(door.a.post("/api/v1/ingest", json=_batch(1, dropped=many)), "dropped")
    _refused(door.a.post("/api/v1/nodes/heartbeat", json={"ts": time.time(), "dropped": many}), "dropped")


def test_xid_codes_per_node_are_capped_and_what_is_refused_is_counted(door: Door) -> None:
    """Every distinct (GPU, code) was a new series of gpuwatch_xid_events_total: 60k codes from one node
    took /metrics from 28 KB to 16 MB."""
    events = [{**_event(n, xid=300 + n // 8), "gpu": n % 8} for n in range(500)]  # 500 (GPU, code): none fatal
    assert door.a.post("/api/v1/ingest", json=_batch(1, events=events)).status_code == 200
    metrics = door.anon.get("/metrics").text
    series = [ln for ln in metrics.splitlines() if ln.startswith("gpuwatch_xid_events_total{")]
    assert 0 < len(series) <= 64
    refused = [ln for ln in metrics.splitlines() if ln.startswith("gpuwatch_label_values_refused_total{")]
    assert any('what="xid"' in ln and ln.endswith(" " + str(float(500 - len(series)))) for ln in refused), refused
    # Another node keeps its own budget.
    assert door.b.post("/api/v1/ingest", json=_batch(1, events=[_event(1, xid=1)])).status_code == 200
    assert 'instance="node-b"' in door.anon.get("/metrics").text


@pytest.mark.parametrize("read_auth", [False, True])
def test_log_reads_are_capped_in_bytes_not_only_rows(tmp_path: Path, sqlite_url: str, read_auth: bool) -> None:
    """Three ``GET /logs?limit=10000`` of long lines took the server from 372 MB to 1.3 GB."""
    config = Settings(data_dir=tmp_path, database_url=sqlite_url, read_max_bytes=1_000_000, read_auth=read_auth)
    with InProcessServer(config) as srv, _client(srv, new_token(sqlite_url, NODE_A)) as a:
        for b in range(4):
            lines = [_line(b * 100 + i, "x" * 16_000) for i in range(100)]
            assert a.post("/api/v1/ingest", json=_batch(b, logs=lines)).status_code == 200
        resp = a.get("/api/v1/logs", params={"node": NODE_A, "limit": 10_000})
        assert resp.status_code == 200
        got = resp.json()
        assert 0 < len(got) < 400 and len(resp.content) <= 1_100_000
        assert resp.headers["X-Gpuwatch-Truncated"] == "bytes"
        rest = a.get("/api/v1/logs", params={"node": NODE_A, "after_seq": got[-1]["seq"]}).json()
        assert rest[0]["seq"] == got[-1]["seq"] + 1  # the next page starts where the cut one stopped


def test_with_read_auth_a_node_token_reads_only_its_own_nodes_logs(tmp_path: Path, sqlite_url: str) -> None:
    config = Settings(data_dir=tmp_path, database_url=sqlite_url, read_auth=True)
    with InProcessServer(config) as srv:
        a, b = _client(srv, new_token(sqlite_url, NODE_A)), _client(srv, new_token(sqlite_url, NODE_B))
        admin, anon = _client(srv, new_admin_token(sqlite_url)), _client(srv, None)
        assert a.post("/api/v1/ingest", json=_batch(1, logs=[_line(1, "secret of a")])).status_code == 200
        assert b.post("/api/v1/ingest", json=_batch(1, logs=[_line(1, "of b")])).status_code == 200
        assert anon.get("/api/v1/logs", params={"node": NODE_A}).status_code == 401
        assert b.get("/api/v1/logs", params={"node": NODE_A}).status_code == 403
        assert [ln["text"] for ln in b.get("/api/v1/logs", params={"node": NODE_B}).json()] == ["of b"]
        assert [ln["text"] for ln in a.get("/api/v1/logs", params={"node": NODE_A}).json()] == ["secret of a"]
        assert [ln["text"] for ln in admin.get("/api/v1/logs", params={"node": NODE_A}).json()] == ["secret of a"]
        for c in (a, b, admin, anon):
            c.close()


# --- item 9 ----------------------------------------------------------------------------------------------


def test_a_cached_token_is_accepted_only_as_a_bearer_token(door: Door) -> None:
    token = door.a.headers["Authorization"].split(" ", 1)[1]
    assert door.a.post("/api/v1/ingest", json=_batch(1)).status_code == 200  # cached now
    for scheme in ("Basic", "Token", "Bearerx", "Digest"):
        resp = door.anon.post("/api/v1/ingest", json=_batch(2), headers={"Authorization": f"{scheme} {token}"})
        assert resp.status_code == 401, (scheme, resp.status_code)


def test_bytes_after_the_gzip_stream_are_refused(door: Door) -> None:
    body = gzip.compress(json.dumps(_batch(1, logs=[_line(1)])).encode())
    for tail in (b"junk", gzip.compress(b"{}")):
        resp = door.a.post("/api/v1/ingest", content=body + tail, headers={"Content-Encoding": "gzip"})
        assert resp.status_code == 400, resp.text
    assert _stored(door, IngestBatch) == 0
    assert door.a.post("/api/v1/ingest", content=body, headers={"Content-Encoding": "gzip"}).status_code == 200


BODIES = {
    ("post", "/api/v1/ingest"): "Batch",
    ("post", "/api/v1/nodes/register"): "RegisterRequest",
    ("post", "/api/v1/nodes/heartbeat"): "Heartbeat",
    ("post", "/api/v1/runs"): "RunStart",
    ("post", "/api/v1/runs/{run_id}/exit"): "RunExit",
    ("post", "/api/v1/recovery/pause"): "PauseIn",
    ("post", "/api/v1/exclusions"): "ExclusionIn",
}


def _resolve(spec: dict[str, Any], schema: dict[str, Any], seen: set[str]) -> None:
    """Every $ref under ``schema`` names a schema of the spec's components."""
    if isinstance(schema, dict):
        if (ref := schema.get("$ref")) is not None:
            name = ref.removeprefix("#/components/schemas/")
            assert name in spec["components"]["schemas"], ref
            if name not in seen:
                seen.add(name)
                _resolve(spec, spec["components"]["schemas"][name], seen)
        for v in schema.values():
            _resolve(spec, v, seen)
    elif isinstance(schema, list):
        for v in schema:
            _resolve(spec, v, seen)


def test_the_openapi_spec_declares_every_request_body(door: Door) -> None:
    spec = door.anon.get("/openapi.json").json()
    for (method, path), model in BODIES.items():
        body = spec["paths"][path][method].get("requestBody")
        assert body is not None, path
        schema = body["content"]["application/json"]["schema"]
        assert schema == {"$ref": f"#/components/schemas/{model}"}, (path, schema)
        _resolve(spec, schema, set())
    batch = spec["components"]["schemas"]["Batch"]
    assert {"batch_id", "series", "logs", "events", "dropped"} <= set(batch["properties"])


def test_an_exclusion_expired_as_soon_as_made_is_refused(door: Door) -> None:
    """Found by tests/server/api/test_openapi_fuzz.py: ``ttl_s: 5e-324`` made an exclusion already over,
    which the handler then could not find (500)."""
    resp = door.admin.post("/api/v1/exclusions", json={"node": NODE_A, "ttl_s": 5e-324})
    _refused(resp, "ttl_s")
    assert door.admin.post("/api/v1/exclusions", json={"node": NODE_A, "ttl_s": 60}).status_code == 201


@pytest.mark.parametrize("decision", [1, "restart", [1, 2], True])
def test_a_run_exits_flat_decision_that_is_not_an_object_is_a_422(door: Door, decision: Any) -> None:
    """The reading of an old outbox's flat ``decision`` took any value for an object: ``"decision": 1`` was a
    500 (found by the fuzz test)."""
    run = door.a.post("/api/v1/runs", json={"job": "j", "node": "node-a"}).json()["id"]
    resp = door.a.post(f"/api/v1/runs/{run}/exit", json={"exit_code": 0, "decision": decision})
    assert resp.status_code == 422 and "flat decision must be an object" in resp.text, resp.text
    assert door.a.get(f"/api/v1/runs/{run}").json()["state"] == "running"
