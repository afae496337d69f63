"""Security: token roles, a node acting only as itself, admin-only switches with an audit log, read auth,
request limits and the per-node rate limit, no secrets in logs or in the LLM's prompt, and HTTPS.

Everything goes through real HTTP on loopback: the app under uvicorn in the test process, or the real
`gpuwatch server`, `gpuwatch agent` and `gpuwatch run` as child processes where their logs, memory or
TLS set-up are what is checked."""

from __future__ import annotations

import gzip
import json
import os
import re
import select
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, text
from sqlalchemy import select as sql_select

from agent.api_client import ServerClient
from agent.shipper import Backoff, Shipper
from agent.spool import Spool
from gpuwatch.config import CONFIG_ENV, LlmSettings, Settings, load_settings
from gpuwatch.diagnosis.llm import LlmAnalyser
from gpuwatch.diagnosis.model import Diagnosis, LogSource
from gpuwatch.diagnosis.scrub import scrub_line, scrub_lines
from gpuwatch.protocol import Batch, GpuSample, LogLine
from server.api.limits import RateLimiter
from server.store.db import make_engine, make_sessionmaker, transaction
from server.store.migrate import downgrade, upgrade
from server.store.models import AuditEntry, IngestBatch, Node
from server.store.tokens import create_admin_token, lookup
from tests.helpers import (
    CLI,
    REPO,
    InProcessServer,
    Proc,
    free_port,
    migrated_sqlite,
    new_admin_token,
    new_token,
    require_tool,
    start_server,
    wait_until,
)
from tests.llm_server import FakeLlmServer

MIB = 1024 * 1024


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _batch(batch_id: int, text: str = "step 1") -> bytes:
    ts = time.time()
    return (
        Batch(
            batch_id=batch_id,
            samples=[GpuSample(ts=ts, gpu=0, uuid="GPU-sec-0", util_gpu=50.0)],
            logs=[LogLine(stream="file:/train.log", seq=batch_id, ts=ts, text=text)],
        )
        .model_dump_json()
        .encode()
    )


@dataclass
class Cluster:
    srv: InProcessServer
    a: httpx.Client  # node-a's token
    b: httpx.Client  # node-b's token
    admin: httpx.Client  # alice's admin token
    anon: httpx.Client  # no token
    admin_token: str


def _clients(srv: InProcessServer, url: str) -> Cluster:
    def client(headers: dict[str, str]) -> httpx.Client:
        return httpx.Client(base_url=srv.url, headers=headers, timeout=20)

    admin = new_admin_token(url, "alice")
    return Cluster(
        srv,
        client(_bearer(new_token(url, "node-a"))),
        client(_bearer(new_token(url, "node-b"))),
        client(_bearer(admin)),
        client({}),
        admin,
    )


@pytest.fixture
def cluster(settings: Settings) -> Iterator[Cluster]:
    config = settings.replace(max_body_bytes=MIB, incident_settle_s=0.05)
    with InProcessServer(config) as srv:
        c = _clients(srv, config.effective_database_url)
        yield c
        for client in (c.a, c.b, c.admin, c.anon):
            client.close()


def _healthy(c: Cluster, batch_id: int) -> None:
    """The server still answers and still stores a valid batch."""
    assert c.anon.get("/readyz").status_code == 200
    resp = c.a.post("/api/v1/ingest", content=_batch(batch_id))
    assert resp.status_code == 200 and resp.json()["logs"] == 1, resp.text


# --- roles: the migration and the token commands ----------------------------------------------------


def test_migration_0005_keeps_node_tokens_and_its_downgrade_drops_admin_tokens(empty_db_url: str) -> None:
    upgrade(empty_db_url, "0004")
    engine = make_engine(empty_db_url)
    try:
        sessions = make_sessionmaker(engine)
        with engine.begin() as conn:  # a node token made before roles existed
            now = {"t": datetime.now(UTC)}
            conn.execute(text("INSERT INTO nodes (id, name, created_at, dropped) VALUES (1, 'old', :t, '{}')"), now)
            conn.execute(
                text("INSERT INTO api_tokens (node_id, token_hash, prefix, created_at) VALUES (1, :h, 'gwn_old', :t)"),
                {"h": "0" * 64, **now},
            )
        upgrade(empty_db_url, "0005")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT role, name FROM api_tokens")).all() == [("node", None)]
        # An admin token as 0005 stores it (raw SQL: today's models describe the head schema, not 0005's).
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO api_tokens (node_id, role, name, token_hash, prefix, created_at) "
                    "VALUES (NULL, 'admin', 'alice', :h, 'gwa_new', :t)"
                ),
                {"h": "1" * 64, **now},
            )
        downgrade(empty_db_url, "0004")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT node_id, prefix FROM api_tokens")).all() == [(1, "gwn_old")]
        upgrade(empty_db_url, "head")
        with transaction(sessions) as s:
            admin = create_admin_token(s, "alice")
        with sessions() as s:
            info, node = lookup(s, admin)  # type: ignore[misc]
            assert (info.role, info.name, info.node_id, node) == ("admin", "alice", None, None)
    finally:
        engine.dispose()


def _gpuwatch(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUWATCH_")}
    env |= {"GPUWATCH_DATA_DIR": str(data_dir), "GPUWATCH_DATABASE_URL": ""}
    return subprocess.run([*CLI, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.slow
def test_token_commands_create_list_and_revoke_admin_tokens_and_audit_them(tmp_path: Path) -> None:
    url = migrated_sqlite(tmp_path)
    made = _gpuwatch("token", "create", "--admin", "--name", "alice", data_dir=tmp_path)
    assert made.returncode == 0, made.stderr
    admin = made.stdout.strip()
    assert admin.startswith("gwa_")
    refused = _gpuwatch("token", "create", "--admin", data_dir=tmp_path)
    assert refused.returncode == 2 and "--admin --name NAME" in refused.stderr

    with InProcessServer(Settings(data_dir=tmp_path, database_url=url, token_cache_s=0.2)) as srv:
        assert httpx.get(f"{srv.url}/api/v1/audit", headers=_bearer(admin)).status_code == 200
        node = new_token(url, "n1")
        listed = _gpuwatch("token", "list", data_dir=tmp_path)
        assert listed.returncode == 0, listed.stderr
        rows = [line.split() for line in listed.stdout.splitlines()[1:]]
        assert [(r[1], r[2], r[-1]) for r in rows] == [("admin", "alice", "live"), ("node", "n1", "live")]
        assert admin not in listed.stdout and node not in listed.stdout  # first characters only
        assert admin[:12] in listed.stdout

        revoked = _gpuwatch("token", "revoke", "--name", "alice", data_dir=tmp_path)
        assert revoked.returncode == 0 and "revoked 1 admin token(s) of alice" in revoked.stdout
        wait_until(  # once the server's token cache (0.2 s here) lets go of it
            lambda: httpx.get(f"{srv.url}/api/v1/audit", headers=_bearer(admin)).status_code == 401,
            timeout=5,
            what="the revoked admin token refused",
        )
        with srv.services.sessions() as s:
            entries = s.scalars(sql_select(AuditEntry).order_by(AuditEntry.id)).all()
    assert [(e.action, e.target, e.params.get("role")) for e in entries] == [
        ("token.create", "alice", "admin"),
        ("token.revoke", "alice", "admin"),
    ]
    assert all(e.actor.startswith("cli ") for e in entries)
    assert entries[0].params["prefix"] == admin[:12] and admin not in json.dumps(entries[0].params)


# --- a node token acts only as its node; an admin token never as a node ------------------------------


def test_a_node_token_cannot_speak_for_another_node(cluster: Cluster) -> None:
    a, b = cluster.a, cluster.b
    other = a.post("/api/v1/nodes/register", json={"hostname": "h", "node": "node-b"})
    assert other.status_code == 403
    assert "node node-a" in other.json()["detail"] and "'node-b'" in other.json()["detail"]
    assert a.post("/api/v1/nodes/register", json={"hostname": "h", "node": "node-a"}).status_code == 200

    assert a.post("/api/v1/runs", json={"job": "j", "node": "node-b"}).status_code == 403
    theirs = b.post("/api/v1/runs", json={"job": "j", "node": "node-b"}).json()["id"]
    ended = a.post(f"/api/v1/runs/{theirs}/exit", json={"exit_code": 1})
    assert ended.status_code == 403 and "another node" in ended.json()["detail"]
    assert a.get(f"/api/v1/runs/{theirs}").json()["state"] == "running"

    mine = a.post("/api/v1/runs", json={"job": "k", "node": "node-a"}).json()["id"]
    diagnosis = {"reason": "gpu_hardware", "node": "node-a", "evidence": [], "source": "rules"}
    decision = {
        "reason": "gpu_hardware",
        "action": "restart_exclude_node",
        "rule": "restart",
        "restart": True,
        "exclude_nodes": ["node-b"],  # a node draining another: refused
        "at": time.time(),
        "node": "node-a",
    }
    body = {"exit_code": 1, "diagnosis": diagnosis, "decision": decision, "restarted": True}
    assert a.post(f"/api/v1/runs/{mine}/exit", json=body).status_code == 403
    blamed = {**body, "diagnosis": {**diagnosis, "node": "node-b"}, "decision": {**decision, "exclude_nodes": []}}
    assert a.post(f"/api/v1/runs/{mine}/exit", json=blamed).status_code == 403
    assert a.get("/api/v1/recovery").json()["excluded"] == []
    assert a.get("/api/v1/incidents").json() == []
    own = {**body, "decision": {**decision, "exclude_nodes": ["node-a"]}}
    assert a.post(f"/api/v1/runs/{mine}/exit", json=own).status_code == 202
    assert [e["node"] for e in a.get("/api/v1/recovery").json()["excluded"]] == ["node-a"]


def test_an_admin_token_is_not_a_node(cluster: Cluster) -> None:
    admin = cluster.admin
    calls = [
        ("/api/v1/ingest", _batch(1)),
        ("/api/v1/nodes/heartbeat", json.dumps({"ts": time.time()}).encode()),
        ("/api/v1/nodes/register", json.dumps({"hostname": "h"}).encode()),
        ("/api/v1/runs", json.dumps({"job": "j"}).encode()),
    ]
    for path, body in calls:
        resp = admin.post(path, content=body)
        assert resp.status_code == 403, path
        assert "admin token cannot act as a node" in resp.json()["detail"]
    with cluster.srv.services.sessions() as s:
        assert s.scalars(sql_select(Node.name).order_by(Node.name)).all() == ["node-a", "node-b"]
        assert s.scalar(sql_select(func.count()).select_from(IngestBatch)) == 0


# --- admin-only switches, audited; read auth --------------------------------------------------------


def test_pause_and_exclusions_are_admin_only_and_every_change_is_audited(cluster: Cluster) -> None:
    attempts = [
        ("POST", "/api/v1/recovery/pause", {"paused": True}),
        ("POST", "/api/v1/exclusions", {"node": "node-b"}),
        ("DELETE", "/api/v1/exclusions/node-b", None),
        ("GET", "/api/v1/audit", None),
    ]
    for method, path, body in attempts:
        assert cluster.anon.request(method, path, json=body).status_code == 401, path
        refused = cluster.a.request(method, path, json=body)
        assert refused.status_code == 403 and "admin token" in refused.json()["detail"], path
    assert cluster.anon.get("/api/v1/recovery").json() == {"paused": False, "excluded": []}

    admin = cluster.admin
    assert admin.post("/api/v1/recovery/pause", json={"paused": True}).json()["paused"] is True
    added = admin.post("/api/v1/exclusions", json={"node": "node-b", "reason": "flaky NVLink", "ttl_s": 600})
    assert added.status_code == 201, added.text
    got = added.json()
    assert (got["node"], got["reason"], got["incident_id"]) == ("node-b", "flaky NVLink", None)
    assert 599 <= (_ts(got["until"]) - _ts(got["since"])) <= 601
    assert admin.post("/api/v1/exclusions", json={"node": "node-b"}).status_code == 200  # already excluded
    assert [e["node"] for e in cluster.anon.get("/api/v1/recovery").json()["excluded"]] == ["node-b"]
    assert 'gpuwatch_excluded_nodes{node="node-b"} 1.0' in cluster.anon.get("/metrics").text
    assert admin.delete("/api/v1/exclusions/node-b").status_code == 204
    assert admin.delete("/api/v1/exclusions/node-b").status_code == 404
    assert 'gpuwatch_excluded_nodes{node="node-b"} 0.0' in cluster.anon.get("/metrics").text
    assert admin.post("/api/v1/recovery/pause", json={"paused": False}).json() == {"paused": False, "excluded": []}

    log = admin.get("/api/v1/audit")
    assert log.status_code == 200
    entries = log.json()
    assert [(e["action"], e["target"]) for e in entries] == [
        ("recovery.unpause", None),
        ("exclusion.release", "node-b"),
        ("exclusion.add", "node-b"),
        ("recovery.pause", None),
    ], "newest first, and the refused attempts left nothing"
    prefix = cluster.admin_token[:12]
    assert {e["actor"] for e in entries} == {f"admin alice ({prefix}…)"}
    assert entries[2]["params"] == {"reason": "flaky NVLink", "ttl_s": 600.0}
    assert cluster.admin_token not in log.text
    assert [e["action"] for e in admin.get("/api/v1/audit", params={"action": "exclusion.add"}).json()] == [
        "exclusion.add"
    ]


def _ts(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


READS = [
    "/api/v1/nodes",
    "/api/v1/gpus",
    "/api/v1/jobs",
    "/api/v1/incidents",
    "/api/v1/recovery",
    "/api/v1/events",
    "/api/v1/runs/1/decision",
    "/api/v1/reports/period?format=json",
]


@pytest.mark.parametrize("read_auth", [False, True])
def test_reads_need_a_token_only_with_read_auth(settings: Settings, read_auth: bool) -> None:
    config = settings.replace(read_auth=read_auth)
    with InProcessServer(config) as srv:
        c = _clients(srv, config.effective_database_url)
        run = c.a.post("/api/v1/runs", json={"job": "j"}).json()["id"]
        assert run == 1
        bad = httpx.Client(base_url=srv.url, headers=_bearer("gwn_not-a-token"), timeout=20)
        for path in READS:
            assert c.anon.get(path).status_code == (401 if read_auth else 200), path
            assert bad.get(path).status_code == (401 if read_auth else 200), path
            for who in (c.a, c.admin):
                assert who.get(path).status_code == 200, path
        if read_auth:
            assert c.anon.get("/api/v1/nodes").headers["WWW-Authenticate"] == "Bearer"
        for path in ("/metrics", "/healthz", "/readyz"):  # scrapers and probes carry no token
            assert c.anon.get(path).status_code == 200, path
        assert c.anon.get("/api/v1/audit").status_code == 401  # admin only in both modes
        assert c.a.get("/api/v1/audit").status_code == 403
        bad.close()


# --- request limits ------------------------------------------------------------------------------------


def _stream(port: int, token: str, total: int, *, chunked: bool, timeout: float = 60) -> tuple[int, int, float]:
    """POST a ``total``-byte ingest body (one log line of x's) over a raw socket, stopping as soon as the
    server answers: (HTTP status, bytes sent by then, seconds). A client that sends the whole body first
    (httpx) would only measure its own upload."""
    prefix = b'{"batch_id": 1, "logs": [{"stream": "s", "seq": 0, "ts": 1700000000, "text": "'
    length = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}"
    head = (
        f"POST /api/v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\n{length}\r\n\r\n"
    ).encode()
    piece = b"x" * 65536
    started = time.monotonic()
    sent, pending, answer, first = 0, b"", b"", True
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head)
        while time.monotonic() - started < timeout:
            want_write = sent < total or pending
            readable, writable, _ = select.select([sock], [sock] if want_write else [], [], 1.0)
            if readable:
                answer = sock.recv(65536)
                break
            if not writable:
                continue
            if not pending:
                data = prefix if first else piece[: total - sent]
                first = False
                pending = f"{len(data):x}\r\n".encode() + data + b"\r\n" if chunked else data
                sent += len(data)
                if chunked and sent >= total:
                    pending += b"0\r\n\r\n"
            try:
                pending = pending[sock.send(pending) :]
            except (BrokenPipeError, ConnectionResetError):  # the server answered and closed: read it
                answer = sock.recv(65536)
                break
    assert answer.startswith(b"HTTP/1.1 "), f"no answer from the server: {answer[:200]!r}"
    return int(answer.split(b" ", 2)[1]), sent, time.monotonic() - started


def test_oversized_bodies_and_gzip_bombs_are_413_and_the_server_carries_on(cluster: Cluster) -> None:
    token = cluster.a.headers["Authorization"].removeprefix("Bearer ")
    port = cluster.srv.port
    assert _stream(port, token, MIB + 1, chunked=False)[0] == 413  # declared: refused before reading
    status, sent, _ = _stream(port, token, 8 * MIB, chunked=True)  # undeclared: refused past the limit
    assert status == 413 and sent < 8 * MIB
    _healthy(cluster, 1)
    bomb = gzip.compress(b'{"batch_id": 2, "logs": [' + b" " * (64 * MIB) + b"]}")
    assert len(bomb) < MIB
    assert cluster.a.post("/api/v1/ingest", content=bomb, headers={"Content-Encoding": "gzip"}).status_code == 413
    _healthy(cluster, 3)


# Each endpoint's valid body with one string it uses marked `@`, where the tests put bad text.
BODIES = {
    "/api/v1/ingest": b'{"batch_id": 1, "logs": [{"stream": "s", "seq": 0, "ts": %d, "text": "@"}]}' % time.time(),
    "/api/v1/nodes/register": b'{"hostname": "@", "node": "node-a"}',
    "/api/v1/nodes/heartbeat": b'{"ts": 1700000000, "dropped": {"@": 1}}',
    "/api/v1/runs": b'{"job": "@", "node": "node-a"}',
    "/api/v1/runs/1/exit": b'{"exit_code": 0, "streams": ["@"]}',
}


@pytest.mark.parametrize("path", list(BODIES))
def test_deep_nesting_bad_utf8_and_bad_gzip_are_client_errors(cluster: Cluster, path: str) -> None:
    assert cluster.a.post("/api/v1/runs", json={"job": "j"}).json()["id"] == 1
    nested = b"[" * 100_000 + b"]" * 100_000
    bodies = {
        "100k nested lists": b'{"batch_id": 1, "logs": ' + nested + b"}",
        "nested objects": b'{"data": ' + b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"}",
        "invalid UTF-8": BODIES[path].replace(b"@", b"h\xff\xfe\xc3\x28"),
        "lone surrogate": BODIES[path].replace(b"@", b"\\ud800"),
        "number too big": b'{"batch_id": 1' + b"0" * 5000 + b"}",
    }
    for what, body in bodies.items():
        resp = cluster.a.post(path, content=body)
        assert 400 <= resp.status_code < 500, (what, resp.status_code, resp.text[:300])
        assert len(resp.content) < 4096, "a refused body is not echoed back"
        for encoded in (gzip.compress(body), b"\x1f\x8b\x08\x00garbage", gzip.compress(body)[:40]):
            resp = cluster.a.post(path, content=encoded, headers={"Content-Encoding": "gzip"})
            assert 400 <= resp.status_code < 500, (what, "gzip", resp.status_code, resp.text[:300])
    bad_gzip = cluster.a.post(path, content=b"\x1f\x8b\x08\x00garbage", headers={"Content-Encoding": "gzip"})
    assert bad_gzip.status_code == 400 and "gzip" in bad_gzip.json()["detail"]
    assert cluster.a.post(path, content=BODIES[path].replace(b"@", b"fine")).is_success, "the same, valid"
    _healthy(cluster, 9)


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/<pid>/status")


@pytest.mark.slow
def test_a_100mb_log_line_is_refused_at_once_without_buffering_it(tmp_path: Path) -> None:
    """The real `gpuwatch server` (default 8 MiB limit) answers 413 after reading about the limit, not
    the 100 MB, and its peak memory does not grow by the body's size."""
    url = migrated_sqlite(tmp_path)
    port = free_port()
    server = start_server(tmp_path, port, tmp_path / "server.log")
    try:
        token = new_token(url, "n1")
        assert httpx.post(
            f"http://127.0.0.1:{port}/api/v1/ingest", content=_batch(1), headers=_bearer(token)
        ).is_success
        before = _peak_rss_mib(server.popen.pid)
        for chunked in (True, False):
            status, sent, took = _stream(port, token, 100 * 1000 * 1000, chunked=chunked)
            assert status == 413 and took < 15, (chunked, status, took)
            assert sent < 40 * MIB, f"the server let {sent / MIB:.0f} MiB in before refusing"
        assert _peak_rss_mib(server.popen.pid) - before < 48, "the server buffered the body"
        assert httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200
        assert httpx.post(
            f"http://127.0.0.1:{port}/api/v1/ingest", content=_batch(2), headers=_bearer(token)
        ).is_success
    finally:
        server.stop()


def test_rate_limiter_refills_at_its_rate_up_to_its_burst() -> None:
    now = [100.0]
    limiter = RateLimiter(rate=2.0, burst=3, clock=lambda: now[0])
    assert [limiter.acquire("n1") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.acquire("n1") == pytest.approx(0.5)  # half a second to the next token
    assert limiter.acquire("n2") == 0.0  # buckets are per node
    now[0] += 0.5
    assert limiter.acquire("n1") == 0.0
    now[0] += 60  # a long pause refills to the burst, no further
    assert [limiter.acquire("n1") for _ in range(4)][-1] > 0
    assert RateLimiter(rate=0, burst=1).acquire("n1") == 0.0  # 0: off


def test_over_the_node_rate_is_429_with_retry_after_for_that_node_only(settings: Settings) -> None:
    config = settings.replace(rate_limit_per_s=0.1, rate_limit_burst=3)
    with InProcessServer(config) as srv:
        c = _clients(srv, config.effective_database_url)
        beat = {"ts": time.time()}
        assert [c.a.post("/api/v1/nodes/heartbeat", json=beat).status_code for _ in range(3)] == [204] * 3
        over = c.a.post("/api/v1/ingest", content=_batch(1))
        assert over.status_code == 429 and "node-a" in over.json()["detail"]
        assert 1 <= int(over.headers["Retry-After"]) <= 10
        assert c.b.post("/api/v1/nodes/heartbeat", json=beat).status_code == 204  # another node's bucket
        assert c.admin.get("/api/v1/audit").status_code == 200  # admins are not nodes: no node bucket
        assert c.anon.get("/readyz").status_code == 200


def test_the_shipper_keeps_every_batch_through_429s(settings: Settings, tmp_path: Path) -> None:
    """Over its rate the agent backs off for the server's Retry-After and resends: nothing is rejected,
    nothing lost, each batch stored once."""
    config = settings.replace(rate_limit_per_s=5.0, rate_limit_burst=4)
    with InProcessServer(config) as srv:
        statuses: list[int] = []

        class Counting(ServerClient):
            def send_batch(self, gzipped: bytes) -> httpx.Response:
                resp = super().send_batch(gzipped)
                statuses.append(resp.status_code)
                return resp

        client = Counting(srv.url, new_token(config.effective_database_url, "node-s"))
        spool = Spool(tmp_path / "spool", max_bytes=16 * MIB)
        for i in range(1, 13):
            spool.put(i, gzip.compress(_batch(i)), {"samples": 1, "logs": 1})
        shipper = Shipper(client, spool, None, heartbeat_s=None, backoff=Backoff(base=0.05, cap=2.0))
        stop = threading.Event()
        sender = threading.Thread(target=shipper.run, args=(stop,), daemon=True)
        sender.start()
        try:
            wait_until(lambda: spool.peek() is None, timeout=30, what="the spool to empty")
        finally:
            stop.set()
            sender.join(timeout=10)
            client.close()
        with srv.services.sessions() as s:
            stored = sorted(s.scalars(sql_select(IngestBatch.batch_id)))
    assert stored == list(range(1, 13))
    assert 429 in statuses and statuses.count(200) == 12
    assert not any((tmp_path / "spool" / "rejected").iterdir()) and spool.dropped_snapshot() == {}


# --- no secrets in logs, none to the LLM -----------------------------------------------------------------


@pytest.mark.slow
def test_tokens_never_appear_in_the_server_agent_or_supervisor_output(tmp_path: Path) -> None:
    url = migrated_sqlite(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    debug = {"GPUWATCH_LOG_LEVEL": "DEBUG"}
    server = start_server(tmp_path, port, tmp_path / "server.log", debug)
    token, admin = new_token(url, "n1"), new_admin_token(url)
    (tmp_path / "node.token").write_text(token + "\n")
    procs: list[Proc] = []
    try:
        common = ["--server", base, "--node", "n1", "--simulate", "1", "--flush", "0.3", "--client-port", "0"]
        procs.append(
            Proc(
                ["agent", *common, "--token-file", str(tmp_path / "node.token"), "--data-dir", str(tmp_path / "a")],
                tmp_path / "agent.log",
                debug,
            )
        )
        # An admin token where a node's belongs: refused, and the refusal is logged (without the token).
        procs.append(
            Proc(["agent", *common, "--token", admin, "--data-dir", str(tmp_path / "b")], tmp_path / "wrong.log", debug)
        )
        run = ["run", "--job", "j", "--server", base, "--token", token, "--node", "n1"]
        run += ["--data-dir", str(tmp_path / "sup"), "--", sys.executable, "-c", "print('trained')"]
        procs.append(Proc(run, tmp_path / "run.log", debug))
        assert procs[2].popen.wait(60) == 0, procs[2].output()
        wait_until(
            lambda: any(g["sample"] for g in httpx.get(f"{base}/api/v1/gpus").json()), what="the agent's samples"
        )
        httpx.post(f"{base}/api/v1/ingest", content=_batch(1), headers=_bearer(token + "x"))  # a 401
        wait_until(lambda: "refused" in procs[1].output(), what="the admin token's refusal in the agent's log")
    finally:
        for p in procs:
            p.stop()
        server.stop()
    outputs = {p.log_path.name: p.output() for p in procs} | {"server.log": server.output()}
    assert "trained" in outputs["run.log"] and "403" in outputs["wrong.log"]
    for name, out in outputs.items():
        assert out.strip(), f"{name} is empty: nothing was checked"
        for secret in (token, admin, token[4:], admin[4:]):
            assert secret not in out, f"a token in {name}"


def test_an_llm_key_in_the_config_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    key = "sk-proj-0123456789abcdefghijklmnop"
    for body in (f'llm_api_key = "{key}"\n', f'port = 1\n[llm]\napi_key = "{key}"\n'):
        path = tmp_path / "gpuwatch.toml"
        path.write_text(body)
        with pytest.raises(ValueError, match="GPUWATCH_LLM_API_KEY") as refused:
            load_settings(config_file=path)
        assert key not in str(refused.value)
    monkeypatch.setenv(CONFIG_ENV, str(path))
    path.write_text("port = 9999\n")
    assert load_settings().server.port == 9999


# (a log line, the secret in it, the line as the LLM may see it)
SECRETS = [
    (
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
        "eyJhbGciOiJIUzI1NiJ9",
        "Authorization: Bearer ***",
    ),
    ("token gwn_Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0 rejected", "Zm9vYmFyYmF6cXV4", "token gw_*** rejected"),
    ("export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE", "export AWS_ACCESS_KEY_ID=AKIA***"),
    (
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY python train.py",
        "wJalrXUtnFEMI",
        "AWS_SECRET_ACCESS_KEY=*** python train.py",
    ),
    (
        "HF_TOKEN='hf_abcdefghijklmnopqrstuvwxyz0123' WANDB_API_KEY=0123456789abcdef",
        "abcdefghijklmnopqrstuvwxyz0123",
        "HF_TOKEN=*** WANDB_API_KEY=***",
    ),
    ("DB_PASSWORD=hunter2hunter2 SECRET=s3cr3tvalue", "hunter2hunter2", "DB_PASSWORD=*** SECRET=***"),
    (
        "openai.AuthenticationError: Incorrect API key provided: sk-proj-abcdefghijklmnopqrstu",
        "abcdefghijklmnopqrstu",
        "openai.AuthenticationError: Incorrect API key provided: sk-***",
    ),
    (
        "reading s3 via https://minio:s3cr3tpassw0rd@minio.local:9000/bucket/shard-0001",
        "s3cr3tpassw0rd",
        "reading s3 via https://minio:***@minio.local:9000/bucket/shard-0001",
    ),
    (
        'config: {"api_key": "0a1b2c3d4e5f6a7b", "lr": 0.0003}',
        "0a1b2c3d4e5f6a7b",
        'config: {"api_key": ***, "lr": 0.0003}',
    ),
    (
        "python train.py --hf-token hf_x1y2z3 --max-tokens 512",
        "hf_x1y2z3",
        "python train.py --hf-token *** --max-tokens 512",
    ),
]
PLAIN = [
    "KeyError: 'input_ids'",
    "step 10 num_tokens=4096 tokens/s=41235 loss=2.3101",
    "TOKENS_PER_SEC=12000",
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=4321, GPU has fallen off the bus.",
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "see https://pytorch.org/docs/stable/notes/cuda.html#memory-management",
]


@pytest.mark.parametrize(("line", "secret", "scrubbed"), SECRETS)
def test_scrub_masks_the_secret_and_keeps_what_it_was(line: str, secret: str, scrubbed: str) -> None:
    assert secret in line and scrub_line(line) == scrubbed


def test_scrub_leaves_ordinary_lines_alone_and_masks_key_blocks() -> None:
    assert scrub_lines(PLAIN) == PLAIN
    block = [
        "before",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAA",
        "-----END OPENSSH PRIVATE KEY-----",
    ]
    assert scrub_lines([*block, "after"]) == [
        "before",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "***",
        "-----END OPENSSH PRIVATE KEY-----",
        "after",
    ]


def test_the_llm_is_sent_scrubbed_lines_through_the_real_client(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    lines = ["[rank0]: loading config", *(line for line, _, _ in SECRETS), *PLAIN, "[rank0]: exiting with code 1"]

    def script(request: dict) -> tuple[int, str]:
        """Cite the Xid line and a line that held a secret, by the ids the prompt gave them."""
        user = [m["content"] for m in request["messages"] if m["role"] == "user"][-1]  # after the examples
        cited = [m.group(1) for m in re.finditer(r"^(L\d+) \| .*(?:Xid|HF_TOKEN)", user, re.M)]
        return 200, json.dumps({"reason": "gpu_hardware", "confidence": 0.9, "evidence": cited, "explanation": "x"})

    with FakeLlmServer(script) as llm:
        analyser = LlmAnalyser.from_settings(LlmSettings(base_url=llm.base_url, model="m", api_key="sk-k" * 8))
        assert analyser is not None
        rules = Diagnosis("unknown", 0.0, "none")
        result = analyser.analyse([LogSource("rank0.log", lines, node="n1", rank=0)], rules)
        (request,) = llm.requests
    sent = json.dumps(request)
    for _, secret, _ in SECRETS:
        assert secret not in sent, f"{secret!r} reached the LLM"
    for expected in ("HF_TOKEN=*** WANDB_API_KEY=***", "https://minio:***@minio.local", *PLAIN):
        assert json.dumps(expected)[1:-1] in sent, f"{expected!r} missing from the prompt"
    assert result.reason == "gpu_hardware"
    assert sorted(e.text for e in result.evidence) == sorted([SECRETS[4][2], PLAIN[3]])


# --- HTTPS --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_server_serves_https_and_the_agent_trusts_a_private_ca(tmp_path: Path) -> None:
    openssl = require_tool("openssl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    make_cert = [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    make_cert += ["-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1"]
    make_cert += ["-addext", "subjectAltName=IP:127.0.0.1", "-addext", "basicConstraints=critical,CA:TRUE"]
    make_cert += ["-addext", "keyUsage=critical,digitalSignature,keyCertSign"]
    subprocess.run(make_cert, check=True, capture_output=True)
    url = migrated_sqlite(tmp_path)
    port = free_port()
    base = f"https://127.0.0.1:{port}"
    env = {"GPUWATCH_DATA_DIR": str(tmp_path), "GPUWATCH_DATABASE_URL": ""}
    args = ["server", "--port", str(port), "--ssl-certfile", str(cert), "--ssl-keyfile", str(key)]
    server = Proc(args, tmp_path / "server.log", env)
    trusted = ssl.create_default_context(cafile=str(cert))
    agent: Proc | None = None
    try:
        wait_until(lambda: httpx.get(f"{base}/readyz", verify=trusted).status_code == 200, timeout=30, what="HTTPS")
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(f"{base}/readyz")  # a self-signed certificate is not trusted by default
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            httpx.get(f"http://127.0.0.1:{port}/readyz")  # no plain HTTP on the HTTPS port
        token = new_token(url, "tls-node")
        agent_args = ["agent", "--server", base, "--token", token, "--node", "tls-node", "--simulate", "2"]
        agent_args += ["--flush", "0.3", "--client-port", "0", "--data-dir", str(tmp_path / "agent")]
        agent = Proc(agent_args, tmp_path / "agent.log", {"SSL_CERT_FILE": str(cert)})

        def samples() -> bool:
            gpus = httpx.get(f"{base}/api/v1/gpus", verify=trusted).json()
            return len(gpus) == 2 and all(g["sample"] for g in gpus)

        wait_until(samples, timeout=30, what="the agent's samples over HTTPS")
    finally:
        if agent is not None:
            agent.stop()
        server.stop()


# --- a GPU's identity: a node claims only GPUs that are not another live node's ---------------------


def _gpu_owner(c: Cluster, uuid: str) -> list[tuple[str, int, str]]:
    """(node, index, uuid) of the GPU rows holding ``uuid`` (a retired row keeps it behind a prefix)."""
    from server.store.models import Gpu

    with c.srv.services.sessions() as s:
        rows = s.execute(sql_select(Node.name, Gpu.index, Gpu.uuid).join(Node, Node.id == Gpu.node_id)).all()
    return sorted((name, index, u) for name, index, u in rows if uuid in u)


def test_a_node_cannot_take_another_live_nodes_gpu(cluster: Cluster) -> None:
    """Node b names node a's GPU (by register, as a new index, as an existing index's new UUID, or only in
    its samples): a's GPU row stays a's, b's register is a 409 naming the owner, b's samples are stored on
    a row of b's own, and nobody's rollups or batches fail."""
    a, b = cluster.a, cluster.b
    gpu = {"index": 0, "uuid": "GPU-aaaa", "name": "NVIDIA H100"}
    assert a.post("/api/v1/nodes/register", json={"hostname": "a", "gpus": [gpu]}).status_code == 200

    taken = b.post("/api/v1/nodes/register", json={"hostname": "b", "gpus": [gpu]})
    assert taken.status_code == 409, taken.text
    assert "GPU-aaaa" in taken.json()["detail"] and "node-a" in taken.json()["detail"]
    assert b.post("/api/v1/nodes/register", json={"hostname": "b", "gpus": [{**gpu, "uuid": "GPU-bbbb"}]}).is_success
    swapped = b.post("/api/v1/nodes/register", json={"hostname": "b", "gpus": [gpu]})  # index 0's new UUID
    assert swapped.status_code == 409, swapped.text
    assert _gpu_owner(cluster, "GPU-aaaa") == [("node-a", 0, "GPU-aaaa")]

    twice = [gpu | {"uuid": "GPU-cccc"}, gpu | {"index": 1, "uuid": "GPU-cccc"}]
    dup = b.post("/api/v1/nodes/register", json={"hostname": "b", "gpus": twice})
    assert dup.status_code == 422 and "GPU-cccc" in dup.text

    # Samples alone (a GPU index b never registered, carrying a's UUID): stored under b, a's row untouched.
    ts = time.time()
    batch = Batch(batch_id=1, samples=[GpuSample(ts=ts, gpu=5, uuid="GPU-aaaa", util_gpu=10.0)])
    assert b.post("/api/v1/ingest", content=batch.model_dump_json().encode()).status_code == 200
    cluster.srv.services.writer.flush_rollups()  # the rollups' GPU rows: a failure here would stall every node
    assert _gpu_owner(cluster, "GPU-aaaa") == [("node-a", 0, "GPU-aaaa")]
    _healthy(cluster, 2)


def test_a_gpu_moves_to_another_node_once_its_old_node_is_revoked(cluster: Cluster) -> None:
    """A node renamed (its old name's tokens revoked) keeps its GPUs' rows: the claim is not a conflict."""
    gpu = {"index": 0, "uuid": "GPU-dddd", "name": "NVIDIA H100"}
    assert cluster.a.post("/api/v1/nodes/register", json={"hostname": "a", "gpus": [gpu]}).status_code == 200
    from server.store.nodes import revoke_tokens

    with transaction(cluster.srv.services.sessions) as session:
        revoke_tokens(session, "node-a")
    assert cluster.b.post("/api/v1/nodes/register", json={"hostname": "b", "gpus": [gpu]}).status_code == 200
    assert _gpu_owner(cluster, "GPU-dddd") == [("node-b", 0, "GPU-dddd")]
