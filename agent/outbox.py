"""Runs the server has not acknowledged, kept on disk by `gpuwatch run` and delivered in order: by the
supervisor while it lives, and by the node's agent once it has ended (a supervisor that ends during an
outage leaves its outbox behind, and nobody else would send it).

One record a line: an attempt's `RunStart` and `RunExit`, the exit with the supervisor's own decision
when it decided by itself. Their times are the node's (when the attempt started and ended, when it was
decided, when the job was relaunched); the record carries the node's measured clock offset, set as soon
as one is known, and the server moves every time onto its own clock with it. A record is never stamped
with the time it happens to be delivered.

Every change rewrites the file whole and renames it into place, under an exclusive lock on a file
beside it, so the supervisor and the agent never send the same record at once. A live supervisor also
holds `alive_lock` for its whole life: the agent delivers only outboxes nobody holds, and with an ended
supervisor's outbox the log lines left in its spool (first: a run's lines before its records). Delivering twice
records once (a start is the same run by its key; the server records a replayed decision once).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from agent.api_client import ServerClient, Unanswered
from agent.shipper import Shipper
from agent.spool import Spool, holds_batches
from gpuwatch.protocol import RunExit, RunStart

log = logging.getLogger("gpuwatch.agent.outbox")

FILE = "outbox.jsonl"
ALIVE = "supervisor.lock"


class Outbox:
    """One job's outbox (``<data_dir>/supervisor/<job>/outbox.jsonl``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rejected = path.with_name(path.stem + ".rejected.jsonl")
        self._lock = threading.Lock()

    def add(self, start: RunStart, exit: RunExit) -> None:
        """Keep an attempt for the server, durably (fsync) before this returns."""
        with self._locked():
            self._write([*self._read(), {"start": _dump(start), "exit": _dump(exit)}])

    def restarted(self, key: str, at: float) -> bool:
        """The attempt ``key``, decided locally, was relaunched at ``at`` (node's clock). False when it
        was delivered already (the server then learns of the restart from the next run's start)."""
        with self._locked():
            records = self._read()
            for rec in records:
                local = rec["exit"].get("local")
                if rec["start"].get("key") == key and local is not None:
                    local["restarted_at"] = at
                    self._write(records)
                    return True
            return False

    def pending(self) -> int:
        with self._locked():
            return len(self._read())

    def deliver(self, client: ServerClient) -> tuple[int, Unanswered | None]:
        """Send what can be sent, in order; keep the rest. A record the server refuses for good (403,
        409, 422: it would refuse it again) is set aside in ``outbox.rejected.jsonl`` for a person.
        Returns how many are still pending, and why the first of them was not delivered."""
        with self._locked():
            records = self._read()
            failed: Unanswered | None = None
            while records:
                rec = records[0]
                outcome = _send(client, rec)
                if isinstance(outcome, Unanswered):
                    if not outcome.permanent:
                        failed = outcome
                        break
                    log.error(
                        "the server refuses run record %s for good (HTTP %s %s): set aside in %s",
                        rec["start"].get("key"),
                        outcome.status,
                        outcome.detail,
                        self.rejected,
                    )
                    with open(self.rejected, "a") as f:
                        f.write(json.dumps({**rec, "refused": outcome.status}) + "\n")
                records.pop(0)
            self._write(records)
            return len(records), failed

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock, open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        records = []
        for line in self.path.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:  # a line cut short by a crash mid-write (before this file was atomic)
                log.error("skipping an unreadable line of %s: %r", self.path, line[:200])
        return records

    def _write(self, records: list[dict[str, Any]]) -> None:
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in records))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


def _send(client: ServerClient, rec: dict[str, Any]) -> Unanswered | None:
    """Deliver one record: its start (the same run again, by its key), then its exit."""
    try:
        start, exit = RunStart.model_validate(rec["start"]), RunExit.model_validate(rec["exit"])
    except (KeyError, ValueError) as exc:
        return Unanswered(422, None, f"unreadable record: {exc}")
    if client.offset_s is not None:  # times on the node's clock: the server moves them onto its own
        start.clock_offset_s = start.clock_offset_s if start.clock_offset_s is not None else client.offset_s
        exit.clock_offset_s = exit.clock_offset_s if exit.clock_offset_s is not None else client.offset_s
    started = client.start_run(start)
    if isinstance(started, Unanswered):
        return started
    ended = client.report_exit(started.id, exit)
    return ended if isinstance(ended, Unanswered) else None


def _dump(model: RunStart | RunExit) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude_none=True)


def hold_alive(home: Path) -> IO[str]:
    """Hold the job's `ALIVE` lock for as long as the returned file stays open (the supervisor's life)."""
    home.mkdir(parents=True, exist_ok=True)
    f = open(home / ALIVE, "a")  # noqa: SIM115 - open for the supervisor's life
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


def deliver_ended(root: Path, client: ServerClient) -> tuple[int, Unanswered | None]:
    """Deliver what the supervisors under ``root`` (``<data_dir>/supervisor``) that have ended (their
    `ALIVE` lock free) left behind: the log lines still in their spool, then their outbox (a run's lines
    before its records, as the supervisor sends them). Returns how many records are still pending, and the
    last reason one was not."""
    pending, failed = 0, None
    if not root.is_dir():
        return 0, None
    for home in sorted(p for p in root.iterdir() if p.is_dir()):
        path, spool = home / FILE, home / "spool"
        has_records, has_lines = path.exists() and path.stat().st_size > 0, holds_batches(spool)
        if not has_records and not has_lines:
            continue
        with open(home / ALIVE, "a") as alive:
            try:
                fcntl.flock(alive, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its supervisor lives, and sends its own lines and records in order with its next runs
            try:
                if has_lines and not _ship_lines(spool, client):
                    left, why = (Outbox(path).pending() if has_records else 0), Unanswered(detail="its log lines first")
                elif has_records:
                    left, why = Outbox(path).deliver(client)
                else:
                    left, why = 0, None
            finally:
                fcntl.flock(alive, fcntl.LOCK_UN)
        if left:
            log.warning("%d run record(s) of %s still waiting for the server", left, home.name)
        pending, failed = pending + left, why or failed
    return pending, failed


def _ship_lines(directory: Path, client: ServerClient) -> bool:
    """Send an ended supervisor's spooled log batches (under its `ALIVE` lock); True when none is left."""
    spool = Spool(directory, max_bytes=1 << 62)  # read and sent only: its cap is the supervisor's business
    shipper = Shipper(client, spool, None, heartbeat_s=None)
    while spool.peek() is not None:
        if shipper.step() > 0:
            log.warning("log lines of %s still waiting for the server", directory.parent.name)
            return False
    return True
