"""One thread stores every ingest batch, many per transaction (group commit).

Request handlers only read and gunzip a body, then queue it here and wait. The writer thread takes
whatever has queued up (at most `MAX_GROUP` batches), decodes each, stores them all in one
transaction, folds their samples into the in-memory state (telemetry, job tracking, rollups), and
answers each waiting request. Under load, groups grow, and the fixed cost of a transaction (and of
the GIL handed between dozens of worker threads, the old way) is paid once per group instead of
once per batch. Overloaded (1,250 nodes), the old way stored 13,600 samples/s at 76 µs of CPU
each, three times its cost at 300 nodes (bench/README.md).

Rollups are flushed by the watchdog's thread (`BatchWriter.flush_rollups`) and, on SQLite, by this
one between groups, in slices, while batches arrive (the watchdog then flushes only once they stop:
`flushes_rollups`). SQLite has one writer at a time anyway, and a flush on another thread held it
while competing for the GIL: p99 at 40,000 samples/s went from 0.4 to 1.6 s, and at 100,000 the
watchdog's whole flush of 10,000 GPUs (0.3-0.6 s) was most of the batches that took over 250 ms. On PostgreSQL batches
keep being stored while a flush runs elsewhere; flushing here made p99 at 24,000 samples/s 0.54 s
against 0.14 s.

Failure is still per batch. A batch pydantic refuses fails alone (422) before the transaction; if
the group's transaction fails, each of its batches is stored again in a transaction of its own, so
only the batch at fault (or all of them, with the database away) gets the error.

Memory is bounded: past ``max_queued_bytes`` of bodies waiting, `submit` refuses with 503 and a
Retry-After, which agents honour by keeping the batch in their spool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import ValidationError
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from gpuwatch.protocol import Batch
from server.ingest.apply import FollowUp
from server.ingest.decode import decode_batch
from server.ingest.metrics import IngestMetrics
from server.ingest.store import StoreResult, store_batches
from server.store.db import transaction
from server.store.models import Node
from server.store.nodes import LastSeen, from_agent
from server.store.rollups import RollupBuffer

log = logging.getLogger("gpuwatch.server.ingest")

MAX_GROUP = 64  # batches stored in one transaction, at most
FLUSH_SLICE_ROWS = 1_000  # rollup rows of each kind the writer flushes between two groups, at most
RETRY_AFTER_S = 1

Stored = tuple[Batch, StoreResult, FollowUp]
"""A batch as its request gets it back: decoded, stored (or found a replay), folded into memory."""


class QueueFull(Exception):
    """Too many bytes of bodies wait already: the agent keeps the batch and retries after ``retry_after_s``."""

    def __init__(self, queued: int) -> None:
        super().__init__(f"ingest queue full ({queued:,} bytes waiting to be stored): retry later")
        self.retry_after_s = RETRY_AFTER_S


@dataclass(slots=True)
class _Item:
    node: Node
    raw: bytes
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Stored]
    columnar: bool = False  # a protocol 3 body (gpuwatch.columnar), not JSON
    batch: Batch | None = None
    result: StoreResult | None = None
    follow: FollowUp | None = None
    error: BaseException | None = None


def _without_tracebacks(exc: BaseException) -> None:
    """Drop the tracebacks of ``exc`` and of its causes: their frames in this thread (and, through each
    frame's caller, the whole loop of the writer) held the group, its bodies and decoded batches, and the
    item that holds ``exc``: a cycle only the garbage collector freed, so a flood of refused batches grew
    the server by 140 MiB in three minutes (bench/README.md). Clearing the frames' locals is not enough:
    a finished frame keeps its caller's. What failed is logged here before (a group) or says itself what
    it is (a refusal, a batch's own database error, raised again at its request)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is not None and id(e) not in seen:
            seen.add(id(e))
            e.__traceback__ = None
            todo += [e.__cause__, e.__context__]


def _settle(items: list[_Item]) -> None:
    """Hand each outcome to its waiting request, on its event loop (it may have gone: a closed connection).
    One call a loop for the whole group: each call wakes the loop with a write to its self-pipe."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Item]] = {}
    for item in items:
        by_loop.setdefault(item.loop, []).append(item)
    for loop, mine in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_settle_here, mine)


def _settle_here(items: list[_Item]) -> None:
    for item in items:
        if item.future.done():
            continue
        if item.error is not None:
            item.future.set_exception(item.error)
        else:
            assert item.batch is not None and item.result is not None
            item.future.set_result((item.batch, item.result, item.follow or FollowUp()))


class BatchWriter:
    """The queue of ingest batches and the thread that stores them (see the module docstring)."""

    def __init__(
        self,
        *,
        sessions: sessionmaker[Session],
        rollups: RollupBuffer,
        fold: Callable[[Node, Batch, StoreResult], FollowUp],
        metrics: IngestMetrics,
        seen: LastSeen,
        max_queued_bytes: int,
        flush_between_groups: bool,
    ) -> None:
        """``fold`` takes each committed batch into memory (`server.ingest.apply.Folder.apply_batch`);
        ``seen`` writes the nodes' last-seen times with their batches; ``flush_between_groups``: this
        thread flushes the rollups while batches arrive (on SQLite: see the module docstring)."""
        self._sessions, self._rollups, self._fold, self._metrics, self._seen = sessions, rollups, fold, metrics, seen
        self._max = max_queued_bytes
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._queued = 0  # bytes of bodies waiting
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._flush_here = flush_between_groups
        self._last_group = -math.inf  # time.monotonic() when the last group was stored

    def check_room(self) -> None:
        """503 now if the queue is full: called before the body is read and gunzipped for nothing."""
        with self._lock:
            self._refuse_if_full(0)

    def _refuse_if_full(self, size: int) -> None:
        if self._queued > 0 and self._queued + max(size, 1) > self._max:  # one batch always fits
            raise QueueFull(self._queued)

    async def submit(self, node: Node, raw: bytes, columnar: bool = False) -> Stored:
        """Queue ``raw`` (a gunzipped batch body, protocol 3's with ``columnar``) for ``node``; wait until it
        is stored or refused (`QueueFull`; pydantic's ValidationError for a batch that does not decode; the
        database's error)."""
        with self._lock:
            self._refuse_if_full(len(raw))
            self._queued += len(raw)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="gpuwatch-ingest", daemon=True)
                self._thread.start()
        loop = asyncio.get_running_loop()
        item = _Item(node, raw, loop, loop.create_future(), columnar)
        self._queue.put(item)
        try:
            return await item.future
        finally:  # a refusal raised here keeps this frame in its traceback: it must not keep the item too
            del item

    def flushes_rollups(self) -> bool:
        """This thread flushes the rollups now (SQLite, a group stored within two flush intervals)."""
        window = max(1.0, 2 * self._rollups.flush_s)
        return self._flush_here and time.monotonic() - self._last_group < window

    def flush_rollups(self, due_only: bool = False) -> None:
        """Write the buffered rollups now (or only when their flush is due and this thread, which flushes
        them in slices between its groups while batches arrive, is not doing it)."""
        if not due_only or (self._rollups.due() and not self.flushes_rollups()):
            with transaction(self._sessions) as session:
                self._rollups.flush(session)

    def queued_bytes(self) -> int:
        with self._lock:
            return self._queued

    def stop(self, timeout: float = 30.0) -> None:
        """Store what is queued, then end the thread."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout)

    # -- the writer thread ------------------------------------------------------------------------

    def _run(self) -> None:
        while self._store_next():
            pass  # each group's references end with `_store_next`, not when the next group arrives

    def _store_next(self) -> bool:
        """Wait for a batch, take what else has queued, store them, answer each request; False at `stop`."""
        first = self._queue.get()
        if first is None:
            return False
        group = [first]
        stop = False
        while len(group) < MAX_GROUP:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                stop = True
                break
            group.append(item)
        started = time.perf_counter()
        try:
            self._store(group)
        except Exception as exc:  # whatever it was, every request gets an answer
            log.exception("ingest writer: storing a group of %d batches failed", len(group))
            for item in group:
                if item.error is None and item.result is None:
                    item.error = exc
        finally:
            self._last_group = time.monotonic()
            self._metrics.writer_busy.inc(time.perf_counter() - started)
            self._metrics.groups.inc()
            with self._lock:
                self._queued -= sum(len(item.raw) for item in group)
            for item in group:
                if item.error is not None:
                    _without_tracebacks(item.error)
            _settle(group)
        return not stop

    def _store(self, group: list[_Item]) -> None:
        valid = []
        for item in group:
            try:
                item.batch = decode_batch(item.raw, columnar=item.columnar)  # msgspec mirrors, samples as a block
                valid.append(item)
            except ValidationError as exc:
                item.error = exc
        try:
            self._commit_on_a_live_connection(valid)
        except Exception as exc:  # alone, the batch is at fault; in a group, each alone finds which
            if len(valid) == 1:
                valid[0].error = exc
            else:
                log.warning("ingest writer: a group of %d batches failed; storing each alone", len(valid))
                for item in valid:
                    try:
                        self._commit([item])
                    except Exception as one:  # this batch's own error, for its own request
                        item.error = one
        self._count([item.result for item in valid if item.result is not None])
        if columnar := sum(1 for item in valid if item.result is not None and item.columnar):
            self._metrics.protocols.labels("3").inc(columnar)
        if other := sum(1 for item in valid if item.result is not None and not item.columnar):
            self._metrics.protocols.labels("2").inc(other)
        for item in valid:
            if item.result is not None:
                assert item.batch is not None
                try:
                    item.follow = self._fold(item.node, item.batch, item.result)
                except Exception:  # stored and acknowledged all the same: memory catches up with the next batch
                    log.exception("ingest writer: folding a stored batch into memory failed")
        rollups = self._rollups
        if self._flush_here and rollups.flush_s > 0 and rollups.due():
            try:
                with transaction(self._sessions) as session:
                    rollups.flush(session, max_rows=FLUSH_SLICE_ROWS)
            except Exception:
                log.exception("rollup flush failed; kept for the next one")

    def _count(self, results: list[StoreResult]) -> None:
        """The group in the ingest counters: once a group, not once a request (a tenth of an empty
        batch's cost was prometheus-client's label lookups)."""
        m = self._metrics
        stored = [r.ack for r in results if not r.ack.duplicate]
        m.batches.labels("stored").inc(len(stored))
        m.batches.labels("duplicate").inc(len(results) - len(stored))
        m.items.labels("sample").inc(sum(a.samples for a in stored))
        m.items.labels("log").inc(sum(a.logs for a in stored))
        m.items.labels("event").inc(sum(a.events for a in stored))
        m.duplicates.labels("log").inc(sum(r.duplicate_logs for r in results))
        m.duplicates.labels("event").inc(sum(r.duplicate_events for r in results))
        if foreign := sum(len(r.foreign_jobs) for r in results):
            m.foreign_jobs.inc(foreign)

    def _commit_on_a_live_connection(self, items: list[_Item]) -> None:
        """`_commit`, and once more if the database had dropped the connection it used (a failover, an
        idle timeout, an administrator): the pool pings only connections that sat idle (server/store/db.py),
        so one dropped in steady use is met by a statement, and the pool has replaced it by now."""
        try:
            self._commit(items)
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
            log.warning("ingest writer: the database dropped the connection (%s); storing again on a new one", exc.orig)
            self._commit(items)

    def _commit(self, items: list[_Item]) -> None:
        """Store ``items`` in one transaction (their rollups too, when they are written per batch)."""
        if not items:
            return
        rollups = self._rollups
        pairs = [(item.node, item.batch) for item in items if item.batch is not None]
        assert len(pairs) == len(items), "only decoded batches are committed"
        with transaction(self._sessions) as session:
            results = store_batches(session, pairs)
            self._seen.write(session, (node.id for node, _ in pairs), agents=(n.id for n, b in pairs if from_agent(b)))
            if rollups.flush_s == 0:
                for (node, batch), result in zip(pairs, results, strict=True):
                    if not result.ack.duplicate:
                        rollups.write(session, node.id, batch.series)
        for item, result in zip(items, results, strict=True):
            item.result = result
