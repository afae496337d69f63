"""Per-minute GPU and job rollups, summed in memory and written in one transaction per flush.

Writing each batch's rollups in the batch's own transaction costs six statements per batch; at 250
batches/s (10,000 GPUs at 10 Hz, a batch every 5 s per node) that is most of the server's CPU. The
buffer folds samples (column by column: `GpuSeries`) into (GPU, minute) and (job, rank, minute) sums
as they arrive and upserts them every ``flush_s`` seconds, with the GPUs' and nodes' last-seen times.

``flush_s = 0`` flushes inside each batch's transaction: the rollups are then exactly-once with the
batch id. With ``flush_s > 0`` a server killed without a clean shutdown loses at most the last
``flush_s`` seconds of rollups (the log lines and events of those batches are stored with the
batch, never buffered); a clean shutdown flushes. See server/README or bench/README.md.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from itertools import islice
from operator import itemgetter, mul
from typing import Any

import numpy as np
from sqlalchemy import ARRAY, Float, Integer, bindparam, case, cast, func, select, update
from sqlalchemy.orm import Session

from gpuwatch.protocol import GpuInfo, GpuSeries, series_periods
from server.store.jobs import IDLE_UTIL, job_ids
from server.store.models import Gpu, GpuRollup, JobRollup
from server.store.nodes import upsert_gpus
from server.store.upsert import insert_for
from server.telemetry.samples import SampleBlock

_GPU_SUMS = ("samples", "util_sum", "mem_util_sum", "power_sum_w", "gpu_seconds", "idle_seconds")
_GPU_SUMS += ("unallocated_seconds", "energy_j")
_GPU_MAXES = ("util_max", "fb_used_max_mib", "temp_max_c")
_JOB_SUMS = ("gpu_seconds", "idle_gpu_seconds", "util_gpu_seconds", "energy_j")
#: The columns of a flush's rows, in the order its tuples hold them (a GPU's sums, then its maxima).
_GPU_KEYS = ("gpu_id", "minute", *_GPU_SUMS, *_GPU_MAXES)
_JOB_STEP_COLUMNS = ("steps", "step_seconds", "comm_seconds", "tokens", "samples")  # written from step reports
_JOB_UNTOUCHED = (0, 0.0, 0.0, 0.0, 0.0)  # a new row's step columns
_JOB_KEYS = ("job_id", "rank", "minute", *_JOB_SUMS, *_JOB_STEP_COLUMNS)
#: How often a GPU's last_seen_at is written, at most: only people read it, and writing 10,000 GPUs'
#: every 5 s was a tenth of a flush. (A node's, which silence detection reads, is written with its
#: batches: `server.store.nodes.LastSeen`.)
GPU_SEEN_EVERY_S = 60.0


@dataclass(slots=True)
class _Pending:
    """What one flush writes."""

    gpus: dict[tuple[int, int, datetime], list[float]] = field(default_factory=dict)  # (node, index, minute)
    uuids: dict[tuple[int, int], tuple[str, float | None]] = field(default_factory=dict)  # (node, index)
    jobs: dict[tuple[str, int, datetime], list[float]] = field(default_factory=dict)  # (job, rank, minute)
    gpu_seen: dict[tuple[int, int], float] = field(default_factory=dict)

    def take(self, n: int) -> _Pending:
        """Up to ``n`` GPU rows and ``n`` job rows, removed from here. The GPUs' identities and last-seen
        times are copied, not moved: later slices may need them."""
        out = _Pending()
        for key in list(islice(self.gpus, n)):
            out.gpus[key] = self.gpus.pop(key)
            gpu = key[:2]
            out.uuids[gpu] = self.uuids[gpu]
            out.gpu_seen[gpu] = self.gpu_seen[gpu]
        for key in list(islice(self.jobs, n)):
            out.jobs[key] = self.jobs.pop(key)
        return out

    def empty(self) -> bool:
        return not (self.gpus or self.jobs)

    def merge(self, other: _Pending) -> None:
        for key, acc in other.gpus.items():
            _fold_gpu(self.gpus, key, acc)
        for key, acc in other.jobs.items():
            _fold_job(self.jobs, key, *acc)
        self.uuids.update(other.uuids)
        for k, ts in other.gpu_seen.items():
            self.gpu_seen[k] = max(ts, self.gpu_seen.get(k, 0.0))


def _fold_job(into: dict[Any, list[float]], key: Any, *sums: float) -> None:
    mine = into.get(key)
    if mine is None:
        into[key] = list(sums)
    else:
        for i, v in enumerate(sums):
            mine[i] += v


def _fold_gpu(into: dict[Any, list[float]], key: Any, acc: list[float]) -> None:
    mine = into.get(key)
    if mine is None:
        into[key] = list(acc)
        return
    n = len(_GPU_SUMS)
    for i in range(n):
        mine[i] += acc[i]
    for i in range(n, n + len(_GPU_MAXES)):
        mine[i] = max(mine[i], acc[i])


class RollupBuffer:
    """Rollups and GPUs' last-seen times waiting for their flush; safe to use from many request threads."""

    def __init__(self, flush_s: float, clock: Any = time.monotonic) -> None:
        self.flush_s = flush_s
        self._clock = clock
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._pending = _Pending()
        self._draining: _Pending | None = None  # what a flush in slices has still to write
        self._last_flush = clock()
        self._seen_written: dict[int, float] = {}  # gpus.id → the last-seen time last written
        self._gpu_ids: dict[tuple[int, int], int] = {}  # (node id, index) → gpus.id, learnt by flushes

    def add(self, node_id: int, series: SampleBlock | Iterable[GpuSeries]) -> None:
        """Fold ``series`` (in time order) of ``node_id`` into the pending sums."""
        with self._lock:  # straight into them: a part folded apart and merged cost as much again
            _fold(self._pending, node_id, series)

    def write(self, session: Session, node_id: int, series: SampleBlock | Iterable[GpuSeries]) -> int:
        """Write the rollups of ``series`` now, in ``session``'s transaction, bypassing the buffer."""
        part = _Pending()
        _fold(part, node_id, series)
        try:
            return self._write(session, part)
        except BaseException:
            self._gpu_ids.clear()  # GPU rows inserted by this transaction are rolled back with it
            raise

    def due(self) -> bool:
        """A flush is due (or one written slice by slice is not finished)."""
        return self._draining is not None or self._clock() - self._last_flush >= self.flush_s

    def flush(self, session: Session, max_rows: int | None = None) -> int:
        """Write what is pending inside ``session``'s transaction; returns the rollup rows written. On an
        error the sums are put back, so a failed flush loses nothing. Skips (returns 0) while another
        thread flushes.

        With ``max_rows``, at most that many GPU rows (and as many job rows) of what was pending when
        the flush began are written, and `due` stays true until the rest is: the writer thread spreads
        a flush of 10,000 GPUs over several groups of batches instead of holding them all up (p99
        at 64,000 samples/s went from 0.70 to 0.38 s)."""
        if not self._flushing.acquire(blocking=False):
            return 0
        try:
            with self._lock:
                if self._draining is None:
                    self._draining, self._pending = self._pending, _Pending()
                    self._last_flush = self._clock()
                if max_rows is None:
                    pending, self._draining = self._draining, None
                    pending.merge(self._pending)
                    self._pending = _Pending()
                else:
                    pending = self._draining.take(max_rows)
                    if self._draining.empty():
                        self._draining = None
            try:
                return self._write(session, pending)
            except BaseException:
                with self._lock:
                    pending.merge(self._pending)
                    self._pending = pending
                self._gpu_ids.clear()  # a GPU row may have gone (its node deleted): ask again next time
                raise
        finally:
            self._flushing.release()

    def _write(self, session: Session, p: _Pending) -> int:
        gpu_ids = self._ids(session, p)
        written = 0
        if p.gpus:
            stmt = _driver_upsert(session, GpuRollup, _GPU_KEYS)
            minutes = {minute: stmt.minute(minute) for _, _, minute in p.gpus}
            rows = [
                (gpu_ids[(node, index)], minutes[minute], int(acc[0]), *acc[1:])
                for (node, index, minute), acc in p.gpus.items()
            ]
            written += stmt.execute(session, rows)
        if p.jobs:
            ids = job_ids(session, {name for name, _, _ in p.jobs}, [])
            stmt = _driver_upsert(session, JobRollup, _JOB_KEYS)
            minutes = {minute: stmt.minute(minute) for _, _, minute in p.jobs}
            rows = [
                (ids[name], rank, minutes[minute], *acc, *_JOB_UNTOUCHED)
                for (name, rank, minute), acc in p.jobs.items()
            ]
            written += stmt.execute(session, rows)
        self._write_seen(session, {gpu_ids[k]: ts for k, ts in p.gpu_seen.items()})
        return written

    def _ids(self, session: Session, p: _Pending) -> dict[tuple[int, int], int]:
        """The GPUs' row ids; only GPUs not seen by an earlier flush are looked up (a flush of 10,000 GPUs
        spent half its time selecting them all again)."""
        ids = self._gpu_ids
        nodes = {node for node, index in p.uuids if (node, index) not in ids}
        if nodes:
            found = session.execute(select(Gpu.node_id, Gpu.index, Gpu.id).where(Gpu.node_id.in_(nodes))).tuples()
            ids.update({(node, index): gpu_id for node, index, gpu_id in found})
        for (node, index), (uuid, total) in p.uuids.items():
            if (node, index) not in ids:  # sampled before (or without) registration: learn it from the sample
                seen = datetime.fromtimestamp(p.gpu_seen[(node, index)], UTC)
                info = GpuInfo(index=index, uuid=uuid, name="unknown", memory_total_mib=total)
                ids[(node, index)] = upsert_gpus(session, node, [info], seen, strict=False)[0].id
        return ids

    def _write_seen(self, session: Session, seen: dict[int, float]) -> None:
        """GPUs' last-seen times, each row at most every `GPU_SEEN_EVERY_S`."""
        due = [
            {"row_id": row_id, "seen": datetime.fromtimestamp(ts, UTC)}
            for row_id, ts in seen.items()
            if ts - self._seen_written.get(row_id, 0.0) >= GPU_SEEN_EVERY_S
        ]
        if not due:
            return
        table = Gpu.__table__
        stmt = (
            update(table)
            .where(table.c.id == bindparam("row_id"))
            .values(last_seen_at=bindparam("seen", type_=table.c.last_seen_at.type))
        )
        session.connection().execute(stmt, due)
        for row in due:
            self._seen_written[row["row_id"]] = row["seen"].timestamp()


def _fold(into: _Pending, node_id: int, series: SampleBlock | Iterable[GpuSeries]) -> None:
    """Fold the series' sums by (GPU, minute) and (job, rank, minute) into ``into``. A series within one
    minute (at the agent's default batches, nearly all) is summed column by column as it is, with no
    slice; a series crossing minutes minute by minute. A block goes to `_fold_block`."""
    if isinstance(series, SampleBlock):
        _fold_block(into, node_id, series)
        return
    for s in series:
        ts, n = s.ts, len(s.ts)
        periods = series_periods(s)
        whole, last = int(ts[0] // 60), int(ts[-1] // 60)
        if whole == last:
            _fold_minute(into, node_id, s, periods, _minute(whole), 0, n)
        else:
            start = 0
            while start < n:  # minute by minute (the series is in time order)
                end = n if whole == last else bisect_left(ts, (whole + 1) * 60, start + 1)
                _fold_minute(into, node_id, s, periods, _minute(whole), start, end)
                start = end
                if start < n:
                    whole = int(ts[start] // 60)
        total_mib = s.fb_total_mib[0] if s.fb_total_mib else None
        into.uuids[(node_id, s.gpu)] = (s.uuid, total_mib)
        if ts[-1] > into.gpu_seen.get((node_id, s.gpu), 0.0):
            into.gpu_seen[(node_id, s.gpu)] = ts[-1]


def _fold_minute(
    into: _Pending, node_id: int, s: GpuSeries, periods: list[float], minute: datetime, start: int, end: int
) -> None:
    """Samples ``start:end`` of ``s``, all in ``minute``, into its GPU row and (with a job) its job row.
    A column with no gap is summed as it is; one with gaps as the samples that have the value (a power
    not reported counts as 0 W). The sums' types are kept: a sum of nothing is the integer 0."""
    whole = end - start == len(s.ts)
    u, p, w = s.util_gpu, periods, s.power_w
    if not whole:
        p = p[start:end]
        u = None if u is None else u[start:end]
        w = None if w is None else w[start:end]
    seconds = sum(p)
    if u is None:
        util_sum, util_max, idle, pairs = 0, 0.0, 0, None
    elif None in u:
        known = [x for x in u if x is not None]
        pairs = [(x, q) for x, q in zip(u, p, strict=True) if x is not None]
        util_sum, util_max = sum(known), max(known, default=0.0)
        idle = sum([q for x, q in pairs if x < IDLE_UTIL])
    else:
        util_sum, util_max, pairs = sum(u), max(u), None
        idle = 0 if min(u) >= IDLE_UTIL else sum([q for x, q in zip(u, p, strict=True) if x < IDLE_UTIL])
    if w is None:
        power_sum, energy = 0.0, 0.0  # as a column of zeros sums
    else:
        if None in w:
            w = [x or 0.0 for x in w]
        power_sum, energy = sum(w), sum(map(mul, w, p))
    job = s.job
    key = (node_id, s.gpu, minute)
    acc = into.gpus.get(key)
    if acc is None:
        into.gpus[key] = [
            end - start,
            util_sum,
            _total(s.util_mem, start, end, whole),
            power_sum,
            seconds,
            idle,
            0.0 if job is not None else seconds,
            energy,
            util_max,
            _most(s.fb_used_mib, start, end, whole),
            _most(s.temp_c, start, end, whole),
        ]
    else:  # _fold_gpu, unrolled
        acc[0] += end - start
        acc[1] += util_sum
        acc[2] += _total(s.util_mem, start, end, whole)
        acc[3] += power_sum
        acc[4] += seconds
        acc[5] += idle
        acc[6] += 0.0 if job is not None else seconds
        acc[7] += energy
        acc[8] = max(acc[8], util_max)
        acc[9] = max(acc[9], _most(s.fb_used_mib, start, end, whole))
        acc[10] = max(acc[10], _most(s.temp_c, start, end, whole))
    if job is not None:
        if u is None:
            busy = 0
        elif pairs is None:
            busy = sum(map(mul, u, p))
        else:
            busy = sum([x * q for x, q in pairs])
        _add_job(into, job, s.rank, minute, seconds, idle, busy, energy)


def _add_job(
    into: _Pending,
    job: str,
    rank: int | None,
    minute: datetime,
    seconds: float,
    idle: float,
    busy: float,
    energy: float,
) -> None:
    """Add a run of a GPU's samples to its job's rank's minute (-1: a job without ranks)."""
    key = (job, -1 if rank is None else rank, minute)
    acc = into.jobs.get(key)
    if acc is None:
        into.jobs[key] = [seconds, idle, busy, energy]
    else:
        acc[0] += seconds
        acc[1] += idle
        acc[2] += busy
        acc[3] += energy


def _fold_block(into: _Pending, node_id: int, block: SampleBlock) -> None:
    """`_fold` of a batch's block (protocol 3): its columns are
    summed over each series' run of samples within a minute (at the agent's default batches, one run per
    series) by one `numpy.add.reduceat` for all the sums and one `numpy.fmax.reduceat` for the maxima; what
    is left per run is adding its row into the pending sums. A column with gaps sums the samples that have
    the value (a power not reported counts as 0 W); a maximum of nothing is 0."""
    if not len(block):
        return
    ts, starts = block.ts, block.starts
    minutes = np.floor_divide(ts, 60.0).astype(np.int64)
    new = np.empty(block.size, dtype=bool)
    new[0] = True
    np.not_equal(minutes[1:], minutes[:-1], out=new[1:])
    new[starts[:-1]] = True
    runs = np.flatnonzero(new)  # each run: one series' samples within one minute
    which = np.searchsorted(starts, runs, side="right") - 1  # the series of each run
    p = block.periods()
    u, w = block.floats.get("util_gpu"), block.floats.get("power_w")
    nothing = _zeros(block.size)
    u0 = nothing if u is None else np.nan_to_num(u, nan=0.0)
    w0 = nothing if w is None else np.nan_to_num(w, nan=0.0)
    idle = nothing if u is None else np.where(u < IDLE_UTIL, p, 0.0)
    mem = block.floats.get("util_mem")
    sums = np.add.reduceat(
        np.stack([p, u0, nothing if mem is None else np.nan_to_num(mem, nan=0.0), w0, idle, w0 * p, u0 * p]),
        runs,
        axis=1,
    )
    maxima = np.fmax.reduceat(
        np.stack([_or_nan(block, n) for n in ("util_gpu", "fb_used_mib", "temp_c")]), runs, axis=1
    )
    sums_t, maxima_t = sums.T.tolist(), np.nan_to_num(maxima, nan=0.0).T.tolist()
    counts = np.diff(np.append(runs, block.size)).tolist()
    jobs, ranks, gpus = block.job, block.rank, block.gpu
    for n, m, row, most, count in zip(which.tolist(), minutes[runs].tolist(), sums_t, maxima_t, counts, strict=True):
        seconds, util_sum, mem_sum, power_sum, idle_s, energy, busy = row
        job, minute = jobs[n], _minute(m)
        key = (node_id, gpus[n], minute)
        acc = into.gpus.get(key)
        if acc is None:
            into.gpus[key] = [
                count,
                util_sum,
                mem_sum,
                power_sum,
                seconds,
                idle_s,
                0.0 if job is not None else seconds,
                energy,
                *most,
            ]
        else:  # _fold_gpu, unrolled
            acc[0] += count
            acc[1] += util_sum
            acc[2] += mem_sum
            acc[3] += power_sum
            acc[4] += seconds
            acc[5] += idle_s
            acc[6] += 0.0 if job is not None else seconds
            acc[7] += energy
            acc[8] = max(acc[8], most[0])
            acc[9] = max(acc[9], most[1])
            acc[10] = max(acc[10], most[2])
        if job is not None:
            _add_job(into, job, ranks[n], minute, seconds, idle_s, busy, energy)
    first_total = block.floats.get("fb_total_mib")
    totals = [None] * len(block) if first_total is None else first_total[starts[:-1]].tolist()
    for gpu, uuid, total, last in zip(gpus, block.uuid, totals, block.last_ts(), strict=True):
        into.uuids[(node_id, gpu)] = (uuid, None if total is None or total != total else total)
        if last > into.gpu_seen.get((node_id, gpu), 0.0):
            into.gpu_seen[(node_id, gpu)] = last


def _zeros(n: int) -> np.ndarray:
    return np.zeros(n)


def _or_nan(block: SampleBlock, name: str) -> np.ndarray:
    column = block.floats.get(name)
    return np.full(block.size, np.nan) if column is None else column


@lru_cache(maxsize=4096)
def _minute(whole: int) -> datetime:
    """The minute ``whole`` (minutes since the epoch) as the rollup rows' key: one datetime per minute."""
    return datetime.fromtimestamp(whole * 60, UTC)


def _total(column: list[Any] | None, start: int, end: int, whole: bool = False) -> float:
    """The sum of ``column[start:end]``'s values (all of it when ``whole``), 0.0 without the column."""
    if not column:
        return 0.0
    values = column if whole else column[start:end]
    return sum(values) if None not in values else sum(v for v in values if v is not None)


def _most(column: list[Any] | None, start: int, end: int, whole: bool = False) -> float:
    """The greatest of ``column[start:end]``'s values (all of it when ``whole``), 0.0 without any."""
    if not column:
        return 0.0
    values = column if whole else column[start:end]
    return max(values) if None not in values else max((v for v in values if v is not None), default=0.0)


def _greatest(a: Any, b: Any) -> Any:
    return case((a >= b, a), else_=b)


def _gpu_upsert(session: Session, source: Any = None) -> Any:
    """The GPU rollup upsert: its VALUES bound per row, or (with ``source``) the rows a SELECT gives."""
    table = GpuRollup.__table__
    stmt = _insert(session, table, _GPU_KEYS, source)
    ex, c = stmt.excluded, table.c
    sets: dict[str, Any] = {k: c[k] + ex[k] for k in _GPU_SUMS}
    sets.update({k: _greatest(c[k], ex[k]) for k in _GPU_MAXES})
    return stmt.on_conflict_do_update(index_elements=[c.gpu_id, c.minute], set_=sets)


def _job_upsert(session: Session, source: Any = None) -> Any:
    """The job rollup upsert, as `_gpu_upsert`; the step columns of a row already there are left alone."""
    table = JobRollup.__table__
    stmt = _insert(session, table, _JOB_KEYS, source)
    return stmt.on_conflict_do_update(
        index_elements=["job_id", "rank", "minute"], set_={k: table.c[k] + stmt.excluded[k] for k in _JOB_SUMS}
    )


def _insert(session: Session, table: Any, keys: tuple[str, ...], source: Any) -> Any:
    stmt = insert_for(session, table)
    return stmt if source is None else stmt.from_select(list(keys), source)


def _unnest(table: Any, keys: tuple[str, ...]) -> Any:
    """``SELECT * FROM unnest(:k1::type[], :k2::type[], …)``: rows from one array parameter per column."""
    arrays = [cast(bindparam(k), ARRAY(table.c[k].type)) for k in keys]
    rows = func.unnest(*arrays).table_valued(*keys).render_derived()
    return select(*(rows.c[k] for k in keys))


@dataclass(frozen=True, slots=True)
class _DriverUpsert:
    """A rollup upsert compiled once per database and run by the driver itself. A flush of 10,000 GPUs
    writes 20,000 rows every 5 s, and through SQLAlchemy's own ``execute`` each row cost about 10 µs of
    parameter processing (a dict, bind processors, defaults) against 2 µs inside SQLite.

    SQLite takes the rows as tuples through ``executemany``. PostgreSQL takes one statement with an
    array per column (``INSERT … SELECT FROM unnest(…)``): psycopg's ``executemany`` sends a statement
    per row, and the server parses, plans and executes each (bench/rollup_flush.py, bench/README.md)."""

    sql: str
    keys: tuple[str, ...]
    positions: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None  # SQLite: reorders a row for "?"
    minute: Callable[[datetime], Any]  # the minute column's value as the driver takes it
    kinds: tuple[Callable[[Any], Any], ...] = ()  # PostgreSQL: each column's Python type (int, float, …)

    def execute(self, session: Session, rows: list[tuple[Any, ...]]) -> int:
        """Upsert ``rows`` (tuples in ``keys`` order, the minute already converted); returns how many.
        The rows must differ in their keys: one statement cannot update a row twice."""
        if not rows:
            return 0
        connection = session.connection()
        if self.positions is not None:
            connection.exec_driver_sql(self.sql, [self.positions(row) for row in rows])
        else:  # psycopg types an array by its items, and a sum of nothing is the int 0 in a float column
            columns = zip(*rows, strict=True)
            params = {
                k: list(map(kind, column)) for k, kind, column in zip(self.keys, self.kinds, columns, strict=True)
            }
            connection.exec_driver_sql(self.sql, params)
        return len(rows)


_compiled: dict[tuple[str, str], _DriverUpsert] = {}


def _driver_upsert(session: Session, model: type[GpuRollup] | type[JobRollup], keys: tuple[str, ...]) -> _DriverUpsert:
    dialect = session.get_bind().dialect
    found = _compiled.get((dialect.name, model.__tablename__))
    if found is not None:
        return found
    build = _gpu_upsert if model is GpuRollup else _job_upsert
    table = model.__table__
    if dialect.name == "postgresql":
        compiled = build(session, _unnest(table, keys)).compile(dialect=dialect)
        sql = compiled.string
        for k in keys:  # psycopg's binary format: PostgreSQL parsing text arrays of floats took 60 % of a flush
            assert f"%({k})s" in sql, (k, sql)
            sql = sql.replace(f"%({k})s", f"%({k})b")
        positions, kinds = None, tuple(_number_kind(table.c[k].type) for k in keys)
    else:
        compiled = build(session).compile(dialect=dialect, column_keys=list(keys))
        assert compiled.positional and compiled.positiontup is not None, dialect.name
        assert set(compiled.positiontup) == set(keys), compiled.positiontup
        positions = itemgetter(*(keys.index(name) for name in compiled.positiontup))
        sql, kinds = compiled.string, ()
    # The dialect's own processor (SQLite: SQLAlchemy's text format), as rows written by the ORM hold it:
    # the type's generic one would leave a datetime for the driver to format its own way.
    column = table.c.minute.type
    convert = column.dialect_impl(dialect).bind_processor(dialect) or _as_is
    found = _DriverUpsert(sql, keys, positions, convert, kinds)
    _compiled[(dialect.name, model.__tablename__)] = found
    return found


def _number_kind(column_type: Any) -> Callable[[Any], Any]:
    """``int`` or ``float`` for a numeric column (what its array's items must all be), else as is."""
    if isinstance(column_type, Integer):
        return int
    if isinstance(column_type, Float):
        return float
    return _as_is


def _as_is(value: Any) -> Any:
    return value
