"""Per-job analysis in memory: utilization, step time, communication overhead, checkpointing.

Fed from every ingest batch (processes, steps, attributed GPU samples) and asked by /metrics, the
API and the detectors (`server.detect.stragglers` and `server.detect.hangs` read the state it keeps).
State per job is bounded (recent steps and samples within a time window), and a job unheard of for
`forget_after_s` is dropped, which also bounds metric cardinality.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import mul
from typing import Any, Literal

import numpy as np

from gpuwatch.protocol import CheckpointReport, GpuSeries, JobProcess, StepReport, series_periods
from server.telemetry.points import POINT_GAP_S, GpuPoint, PointRing, Window
from server.telemetry.samples import SampleBlock


@dataclass(slots=True)
class RankState:
    rank: int
    node: str | None = None
    pid: int | None = None
    steps: deque[StepReport] = field(default_factory=lambda: deque(maxlen=512))
    points: PointRing = field(default_factory=PointRing)  # one per GPU per POINT_GAP_S
    latest: dict[int, GpuPoint] = field(default_factory=dict)  # by GPU index: the newest sample
    bucket: dict[int, tuple[float, int]] = field(default_factory=dict)  # by GPU: (start, the open point's seq)
    last_step: int = -1
    last_progress: float | None = None
    streak: int = 0
    straggling: bool = False


@dataclass(slots=True)
class Checkpointing:
    """A job's checkpoint saves: as its client reported them (`checkpoint_saved`, the AsyncCheckpointer),
    as its supervisor reported them at a run's exit, or as the database had them at start-up."""

    last_ok_ts: float | None = None
    last_step: int | None = None
    blocking_s: float | None = None
    write_s: float | None = None
    size_bytes: int | None = None
    interval_s: float | None = None  # between the last two complete saves
    saves: int = 0
    failures: int = 0
    last_error: str | None = None


@dataclass(slots=True)
class JobState:
    name: str
    world_size: int | None = None
    hang_timeout_s: float | None = None
    ranks: dict[int, RankState] = field(default_factory=dict)
    pending: dict[int, dict[int, float]] = field(default_factory=dict)  # step -> rank -> compute seconds
    last_activity: float = 0.0
    hung: bool = False
    straggler_events: int = 0
    hang_events: int = 0
    idle_gpu_seconds: float = 0.0
    gpu_seconds: float = 0.0
    energy_j: float = 0.0
    first_seen: float = 0.0
    failures: int = 0  # run failures decided since this server started tracking the job
    checkpoint: Checkpointing = field(default_factory=Checkpointing)
    introduced_by: str | None = None  # the node whose report first named the job (its budget holds it)

    def rank(self, r: int) -> RankState:
        state = self.ranks.get(r)
        if state is None:
            state = self.ranks[r] = RankState(r)
        return state


@dataclass(frozen=True, slots=True)
class RankSummary:
    rank: int
    node: str | None
    gpus: tuple[int, ...]
    steps: int
    last_step: int
    gpu_util_mean: float | None
    gpu_util_p50: float | None
    idle_fraction: float | None
    step_s: float | None
    comm_s: float | None
    compute_s: float | None
    comm_overhead: float | None
    tokens_per_s: float | None
    samples_per_s: float | None
    nvlink_bytes_per_s: float | None
    pcie_bytes_per_s: float | None
    straggler: bool
    comm_exposed: float | None = None  # time the steps waited for collectives / step time


@dataclass(frozen=True, slots=True)
class CollectiveSummary:
    """One op's collectives over the window, per rank summed: nccl-tests' bandwidths over the time
    measured (GPU time where CUDA events timed them, else host time)."""

    count: int
    bytes: int
    seconds: float
    gpu_seconds: float | None
    algbw_bytes_per_s: float | None
    busbw_bytes_per_s: float | None


#: Whether a job's GPU samples are tied to it (`gpu_attribution`): "full" every rank with steps has GPU
#: samples of its own, "partial" some do not, "none" no GPU sample is attributed to the job at all.
GpuAttribution = Literal["none", "partial", "full"]


@dataclass(frozen=True, slots=True)
class JobSummary:
    job: str
    window_s: float
    world_size: int | None
    gpu_util_mean: float | None
    gpu_util_p50: float | None
    idle_fraction: float | None
    step_s: float | None
    comm_overhead: float | None
    tokens_per_s: float | None
    samples_per_s: float | None
    nvlink_bytes_per_s: float | None
    pcie_bytes_per_s: float | None
    gpu_hours: float
    idle_gpu_hours: float
    energy_kwh: float
    straggler_events: int
    hang_events: int
    hung: bool
    ranks: tuple[RankSummary, ...]
    checkpoint_age_s: float | None = None  # since the last complete save the client reported
    checkpoint_step: int | None = None
    checkpoint_blocking_s: float | None = None
    checkpoint_write_s: float | None = None
    checkpoint_size_bytes: int | None = None
    checkpoint_interval_s: float | None = None
    checkpoint_saves: int = 0
    checkpoint_failures: int = 0
    mtbf_s: float | None = None  # observed: tracked time / failures
    optimal_checkpoint_interval_s: float | None = None  # Young/Daly: sqrt(2 * blocking time * MTBF)
    gpus: int = 0
    gpu_hours_at_risk: float | None = None  # GPUs x time since the last complete save
    gpu_attribution: GpuAttribution = "none"
    gpu_attribution_note: str | None = None  # why it is not "full", in words
    comm_exposed: float | None = None  # time the steps waited for collectives / step time
    collectives: dict[str, CollectiveSummary] = field(default_factory=dict)  # by op


def _fold_points(r: RankState, s: GpuSeries, now: float, idle_util: float, newest: tuple[Any, ...]) -> None:
    """One point per GPU per `POINT_GAP_S` bucket, from protocol 2's lists (None: not reported): see
    `_fold_buckets`."""
    utils = s.util_gpu
    gaps = utils is not None and None in utils
    _fold_buckets(r, s.gpu, s.ts, 0, len(s.ts), utils, gaps, newest, lambda k: _at(s, k), now, idle_util)


def _fold_buckets(
    r: RankState,
    gpu: int,
    ts: Sequence[float],
    start: int,
    n: int,
    utils: Sequence[float | None] | None,
    gaps: bool,
    newest: tuple[Any, ...],
    at: Callable[[int], tuple[Any, ...]],
    now: float,
    idle_util: float,
) -> None:
    """One point per GPU per `POINT_GAP_S` bucket over the samples ``start`` to ``n`` of ``ts``: the open
    bucket's point takes the first samples (unless the ring overwrote it meanwhile), the rest open buckets
    of their own. ``utils``: the utilisations (None or NaN: not reported, where ``gaps`` says there are
    any); ``newest``: the last sample's period, power, NVLink and PCIe, already read (the last bucket's point
    has them); ``at(k)``: the same of sample ``k``."""
    points = r.points
    while start < n:
        bucket = r.bucket.get(gpu)
        if (
            bucket is not None
            and bucket[0] <= ts[start] < bucket[0] + POINT_GAP_S
            and points.count - bucket[1] <= points.size  # not overwritten (`PointRing.holds`)
        ):
            seq: int | None = bucket[1]
            end = bisect_left(ts, bucket[0] + POINT_GAP_S, start + 1, n)
        else:
            seq, end = None, bisect_left(ts, ts[start] + POINT_GAP_S, start + 1, n)
        count, mean, idle = 0, None, 0
        if utils is not None:
            chunk = utils[start:end]
            if gaps:
                chunk = [u for u in chunk if u is not None and u == u]
            if count := len(chunk):
                mean = sum(chunk) / count
                idle = 0 if min(chunk) >= idle_util else len([u for u in chunk if u < idle_util])
        period, watts, nvlink, pcie = newest if end == n else at(end - 1)
        if seq is None:
            seq = points.put(ts[end - 1], now, gpu, mean, period, watts, nvlink, pcie, count, idle)
            r.bucket[gpu] = (ts[start], seq)
        else:
            points.merge(seq, ts[end - 1], now, mean, period, watts, nvlink, pcie, count, idle)
        start = end


def _at(s: GpuSeries, i: int) -> tuple[float, float | None, int | None, float | None]:
    """Sample ``i``'s period (1 s where not said), power, NVLink counter (TX + RX) and PCIe rate (TX + RX)."""
    period = s.period_s[i] if s.period_s is not None else None
    tx = s.nvlink_tx_kib[i] if s.nvlink_tx_kib is not None else None
    if tx is not None and s.nvlink_rx_kib is not None:
        tx += s.nvlink_rx_kib[i] or 0
    pcie = s.pcie_tx_kbps[i] if s.pcie_tx_kbps is not None else None
    if pcie is not None:
        pcie += (s.pcie_rx_kbps[i] if s.pcie_rx_kbps is not None else None) or 0.0
    return period or 1.0, s.power_w[i] if s.power_w is not None else None, tx, pcie


def _fold_block_points(
    r: RankState,
    block: SampleBlock,
    i: int,
    now: float,
    idle_util: float,
    newest: tuple[Any, ...],
    utils: list[float] | None,
    gaps: bool,
) -> None:
    """One point per GPU per `POINT_GAP_S` bucket: the open bucket's point takes series ``i``'s first
    samples (unless the ring overwrote it meanwhile), the rest open buckets of their own. ``newest``:
    the last sample's period, power, NVLink and PCIe, already read (the last bucket's point has them);
    ``utils``: the block's utilisations as a list (NaN: not reported), ``gaps``: the series has NaN there."""
    bounds = block.bounds()
    fold = (r, block.gpu[i], block.ts_list(), bounds[i], bounds[i + 1], utils, gaps, newest)
    _fold_buckets(*fold, lambda k: _block_at(block, k), now, idle_util)


#: What a point keeps of a GPU's sample besides its utilisation.
_NEWEST = ("period_s", "power_w", "nvlink_tx_kib", "nvlink_rx_kib", "pcie_tx_kbps", "pcie_rx_kbps")


def _point_values(row: tuple[Any, ...]) -> tuple[float, float | None, int | None, float | None]:
    """A sample's period (1 s where not said), power, NVLink counter (TX + RX) and PCIe rate (TX + RX),
    from its `_NEWEST` values."""
    period, watts, tx, rx, pcie, pcie_rx = row
    if tx is not None and rx is not None:
        tx += rx
    if pcie is not None:
        pcie += pcie_rx or 0.0
    return period or 1.0, watts, tx, pcie


def _block_at(block: SampleBlock, j: int) -> tuple[float, float | None, int | None, float | None]:
    """`_point_values` of the block's sample ``j``, from lists made for the whole block at its first call
    (a 400-sample batch closes a bucket every 5 samples: reading numpy scalars one by one cost more than
    the rest of the fold)."""
    lists = block.cached("points", _point_lists)
    period, watts, nvlink, pcie = (column[j] for column in lists)
    return period, None if watts != watts else watts, None if nvlink < 0 else nvlink, None if pcie != pcie else pcie


def _point_lists(block: SampleBlock) -> tuple[list[Any], ...]:
    """Each sample's `_point_values` as four lists (NaN, or -1 for NVLink: not reported)."""
    n = block.size
    power = block.floats.get("power_w")
    tx, rx = block.ints.get("nvlink_tx_kib"), block.ints.get("nvlink_rx_kib")
    if tx is None:
        nvlink = np.full(n, -1, dtype=np.int64)
    else:
        nvlink = tx if rx is None else np.where(tx < 0, -1, tx + np.maximum(rx, 0))
    ptx, prx = block.floats.get("pcie_tx_kbps"), block.floats.get("pcie_rx_kbps")
    pcie = np.full(n, np.nan) if ptx is None else ptx if prx is None else ptx + np.nan_to_num(prx, nan=0.0)
    watts = np.full(n, np.nan) if power is None else power
    return block.periods().tolist(), watts.tolist(), nvlink.tolist(), pcie.tolist()


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def _exposed(steps: list[StepReport]) -> float | None:
    """Exposed communication / step time over the steps that report it (older clients do not)."""
    known = [s for s in steps if s.exposed_s is not None]
    return _ratio(sum(s.exposed_s or 0.0 for s in known), sum(s.duration_s for s in known)) if known else None


def _collectives(steps: list[StepReport]) -> dict[str, CollectiveSummary]:
    """Per-op totals and bandwidths (algbw = bytes / time, busbw = bus_bytes / time, as nccl-tests)."""
    sums: dict[str, list[Any]] = {}
    for st in steps:
        for op, c in st.collectives.items():
            a = sums.setdefault(op, [0, 0, 0.0, None, 0.0])
            a[0] += c.count
            a[1] += c.bytes
            a[2] += c.seconds
            if c.gpu_seconds is not None:
                a[3] = (a[3] or 0.0) + c.gpu_seconds
            a[4] += c.bus_bytes or 0.0
    out = {}
    for op, (count, nbytes, seconds, gpu, bus) in sorted(sums.items()):
        t = gpu if gpu else seconds
        out[op] = CollectiveSummary(
            count=count,
            bytes=nbytes,
            seconds=seconds,
            gpu_seconds=gpu,
            algbw_bytes_per_s=nbytes / t if nbytes and t > 0 else None,
            busbw_bytes_per_s=bus / t if bus and t > 0 else None,
        )
    return out


class JobTracker:
    def __init__(
        self,
        *,
        window_s: float = 300.0,
        idle_util: float = 5.0,
        forget_after_s: float = 3600.0,
        max_jobs_per_node: int = 256,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``max_jobs_per_node``: jobs a node may have tracked at once (forgotten after `forget_after_s` of
        quiet); a node naming more gets no new ones tracked (`refused_jobs` counts the reports), so one
        node cannot grow the server's memory and /metrics with job names (docs/security.md)."""
        self.window_s = window_s
        self.max_jobs_per_node = max_jobs_per_node
        self.refused_jobs = 0  # reports of a job past its node's budget
        self._introduced: dict[str, int] = {}  # node → tracked jobs it brought in
        self.idle_util = idle_util
        self.forget_after_s = forget_after_s
        self.clock = clock
        self._lock = threading.Lock()
        self._jobs: dict[str, JobState] = {}

    # -- feeding ----------------------------------------------------------------------------------

    def add_processes(self, node: str, processes: list[JobProcess]) -> None:
        now = self.clock()
        with self._lock:
            for p in processes:
                if (job := self._job(p.job, now, node)) is None:
                    continue
                job.world_size = p.world_size or job.world_size
                job.hang_timeout_s = p.hang_timeout_s or job.hang_timeout_s
                if p.rank is not None:
                    r = job.rank(p.rank)
                    r.node, r.pid = node, p.pid

    def add_series(self, node: str, series: list[GpuSeries] | SampleBlock) -> None:
        """Attributed GPU samples (series sorted by time): utilisation, energy and idle time per job and rank.

        At the agent's default batches (two samples a series) the cost is per series, not per sample:
        each column is looked at once, in C where it can be (`sum`, `min`, `map`), and a point goes into
        the ring as values, not as an object. A batch's block goes to `_add_block`."""
        if isinstance(series, SampleBlock):
            self._add_block(node, series)
            return
        now = self.clock()
        idle_util = self.idle_util
        with self._lock:
            for s in series:
                if s.job is None or (job := self._job(s.job, now, node)) is None:
                    continue
                r = job.rank(-1 if s.rank is None else s.rank)
                r.node = r.node or node
                ts, utils, power, gpu = s.ts, s.util_gpu, s.power_w, s.gpu
                periods = series_periods(s)
                job.gpu_seconds += sum(periods)
                if utils is not None:
                    if None in utils:
                        job.idle_gpu_seconds += sum(
                            [p for u, p in zip(utils, periods, strict=True) if u is not None and u < idle_util]
                        )
                    elif min(utils) < idle_util:
                        job.idle_gpu_seconds += sum([p for u, p in zip(utils, periods, strict=True) if u < idle_util])
                if power is not None:
                    if None in power:
                        job.energy_j += sum([w * p for w, p in zip(power, periods, strict=True) if w is not None])
                    else:
                        job.energy_j += sum(map(mul, power, periods))
                newest = _at(s, len(ts) - 1)  # the newest sample's period, power, NVLink and PCIe
                known = r.latest.get(gpu)
                if known is None or ts[-1] >= known.ts:
                    u = None if utils is None else utils[-1]
                    n, idle = (0, 0) if u is None else (1, int(u < idle_util))
                    mean = None if u is None else (0.0 + u) / 1  # a mean of one, as it always was (-0.0 reads 0.0)
                    r.latest[gpu] = GpuPoint(ts[-1], now, gpu, mean, *newest, n, idle)
                _fold_points(r, s, now, idle_util, newest)

    def _add_block(self, node: str, block: SampleBlock) -> None:
        """`add_series` of a batch's block (protocol 3): the block's GPU seconds, idle seconds and energy are
        summed for all its series by one `numpy.add.reduceat`, each series' last sample is read from the
        columns at once, and a point goes into the ring as values, not as an object."""
        if all(job is None for job in block.job):
            return
        now = self.clock()
        idle_util = self.idle_util
        starts = block.starts[:-1]
        p, u, w = block.periods(), block.floats.get("util_gpu"), block.floats.get("power_w")
        rows = [p]
        if u is not None:
            rows.append(np.where(u < idle_util, p, 0.0))
            gaps = np.add.reduceat(np.isnan(u), starts).tolist()
            utils: list[float] | None = u.tolist()
        else:
            gaps, utils = [0] * len(block), None
        if w is not None:
            rows.append(np.nan_to_num(w, nan=0.0) * p)
        sums = np.add.reduceat(np.stack(rows), starts, axis=1).T.tolist()
        newest_rows = block.at_last(_NEWEST)
        last_ts, bounds = block.last_ts(), block.bounds()
        with self._lock:
            for i, name in enumerate(block.job):
                if name is None or (job := self._job(name, now, node)) is None:
                    continue
                rank = block.rank[i]
                r = job.rank(-1 if rank is None else rank)
                r.node = r.node or node
                gpu, total = block.gpu[i], sums[i]
                job.gpu_seconds += total[0]
                if u is not None:
                    job.idle_gpu_seconds += total[1]
                if w is not None:
                    job.energy_j += total[-1]
                newest = _point_values(newest_rows[i])
                known = r.latest.get(gpu)
                last = last_ts[i]
                if known is None or last >= known.ts:
                    uu = None if utils is None or (x := utils[bounds[i + 1] - 1]) != x else x
                    n, idle = (0, 0) if uu is None else (1, int(uu < idle_util))
                    mean = None if uu is None else (0.0 + uu) / 1  # a mean of one, as it always was (-0.0 reads 0.0)
                    r.latest[gpu] = GpuPoint(last, now, gpu, mean, *newest, n, idle)
                _fold_block_points(r, block, i, now, idle_util, newest, utils, bool(gaps[i]))

    def add_steps(self, node: str, steps: list[StepReport]) -> set[str]:
        """Record steps; the names of the jobs they were of (for `server.detect.stragglers`)."""
        now = self.clock()
        touched: set[str] = set()
        with self._lock:
            for st in sorted(steps, key=lambda s: (s.job, s.step, s.rank)):
                if (job := self._job(st.job, now, node)) is None:
                    continue
                r = job.rank(st.rank)
                r.node = r.node or node
                r.steps.append(st)
                # Any newer step is progress, even a lower number: a job restarted from a checkpoint
                # redoes steps it had done before, and that is not a hang.
                at = min(st.ts, now)
                if r.last_progress is None or at >= r.last_progress:
                    r.last_step, r.last_progress = st.step, at
                    job.hung = False
                # Compute time: the step less the time it waited for collectives (a fast rank waits for
                # a slow one there); the exposed time where the client measured it, else all of it.
                waited = st.comm_s if st.exposed_s is None else st.exposed_s
                job.pending.setdefault(st.step, {})[st.rank] = max(0.0, st.duration_s - waited)
                touched.add(job.name)
        return touched

    def add_checkpoints(self, node: str, reports: list[CheckpointReport]) -> None:
        """Record the client's checkpoint saves (complete or failed)."""
        now = self.clock()
        with self._lock:
            for rep in sorted(reports, key=lambda r: r.ts):
                if (job := self._job(rep.job, now, node)) is None:
                    continue
                c = job.checkpoint
                if not rep.ok:
                    c.failures += 1
                    c.last_error = rep.error
                    continue
                if c.last_ok_ts is not None and rep.ts > c.last_ok_ts:
                    c.interval_s = rep.ts - c.last_ok_ts
                if c.last_ok_ts is None or rep.ts >= c.last_ok_ts:
                    c.last_ok_ts, c.last_step = rep.ts, rep.step
                    c.blocking_s, c.write_s, c.size_bytes = rep.blocking_s, rep.write_s, rep.size_bytes
                c.saves += 1

    def note_checkpoint(self, name: str, step: int | None, ts: float, size_bytes: int | None = None) -> None:
        """A complete checkpoint known other than by the client's report: a supervisor's run exit, or the
        database at start-up. Only a newer one than what is known moves the age; no save is counted."""
        with self._lock:
            if (job := self._job(name, self.clock(), None)) is None:
                return
            c = job.checkpoint
            if c.last_ok_ts is None or ts > c.last_ok_ts:
                c.last_ok_ts, c.last_step = ts, step
                c.size_bytes = size_bytes if size_bytes is not None else c.size_bytes

    def note_failure(self, name: str) -> None:
        """A run of the job failed (the recovery path calls this): the MTBF behind the optimal interval."""
        with self._lock:
            if (job := self._job(name, self.clock(), None)) is not None:
                job.failures += 1

    # -- for the detectors (server/detect) ---------------------------------------------------------

    @contextmanager
    def locked(self) -> Iterator[dict[str, JobState]]:
        """The jobs' state by name, held still while the caller reads (and marks) it."""
        with self._lock:
            yield self._jobs

    def forget_quiet(self) -> list[str]:
        """Drop the jobs unheard of for `forget_after_s` (bounds memory and metric cardinality)."""
        now = self.clock()
        with self._lock:
            gone = [n for n, j in self._jobs.items() if now - j.last_activity > self.forget_after_s]
            for name in gone:
                job = self._jobs.pop(name)
                if job.introduced_by is not None:
                    self._introduced[job.introduced_by] -= 1
        return gone

    def gpus_idle(self, job: JobState, now: float) -> bool:
        """A job never sampled (CPU-only) counts as idle: it is judged on its steps alone. One whose
        samples stopped arriving (this replica no longer hears from the node) is not: no evidence."""
        latest: dict[tuple[str | None, int], GpuPoint] = {}
        for r in job.ranks.values():
            for p in r.latest.values():
                key = (r.node, p.gpu)
                if key not in latest or p.ts > latest[key].ts:
                    latest[key] = p
        if not latest:
            return True
        fresh = [p for p in latest.values() if now - p.received <= max(10.0, 3 * p.period_s)]
        return bool(fresh) and all(p.util is not None and p.util < self.idle_util for p in fresh)

    # -- reading ----------------------------------------------------------------------------------

    def jobs(self) -> list[str]:
        with self._lock:
            return sorted(self._jobs)

    def summary(self, name: str, window_s: float | None = None) -> JobSummary | None:
        window = window_s or self.window_s
        now = self.clock()
        with self._lock:
            job = self._jobs.get(name)
            if job is None:
                return None
            windows = {k: r.points.window(now, window) for k, r in job.ranks.items()}
            ranks = tuple(self._rank_summary(r, windows[k], now, window) for k, r in sorted(job.ranks.items()))
            util_mean, util_p50, idle_fraction = Window.merged(windows.values()).util_stats()
            steps = [s for r in job.ranks.values() for s in r.steps if now - s.ts <= window]
            return JobSummary(
                job=name,
                window_s=window,
                world_size=job.world_size,
                gpu_util_mean=util_mean,
                gpu_util_p50=util_p50,
                idle_fraction=idle_fraction,
                step_s=statistics.median(s.duration_s for s in steps) if steps else None,
                comm_overhead=_ratio(sum(s.comm_s for s in steps), sum(s.duration_s for s in steps)),
                tokens_per_s=_sum_or_none([r.tokens_per_s for r in ranks]),
                samples_per_s=_sum_or_none([r.samples_per_s for r in ranks]),
                nvlink_bytes_per_s=_sum_or_none([r.nvlink_bytes_per_s for r in ranks]),
                pcie_bytes_per_s=_sum_or_none([r.pcie_bytes_per_s for r in ranks]),
                gpu_hours=job.gpu_seconds / 3600,
                idle_gpu_hours=job.idle_gpu_seconds / 3600,
                energy_kwh=job.energy_j / 3.6e6,
                straggler_events=job.straggler_events,
                hang_events=job.hang_events,
                hung=job.hung,
                ranks=ranks,
                **self._checkpointing(job, ranks, now),
                **_attribution(ranks, window),
                comm_exposed=_exposed(steps),
                collectives=_collectives(steps),
            )

    def _checkpointing(self, job: JobState, ranks: tuple[RankSummary, ...], now: float) -> dict[str, Any]:
        c = job.checkpoint
        age = now - c.last_ok_ts if c.last_ok_ts is not None else None
        mtbf = (now - job.first_seen) / job.failures if job.failures else None
        optimal = math.sqrt(2 * c.blocking_s * mtbf) if mtbf and c.blocking_s else None
        gpus = len({(r.node, g) for r in ranks for g in r.gpus}) or len([r for r in ranks if r.rank >= 0])
        return {
            "checkpoint_age_s": age,
            "checkpoint_step": c.last_step,
            "checkpoint_blocking_s": c.blocking_s,
            "checkpoint_write_s": c.write_s,
            "checkpoint_size_bytes": c.size_bytes,
            "checkpoint_interval_s": c.interval_s,
            "checkpoint_saves": c.saves,
            "checkpoint_failures": c.failures,
            "mtbf_s": mtbf,
            "optimal_checkpoint_interval_s": optimal,
            "gpus": gpus,
            "gpu_hours_at_risk": gpus * age / 3600 if age is not None and gpus else None,
        }

    def _rank_summary(self, r: RankState, points: Window, now: float, window: float) -> RankSummary:
        util_mean, util_p50, idle_fraction = points.util_stats()
        steps = [s for s in r.steps if now - s.ts <= window]
        duration = sum(s.duration_s for s in steps)
        comm = sum(s.comm_s for s in steps)
        span = (steps[-1].ts - steps[0].ts + steps[0].duration_s) if steps else 0.0

        def rate(total: float | None) -> float | None:
            return None if total is None or span <= 0 else total / span

        tokens = sum(s.tokens for s in steps if s.tokens is not None) if any(s.tokens for s in steps) else None
        samples = sum(s.samples for s in steps if s.samples is not None) if any(s.samples for s in steps) else None
        return RankSummary(
            rank=r.rank,
            node=r.node,
            gpus=tuple(sorted(points.gpus)),
            steps=len(steps),
            last_step=r.last_step,
            gpu_util_mean=util_mean,
            gpu_util_p50=util_p50,
            idle_fraction=idle_fraction,
            step_s=statistics.median(s.duration_s for s in steps) if steps else None,
            comm_s=comm / len(steps) if steps else None,
            compute_s=(duration - comm) / len(steps) if steps else None,
            comm_overhead=_ratio(comm, duration),
            tokens_per_s=rate(tokens),
            samples_per_s=rate(samples),
            nvlink_bytes_per_s=points.nvlink_bytes_per_s(),
            pcie_bytes_per_s=points.pcie_bytes_per_s(),
            straggler=r.straggling,
            comm_exposed=_exposed(steps),
        )

    def _job(self, name: str, now: float, node: str | None) -> JobState | None:
        """The job's state, tracked from now on if ``node`` has room for another job (None: it has not)."""
        job = self._jobs.get(name)
        if job is None:
            if node is not None:
                if self._introduced.get(node, 0) >= self.max_jobs_per_node:
                    self.refused_jobs += 1
                    return None
                self._introduced[node] = self._introduced.get(node, 0) + 1
            job = self._jobs[name] = JobState(name, first_seen=now, introduced_by=node)
        job.last_activity = now
        return job


def _attribution(ranks: tuple[RankSummary, ...], window: float) -> dict[str, Any]:
    """Say when the job's GPU time is missing rather than zero. The agent ties a GPU sample to a job
    through the process on the GPU (the NVML process list, or the GPU the client declared from
    LOCAL_RANK / CUDA_VISIBLE_DEVICES); a job whose processes are matched by neither reports steps and
    gets no GPU utilization, idle time or energy at all."""
    stepping = [r.rank for r in ranks if r.steps]
    if not any(r.gpus for r in ranks):
        if not stepping:
            note = f"neither steps nor GPU samples of the job in the last {window:g} s"
        else:
            note = (
                f"ranks {stepping} report steps but no GPU sample is attributed to the job in the last {window:g} s: "
                "its processes are not tied to a GPU (no LOCAL_RANK or CUDA_VISIBLE_DEVICES in what the training "
                "client registered, and the driver's process list names none of them), so its GPU utilization, "
                "idle GPU-hours and energy are unknown, not zero"
            )
        return {"gpu_attribution": "none", "gpu_attribution_note": note}
    untied = [r.rank for r in ranks if r.steps and not r.gpus]
    if untied:
        note = (
            f"ranks {untied} report steps but no GPU sample of their own in the last {window:g} s: the job's "
            "GPU utilization is that of its other ranks' GPUs (and of samples whose process named no rank)"
        )
        return {"gpu_attribution": "partial", "gpu_attribution_note": note}
    return {"gpu_attribution": "full", "gpu_attribution_note": None}


def _sum_or_none(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None
