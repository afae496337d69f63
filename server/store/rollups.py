"""Per-minute GPU and job rollups, summed in memory and written in one transaction per flush.

Writing each batch's rollups in the batch's own transaction costs six statements per batch; at 250
batches/s (10,000 GPUs at 10 Hz, a batch every 5 s per node) that is most of the server's CPU. The
buffer folds samples into (GPU, minute) and (job, rank, minute) sums as they arrive and upserts
them every ``flush_s`` seconds, with the GPUs' and nodes' last-seen times.

``flush_s = 0`` flushes inside each batch's transaction: the rollups are then exactly-once with the
batch id. With ``flush_s > 0`` a server killed without a clean shutdown loses at most the last
``flush_s`` seconds of rollups (the log lines and events of those batches are stored with the
batch, never buffered); a clean shutdown flushes. See server/README or bench/README.md.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import bindparam, case, select, update
from sqlalchemy.orm import Session

from gpuwatch.protocol import GpuInfo, GpuSample
from server.store.jobs import IDLE_UTIL, job_ids
from server.store.models import Gpu, GpuRollup, JobRollup, Node
from server.store.nodes import upsert_gpu
from server.store.upsert import insert_for

_GPU_SUMS = ("samples", "util_sum", "mem_util_sum", "power_sum_w", "gpu_seconds", "idle_seconds")
_GPU_SUMS += ("unallocated_seconds", "energy_j")
_GPU_MAXES = ("util_max", "fb_used_max_mib", "temp_max_c")
_JOB_SUMS = ("gpu_seconds", "idle_gpu_seconds", "util_gpu_seconds", "energy_j")
SEEN_EVERY_S = 5.0  # nodes.last_seen_at and gpus.last_seen_at are written at most this often


@dataclass(slots=True)
class _Pending:
    """What one flush writes."""

    gpus: dict[tuple[int, int, datetime], list[float]] = field(default_factory=dict)  # (node, index, minute)
    uuids: dict[tuple[int, int], tuple[str, float | None]] = field(default_factory=dict)  # (node, index)
    jobs: dict[tuple[str, int, datetime], list[float]] = field(default_factory=dict)  # (job, rank, minute)
    gpu_seen: dict[tuple[int, int], float] = field(default_factory=dict)
    node_seen: dict[int, float] = field(default_factory=dict)

    def merge(self, other: _Pending) -> None:
        for key, acc in other.gpus.items():
            _fold_gpu(self.gpus, key, acc)
        for key, acc in other.jobs.items():
            _fold_job(self.jobs, key, *acc)
        self.uuids.update(other.uuids)
        for k, ts in other.gpu_seen.items():
            self.gpu_seen[k] = max(ts, self.gpu_seen.get(k, 0.0))
        for k, ts in other.node_seen.items():
            self.node_seen[k] = max(ts, self.node_seen.get(k, 0.0))


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
    """Rollups and last-seen times waiting for their flush; safe to use from many request threads."""

    def __init__(self, flush_s: float, clock: Any = time.monotonic) -> None:
        self.flush_s = flush_s
        self._clock = clock
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._pending = _Pending()
        self._last_flush = clock()
        self._seen_written: dict[tuple[str, int], float] = {}  # ("node"|"gpu", id) → ts last written
        self._gpu_ids: dict[tuple[int, int], int] = {}  # (node id, index) → gpus.id, learnt by flushes

    def add(self, node_id: int, samples: Iterable[GpuSample], now: float | None = None) -> None:
        """Fold ``samples`` of ``node_id`` into the pending sums (and note the node as seen at ``now``)."""
        part = self._fold(node_id, samples, now)
        with self._lock:
            self._pending.merge(part)

    def write(self, session: Session, node_id: int, samples: Iterable[GpuSample]) -> int:
        """Write the rollups of ``samples`` now, in ``session``'s transaction, bypassing the buffer."""
        try:
            return self._write(session, self._fold(node_id, samples, None))
        except BaseException:
            self._gpu_ids.clear()  # GPU rows inserted by this transaction are rolled back with it
            raise

    @staticmethod
    def _fold(node_id: int, samples: Iterable[GpuSample], now: float | None) -> _Pending:
        """The samples' sums by (GPU, minute) and (job, rank, minute). Samples are grouped first and each
        group summed with builtins: about 1 µs a sample, a third of a per-sample loop's cost."""
        groups: dict[tuple[int, int], list[GpuSample]] = {}
        for s in samples:
            key = (s.gpu, int(s.ts // 60))
            group = groups.get(key)
            if group is None:
                groups[key] = [s]
            else:
                group.append(s)
        part = _Pending(node_seen={node_id: time.time() if now is None else now})
        for (gpu, whole), g in groups.items():
            minute = datetime.fromtimestamp(whole * 60, UTC)
            periods = [s.period_s or 1.0 for s in g]
            utils = [s.util_gpu for s in g]
            known = [u for u in utils if u is not None]
            powers = [s.power_w or 0.0 for s in g]
            idle = [p if u is not None and u < IDLE_UTIL else 0.0 for u, p in zip(utils, periods, strict=True)]
            energy = [w * p for w, p in zip(powers, periods, strict=True)]
            busy = [u * p for u, p in zip(utils, periods, strict=True) if u is not None]
            owners = {(s.job, s.rank) for s in g}
            free = sum(p for s, p in zip(g, periods, strict=True) if s.job is None)
            _fold_gpu(
                part.gpus,
                (node_id, gpu, minute),
                [
                    len(g),
                    sum(known),
                    sum(s.util_mem or 0.0 for s in g),
                    sum(powers),
                    sum(periods),
                    sum(idle),
                    free,
                    sum(energy),
                    max(known, default=0.0),
                    max(s.fb_used_mib or 0.0 for s in g),
                    max(s.temp_c or 0.0 for s in g),
                ],
            )
            if len(owners) == 1:
                ((job, rank),) = owners
                if job is not None:
                    _fold_job(
                        part.jobs,
                        (job, -1 if rank is None else rank, minute),
                        sum(periods),
                        sum(idle),
                        sum(busy),
                        sum(energy),
                    )
            else:  # the GPU changed hands within the minute: sample by sample
                for n, s in enumerate(g):
                    if s.job is not None:
                        u = utils[n]
                        key = (s.job, -1 if s.rank is None else s.rank, minute)
                        _fold_job(part.jobs, key, periods[n], idle[n], 0.0 if u is None else u * periods[n], energy[n])
            part.uuids[(node_id, gpu)] = (g[0].uuid, g[0].fb_total_mib)
            newest = max(s.ts for s in g)
            if newest > part.gpu_seen.get((node_id, gpu), 0.0):
                part.gpu_seen[(node_id, gpu)] = newest
        return part

    def due(self) -> bool:
        return self._clock() - self._last_flush >= self.flush_s

    def flush(self, session: Session) -> int:
        """Write what is pending inside ``session``'s transaction; returns the rollup rows written. On an
        error the pending sums are put back, so a failed flush loses nothing. Skips (returns 0) while
        another thread flushes."""
        if not self._flushing.acquire(blocking=False):
            return 0
        try:
            with self._lock:
                pending, self._pending = self._pending, _Pending()
                self._last_flush = self._clock()
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
        rows = [
            {"gpu_id": gpu_ids[(node, index)], "minute": minute, **_gpu_columns(acc)}
            for (node, index, minute), acc in p.gpus.items()
        ]
        if rows:
            session.execute(_gpu_upsert(session), rows)
        if p.jobs:
            ids = job_ids(session, {name for name, _, _ in p.jobs}, [])
            job_rows = [
                {"job_id": ids[name], "rank": rank, "minute": minute, **dict(zip(_JOB_SUMS, acc, strict=True))}
                for (name, rank, minute), acc in p.jobs.items()
            ]
            session.execute(_job_upsert(session), job_rows)
            rows.extend(job_rows)
        self._write_seen(session, Gpu, {gpu_ids[k]: ts for k, ts in p.gpu_seen.items()}, "gpu")
        self._write_seen(session, Node, p.node_seen, "node")
        return len(rows)

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
                ids[(node, index)] = upsert_gpu(session, node, info, seen).id
        return ids

    def _write_seen(self, session: Session, model: type[Gpu] | type[Node], seen: dict[int, float], kind: str) -> None:
        """Last-seen times, each row at most every `SEEN_EVERY_S` (silence detection reads the node's)."""
        due = [
            {"row_id": row_id, "seen": datetime.fromtimestamp(ts, UTC)}
            for row_id, ts in seen.items()
            if ts - self._seen_written.get((kind, row_id), 0.0) >= SEEN_EVERY_S
        ]
        if not due:
            return
        table = model.__table__
        stmt = (
            update(table)
            .where(table.c.id == bindparam("row_id"))
            .values(last_seen_at=bindparam("seen", type_=table.c.last_seen_at.type))
        )
        session.connection().execute(stmt, due)
        for row in due:
            self._seen_written[(kind, row["row_id"])] = row["seen"].timestamp()


def _gpu_columns(acc: list[float]) -> dict[str, float]:
    out = dict(zip(_GPU_SUMS, acc, strict=False))
    out.update(zip(_GPU_MAXES, acc[len(_GPU_SUMS) :], strict=True))
    out["samples"] = int(out["samples"])
    return out


def _greatest(a: Any, b: Any) -> Any:
    return case((a >= b, a), else_=b)


def _gpu_upsert(session: Session) -> Any:
    table = GpuRollup.__table__
    stmt = insert_for(session, table)
    ex, c = stmt.excluded, table.c
    sets: dict[str, Any] = {k: c[k] + ex[k] for k in _GPU_SUMS}
    sets.update({k: _greatest(c[k], ex[k]) for k in _GPU_MAXES})
    return stmt.on_conflict_do_update(index_elements=[c.gpu_id, c.minute], set_=sets)


def _job_upsert(session: Session) -> Any:
    table = JobRollup.__table__
    stmt = insert_for(session, table)
    return stmt.on_conflict_do_update(
        index_elements=["job_id", "rank", "minute"], set_={k: table.c[k] + stmt.excluded[k] for k in _JOB_SUMS}
    )
