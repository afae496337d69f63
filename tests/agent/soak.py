"""The agent soak of issue 21 (acceptance 3), shared by `tests/agent/test_soak.py` and `bench/agent_soak.py`.

A job writes numbered lines, mixed ~100-byte and ~5 KB (random hex: gzip cannot make them small), at
``rate`` lines/s to its log; a real `gpuwatch agent` tails it with its spool on a small tmpfs; a real
`gpuwatch server` (SQLite) stores them. Meanwhile the server is SIGKILLed twice and restarted after
``outage_s`` (the spool's disk fills, then empties), and between the two outages the agent is stopped,
the log rotated (renamed to ``.1``, a new file created, the job writing on into both) and the agent
started again. Once the job has stopped and everything has drained, every line written must be stored
exactly once (same text, no line under two sequence numbers) or counted as dropped, with a reason, in
the agent's ``gpuwatch_agent_dropped_total{kind="logs",reason}``: written == stored + dropped.
"""

from __future__ import annotations

import os
import random
import re
import signal
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import Proc, free_port, migrated_sqlite, new_token, start_server, wait_until

NODE = "soak"
SMALL, BIG = 100, 5000
#: One line in BIG_EVERY is BIG bytes (counting its newline), the others SMALL.
BIG_EVERY = 10
CLK_TCK = os.sysconf("SC_CLK_TCK")
_NUMBER = re.compile(r"^line (\d{9}) ")


def line(n: int) -> str:
    """Line ``n`` of the job's log, without its newline: the same text for the same ``n``, always."""
    size = BIG if n % BIG_EVERY == BIG_EVERY - 1 else SMALL
    head = f"line {n:09d} "
    return head + random.Random(n).randbytes((size - 1 - len(head)) // 2).hex()


@dataclass
class SoakConfig:
    duration_s: float = 300.0  # how long the job writes
    rate: int = 2000  # lines per second
    disk: str = "2m"  # the spool's tmpfs
    outage_s: float = 8.0  # each time the server is down
    agent_down_s: float = 2.0  # the agent stopped, the log rotated meanwhile
    pending_max_bytes: int = 2 * 1024 * 1024  # what the agent holds in memory while its spool is full
    flush_s: float = 1.0
    #: When the agent is stopped for the rotation: "full" (in the second outage, its spool's disk full and
    #: lines being dropped) or "empty" (between the outages, once its spool has emptied).
    agent_stop: str = "full"
    drain_timeout_s: float = 180.0
    events: list[str] = field(default_factory=list)  # what happened, when (for the report)


@dataclass
class SoakResult:
    written: int
    stored_rows: int
    stored_lines: int  # distinct line numbers among the rows
    duplicates: int  # rows beyond the first of a line number
    wrong_text: int  # rows whose text is not the line their number names
    missing: int  # written, neither stored nor counted as dropped
    dropped: dict[str, float]  # the agent's gpuwatch_agent_dropped_total{kind="logs"} by reason
    server_dropped: dict[str, int]  # the node's `dropped` as the server last stored it
    seq_gaps: int  # sequence numbers of the stream with no row (dropped lines leave them)
    disk_min_free: int  # bytes: the spool's tmpfs at its fullest
    disk_free_end: int
    disk_size: int
    spool_files_end: int
    agent_cpu_s: float
    agent_wall_s: float
    agent_rss_max: int
    agent_rss_end: int
    events: list[str]

    @property
    def dropped_total(self) -> int:
        return int(sum(self.dropped.values()))

    def summary(self) -> str:
        reasons = ", ".join(f"{r} {int(n)}" for r, n in sorted(self.dropped.items())) or "none"
        return (
            f"written {self.written}, stored {self.stored_lines} ({self.stored_rows} rows),"
            f" dropped {self.dropped_total}"
            f" ({reasons}), duplicates {self.duplicates}, wrong text {self.wrong_text}, missing {self.missing};"
            f" seq gaps {self.seq_gaps}; server's node dropped {self.server_dropped};"
            f" spool disk {self.disk_size // 1024} KiB, fullest {self.disk_min_free // 1024} KiB free,"
            f" at the end {self.disk_free_end // 1024} KiB free and {self.spool_files_end} batches;"
            f" agent CPU {100 * self.agent_cpu_s / max(self.agent_wall_s, 1e-9):.0f} % of a core,"
            f" RSS max {self.agent_rss_max / 2**20:.0f} MiB, end {self.agent_rss_end / 2**20:.0f} MiB"
        )


def mount_tmpfs(mount: Path, size: str) -> bool:
    """A tmpfs of ``size`` (mount's syntax: 128k, 2m) at ``mount``; False where that is not possible (not
    root). Unmount with `unmount`."""
    mount.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)]).returncode == 0


def unmount(mount: Path) -> None:
    subprocess.run(["umount", "-l", str(mount)], check=False)


class LogWriter(threading.Thread):
    """The job: ``line(n)`` for n = 0, 1, … at ``rate`` lines/s for ``duration_s``; `rotate` renames the
    file to ``<name>.1`` and writes on into a new one, as logrotate with a job that reopens its log."""

    def __init__(self, path: Path, rate: int, duration_s: float) -> None:
        super().__init__(daemon=True, name="log-writer")
        self.path, self.rate, self.total = path, rate, int(rate * duration_s)
        self.written = 0
        self._lock = threading.Lock()
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 - closed at the end of run()
        self.error: BaseException | None = None

    def run(self) -> None:
        start = time.monotonic()
        try:
            for n in range(self.total):
                with self._lock:
                    self._file.write(line(n) + "\n")
                self.written = n + 1
                # Pacing a producer at a fixed rate, not waiting for a condition.
                ahead = start + (n + 1) / self.rate - time.monotonic()
                if ahead > 0.002:
                    time.sleep(ahead)
        except BaseException as exc:  # reported by the soak
            self.error = exc
        finally:
            with self._lock:
                self._file.close()

    def rotate(self) -> None:
        with self._lock:
            self._file.close()
            os.rename(self.path, self.path.with_name(self.path.name + ".1"))
            self._file = open(self.path, "a", buffering=1)  # noqa: SIM115


class Usage(threading.Thread):
    """The agent's CPU time and RSS (summed over its incarnations) and the spool disk's free bytes."""

    def __init__(self, disk: Path) -> None:
        super().__init__(daemon=True, name="usage")
        self.disk = disk
        self.pid: int | None = None
        self.cpu_s: dict[int, float] = {}
        self.rss_max = self.rss_last = 0
        self.disk_min_free = self.free()
        self.stop = threading.Event()

    def free(self) -> int:
        st = os.statvfs(self.disk)
        return st.f_bavail * st.f_frsize

    def run(self) -> None:
        while not self.stop.wait(0.1):
            self.disk_min_free = min(self.disk_min_free, self.free())
            if (pid := self.pid) is not None:
                self.read(pid)

    def read(self, pid: int) -> None:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return
        self.cpu_s[pid] = (int(fields[11]) + int(fields[12])) / CLK_TCK
        m = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        if m:
            self.rss_last = int(m.group(1)) * 1024
            self.rss_max = max(self.rss_max, self.rss_last)


def agent_metrics(port: int) -> dict[tuple[str, ...], float]:
    """The agent's loopback /metrics, keyed by (name, *label values)."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {
        (s.name, *s.labels.values()): s.value for family in text_string_to_metric_families(text) for s in family.samples
    }


def dropped_logs(port: int) -> dict[str, float]:
    return {
        labels[1]: v
        for (name, *labels), v in agent_metrics(port).items()
        if name == "gpuwatch_agent_dropped_total" and labels[0] == "logs"
    }


def run_soak(tmp: Path, disk: Path, cfg: SoakConfig) -> SoakResult:
    """The scenario under ``tmp``, the spool on the tmpfs mounted at ``disk``; every process it started is
    killed on the way out."""
    procs: dict[str, Proc] = {}
    try:
        return _run(tmp, disk, cfg, procs)
    finally:
        for p in procs.values():
            p.stop(signal.SIGKILL)


def _run(tmp: Path, disk: Path, cfg: SoakConfig, procs: dict[str, Proc]) -> SoakResult:
    url = migrated_sqlite(tmp)
    db = tmp / "gpuwatch.db"
    port, client_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    log_file = tmp / "train.log"
    log_file.touch()
    token = new_token(url, NODE)
    began = time.monotonic()

    def note(what: str) -> None:
        cfg.events.append(f"{time.monotonic() - began:6.1f}s {what}")

    def server(n: int) -> None:
        procs["server"] = start_server(tmp, port, tmp / f"server-{n}.log")
        note(f"server {n} up")

    def agent(n: int) -> None:
        args = ["agent", "--server", base, "--token", token, "--node", NODE, "--data-dir", str(tmp / "agent-data")]
        args += ["--client-port", str(client_port), "--simulate", "1", "--flush", str(cfg.flush_s)]
        args += ["--backoff-max", "1", "--log-file", str(log_file), "--spool-dir", str(disk / "spool")]
        env = {"GPUWATCH_PENDING_MAX_BYTES": str(cfg.pending_max_bytes)}
        procs["agent"] = Proc(args, tmp / f"agent-{n}.log", env)
        usage.pid = procs["agent"].popen.pid
        wait_until(lambda: agent_metrics(client_port), timeout=30, what="the agent's /metrics")
        note(f"agent {n} up")

    def at(fraction: float) -> None:
        """Until the job has written ``fraction`` of its lines (the writer's progress is the clock)."""
        target = int(writer.total * fraction)
        wait_until(lambda: writer.written >= target, timeout=cfg.duration_s + 60, what=f"{target} lines written")

    def lines_written(n: int) -> None:
        start = writer.written
        wait_until(lambda: writer.written >= start + n, timeout=60, what=f"{n} more lines written")

    def kill_server(n: int, meanwhile: Callable[[], None] | None = None) -> None:
        procs["server"].stop(signal.SIGKILL)
        note(f"server killed (SIGKILL) at line {writer.written}")
        start = writer.written
        if meanwhile is not None:
            meanwhile()
        wait_until(lambda: writer.written >= start + cfg.outage_s * cfg.rate, timeout=60, what="the outage to last")
        server(n)

    def restart_agent_and_rotate() -> None:
        usage.read(procs["agent"].popen.pid)
        assert procs["agent"].stop() == 0, procs["agent"].output()[-3000:]
        note(f"agent stopped (SIGTERM) at line {writer.written}, {usage.free() // 1024} KiB free on the spool disk")
        lines_written(int(cfg.agent_down_s * cfg.rate) // 2)
        writer.rotate()
        note(f"log rotated at line {writer.written}")
        lines_written(int(cfg.agent_down_s * cfg.rate) // 2)
        agent(2)

    def full_then_restart_agent() -> None:
        wait_until(lambda: sum(dropped_logs(client_port).values()) > dropped_before, timeout=60, what="lines dropped")
        note(f"spool disk full ({usage.free() // 1024} KiB free), lines dropped")
        restart_agent_and_rotate()

    usage = Usage(disk)
    usage.start()
    server(1)
    agent(1)
    writer = LogWriter(log_file, cfg.rate, cfg.duration_s)
    writer.start()
    note("writer started")

    at(0.15)
    kill_server(2)
    at(0.45)
    if cfg.agent_stop == "empty":  # the gentle case: the agent stopped with nothing spooled
        wait_until(lambda: not list((disk / "spool").glob("*.json.gz")), timeout=120, what="the spool to empty")
        note(f"spool empty, {usage.free() // 1024} KiB free")
        restart_agent_and_rotate()
        at(0.65)
        kill_server(3)
    else:  # the agent stopped while its spool's disk is full and lines are being dropped
        at(0.55)
        dropped_before = sum(dropped_logs(client_port).values())
        kill_server(3, full_then_restart_agent)
    writer.join(timeout=cfg.duration_s + 60)
    if writer.error is not None:
        raise writer.error
    note(f"writer done: {writer.written} lines")

    def settled() -> bool:
        dropped = sum(dropped_logs(client_port).values())
        (rows,) = _query(db, "SELECT count(*) FROM log_lines")[0]
        spooled = list((disk / "spool").glob("*.json.gz"))
        return rows + dropped >= writer.written and not spooled

    try:
        wait_until(settled, timeout=cfg.drain_timeout_s, every=0.5, what="every line stored or counted dropped")
        note("drained")
    except AssertionError as exc:  # the check below says what is missing
        note(f"NOT drained: {exc}")
    usage.read(procs["agent"].popen.pid)
    usage.stop.set()
    return _result(db, writer, usage, disk, dropped_logs(client_port), base, cfg, time.monotonic() - began)


def _spool_left(spool: Path, within_s: float = 15.0) -> int:
    """The batches still spooled once the agent has had ``within_s`` to send them.

    Every batch is spooled before it is sent, so the running agent's next metrics batch may sit there
    for a moment after the drain: a file counts as left behind only if the spool never empties."""
    deadline = time.monotonic() + within_s
    while (left := len(list(spool.glob("*.json.gz")))) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _query(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db, timeout=30) as conn:
        return conn.execute(sql).fetchall()


def _result(
    db: Path,
    writer: LogWriter,
    usage: Usage,
    disk: Path,
    dropped: dict[str, float],
    base: str,
    cfg: SoakConfig,
    wall: float,
) -> SoakResult:
    seen: Counter[int] = Counter()
    wrong = 0
    seqs: set[int] = set()
    for seq, text in _query(db, "SELECT seq, text FROM log_lines"):
        seqs.add(seq)
        m = _NUMBER.match(text)
        if m is None or text != line(int(m.group(1))):
            wrong += 1
            continue
        seen[int(m.group(1))] += 1
    rows = sum(seen.values()) + wrong
    stored = sum(1 for n in seen if n < writer.written)
    nodes = httpx.get(f"{base}/api/v1/nodes", timeout=10).json()
    server_dropped = next((n.get("dropped") or {} for n in nodes if n.get("name") == NODE), {})
    st = os.statvfs(disk)
    return SoakResult(
        written=writer.written,
        stored_rows=rows,
        stored_lines=stored,
        duplicates=sum(c - 1 for c in seen.values()),
        wrong_text=wrong,
        missing=writer.written - stored - int(sum(dropped.values())),
        dropped=dropped,
        server_dropped=server_dropped,
        seq_gaps=(max(seqs) + 1 - len(seqs)) if seqs else 0,
        disk_min_free=usage.disk_min_free,
        disk_free_end=usage.free(),
        disk_size=st.f_blocks * st.f_frsize,
        spool_files_end=_spool_left(disk / "spool"),
        agent_cpu_s=sum(usage.cpu_s.values()),
        agent_wall_s=wall,
        agent_rss_max=usage.rss_max,
        agent_rss_end=usage.rss_last,
        events=list(cfg.events),
    )
