"""A bounded on-disk queue of ready-to-send batches.

Every batch is written here before it is sent, so neither a dead server nor an agent restart loses
it; files are named by batch id, which increases, so replay is in order. Past ``max_bytes`` the
oldest batches are dropped and their item counts added to ``dropped`` (persisted, and reported to the
server with every batch) — never silently.
"""

from __future__ import annotations

import bisect
import errno
import gzip
import json
import logging
import os
import re
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from agent.batching import encode, halve
from gpuwatch import columnar
from gpuwatch.protocol import PROTOCOL_VERSION, Batch, sample_count

log = logging.getLogger("gpuwatch.agent.spool")

# batch id, then the item count of each kind; older spools have no steps count (read as 0).
# A batch that says its clock offset is marked ".t": the others are given one as they are sent.
# A protocol 3 batch (gpuwatch.columnar) ends ".c3.gz" instead of ".json.gz".
_NAME = re.compile(r"^(\d{20})\.(\d+)-(\d+)-(\d+)(?:-(\d+))?(\.t)?\.(json|c3)\.gz$")
KINDS = ("samples", "logs", "events", "steps")
# The lists of a batch, as a 413's halves split them.
_LISTS = ("samples", "series", "logs", "events", "processes", "steps", "checkpoints", "ib")


def _counts(batch: Batch) -> dict[str, int]:
    return {
        "samples": sample_count(batch),
        "logs": len(batch.logs),
        "events": len(batch.events),
        "steps": len(batch.steps),
    }


@dataclass(frozen=True, slots=True)
class SpoolItem:
    path: Path
    batch_id: int
    counts: dict[str, int]
    timed: bool = False  # the batch carries its clock offset
    columnar: bool = False  # a protocol 3 body (gpuwatch.columnar), not JSON

    def read(self) -> bytes:
        return self.path.read_bytes()

    def read_timed(self, offset_s: float | None) -> bytes:
        """The body to send: one spooled before the clock offset was known is given ``offset_s`` now."""
        body = self.read()
        if self.timed or offset_s is None:
            return body
        try:
            raw = gzip.decompress(body)
            envelope, columns = columnar.split(raw) if self.columnar else (raw, b"")
        except (OSError, EOFError, zlib.error, ValueError):
            return body  # not a batch: the server says so
        timed = _with_offset(envelope, offset_s)
        if self.columnar:
            timed = columnar.join(timed, columns)
        return gzip.compress(timed, compresslevel=5)

    def as_json(self, body: bytes) -> bytes:
        """``body`` (this item's, maybe made `read_timed`) as protocol 2's JSON: a protocol 3 batch for a
        server that reads only protocol 2 (downgraded since it was spooled)."""
        if not self.columnar:
            return body
        try:
            batch = columnar.decode(gzip.decompress(body))
        except (OSError, EOFError, zlib.error, ValueError):
            return body  # not a batch: the server says so
        return encode(batch, PROTOCOL_VERSION)[0]


def _with_offset(raw: bytes, offset_s: float) -> bytes:
    """A batch's JSON with ``clock_offset_s`` added as its first field (not JSON: as it is)."""
    start = raw.find(b"{")
    if start < 0:
        return raw
    rest = raw[start + 1 :]
    sep = b"" if rest.lstrip().startswith(b"}") else b","
    field = b'{"clock_offset_s":' + repr(float(offset_s)).encode() + sep
    return raw[:start] + field + rest


def _item(path: Path) -> SpoolItem | None:
    m = _NAME.match(path.name)
    if m is None:
        return None
    counts = [int(n or 0) for n in m.groups()[1:5]]
    counted = dict(zip(KINDS, counts, strict=True))
    return SpoolItem(path, int(m.group(1)), counted, bool(m.group(6)), m.group(7) == "c3")


def holds_batches(directory: Path) -> bool:
    """Whether a spool directory holds batches, read from their names alone (no `Spool` is opened: opening
    one clears the half-written files of whoever writes to it)."""
    return directory.is_dir() and any(_item(p) is not None for p in directory.iterdir())


class Spool:
    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "rejected").mkdir(exist_ok=True)
        for stale in directory.glob("*.tmp"):  # a write interrupted by a crash: never acknowledged
            stale.unlink()
        self._items = sorted(filter(None, map(_item, directory.iterdir())), key=lambda i: i.batch_id)
        self._bytes = sum(i.path.stat().st_size for i in self._items)
        self._dropped_path = directory / "dropped.json"
        self.dropped: dict[str, int] = json.loads(self._dropped_path.read_text()) if self._dropped_path.exists() else {}
        self._last_batch_id = 0
        #: Dropped items that a restarted agent would read again (`count_dropped`); in memory only.
        self._provisional: dict[str, int] = {}
        self.errors: dict[str, int] = {}  # spool writes that failed, by errno name
        self._failing = False

    def next_batch_id(self) -> int:
        """Microseconds since the epoch: unique across restarts without any saved state, and increasing,
        so the spool replays in order."""
        with self._lock:
            self._last_batch_id = max(self._last_batch_id + 1, time.time_ns() // 1000)
            return self._last_batch_id

    def put_batch(self, batch: Batch) -> None:
        """Durably queue ``batch`` whole (gzipped, as the server's ingest endpoint takes it); the agent
        sizes its batches first (`agent.batching`)."""
        self.put_encoded(batch, encode(batch)[0])

    def put_encoded(self, batch: Batch, body: bytes, columnar: bool = False) -> SpoolItem:
        """Durably queue ``batch``, already encoded as ``body`` (protocol 3's with ``columnar``)."""
        return self.put(batch.batch_id, body, _counts(batch), timed=batch.clock_offset_s is not None, columnar=columnar)

    def put(
        self, batch_id: int, body: bytes, counts: dict[str, int], timed: bool = False, columnar: bool = False
    ) -> SpoolItem:
        """Durably queue a gzipped batch body, dropping the oldest batches if over the bound. Raises
        `OSError` (a full disk …) with nothing queued and nothing left behind."""
        name = (
            f"{batch_id:020d}."
            + "-".join(str(counts.get(k, 0)) for k in KINDS)
            + (".t" if timed else "")
            + (".c3.gz" if columnar else ".json.gz")
        )
        tmp = self.directory / (name + ".tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(body)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.directory / name)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        if self._failing:
            log.info("the spool writes again (%s)", self.directory)
            self._failing = False
        with self._lock:
            # Sorted like a re-opened spool would be, even if ids arrive out of order (clock stepped back).
            item = SpoolItem(self.directory / name, batch_id, {k: counts.get(k, 0) for k in KINDS}, timed, columnar)
            bisect.insort(self._items, item, key=lambda i: i.batch_id)
            self._bytes += len(body)
            while self._bytes > self.max_bytes and len(self._items) > 1:
                self._drop_oldest()
        return item

    def split(self, item: SpoolItem) -> int | None:
        """Replace ``item`` (refused as too large) by its two halves, queued after what is spooled; return
        the size of its JSON, or None when it cannot be split (a single item, or not a batch at all).
        Raises `OSError` when the halves cannot be written: the item then stays as it was."""
        try:
            raw = gzip.decompress(item.read())
            batch = columnar.decode(raw) if item.columnar else Batch.model_validate_json(raw)
        except (OSError, EOFError, zlib.error, ValueError):
            return None
        lists = {k: list(getattr(batch, k)) for k in _LISTS if getattr(batch, k)}
        if sum(map(len, lists.values())) <= 1:
            return None
        cleared: dict[str, list[object]] = {k: [] for k in lists}
        written: list[SpoolItem] = []
        try:
            for part in halve(lists):
                piece = batch.model_copy(update={**cleared, **part, "batch_id": self.next_batch_id()})
                written.append(self.put_encoded(piece, encode(piece)[0]))
        except BaseException:
            for done in written:  # all or nothing: the item stays as it was
                self.remove(done)
            raise
        self.remove(item)
        log.warning("batch %d was over the server's limit (%d bytes of JSON): split in two", item.batch_id, len(raw))
        return len(raw)

    def note_error(self, exc: BaseException) -> None:
        """A batch could not be spooled (its items wait in memory): counted by reason, logged once a streak."""
        code = exc.errno if isinstance(exc, OSError) else None
        reason = errno.errorcode.get(code, "OSError") if code else type(exc).__name__
        with self._lock:
            self.errors[reason] = self.errors.get(reason, 0) + 1
        if not self._failing:
            self._failing = True
            log.error("cannot spool to %s (%s); the items wait in memory", self.directory, exc)

    def count_dropped(self, counts: dict[str, int], reason: str, provisional: bool = False) -> None:
        """Items dropped before they reached the spool (``reason``: why), counted like the spool's own.
        ``provisional``: items a restarted agent reads again (lines past the saved position): counted in
        memory only until `commit_dropped`, so that a restart does not count, as dropped, lines it then stores."""
        with self._lock:
            if provisional:
                for kind, n in counts.items():
                    if n:
                        key = f"{reason}_{kind}"
                        self._provisional[key] = self._provisional.get(key, 0) + n
            else:
                self._add_dropped(counts, reason + "_")

    def commit_dropped(self) -> None:
        """The agent saved its positions past the provisionally dropped items: they are dropped for good."""
        with self._lock:
            if self._provisional:
                for key, n in self._provisional.items():
                    self.dropped[key] = self.dropped.get(key, 0) + n
                self._provisional.clear()
                self._save_dropped()

    def peek(self) -> SpoolItem | None:
        with self._lock:
            return self._items[0] if self._items else None

    def remove(self, item: SpoolItem) -> None:
        """The server acknowledged ``item``."""
        with self._lock:
            self._forget(item)
            item.path.unlink(missing_ok=True)

    def reject(self, item: SpoolItem, why: str) -> None:
        """The server refused ``item`` for good (4xx): keep it aside for a person and count it dropped."""
        log.error("server rejected batch %d for good (%s); kept in %s", item.batch_id, why, self.directory / "rejected")
        with self._lock:
            self._forget(item)
            if item.path.exists():
                os.replace(item.path, self.directory / "rejected" / item.path.name)
            self._count_dropped(item, "rejected_")

    def stats(self) -> tuple[int, int]:
        """(files, bytes) waiting."""
        with self._lock:
            return len(self._items), self._bytes

    def dropped_snapshot(self) -> dict[str, int]:
        """Everything dropped so far, provisional counts included."""
        with self._lock:
            out = dict(self.dropped)
            for key, n in self._provisional.items():
                out[key] = out.get(key, 0) + n
            return out

    def _drop_oldest(self) -> None:
        item = self._items[0]
        log.warning("spool over %d bytes: dropping batch %d %s", self.max_bytes, item.batch_id, item.counts)
        self._forget(item)
        item.path.unlink(missing_ok=True)
        self._count_dropped(item, "")

    def _forget(self, item: SpoolItem) -> None:
        if item in self._items:
            self._items.remove(item)
            self._bytes -= item.path.stat().st_size if item.path.exists() else 0

    def _count_dropped(self, item: SpoolItem, prefix: str) -> None:
        self._add_dropped(item.counts, prefix)

    def _add_dropped(self, counts: dict[str, int], prefix: str) -> None:
        for kind, n in counts.items():
            if n:
                self.dropped[prefix + kind] = self.dropped.get(prefix + kind, 0) + n
        self._save_dropped()

    def _save_dropped(self) -> None:
        tmp = self._dropped_path.with_suffix(".tmp")
        try:  # best effort: on a full disk the counts live on in memory and in every batch
            tmp.write_text(json.dumps(self.dropped))
            os.replace(tmp, self._dropped_path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            log.warning("could not save the dropped counts (%s); they are kept in memory", exc)
