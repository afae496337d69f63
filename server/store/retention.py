"""Retention: delete what is past its time, in short bounded transactions, on SQLite and PostgreSQL.

Every delete touches at most ``chunk`` rows through an index range and commits at once, so pruning a
large backlog never holds a long transaction, a big lock or a long SQLite write lock: ingest goes on
between chunks. What is pruned, each by its own setting (`retention_*`, in days; 0 keeps forever):

- log lines and events, by their time (``ts``), walking each (node, stream) in sequence order.
  Within a stream the sequence follows time, so the walk stops at the first row still within
  retention; a row behind it (an agent whose clock stepped back) waits until that row expires too.
  Lines and events of a node with an open incident are kept from its run's start (minus the
  diagnosis look-back) on: the incident is diagnosed from them.
- ingest batch ids (the idempotency keys of agents' retries), by when they were received.
- per-minute GPU and job rollups, by their minute.
- the GPU snapshot of incidents past diagnosis (the post-mortem's plots). The incidents, their
  diagnoses and actions stay: they are the audit trail, and small.

On PostgreSQL one process at a time prunes (a session advisory lock, tried, not waited for): a
replica that finds it taken skips its turn. Deletes are idempotent, so a skipped or interrupted run
only leaves work for the next.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import Counter, Gauge
from prometheus_client.registry import CollectorRegistry
from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    Engine,
    Table,
    Text,
    bindparam,
    cast,
    delete,
    func,
    null,
    select,
    text,
)
from sqlalchemy import update as sql_update

from gpuwatch.config import RetentionSettings
from server.store.models import EventRow, GpuRollup, Incident, IngestBatch, JobRollup, LogLineRow, Run

log = logging.getLogger("gpuwatch.server.retention")

LOCK_KEY = "gpuwatch:retention"
DEFAULT_CHUNK = 5000
# The diagnosis reads a node's lines from its run's start, or from incidents.diagnose.LOOKBACK before an
# incident without a run opened: an open incident's are kept from this long before either.
EVIDENCE_LOOKBACK = timedelta(minutes=5)
# Batch ids are kept this much longer than their retention: an agent's clock may run ahead of the server's.
CLOCK_SKEW = timedelta(hours=1)
TABLES = ("log_lines", "events", "ingest_batches", "gpu_rollups", "job_rollups", "incident_snapshots")


@dataclass(frozen=True, slots=True)
class Retention:
    """How long each kind of row is kept; None keeps it forever."""

    log_lines: timedelta | None = None
    events: timedelta | None = None
    ingest_batches: timedelta | None = None
    rollups: timedelta | None = None
    incident_snapshots: timedelta | None = None

    @classmethod
    def from_settings(cls, s: RetentionSettings) -> Retention:
        def days(value: float) -> timedelta | None:
            return timedelta(days=value) if value > 0 else None

        return cls(
            log_lines=days(s.log_lines_days),
            events=days(s.events_days),
            ingest_batches=days(s.ingest_batches_days),
            rollups=days(s.rollups_days),
            incident_snapshots=days(s.incident_snapshots_days),
        )


@dataclass(frozen=True, slots=True)
class PruneResult:
    """Rows deleted per table (with ``dry_run``: rows that would be); ``ran`` is False when another
    process held the lock and nothing was done."""

    counts: dict[str, int]
    ran: bool
    dry_run: bool
    seconds: float

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True, slots=True)
class _Spec:
    """A table pruned group by group: ``group`` columns are equal within a group and, with ``order``
    after them, a prefix of an index; ``time`` is compared with the horizon."""

    name: str
    table: Table
    group: tuple[str, ...]
    order: str
    time: str


_LOGS = _Spec("log_lines", LogLineRow.__table__, ("node_id", "stream"), "seq", "ts")
_EVENTS = _Spec("events", EventRow.__table__, ("node_id", "stream"), "seq", "ts")
_BATCHES = _Spec("ingest_batches", IngestBatch.__table__, (), "received_at", "received_at")
_GPU_ROLLUPS = _Spec("gpu_rollups", GpuRollup.__table__, ("gpu_id",), "minute", "minute")
_JOB_ROLLUPS = _Spec("job_rollups", JobRollup.__table__, ("job_id", "rank"), "minute", "minute")


def prune(
    engine: Engine,
    retention: Retention,
    *,
    now: datetime | None = None,
    dry_run: bool = False,
    chunk: int = DEFAULT_CHUNK,
    evidence_lookback: timedelta = EVIDENCE_LOOKBACK,
) -> PruneResult:
    """Delete every row older than its retention (see the module's docstring); counts per table."""
    if chunk < 1:
        raise ValueError("chunk must be at least 1")
    now = now or datetime.now(UTC)
    started = time.perf_counter()
    counts = dict.fromkeys(TABLES, 0)
    # Autocommit: each statement is its own transaction, so no read snapshot or lock outlives it.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if not dry_run and not _try_lock(conn):
            return PruneResult(counts, ran=False, dry_run=False, seconds=time.perf_counter() - started)
        try:
            pruner = _Pruner(conn, chunk, dry_run)
            keep = _open_incident_evidence(conn, evidence_lookback)
            if retention.log_lines is not None:
                counts["log_lines"] = pruner.table(_LOGS, _per_node(now - retention.log_lines, keep))
            if retention.events is not None:
                counts["events"] = pruner.table(_EVENTS, _per_node(now - retention.events, keep))
            if retention.ingest_batches is not None:
                horizon = now - retention.ingest_batches - CLOCK_SKEW
                counts["ingest_batches"] = pruner.table(_BATCHES, lambda _group: horizon)
            if retention.rollups is not None:
                horizon = now - retention.rollups
                counts["gpu_rollups"] = pruner.table(_GPU_ROLLUPS, lambda _group: horizon)
                counts["job_rollups"] = pruner.table(_JOB_ROLLUPS, lambda _group: horizon)
            if retention.incident_snapshots is not None:
                counts["incident_snapshots"] = pruner.snapshots(now - retention.incident_snapshots)
        finally:
            if not dry_run:
                _unlock(conn)
    seconds = time.perf_counter() - started
    if any(counts.values()):
        verb = "would delete" if dry_run else "deleted"
        done = ", ".join(f"{n} {table}" for table, n in counts.items() if n)
        log.info("retention %s %s in %.1fs", verb, done, seconds)
    return PruneResult(counts, ran=True, dry_run=dry_run, seconds=seconds)


def _try_lock(conn: Connection) -> bool:
    """PostgreSQL: this connection's session advisory lock on LOCK_KEY, if free. SQLite: always (one
    server per SQLite file; a concurrent `gpuwatch db prune` only repeats idempotent deletes)."""
    if conn.dialect.name != "postgresql":
        return True
    return bool(conn.scalar(text("SELECT pg_try_advisory_lock(hashtextextended(:k, 0))"), {"k": LOCK_KEY}))


def _unlock(conn: Connection) -> None:
    if conn.dialect.name == "postgresql" and not conn.invalidated:
        conn.execute(text("SELECT pg_advisory_unlock(hashtextextended(:k, 0))"), {"k": LOCK_KEY})


def _open_incident_evidence(conn: Connection, lookback: timedelta) -> dict[int, datetime]:
    """Per node, the earliest time an open (not yet diagnosed) incident reads evidence from."""
    rows = conn.execute(
        select(Incident.node_id, func.coalesce(Run.started_at, Incident.opened_at))
        .outerjoin(Run, Run.id == Incident.run_id)
        .where(Incident.state == "open", Incident.node_id.is_not(None))
    ).tuples()
    keep: dict[int, datetime] = {}
    for node_id, since in rows:
        since = _aware(since) - lookback
        keep[node_id] = min(since, keep.get(node_id, since))
    return keep


def _per_node(horizon: datetime, keep: dict[int, datetime]) -> Callable[[tuple[Any, ...]], datetime]:
    return lambda group: min(horizon, keep.get(group[0], horizon))


def _aware(value: datetime) -> datetime:
    """SQLite hands raw rows back without their zone (the ORM type adds it; plain selects of
    expressions do not)."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class _Statements:
    """One table's statements, built once with bound parameters so that SQLAlchemy compiles each once:
    building a statement per group would cost more than the index seek it runs."""

    def __init__(self, spec: _Spec, chunk: int) -> None:
        t, c = spec.table, spec.table.c
        group = [c[name] for name in spec.group]
        order, at = c[spec.order], c[spec.time]
        columns, keys = [*group, order, at], [*group, order]
        self.width = len(group)
        self.by_time = spec.order == spec.time
        self.first = select(*columns).order_by(*keys).limit(1)
        # The first row of the next group, at each level of the group key (loose index scan).
        self.after = [
            select(*columns)
            .where(*_equal(group[:level]), group[level] > bindparam(f"g{level}"))
            .order_by(*keys[level:])
            .limit(1)
            for level in range(len(group))
        ]
        in_group, expired = _equal(group), at < bindparam("horizon")
        if self.by_time:  # time is indexed after the group: delete up to the chunk-th oldest row's time
            self.count = select(func.count()).select_from(t).where(*in_group, expired)
            self.boundary = select(at).where(*in_group, expired).order_by(at).offset(chunk - 1).limit(1)
            self.delete_upto = delete(t).where(*in_group, at <= bindparam("boundary"))
            self.delete_expired = delete(t).where(*in_group, expired)
        else:  # windows of ``chunk`` sequence numbers
            window = [*in_group, order >= bindparam("low"), order < bindparam("high")]
            self.count = select(func.count()).select_from(t).where(*window, expired)
            self.delete_expired = delete(t).where(*window, expired)
            self.fresh = select(order).where(*window, at >= bindparam("horizon")).limit(1)
            self.next_low = select(order).where(*in_group, order >= bindparam("high")).order_by(order).limit(1)


def _equal(columns: Sequence[Column[Any]]) -> list[ColumnElement[bool]]:
    return [col == bindparam(f"g{i}") for i, col in enumerate(columns)]


class _Pruner:
    def __init__(self, conn: Connection, chunk: int, dry_run: bool) -> None:
        self._conn, self._chunk, self._dry_run = conn, chunk, dry_run

    def table(self, spec: _Spec, horizon_of: Callable[[tuple[Any, ...]], datetime]) -> int:
        """Prune ``spec`` group by group, each group against its own horizon."""
        st = _Statements(spec, self._chunk)
        total = 0
        first = self._conn.execute(st.first).first()
        while first is not None:
            key, first_time = tuple(first[: st.width]), _aware(first[-1])
            params: dict[str, Any] = {f"g{i}": value for i, value in enumerate(key)}
            params["horizon"] = horizon_of(key)
            if first_time < params["horizon"]:  # the group's oldest row: nothing to do when within retention
                if st.by_time:
                    total += self._by_time(st, params)
                else:
                    total += self._by_sequence(st, params, first[st.width])
            first = self._next_group(st, key)
        return total

    def _next_group(self, st: _Statements, key: tuple[Any, ...]) -> Any:
        """The first row (group columns, order, time) of the group after ``key``: one index seek per
        group, however many rows each holds."""
        for level in reversed(range(st.width)):
            params = {f"g{i}": value for i, value in enumerate(key[: level + 1])}
            row = self._conn.execute(st.after[level], params).first()
            if row is not None:
                return row
        return None

    def _by_time(self, st: _Statements, params: dict[str, Any]) -> int:
        """The group's rows before the horizon, oldest first, ``chunk`` at a time."""
        if self._dry_run:
            return self._conn.scalar(st.count, params) or 0
        total = 0
        while (boundary := self._conn.scalar(st.boundary, params)) is not None:
            total += self._conn.execute(st.delete_upto, {**params, "boundary": boundary}).rowcount
        return total + self._conn.execute(st.delete_expired, params).rowcount

    def _by_sequence(self, st: _Statements, params: dict[str, Any], low: int | None) -> int:
        """The group's rows before the horizon in windows of ``chunk`` sequence numbers, until a window
        holds a row still within retention (time follows the sequence)."""
        total = 0
        while low is not None:
            window = {**params, "low": low, "high": low + self._chunk}
            if self._dry_run:
                total += self._conn.scalar(st.count, window) or 0
            else:
                total += self._conn.execute(st.delete_expired, window).rowcount
            if self._conn.scalar(st.fresh, window) is not None:
                break
            low = self._conn.scalar(st.next_low, window)
        return total

    def snapshots(self, horizon: datetime) -> int:
        """Clear the GPU snapshot of incidents opened before ``horizon`` and past diagnosis."""
        held = [
            Incident.state != "open",
            Incident.opened_at < horizon,
            Incident.snapshot.is_not(None),
            cast(Incident.snapshot, Text) != "null",  # a JSON null is no snapshot either
        ]
        if self._dry_run:
            return self._conn.scalar(select(func.count()).select_from(Incident).where(*held)) or 0
        total, oldest = 0, select(Incident.id).where(*held).order_by(Incident.id).limit(self._chunk)
        while ids := self._conn.scalars(oldest).all():
            cleared = sql_update(Incident).where(Incident.id.in_(ids)).values(snapshot=null())
            total += self._conn.execute(cleared).rowcount
        return total


OUTCOMES = ("pruned", "skipped", "failed")


class RetentionMetrics:
    """Registered on the app's registry; every table and outcome starts at 0 so `increase()` sees
    the first run."""

    def __init__(self, registry: CollectorRegistry, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.deleted = Counter(
            "gpuwatch_retention_deleted_rows",
            "Rows deleted by retention, by table (incident_snapshots: snapshots cleared).",
            ["table"],
            registry=registry,
        )
        self.runs = Counter(
            "gpuwatch_retention_runs",
            "Retention runs of this server, by outcome (skipped: another replica was pruning).",
            ["outcome"],
            registry=registry,
        )
        self.last_run = Gauge(
            "gpuwatch_retention_last_run_timestamp_seconds",
            "When this server last finished pruning (0: not yet).",
            registry=registry,
        )
        self.duration = Gauge(
            "gpuwatch_retention_last_run_seconds", "How long this server's last pruning took.", registry=registry
        )
        for table in TABLES:
            self.deleted.labels(table)
        for outcome in OUTCOMES:
            self.runs.labels(outcome)

    def observe(self, run: Callable[[], PruneResult]) -> PruneResult:
        """Run one pruning and count it; a failure is counted and raised on (the caller logs it)."""
        try:
            result = run()
        except Exception:
            self.runs.labels("failed").inc()
            raise
        if not result.ran:
            self.runs.labels("skipped").inc()
            return result
        for table, n in result.counts.items():
            self.deleted.labels(table).inc(n)
        self.runs.labels("pruned").inc()
        self.duration.set(result.seconds)
        self.last_run.set(self._clock())
        return result
