"""What the agent (and the supervisor) has read but not yet spooled, and how it becomes batches the
server takes.

Batches are sized by bytes, not by item count: the server refuses a body over its ``max_body_bytes``
(after gunzip too) with 413, and 5,000 lines of 2 KB are already past its default 8 MiB. A batch is
cut at an estimate of its JSON size, then measured exactly as it is encoded and halved until every
piece fits; a single item that cannot fit is spooled alone and the server's verdict is final.

Items leave memory only once the batch that carries them is on disk. A spool that cannot write (a
full disk, a read-only mount, any other error) leaves them where they were, up to ``max_bytes`` of
them; past that the oldest are dropped and counted under the reason ``spool_error`` — never silently.
"""

from __future__ import annotations

import gzip
import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpuwatch import columnar
from gpuwatch.columnar import VERSION as COLUMNAR_VERSION
from gpuwatch.protocol import MAX_BATCH_ITEMS, PROTOCOL_VERSION, Batch, GpuSeries, sample_count, to_series

if TYPE_CHECKING:
    from agent.spool import Spool

log = logging.getLogger("gpuwatch.agent.batching")

#: The lists of a batch, in the order pending items are kept. ``samples`` become ``series`` on the wire.
KINDS = ("samples", "logs", "events", "processes", "steps", "checkpoints", "ib")
#: Most items of one kind per batch: well within the server's per-list bound.
MAX_ITEMS = MAX_BATCH_ITEMS // 4
#: Batches are cut at this share of the byte budget by the estimate, so that halving is rare.
_ESTIMATE_SHARE = 0.75
GZIP_LEVEL = 5


def item_bytes(kind: str, item: Any) -> int:
    """A generous estimate of one item's JSON size (exact sizes are measured when the batch is encoded)."""
    if kind == "logs":
        return len(item.text) + len(item.stream) + 64
    if kind == "events":
        return len(item.message) + len(item.stream) + len(str(item.data)) + 128
    if kind == "checkpoints":
        return len(item.path) + len(item.error or "") + 256
    if kind == "steps":
        return 256 + 96 * len(item.collectives)
    if kind == "ib":
        return 192 + 48 * len(item.errors)
    return 512  # samples, processes


#: Fewest samples a batch holds to go as protocol 3 (to a server that reads it): below that protocol 2's JSON
#: costs the server less CPU a batch (its numpy folds pay a fixed cost per call; bench/README.md, protocol 3).
COLUMNAR_MIN_SAMPLES = 128


def columnar_for(batch: Batch, protocol: int) -> bool:
    """Whether ``batch`` goes as protocol 3 to a server that reads batches up to ``protocol``."""
    return protocol >= COLUMNAR_VERSION and sample_count(batch) >= COLUMNAR_MIN_SAMPLES


def encode(batch: Batch, protocol: int = PROTOCOL_VERSION) -> tuple[bytes, int]:
    """The batch as the server's ingest endpoint takes it: (gzipped body, the body's size before gzip): protocol
    2's JSON, or protocol 3's columns (`gpuwatch.columnar`) where `columnar_for` says so."""
    raw = columnar.encode(batch) if columnar_for(batch, protocol) else batch.model_dump_json(exclude_none=True).encode()
    return gzip.compress(raw, compresslevel=GZIP_LEVEL), len(raw)


class Pending:
    """Items waiting for the spool, per kind and in order, bounded by ``max_bytes`` (estimated)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: dict[str, deque[tuple[Any, int]]] = {k: deque() for k in KINDS}
        self._kind_bytes = dict.fromkeys(KINDS, 0)
        self.bytes = 0

    def __bool__(self) -> bool:
        return any(self._items.values())

    def __len__(self) -> int:
        return sum(len(q) for q in self._items.values())

    def add(self, kind: str, items: list[Any]) -> None:
        """Queue ``items`` (the bound is held by `shed`, once the spool has refused them)."""
        q = self._items[kind]
        for item in items:
            size = item_bytes(kind, item)
            q.append((item, size))
            self._kind_bytes[kind] += size
            self.bytes += size

    def take(self, budget: int) -> dict[str, list[Any]]:
        """The oldest items, up to ``budget`` estimated bytes and MAX_ITEMS per kind (at least one item);
        they stay queued until `consume`."""
        out: dict[str, list[Any]] = {}
        used = 0
        for kind in KINDS:
            got = []
            for item, size in self._items[kind]:
                if len(got) >= MAX_ITEMS or (used + size > budget and (got or out)):
                    break
                got.append(item)
                used += size
            if got:
                out[kind] = got
            if used >= budget:
                break
        return out

    def consume(self, counts: dict[str, int]) -> None:
        """Forget the oldest ``counts[kind]`` items of each kind: they are spooled."""
        for kind, n in counts.items():
            q = self._items[kind]
            for _ in range(n):
                size = q.popleft()[1]
                self._kind_bytes[kind] -= size
                self.bytes -= size

    def shed(self) -> dict[str, list[Any]]:
        """Drop the oldest items until within the bound; return them, by kind."""
        dropped: dict[str, list[Any]] = {}
        while self.bytes > self.max_bytes:
            # The kind holding the most bytes gives up its oldest item (logs, as a rule).
            kind = max(KINDS, key=self._kind_bytes.__getitem__)
            item, size = self._items[kind].popleft()
            self._kind_bytes[kind] -= size
            self.bytes -= size
            dropped.setdefault(kind, []).append(item)
        return dropped


def make_batch(batch_id: int, items: dict[str, list[Any]], **fields: Any) -> Batch:
    """A batch of ``items`` (kind → list; samples as `GpuSample`, sent as series)."""
    lists = {k: v for k, v in items.items() if k != "samples"}
    return Batch(batch_id=batch_id, series=to_series(items.get("samples", []), GpuSeries), **lists, **fields)


def fit(
    items: dict[str, list[Any]],
    max_bytes: int,
    build: Callable[[dict[str, list[Any]]], Batch],
    protocol: int = PROTOCOL_VERSION,
) -> list[tuple[dict[str, int], Batch, bytes]]:
    """``items`` as encoded batches (`encode`, for a server reading up to ``protocol``) whose body is at most
    ``max_bytes`` each: (counts per kind, batch, gzipped body), in order. A piece too large is halved, kind
    by kind, until it fits or holds one item."""
    batch = build(items)
    body, size = encode(batch, protocol)
    total = sum(len(v) for v in items.values())
    if size <= max_bytes or total <= 1:
        if size > max_bytes:
            log.warning("one item of %d bytes is over the batch limit of %d: sent alone", size, max_bytes)
        return [({k: len(v) for k, v in items.items()}, batch, body)]
    first, second = halve(items)
    return fit(first, max_bytes, build, protocol) + fit(second, max_bytes, build, protocol)


def spool_pending(
    pending: Pending,
    spool: Spool,
    max_bytes: int,
    build: Callable[[dict[str, list[Any]]], Batch],
    rereadable: Callable[[str, Any], bool] | None = None,
    protocol: int = PROTOCOL_VERSION,
) -> bool:
    """Spool what is pending in batches of at most ``max_bytes`` (before gzip), encoded for a server that
    reads batches up to ``protocol`` (`encode`); True when nothing is left.
    On a spool error the items of the batch that failed, and of those after it, stay pending, within
    the pending bound: what is past it is dropped and counted (reason ``spool_error``).

    An item for which ``rereadable(kind, item)`` is true (a followed file's line) is read again by an agent
    restarted before its position is saved past it: its drop is counted provisionally (`Spool.count_dropped`),
    made final by `Spool.commit_dropped` once that position is saved, so that a line is never both counted
    dropped and, read again, stored."""
    while pending:
        items = pending.take(int(max_bytes * _ESTIMATE_SHARE))
        for counts, batch, body in fit(items, max_bytes, build, protocol):
            try:
                spool.put_encoded(batch, body, columnar=columnar_for(batch, protocol))
            except Exception as exc:  # ENOSPC, EROFS, EIO …: the items wait in memory for the next try
                spool.note_error(exc)
                if dropped := pending.shed():
                    final: dict[str, int] = {}
                    provisional: dict[str, int] = {}
                    for kind, shed in dropped.items():
                        for item in shed:
                            into = provisional if rereadable is not None and rereadable(kind, item) else final
                            into[kind] = into.get(kind, 0) + 1
                    log.error(
                        "spool unwritable, %d bytes waiting in memory: dropped %s",
                        pending.max_bytes,
                        {k: len(v) for k, v in dropped.items()},
                    )
                    spool.count_dropped(final, "spool_error")
                    spool.count_dropped(provisional, "spool_error", provisional=True)
                return False
            pending.consume(counts)
    return True


def halve(items: dict[str, list[Any]]) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """The first and second half of ``items`` (at least one item in each; the first has the oldest)."""
    total = sum(len(v) for v in items.values())
    half = total // 2
    first: dict[str, list[Any]] = {}
    second: dict[str, list[Any]] = {}
    for kind, values in items.items():
        cut = max(0, min(len(values), half))
        half -= cut
        if cut:
            first[kind] = values[:cut]
        if values[cut:]:
            second[kind] = values[cut:]
    return first, second
