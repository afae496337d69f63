"""The agent never loses a line (issue 21, item 7): batches sized by bytes, a 413 split again, spool
errors kept in memory and counted, positions saved only past spooled lines, rotation while down, long
paths and huge lines. Real server on loopback, real files."""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

from agent.agent import Agent
from agent.api_client import ServerClient
from agent.collectors.logfile import LogTailer, TailPosition
from agent.outbox import deliver_ended, hold_alive
from agent.shipper import Backoff, Shipper
from agent.spool import Spool
from agent.supervisor import Options, Supervisor
from gpuwatch.config import Settings
from gpuwatch.protocol import MAX_LOG_LINE_CHARS, Batch, LogLine, RegisterRequest
from server.store.models import Diagnosis, LogLineRow
from tests.helpers import InProcessServer, new_token, wait_until

NODE = "node-l"


def _line(n: int, size: int) -> str:
    head = f"line {n:06d} "
    return head + "x" * (size - len(head))


def _stored(srv: InProcessServer, stream: str | None = None) -> list[tuple[int, str]]:
    with srv.services.sessions() as s:
        q = select(LogLineRow.seq, LogLineRow.text)
        if stream is not None:
            q = q.where(LogLineRow.stream == stream)
        return sorted(s.execute(q).tuples())


def _count(srv: InProcessServer) -> int:
    with srv.services.sessions() as s:
        return s.scalar(select(func.count()).select_from(LogLineRow)) or 0


def _agent_settings(srv: InProcessServer, tmp_path: Path, log_file: Path, **extra: object) -> Settings:
    return Settings(
        data_dir=tmp_path / "agent",
        server_url=srv.url,
        token=new_token(srv.services.settings.effective_database_url, NODE),
        node=NODE,
        client_port=0,
        interval_s=0.5,
        flush_s=0.1,
        simulate=1,
        log_files=[log_file],
        backoff_max_s=0.2,
        **extra,
    )


@pytest.fixture
def started() -> Iterator[list[tuple[Agent, threading.Thread]]]:
    """Agents started by a test, stopped at its end."""
    agents: list[tuple[Agent, threading.Thread]] = []
    yield agents
    for agent, thread in agents:
        agent.stop.set()
        thread.join(timeout=20)


def _start(agents: list[tuple[Agent, threading.Thread]], settings: Settings) -> Agent:
    agent = Agent(settings)
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    agents.append((agent, thread))
    return agent


# -- batches sized by bytes, and split again on 413 ---------------------------------------------------


def test_lines_far_over_the_servers_body_limit_arrive_in_batches_it_accepts(
    live_server: InProcessServer, tmp_path: Path, started: list
) -> None:
    """The server's limit here is 64 KiB: 300 lines of 2 KB is ten times that, in one flush."""
    log_file = tmp_path / "train.log"
    log_file.write_text("".join(_line(n, 2000) + "\n" for n in range(300)))
    agent = _start(started, _agent_settings(live_server, tmp_path, log_file))

    wait_until(lambda: _count(live_server) == 300, what="all 300 lines stored")

    assert [text for _, text in _stored(live_server)] == [_line(n, 2000) for n in range(300)]
    assert agent.spool.dropped_snapshot() == {}
    assert not list((agent.spool.directory / "rejected").iterdir())


def _big_batch(batch_id: int, lines: int, size: int) -> Batch:
    return Batch(
        batch_id=batch_id,
        logs=[
            LogLine(stream="file:/big.log", seq=n, ts=time.time() + n / 1000, text=_line(n, size)) for n in range(lines)
        ],
    )


def test_a_batch_refused_with_413_is_split_until_the_server_takes_it(
    live_server: InProcessServer, tmp_path: Path
) -> None:
    """A batch spooled before the agent knew the limit (or under a larger one): split, not thrown away."""
    spool = Spool(tmp_path / "spool", 1 << 30)
    spool.put_batch(_big_batch(1, 200, 3000))  # 600 KB of JSON against a 64 KiB limit
    token = new_token(live_server.services.settings.effective_database_url, NODE)
    client = ServerClient(live_server.url, token)
    shipper = Shipper(client, spool, None, backoff=Backoff(rng=random.Random(0)))
    try:
        for _ in range(200):
            if spool.peek() is None:
                break
            assert shipper.step() == 0.0
    finally:
        client.close()

    assert [seq for seq, _ in _stored(live_server)] == list(range(200))
    assert spool.dropped_snapshot() == {}
    assert not list((spool.directory / "rejected").iterdir())


def test_a_single_line_batch_over_the_limit_is_rejected_and_counted_as_too_large(
    live_server: InProcessServer, tmp_path: Path
) -> None:
    spool = Spool(tmp_path / "spool", 1 << 30)
    line = LogLine(stream="s", seq=0, ts=time.time(), text="é" * 16_000)
    spool.put(1, gzip.compress(Batch(batch_id=1, logs=[line]).model_dump_json().encode()), {"logs": 1})
    token = new_token(live_server.services.settings.effective_database_url, NODE)
    live_server.services.settings.server.max_body_bytes = 16 * 1024  # under that one line's 32 KB
    client = ServerClient(live_server.url, token)
    shipper = Shipper(client, spool, None)
    try:
        for _ in range(10):
            if spool.peek() is None:
                break
            shipper.step()
    finally:
        client.close()
    assert spool.peek() is None
    assert spool.dropped_snapshot() == {"rejected_logs": 1}


def test_the_registration_answer_tells_the_agent_the_servers_body_limit(
    live_server: InProcessServer, tmp_path: Path
) -> None:
    token = new_token(live_server.services.settings.effective_database_url, NODE)
    client = ServerClient(live_server.url, token)
    shipper = Shipper(
        client,
        Spool(tmp_path / "spool", 1 << 30),
        lambda: RegisterRequest(hostname="h", node=NODE),
        batch_max_bytes=1 << 30,
    )
    try:
        shipper.step()
    finally:
        client.close()
    assert shipper.registered
    assert shipper.batch_max_bytes <= 64 * 1024


# -- a spool that cannot be written: lines wait in memory, bounded, and the saved position waits too ---


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 128 KiB tmpfs: a spool directory whose disk fills up (root only, as in CI's container)."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(mount)]).returncode:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _noise(n: int, size: int, rng: random.Random) -> str:
    """A line gzip cannot shrink much (random hex), so that the spool's disk really fills."""
    head = f"line {n:06d} "
    return head + rng.randbytes((size - len(head)) // 2).hex()


def _agent_metrics(agent: Agent) -> dict[tuple[str, ...], float]:
    """The agent's own /metrics, keyed by (name, *label values)."""
    text = httpx.get(f"http://127.0.0.1:{agent.local_api.port}/metrics").text
    return {
        (s.name, *s.labels.values()): s.value for family in text_string_to_metric_families(text) for s in family.samples
    }


def _saved_offset(agent: Agent, log_file: Path) -> int:
    state = json.loads((agent.settings.agent_dir / "state.json").read_text())
    return state["files"].get(str(log_file), {}).get("offset", 0)


@pytest.mark.parametrize("pending_max_bytes", [64 * 1024 * 1024, 100 * 1024])
def test_a_full_spool_disk_keeps_lines_in_memory_and_the_position_behind_them(
    settings: Settings, tmp_path: Path, small_disk: Path, started: list, pending_max_bytes: int
) -> None:
    """The server is away and the spool's disk fills: no crash, the saved position stays before the first
    line not spooled; when the server is back every line is stored once, or (memory bound) counted."""
    rng = random.Random(7)
    lines = [_noise(n, 1000, rng) for n in range(400)]  # ~400 KB against a 128 KiB disk
    log_file = tmp_path / "train.log"
    log_file.write_text("".join(line + "\n" for line in lines))
    server = InProcessServer(settings)  # not started yet: the agent finds nobody at its address
    agent = _start(
        started,
        _agent_settings(server, tmp_path, log_file, spool_dir=small_disk, pending_max_bytes=pending_max_bytes),
    )
    wait_until(lambda: agent.spool.errors.get("ENOSPC"), what="the spool's disk to fill")
    assert started[0][1].is_alive(), "the agent must survive a full spool disk"
    saved = _saved_offset(agent, log_file) if (agent.settings.agent_dir / "state.json").exists() else 0
    assert saved < log_file.stat().st_size, "the saved position moved past lines that are not spooled"

    with server:

        def settled() -> bool:
            dropped = agent.spool.dropped_snapshot().get("spool_error_logs", 0)
            return _count(server) + dropped == len(lines) and agent.spool.peek() is None and not agent.pending

        wait_until(settled, timeout=60, what="every line stored or counted as dropped")
        stored = _stored(server)
        dropped = agent.spool.dropped_snapshot()
        assert {text for _, text in stored} <= set(lines)
        assert len({seq for seq, _ in stored}) == len(stored)
        if pending_max_bytes > 1024 * 1024:
            assert [text for _, text in stored] == lines and dropped == {}
        else:
            assert dropped.get("spool_error_logs", 0) > 0
            assert set(dropped) == {"spool_error_logs"}
        metrics = _agent_metrics(agent)
        assert metrics.get(("gpuwatch_agent_dropped_total", "logs", "spool_error"), 0) == dropped.get(
            "spool_error_logs", 0
        )
        assert metrics[("gpuwatch_agent_spool_errors_total", "ENOSPC")] >= 1
        wait_until(lambda: _saved_offset(agent, log_file) == log_file.stat().st_size, what="the position saved")


def test_lines_dropped_from_memory_and_read_again_after_a_restart_are_not_also_counted_dropped(
    settings: Settings, tmp_path: Path, small_disk: Path, started: list
) -> None:
    """Lines shed from memory while the spool's disk is full stay before the saved position: a restarted
    agent reads them again. Counting them dropped as well would say lines were lost that are stored
    (the agent soak found 1,405 of them): counted only once the position is saved past them."""
    rng = random.Random(11)
    lines = [_noise(n, 1000, rng) for n in range(1000)]  # 1 MB; what waits in memory is more than the disk takes
    log_file = tmp_path / "train.log"
    log_file.write_text("".join(line + "\n" for line in lines))
    server = InProcessServer(settings)  # away while the first agent runs
    agent_settings = _agent_settings(server, tmp_path, log_file, spool_dir=small_disk, pending_max_bytes=300 * 1024)
    first = _start(started, agent_settings)
    wait_until(lambda: first.spool.dropped_snapshot().get("spool_error_logs"), what="lines dropped from memory")
    first.stop.set()
    started[0][1].join(timeout=20)
    saved = _saved_offset(first, log_file) if (first.settings.agent_dir / "state.json").exists() else 0
    assert saved < log_file.stat().st_size, "stopped with lines still waiting for the spool"

    with server:
        second = _start(started, agent_settings)

        def settled() -> bool:
            dropped = second.spool.dropped_snapshot().get("spool_error_logs", 0)
            return _count(server) + dropped >= len(lines) and second.spool.peek() is None and not second.pending

        wait_until(settled, timeout=60, what="every line stored or counted as dropped")
        stored = _stored(server)
        assert len({text for _, text in stored}) == len(stored) and {text for _, text in stored} <= set(lines)
        dropped = second.spool.dropped_snapshot().get("spool_error_logs", 0)
        assert len(stored) + dropped == len(lines), (len(stored), dropped)
        assert _agent_metrics(second).get(("gpuwatch_agent_dropped_total", "logs", "spool_error"), 0) == dropped


# -- the tailer: huge lines, long paths, rotation while the agent is down -----------------------------


def test_a_line_of_a_million_characters_is_one_row_cut_and_marked(tmp_path: Path) -> None:
    log_file = tmp_path / "train.log"
    huge = "é" * 1_000_000  # 2 MB: more than one read
    log_file.write_text(f"before\n{huge}\nafter\n")
    tailer = LogTailer(log_file)
    lines: list[str] = []
    for _ in range(10):
        lines += tailer.poll()
    assert len(lines) == 3, [line[:40] for line in lines]
    assert lines[0] == "before" and lines[2] == "after"
    assert len(lines[1]) <= MAX_LOG_LINE_CHARS and lines[1].startswith("é" * 1000) and "truncated" in lines[1]
    assert tailer.committed_offset == log_file.stat().st_size


def test_a_log_path_over_250_characters_is_followed_under_a_stream_name_the_server_takes(
    live_server: InProcessServer, tmp_path: Path, started: list
) -> None:
    deep = tmp_path.joinpath(*(["d" * 50] * 6))
    deep.mkdir(parents=True)
    log_file = deep / "train.log"
    assert len(str(log_file)) > 300
    log_file.write_text("step 1\nstep 2\n")
    agent = _start(started, _agent_settings(live_server, tmp_path, log_file))

    wait_until(lambda: _count(live_server) == 2, what="the long path's lines stored")
    assert started[0][1].is_alive()
    with live_server.services.sessions() as s:
        (stream,) = set(s.scalars(select(LogLineRow.stream)))
    assert len(stream) <= 255 and stream.startswith("file:") and "train.log" in stream
    assert agent.collectors["logfile"].tailers[0].stream == stream


def _saved(tailer: LogTailer) -> TailPosition:
    return tailer.saved_position()


def test_lines_written_before_a_rotation_while_the_agent_was_down_are_read_before_the_new_file(
    tmp_path: Path,
) -> None:
    log_file = tmp_path / "train.log"
    log_file.write_text("one\ntwo\n")
    first = LogTailer(log_file)
    assert first.poll() == ["one", "two"]
    saved = _saved(first)
    first.close()
    # Down: the job writes on, then logrotate renames the file and the job opens a new one.
    with log_file.open("a") as f:
        f.write("three\nfour\n")
    os.rename(log_file, tmp_path / "train.log.1")
    log_file.write_text("alpha\nbeta\n")

    resumed = LogTailer(log_file, saved)
    assert resumed.poll() + resumed.poll() == ["three", "four", "alpha", "beta"]
    assert resumed.poll() == []


def test_a_copytruncate_rotation_while_down_reads_the_copy_to_its_end_then_the_file_anew(tmp_path: Path) -> None:
    log_file = tmp_path / "train.log"
    log_file.write_text("one\ntwo\n")
    first = LogTailer(log_file)
    first.poll()
    saved = _saved(first)
    first.close()
    with log_file.open("a") as f:
        f.write("three\n")
    shutil.copy(log_file, tmp_path / "train.log.1")  # logrotate's copytruncate
    log_file.write_text("alpha\n")

    resumed = LogTailer(log_file, saved)
    assert resumed.poll() + resumed.poll() == ["three", "alpha"]


def test_a_new_file_on_a_reused_inode_is_read_from_its_start(tmp_path: Path) -> None:
    """Same inode, longer than the saved offset, but another first line: another file (inode reused)."""
    log_file = tmp_path / "train.log"
    log_file.write_text("one\ntwo\n")
    first = LogTailer(log_file)
    first.poll()
    saved = _saved(first)
    first.close()
    with log_file.open("r+") as f:  # rewritten in place, as a reused inode would look
        f.write("ALPHA\nBETA\nGAMMA\n")
    assert LogTailer(log_file, saved).poll() == ["ALPHA", "BETA", "GAMMA"]


# -- the supervisor's paths --------------------------------------------------------------------------


@pytest.mark.parametrize("job", ["..", ".", "../../etc", "a/../../b", "...", "x" * 400])
def test_the_supervisors_folder_for_any_job_name_stays_inside_its_own(tmp_path: Path, job: str) -> None:
    settings = Settings(data_dir=tmp_path / "data", token="t", server_url="http://127.0.0.1:9")
    sup = Supervisor(settings, Options(job=job, command=["true"]))
    root = (tmp_path / "data" / "supervisor").resolve()
    assert sup.home.resolve().parent == root
    assert ".." not in sup.home.name and not sup.home.name.startswith(".")
    assert len(sup.home.name) <= 255
    sup.client.close()


# -- clock skew (issue 21, item 8) --------------------------------------------------------------------


def test_a_failed_runs_lines_are_its_evidence_with_the_nodes_clock_two_minutes_behind(
    live_server: InProcessServer, tmp_path: Path
) -> None:
    skewed = lambda: time.time() - 120.0  # noqa: E731 - the node's clock
    settings = Settings(
        data_dir=tmp_path / "sup",
        server_url=live_server.url,
        token=new_token(live_server.services.settings.effective_database_url, NODE),
        node=NODE,
    )
    script = "import sys; print('Traceback (most recent call last):'); print(\"KeyError: 'labels'\"); sys.exit(1)"
    sup = Supervisor(settings, Options(job="skewed", command=[sys.executable, "-c", script], decision_timeout_s=20))
    sup.clock = sup.client.clock = skewed
    assert sup.run() != 0

    def diagnosis() -> Diagnosis | None:
        with live_server.services.sessions() as s:
            return s.scalar(select(Diagnosis))

    got = wait_until(diagnosis, what="the run's diagnosis")
    assert got.reason == "script_error", got.evidence
    assert "KeyError" in " ".join(e["text"] for e in got.evidence)
    with live_server.services.sessions() as s:
        times = list(s.scalars(select(LogLineRow.ts)))
    assert times and all(abs(t.replace(tzinfo=UTC).timestamp() - time.time()) < 60 for t in times)


class _LinesAfterTheExit(BaseHTTPRequestHandler):
    """A proxy to the server that refuses log batches (503, Retry-After 1 s) until the run's exit has
    passed through and ``delay_s`` more: a node whose lines reach the server after its exit report."""

    upstream = ""
    delay_s = 2.0
    exit_seen: float | None = None

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        cls = type(self)
        if self.path.endswith("/ingest") and (cls.exit_seen is None or time.monotonic() < cls.exit_seen + cls.delay_s):
            self.send_response(503)
            self.send_header("Retry-After", "1")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        keep = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length", "connection")}
        got = httpx.request(self.command, cls.upstream + self.path, content=body, headers=keep, timeout=60)
        if "/exit" in self.path and got.status_code < 300:
            cls.exit_seen = time.monotonic()
        self.send_response(got.status_code)
        for k, v in got.headers.items():
            if k.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(got.content)))
        self.end_headers()
        self.wfile.write(got.content)

    do_GET = do_POST = _forward

    def log_message(self, *args: object) -> None:
        pass


def test_lines_that_reach_the_server_after_the_exit_are_still_the_runs_evidence(
    live_server: InProcessServer, tmp_path: Path
) -> None:
    """An overloaded or briefly unwilling server takes the exit before the lines: the exit says how many
    lines each stream has, and the diagnosis waits for them (it used to answer unknown, with no evidence)."""
    _LinesAfterTheExit.upstream, _LinesAfterTheExit.exit_seen = live_server.url, None
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _LinesAfterTheExit)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    settings = Settings(
        data_dir=tmp_path / "sup",
        server_url=f"http://127.0.0.1:{proxy.server_address[1]}",
        token=new_token(live_server.services.settings.effective_database_url, NODE),
        node=NODE,
    )
    script = "import sys; print('Traceback (most recent call last):'); print(\"KeyError: 'labels'\"); sys.exit(1)"
    sup = Supervisor(settings, Options(job="late-lines", command=[sys.executable, "-c", script], decision_timeout_s=20))
    try:
        assert sup.run() != 0
    finally:
        proxy.shutdown()

    def diagnosis() -> Diagnosis | None:
        with live_server.services.sessions() as s:
            return s.scalar(select(Diagnosis))

    got = wait_until(diagnosis, what="the run's diagnosis")
    assert _LinesAfterTheExit.exit_seen is not None
    assert got.reason == "script_error", (got.reason, got.evidence)
    assert "KeyError" in " ".join(e["text"] for e in got.evidence)


def test_lines_a_supervisor_could_not_send_before_it_ended_are_sent_by_the_nodes_agent(
    live_server: InProcessServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that ends while the server refuses its log batches leaves them in its spool; its supervisor is
    gone, so the node's agent, which delivers ended supervisors' run records, sends the lines too (they were
    left on disk for good before)."""
    monkeypatch.setattr(_LinesAfterTheExit, "delay_s", 3600.0)  # no log batch gets through while it runs
    _LinesAfterTheExit.upstream, _LinesAfterTheExit.exit_seen = live_server.url, None
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _LinesAfterTheExit)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    token = new_token(live_server.services.settings.effective_database_url, NODE)
    settings = Settings(
        data_dir=tmp_path / "sup", server_url=f"http://127.0.0.1:{proxy.server_address[1]}", token=token, node=NODE
    )
    script = "print('epoch 1 done'); print('saved checkpoint step 100')"
    try:
        assert Supervisor(settings, Options(job="ended", command=[sys.executable, "-c", script])).run() == 0
    finally:
        proxy.shutdown()
    assert _LinesAfterTheExit.exit_seen is not None  # the run's records got through; its lines did not

    def stored() -> list[str]:
        with live_server.services.sessions() as s:
            return list(s.scalars(select(LogLineRow.text).order_by(LogLineRow.seq)))

    assert stored() == []
    client = ServerClient(live_server.url, token)
    try:
        deliver_ended(settings.data_dir / "supervisor", client)  # what the node's agent runs every few seconds
    finally:
        client.close()
    assert stored() == ["epoch 1 done", "saved checkpoint step 100"]
    assert Spool(settings.data_dir / "supervisor" / "ended" / "spool", 1 << 30).peek() is None


def test_the_agent_leaves_a_live_supervisors_lines_to_it(live_server: InProcessServer, tmp_path: Path) -> None:
    root = tmp_path / "supervisor"
    Spool(root / "live" / "spool", 1 << 30).put_batch(
        Batch(batch_id=1, logs=[LogLine(stream="run/k/stdout", seq=0, ts=time.time(), text="still running")])
    )
    client = ServerClient(live_server.url, new_token(live_server.services.settings.effective_database_url, NODE))
    alive = hold_alive(root / "live")
    try:
        deliver_ended(root, client)
    finally:
        alive.close()
        client.close()
    with live_server.services.sessions() as s:
        assert s.scalar(select(func.count()).select_from(LogLineRow)) == 0
    assert Spool(root / "live" / "spool", 1 << 30).peek() is not None


def test_the_server_applies_a_batchs_clock_offset_to_its_times(live_server: InProcessServer, tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", 1 << 30)
    now = time.time()
    batch = Batch(batch_id=1, logs=[LogLine(stream="s", seq=0, ts=now - 120, text="behind")], clock_offset_s=120.0)
    spool.put_batch(batch)
    client = ServerClient(live_server.url, new_token(live_server.services.settings.effective_database_url, NODE))
    try:
        Shipper(client, spool, None).step()
    finally:
        client.close()
    with live_server.services.sessions() as s:
        (ts,) = s.scalars(select(LogLineRow.ts))
    assert abs(ts.replace(tzinfo=UTC).timestamp() - now) < 1.0
