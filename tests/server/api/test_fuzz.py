"""Generated payloads (hypothesis) against every write endpoint, over real HTTP to one server on loopback:
whatever arrives (wrong types, missing or extra fields, huge numbers, odd text, nesting, broken gzip,
bad headers), the answer is never a 5xx, and the server still answers /readyz and stores a valid batch.

The payloads start from each endpoint's real shape (`gpuwatch/protocol.py`, `server/api/routes/`) and
swap any field for an arbitrary JSON value, so most examples get past the JSON parser and reach the
validation, the store and the incident machinery behind it."""

from __future__ import annotations

import gzip
import json
import socket
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, LogLine
from gpuwatch.recovery.settings import JOB_KEYS
from gpuwatch.taxonomy import REASONS
from tests.helpers import InProcessServer, migrated_sqlite, new_admin_token, new_token

NODE = "fuzz-node"
# deadline=None: a request's time depends on the machine, not on the example; no database: nothing to
# clean up in the work tree. The example counts keep the whole module near 30 s on a small machine.
FUZZ = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@dataclass
class Target:
    srv: InProcessServer
    node: httpx.Client
    admin: httpx.Client
    anon: httpx.Client


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    url = migrated_sqlite(tmp)
    config = Settings(
        data_dir=tmp,
        database_url=url,
        max_body_bytes=256 * 1024,
        rate_limit_per_s=0,  # every example reaches the handler
        incident_settle_s=0,
        hang_check_s=3600,
    )
    with InProcessServer(config) as srv:

        def client(token: str | None) -> httpx.Client:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            return httpx.Client(base_url=srv.url, headers=headers, timeout=30)

        t = Target(srv, client(new_token(url, NODE)), client(new_admin_token(url, "fuzzer")), client(None))
        yield t
        _assert_healthy(t, batch_id=10**12)
        for c in (t.node, t.admin, t.anon):
            c.close()


def _assert_healthy(t: Target, batch_id: int) -> None:
    assert t.anon.get("/readyz").status_code == 200
    batch = Batch(batch_id=batch_id, logs=[LogLine(stream="fuzz-check", seq=batch_id, ts=time.time(), text="ok")])
    resp = t.node.post("/api/v1/ingest", content=batch.model_dump_json())
    assert resp.status_code == 200 and resp.json()["batch_id"] == batch_id, resp.text


# --- strategies ---------------------------------------------------------------------------------------

text = st.text(max_size=40)
names = st.one_of(st.sampled_from(["", "a", NODE, "node-x", "../etc", "ünïcødé", "a" * 300]), text)
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -1, 1e308, 2**63, 2**64]),
)
timestamps = st.one_of(st.floats(min_value=1.6e9, max_value=2e9), numbers)
json_values = st.recursive(
    st.none() | st.booleans() | numbers | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)


def field(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a plausible value (4 in 5), sometimes anything at all."""
    return st.one_of(good, good, good, good, json_values)


def shape(required: dict[str, st.SearchStrategy[Any]], optional: dict[str, st.SearchStrategy[Any]] | None = None):  # type: ignore[no-untyped-def]
    """A JSON object of the endpoint's fields (each maybe wrong), sometimes with an unknown one added."""
    known = st.fixed_dictionaries(
        {k: field(v) for k, v in required.items()}, optional={k: field(v) for k, v in (optional or {}).items()}
    )
    return st.one_of(known, st.builds(lambda d, extra: {**d, **extra}, known, st.dictionaries(text, json_values)))


def items(one: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    return st.lists(one, max_size=5)


sample = shape(
    {"ts": timestamps, "gpu": st.integers(-2, 2000), "uuid": names},
    {"util_gpu": numbers, "fb_used_mib": numbers, "temp_c": numbers, "processes": items(json_values), "job": names},
)
log_line = shape({"stream": names, "seq": st.integers(-1, 2**64), "ts": timestamps, "text": text})
gpu_event = shape(
    {"stream": names, "seq": st.integers(-1, 2**64), "ts": timestamps, "kind": st.sampled_from(["xid", "ecc", "X"])},
    {"gpu": st.integers(-1, 2000), "message": text, "data": st.dictionaries(text, json_values, max_size=3)},
)
step = shape(
    {"job": names, "rank": st.integers(-1, 10**6), "step": st.integers(-1, 2**64), "ts": timestamps},
    {"duration_s": numbers, "comm_s": numbers, "collectives": st.dictionaries(text, json_values, max_size=2)},
)
process = shape({"job": names, "pid": st.integers(-1, 2**40)}, {"rank": numbers, "gpu": numbers, "scheduler": text})
checkpoint = shape(
    {"job": names, "rank": st.integers(-1, 8), "step": numbers, "ts": timestamps, "path": text, "ok": st.booleans()}
)
batch = shape(
    {"batch_id": st.integers(-1, 2**64)},
    {
        "version": st.integers(-1, 3),
        "samples": items(sample),
        "logs": items(log_line),
        "events": items(gpu_event),
        "steps": items(step),
        "processes": items(process),
        "checkpoints": items(checkpoint),
        "ib": items(json_values),
        "dropped": st.dictionaries(text, numbers, max_size=3),
    },
)
gpu_info = shape({"index": st.integers(-1, 2000), "uuid": names, "name": names}, {"memory_total_mib": numbers})
register = shape(
    {"hostname": names}, {"node": names, "collector": text, "driver_version": text, "gpus": items(gpu_info)}
)
heartbeat = shape({"ts": timestamps}, {"spool_files": numbers, "spool_bytes": numbers, "dropped": json_values})
policy = st.dictionaries(st.one_of(st.sampled_from(sorted(JOB_KEYS)), text), json_values, max_size=3)
run_start = shape(
    {"job": names},
    {
        "node": st.one_of(st.just(NODE), names),
        "key": names,
        "command": text,
        "restart_of": names,
        "resume_from": text,
        "policy": policy,
        "scheduler": st.one_of(st.just("local"), text),
        "external_id": text,
    },
)
reasons = st.one_of(st.sampled_from(sorted(REASONS)), text)
diagnosis = shape(
    {"reason": reasons}, {"node": st.one_of(st.just(NODE), names), "evidence": items(json_values), "source": text}
)
decision = shape(
    {"reason": reasons, "action": text, "rule": text, "restart": st.booleans(), "at": timestamps},
    {"exclude_nodes": items(st.one_of(st.just(NODE), names)), "node": names, "delay_s": numbers},
)
run_exit = shape(
    {},
    {
        "exit_code": numbers,
        "signal": st.integers(-1, 70),
        "streams": items(text),
        "ranks": items(shape({"rank": st.integers(-1, 10)}, {"exit_code": numbers, "stream": text})),
        "checkpoint": shape({"path": text}, {"step": numbers, "saved_at": numbers}),
        "diagnosis": diagnosis,
        "decision": decision,
        "restarted": st.booleans(),
    },
)
pause = shape({"paused": st.booleans()})
exclusion = shape({"node": names}, {"reason": text, "ttl_s": numbers})


@st.composite
def wire(draw: st.DrawFn, payload: st.SearchStrategy[Any]) -> tuple[bytes, dict[str, str]]:
    """The payload as JSON, gzipped, cut short, or bytes mangled; and its headers."""
    body = json.dumps(draw(payload)).encode()
    how = draw(st.sampled_from(["json", "json", "json", "gzip", "cut", "mangled"]))
    headers = {"Content-Type": "application/json"}
    if how == "gzip":
        body, headers["Content-Encoding"] = gzip.compress(body), "gzip"
    elif how == "cut":
        body = body[: draw(st.integers(0, len(body)))]
    elif how == "mangled":
        at = draw(st.integers(0, len(body)))
        body = body[:at] + draw(st.binary(min_size=1, max_size=8)) + body[at:]
    return body, headers


def _no_5xx(resp: httpx.Response, body: bytes) -> None:
    event(f"HTTP {resp.status_code}")  # pytest --hypothesis-show-statistics: how far the examples got
    assert resp.status_code < 500, (
        f"{resp.request.method} {resp.request.url.path}: {resp.status_code} {resp.text[:300]} for {body[:300]!r}"
    )


# --- the tests --------------------------------------------------------------------------------------


@settings(FUZZ, max_examples=120)
@given(sent=wire(batch))
def test_ingest_never_answers_5xx(target: Target, sent: tuple[bytes, dict[str, str]]) -> None:
    body, headers = sent
    _no_5xx(target.node.post("/api/v1/ingest", content=body, headers=headers), body)


@settings(FUZZ, max_examples=80)
@given(sent=st.one_of(wire(register).map(lambda w: ("register", w)), wire(heartbeat).map(lambda w: ("heartbeat", w))))
def test_register_and_heartbeat_never_answer_5xx(
    target: Target, sent: tuple[str, tuple[bytes, dict[str, str]]]
) -> None:
    which, (body, headers) = sent
    _no_5xx(target.node.post(f"/api/v1/nodes/{which}", content=body, headers=headers), body)


@settings(FUZZ, max_examples=70)
@given(start=wire(run_start), end=wire(run_exit), run=st.sampled_from(["new", "new", "new", "last", "missing"]))
def test_runs_start_and_exit_never_answer_5xx(
    target: Target, start: tuple[bytes, dict[str, str]], end: tuple[bytes, dict[str, str]], run: str
) -> None:
    body, headers = start
    started = target.node.post("/api/v1/runs", content=body, headers=headers)
    _no_5xx(started, body)
    if run == "new" or not started.is_success:  # an exit needs a run: start a plain one
        started = target.node.post("/api/v1/runs", json={"job": "fuzz-job", "node": NODE})
    run_id = 2**62 if run == "missing" else started.json()["id"]
    body, headers = end
    _no_5xx(target.node.post(f"/api/v1/runs/{run_id}/exit", content=body, headers=headers), body)
    _no_5xx(target.anon.get(f"/api/v1/runs/{run_id}/decision"), b"")


@settings(FUZZ, max_examples=70)
@given(
    call=st.one_of(
        wire(pause).map(lambda w: ("POST", "/api/v1/recovery/pause", w)),
        wire(exclusion).map(lambda w: ("POST", "/api/v1/exclusions", w)),
        names.map(lambda n: ("DELETE", f"/api/v1/exclusions/{urllib.parse.quote(n, safe='')}", (b"", {}))),
        st.dictionaries(st.sampled_from(["limit", "action", "x"]), text, max_size=2).map(
            lambda q: ("GET", "/api/v1/audit?" + urllib.parse.urlencode(q), (b"", {}))
        ),
    ),
    who=st.sampled_from(["admin", "admin", "node", "anon"]),
)
def test_admin_endpoints_never_answer_5xx(
    target: Target, call: tuple[str, str, tuple[bytes, dict[str, str]]], who: str
) -> None:
    method, path, (body, headers) = call
    client = {"admin": target.admin, "node": target.node, "anon": target.anon}[who]
    resp = client.request(method, path, content=body or None, headers=headers)
    _no_5xx(resp, body)
    if who != "admin":
        assert resp.status_code in (401, 403, 404, 405, 307), (who, resp.status_code)  # no route, or a redirect


def _raw_post(port: int, head: dict[str, str], body: bytes) -> int | None:
    """POST /api/v1/ingest over a raw socket, headers as given (a client library would refuse a false
    Content-Length): the status, or None when the server waits for the body it was promised, or drops it."""
    lines = [f"{k}: {v}" for k, v in {"Host": "127.0.0.1", "Connection": "close", **head}.items()]
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(("POST /api/v1/ingest HTTP/1.1\r\n" + "\r\n".join(lines) + "\r\n\r\n").encode() + body)
        try:
            answer = sock.recv(4096)
        except (TimeoutError, ConnectionResetError):
            return None
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else None


@settings(FUZZ, max_examples=40)
@given(
    authorization=st.one_of(st.none(), st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=80)),
    encoding=st.one_of(st.none(), st.sampled_from(["gzip", "GZIP", "identity", "br", "deflate", ""]), text),
    length=st.one_of(st.none(), st.sampled_from(["-1", "abc", "0", "3", "99999999999999999999"])),
)
def test_odd_headers_never_answer_5xx(
    target: Target, authorization: str | None, encoding: str | None, length: str | None
) -> None:
    """Any Authorization (none: the node's own token), Content-Encoding, and a Content-Length that may lie."""
    body = b'{"batch_id": 1}'
    head = {"Authorization": authorization or target.node.headers["Authorization"]}
    if encoding is not None:
        head["Content-Encoding"] = encoding
    head["Content-Length"] = str(len(body)) if length is None else length
    try:
        "".join(f"{k}{v}" for k, v in head.items()).encode("ascii")
    except UnicodeEncodeError:
        return  # not a header anyone can send
    status = _raw_post(target.srv.port, head, body)
    assert status is None or status < 500, (head, status)
    if length is None and encoding in (None, "identity") and authorization is None:
        assert status == 200


def test_the_server_is_healthy_after_the_fuzzing(target: Target) -> None:
    _assert_healthy(target, batch_id=10**12 + 1)
