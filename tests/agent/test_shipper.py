"""The agent's sender: backoff with full jitter, and the Shipper against the real server on loopback."""

from __future__ import annotations

import gzip
import json
import random
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from agent.api_client import ServerClient
from agent.shipper import Backoff, Shipper
from agent.spool import Spool
from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, Event, GpuInfo, GpuSample, LogLine, RegisterRequest
from server.store.models import IngestBatch, LogLineRow, Node
from tests.helpers import InProcessServer, free_port, new_token, wait_until

# --- Backoff ------------------------------------------------------------------------------------


class _Ceiling(random.Random):
    """An rng whose 'uniform' always returns the top of the range: exposes the backoff's bound."""

    def uniform(self, a: float, b: float) -> float:
        return b


def test_backoff_delays_stay_within_zero_and_capped_exponential_bound() -> None:
    backoff = Backoff(base=0.5, cap=8.0, rng=random.Random(1234))
    for n in range(20):
        bound = min(8.0, 0.5 * 2**n)
        delays = []
        for _ in range(50):
            backoff.failures = n
            delays.append(backoff.next_delay())
        assert all(0 <= d <= bound for d in delays), (n, bound, max(delays))
        assert backoff.failures == n + 1
    # Full jitter: spread over the whole range, not bunched at the top.
    many = []
    for _ in range(2000):
        backoff.failures = 10
        many.append(backoff.next_delay())
    assert min(many) < 1.0 and max(many) > 7.0


def test_backoff_bound_grows_exponentially_up_to_cap_and_reset_starts_over() -> None:
    backoff = Backoff(base=0.5, cap=30.0, rng=_Ceiling())
    assert [backoff.next_delay() for _ in range(8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert backoff.failures == 8
    backoff.reset()
    assert backoff.failures == 0
    assert backoff.next_delay() == 0.5


def test_backoff_typical_delay_grows_with_failures() -> None:
    rng = random.Random(7)

    def mean_after(n: int) -> float:
        b = Backoff(base=0.5, cap=30.0, rng=rng)
        total = 0.0
        for _ in range(500):
            b.failures = n
            total += b.next_delay()
        return total / 500

    assert mean_after(0) < mean_after(3) < mean_after(6)


# --- Shipper against the real server -------------------------------------------------------------


def _registration() -> RegisterRequest:
    return RegisterRequest(
        hostname="host-a",
        agent_version="test",
        collector="simulated",
        gpus=[GpuInfo(index=i, uuid=f"GPU-ship-{i}", name="Simulated GPU") for i in range(2)],
    )


def _batch(batch_id: int, first_seq: int = 0, n_logs: int = 3) -> Batch:
    ts = time.time()
    return Batch(
        batch_id=batch_id,
        samples=[GpuSample(ts=ts, gpu=0, uuid="GPU-ship-0", util_gpu=42.0)],
        logs=[
            LogLine(stream="file:/train.log", seq=s, ts=ts, text=f"line {s}")
            for s in range(first_seq, first_seq + n_logs)
        ],
        events=[Event(stream="gpu:simulated", seq=batch_id, ts=ts, kind="xid", gpu=0, message="Xid 79")],
    )


def _spool_batch(spool: Spool, batch: Batch) -> None:
    body = gzip.compress(batch.model_dump_json().encode())
    spool.put(
        batch.batch_id, body, {"samples": len(batch.samples), "logs": len(batch.logs), "events": len(batch.events)}
    )


def _spool_raw(spool: Spool, batch_id: int, payload: dict, counts: dict[str, int]) -> None:
    spool.put(batch_id, gzip.compress(json.dumps(payload).encode()), counts)


class RecordingClient(ServerClient):
    """The real HTTP client, noting which batch ids it sent and what the server answered."""

    def __init__(self, base_url: str, token: str, timeout_s: float = 10.0) -> None:
        super().__init__(base_url, token, timeout_s)
        self.sent: list[tuple[int, int]] = []

    def send_batch(self, gzipped: bytes):  # type: ignore[no-untyped-def]
        resp = super().send_batch(gzipped)
        try:
            batch_id = json.loads(gzip.decompress(gzipped))["batch_id"]
        except (OSError, ValueError, KeyError):
            batch_id = -1  # a body that is not a batch at all
        self.sent.append((batch_id, resp.status_code))
        return resp


@pytest.fixture
def token(live_server: InProcessServer) -> str:
    return new_token(live_server.services.settings.effective_database_url, "node-a")


@pytest.fixture
def spool(tmp_path: Path) -> Spool:
    return Spool(tmp_path / "agent-spool", max_bytes=16 * 1024 * 1024)


@pytest.fixture
def client(live_server: InProcessServer, token: str) -> Iterator[RecordingClient]:
    c = RecordingClient(live_server.url, token, timeout_s=10)
    yield c
    c.close()


def _stored_batches(srv: InProcessServer) -> list[int]:
    with srv.services.sessions() as s:
        return sorted(s.scalars(select(IngestBatch.batch_id)))


def _count(srv: InProcessServer, model: type) -> int:
    with srv.services.sessions() as s:
        return s.scalar(select(func.count()).select_from(model))


def _step_until_idle(shipper: Shipper, limit: int = 50) -> list[float]:
    delays = []
    for _ in range(limit):
        delays.append(shipper.step())
        if shipper.spool.peek() is None:
            return delays
    raise AssertionError(f"spool not empty after {limit} steps: {shipper.spool.stats()}, delays {delays}")


def test_shipper_registers_then_sends_spooled_batches_in_order_and_empties_spool(
    live_server: InProcessServer, client: RecordingClient, spool: Spool
) -> None:
    for bid, seq in ((103, 6), (101, 0), (102, 3)):
        _spool_batch(spool, _batch(bid, first_seq=seq))
    shipper = Shipper(client, spool, _registration, backoff=Backoff(rng=random.Random(0)))

    delays = _step_until_idle(shipper)

    assert all(d == 0.0 for d in delays)
    assert shipper.registered
    with live_server.services.sessions() as s:
        node = s.scalar(select(Node).where(Node.name == "node-a"))
        assert node is not None and node.hostname == "host-a" and node.collector == "simulated"
        assert node.registered_at is not None
    assert client.sent == [(101, 200), (102, 200), (103, 200)]
    assert shipper.sent_batches == 3
    assert _stored_batches(live_server) == [101, 102, 103]
    assert _count(live_server, LogLineRow) == 9
    assert spool.stats() == (0, 0)
    assert not list(spool.directory.glob("*.json.gz"))
    assert spool.dropped_snapshot() == {}
    assert shipper.step() > 0  # idle: a short poll interval, nothing else to do


def test_shipper_with_wrong_token_keeps_spool_and_backs_off(
    live_server: InProcessServer, token: str, spool: Spool
) -> None:
    for bid in (1, 2):
        _spool_batch(spool, _batch(bid, first_seq=bid * 10))
    before = spool.stats()
    client = RecordingClient(live_server.url, "gwn_not-a-real-token")
    try:
        shipper = Shipper(client, spool, _registration, backoff=Backoff(base=0.5, cap=30, rng=random.Random(3)))
        delays = [shipper.step() for _ in range(4)]
    finally:
        client.close()

    assert all(d > 0 for d in delays), delays
    assert shipper.backoff.failures == 4
    assert not shipper.registered
    assert spool.stats() == before
    first = spool.peek()
    assert first is not None and first.batch_id == 1
    assert spool.dropped_snapshot() == {}
    assert not list((spool.directory / "rejected").iterdir())
    assert _stored_batches(live_server) == []


def test_shipper_moves_batch_refused_with_422_to_rejected_and_sends_the_next(
    live_server: InProcessServer, client: RecordingClient, spool: Spool
) -> None:
    _spool_batch(spool, _batch(1, first_seq=0))
    bad = json.loads(_batch(2, first_seq=3).model_dump_json())
    bad["samples"][0]["util_gpu"] = 250.0  # a percentage over 100: the server refuses the whole batch
    _spool_raw(spool, 2, bad, {"samples": 1, "logs": 3, "events": 1})
    _spool_batch(spool, _batch(3, first_seq=6))
    shipper = Shipper(client, spool, _registration, backoff=Backoff(rng=random.Random(0)))

    delays = _step_until_idle(shipper)

    assert all(d == 0.0 for d in delays)  # a permanent refusal is not a reason to back off
    assert client.sent == [(1, 200), (2, 422), (3, 200)]
    assert _stored_batches(live_server) == [1, 3]
    assert _count(live_server, LogLineRow) == 6
    rejected = list((spool.directory / "rejected").iterdir())
    assert [p.name.split(".")[0] for p in rejected] == [f"{2:020d}"]
    assert json.loads(gzip.decompress(rejected[0].read_bytes())) == bad  # kept as sent, for a person
    assert spool.dropped_snapshot() == {"rejected_samples": 1, "rejected_logs": 3, "rejected_events": 1}
    assert shipper.sent_batches == 2
    assert spool.stats() == (0, 0)


def test_shipper_rejects_batch_over_server_body_limit_and_goes_on(
    live_server: InProcessServer, client: RecordingClient, spool: Spool
) -> None:
    limit = live_server.services.settings.server.max_body_bytes
    _spool_raw(spool, 1, {"batch_id": 1}, {})
    spool.put(2, b"\x1f\x8b" + bytes(random.Random(5).randbytes(limit + 10)), {"logs": 7})  # 413 before gunzip
    _spool_batch(spool, _batch(3))
    shipper = Shipper(client, spool, _registration)

    _step_until_idle(shipper)

    assert client.sent == [(1, 200), (-1, 413), (3, 200)]
    assert _stored_batches(live_server) == [3]  # batch 1 is empty: acknowledged, nothing stored
    assert spool.dropped_snapshot() == {"rejected_logs": 7}
    assert len(list((spool.directory / "rejected").iterdir())) == 1


def test_shipper_with_no_server_listening_backs_off_and_keeps_everything(spool: Spool) -> None:
    for bid in (5, 6, 7):
        _spool_batch(spool, _batch(bid))
    before = spool.stats()
    client = ServerClient(f"http://127.0.0.1:{free_port()}", "gwn_whatever", timeout_s=2)
    try:
        shipper = Shipper(client, spool, _registration, backoff=Backoff(base=0.5, cap=4.0, rng=random.Random(9)))
        delays = [shipper.step() for _ in range(8)]
    finally:
        client.close()

    for n, d in enumerate(delays):
        assert 0 < d <= min(4.0, 0.5 * 2**n), (n, d)
    assert shipper.backoff.failures == 8
    assert spool.stats() == before
    first = spool.peek()
    assert first is not None and first.batch_id == 5
    assert spool.dropped_snapshot() == {}


def test_shipper_sends_after_server_comes_back_and_resets_backoff(settings: Settings, spool: Spool) -> None:
    _spool_batch(spool, _batch(1))
    server = InProcessServer(settings)  # chosen port, not listening yet
    client = ServerClient(server.url, new_token(settings.effective_database_url, "node-a"), timeout_s=5)
    shipper = Shipper(client, spool, _registration, backoff=Backoff(rng=random.Random(1)))
    try:
        assert shipper.step() > 0
        assert shipper.step() > 0
        assert shipper.backoff.failures == 2
        with server:
            assert shipper.step() == 0.0  # registers and sends batch 1
            assert shipper.backoff.failures == 0
            assert spool.stats() == (0, 0)
            assert _stored_batches(server) == [1]
    finally:
        client.close()


def test_shipper_run_ships_what_is_spooled_while_running_and_heartbeats_dropped_counts(
    live_server: InProcessServer, client: RecordingClient, tmp_path: Path
) -> None:
    spool = Spool(tmp_path / "small-spool", max_bytes=1024)
    # Over the bound before the shipper starts: batch 1 is dropped, and the server must hear about it.
    spool.put(1, b"x" * 1000, {"samples": 4, "logs": 2})
    _spool_batch(spool, _batch(2))
    assert spool.dropped_snapshot() == {"samples": 4, "logs": 2}
    shipper = Shipper(client, spool, _registration, heartbeat_s=0.05)
    stop = threading.Event()
    thread = threading.Thread(target=shipper.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: _stored_batches(live_server) == [2], what="batch 2 stored")
        _spool_batch(spool, _batch(3, first_seq=50))
        shipper.wakeup.set()
        wait_until(lambda: _stored_batches(live_server) == [2, 3], what="batch 3 stored")

        def node_dropped() -> dict[str, int]:
            with live_server.services.sessions() as s:
                return s.scalar(select(Node.dropped).where(Node.name == "node-a"))

        wait_until(lambda: node_dropped() == {"samples": 4, "logs": 2}, what="heartbeat with dropped counts")
    finally:
        stop.set()
        thread.join(timeout=15)
    assert not thread.is_alive()
    assert spool.stats() == (0, 0)


def test_an_unexpected_error_backs_off_instead_of_killing_the_shipper(tmp_path: Path) -> None:
    class Broken(ServerClient):
        def register(self, req: RegisterRequest) -> httpx.Response:
            raise ValueError("the server answered something that is not JSON")

    spool = Spool(tmp_path / "spool", 1 << 20)
    shipper = Shipper(Broken("http://127.0.0.1:9", "t"), spool, lambda: RegisterRequest(hostname="h"))
    shipper.step()  # must not raise
    assert shipper.backoff.failures == 1 and not shipper.registered


class _OldServer:
    """A server of protocol 1 on loopback: its registration answer has no ``protocol``; it notes every path
    posted to."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        old = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                old.paths.append(self.path)
                body = json.dumps({"node": "node-a", "server_time": time.time()}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_shipper_keeps_batches_spooled_for_a_server_older_than_its_protocol(
    spool: Spool, caplog: pytest.LogCaptureFixture
) -> None:
    """A protocol-1 server would refuse (422) every batch of series: the agent says to upgrade the server
    and keeps them, rather than have them moved aside as rejected."""
    _spool_batch(spool, _batch(1))
    before = spool.stats()
    old = _OldServer()
    client = ServerClient(old.url, "gwn_token")
    try:
        shipper = Shipper(client, spool, _registration, backoff=Backoff(rng=random.Random(0)))
        delays = [shipper.step() for _ in range(3)]
    finally:
        client.close()
        old.stop()
    assert all(d > 0 for d in delays)
    assert not shipper.registered
    assert old.paths == ["/api/v1/nodes/register"] * 3  # never a batch
    assert spool.stats() == before
    assert not list((spool.directory / "rejected").iterdir())
    assert "upgrade the server" in caplog.text
