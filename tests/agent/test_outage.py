"""The server dies for ~10 s while an agent streams 200 log lines/s: nothing is lost, nothing doubled."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.helpers import Proc, free_port, migrated_sqlite, new_token, start_server, wait_until

RATE = 200  # lines per second
DURATION_S = 22
OUTAGE_LINES = 10 * RATE  # the server stays down while the job writes this many lines (~10 s)


class LogWriter(threading.Thread):
    """A job writing numbered lines at a steady rate, as a training script prints its progress."""

    def __init__(self, path: Path, total: int) -> None:
        super().__init__(daemon=True)
        self.path, self.total, self.written = path, total, 0

    def run(self) -> None:
        start = time.monotonic()
        with open(self.path, "a", buffering=1) as f:
            for n in range(self.total):
                f.write(f"step {n:06d} loss=2.{n % 997:03d}\n")
                self.written = n + 1
                # Pacing a producer at a fixed rate, not waiting for a condition.
                time.sleep(max(0.0, start + (n + 1) / RATE - time.monotonic()))


@pytest.mark.slow
def test_server_outage_loses_and_doubles_nothing(tmp_path: Path) -> None:
    url = migrated_sqlite(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_file = tmp_path / "train.log"
    log_file.touch()
    server = start_server(tmp_path, port, tmp_path / "server-1.log")
    agent = Proc(
        [
            "agent",
            "--server",
            base,
            "--token",
            new_token(url, "n1"),
            "--node",
            "n1",
            "--client-port",
            "0",
            "--simulate",
            "2",
            "--flush",
            "0.5",
            "--backoff-max",
            "1",
            "--log-file",
            str(log_file),
            "--data-dir",
            str(tmp_path),
        ],
        tmp_path / "agent.log",
    )
    writer = LogWriter(log_file, RATE * DURATION_S)
    try:
        wait_until(lambda: httpx.get(f"{base}/api/v1/gpus").json(), what="the agent's first samples")
        writer.start()
        wait_until(lambda: writer.written >= 4 * RATE, what="4 s of log lines")
        server.stop(signal.SIGKILL)  # a crash, not a clean shutdown
        down_at = writer.written
        wait_until(lambda: writer.written >= down_at + OUTAGE_LINES, timeout=30, what="the outage to last")
        restarted_at = time.time()
        server = start_server(tmp_path, port, tmp_path / "server-2.log")
        writer.join(timeout=60)
        total = writer.written
        assert total == RATE * DURATION_S

        db = tmp_path / "gpuwatch.db"

        def stored() -> tuple[int, int, int, int]:
            with sqlite3.connect(db) as conn:
                return conn.execute(
                    "SELECT count(*), count(DISTINCT seq), min(seq), max(seq) FROM log_lines"
                ).fetchone()

        wait_until(lambda: stored()[0] >= total, timeout=60, what=f"all {total} lines stored")
        count, distinct, lo, hi = stored()
        assert (count, distinct, lo, hi) == (total, total, 0, total - 1)
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT seq, text FROM log_lines ORDER BY seq").fetchall()
        assert all(text.startswith(f"step {seq:06d} ") for seq, text in rows)

        # Samples resume: the server's latest values are from after the restart.
        def fresh_samples() -> bool:
            gpus = httpx.get(f"{base}/api/v1/gpus").json()
            return len(gpus) == 2 and all(g["sample"] and g["sample"]["ts"] > restarted_at for g in gpus)

        wait_until(fresh_samples, what="samples after the restart")
        nodes = httpx.get(f"{base}/api/v1/nodes").json()
        assert nodes[0]["dropped"] == {}, "nothing may be dropped within the spool bound"
        assert "unreachable" in agent.output()  # the agent noticed the outage and retried
    finally:
        assert agent.stop() == 0
        server.stop()
