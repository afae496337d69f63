"""SQLAlchemy models: the schema as the code sees it. Only Alembic migrations change the database;
`tests/server/store/test_migrations.py` checks the two agree."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Explicit constraint names keep migrations identical on SQLite and PostgreSQL.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite has no 64-bit autoincrement type of its own; INTEGER PRIMARY KEY is already 64-bit there.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite drops the zone; this puts it back)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Node(Base):
    __tablename__ = "nodes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    hostname: Mapped[str | None] = mapped_column(String(255))
    agent_version: Mapped[str | None] = mapped_column(String(64))
    collector: Mapped[str | None] = mapped_column(String(64))
    driver_version: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    registered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_seen_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    agent_seen_at: Mapped[datetime | None] = mapped_column(
        UTCDateTime, doc="its agent's last word (register, heartbeat, a batch of samples): not its supervisors'"
    )
    dropped: Mapped[dict[str, int]] = mapped_column(JSON, default=dict)


class ApiToken(Base):
    """A bearer token: a node's (``role`` node, bound to ``node_id``) or a person's (``role`` admin, no
    node, a ``name`` saying whose). Only its SHA-256 is stored: tokens are 256-bit random, so a slow hash
    would add nothing but latency to every request."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(16), server_default="node", doc="node or admin")
    name: Mapped[str | None] = mapped_column(String(255), doc="an admin token's holder")
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Gpu(Base):
    __tablename__ = "gpus"
    __table_args__ = (UniqueConstraint("node_id", "index"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    index: Mapped[int] = mapped_column(Integer)
    uuid: Mapped[str] = mapped_column(String(96), unique=True)
    model: Mapped[str] = mapped_column(String(255))
    memory_total_mib: Mapped[float | None] = mapped_column(Float)
    pci_bus_id: Mapped[str | None] = mapped_column(String(64))
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_seen_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Its last known fault counts, which only a reset clears: still true of a GPU unheard since.
    ecc_sbe_volatile: Mapped[int | None] = mapped_column(BigInteger)
    ecc_dbe_volatile: Mapped[int | None] = mapped_column(BigInteger)
    retired_pages_sbe: Mapped[int | None] = mapped_column(BigInteger)
    retired_pages_dbe: Mapped[int | None] = mapped_column(BigInteger)
    remap_failure: Mapped[bool | None] = mapped_column(Boolean)
    faults_at: Mapped[datetime | None] = mapped_column(UTCDateTime, doc="when the fault counts were sampled")


class XidCount(Base):
    """Xid events stored per node, GPU (-1: none named) and code: what `gpuwatch_xid_events_total`
    continues from after a restart. Kept whole (not pruned with the events: a count that fell would read
    as a counter reset, a burst of new Xids); at most a node's label budget of rows per node."""

    __tablename__ = "xid_counts"

    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), primary_key=True)
    gpu: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    xid: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    count: Mapped[int] = mapped_column(BigInteger)
    last_at: Mapped[datetime] = mapped_column(UTCDateTime)


class IngestBatch(Base):
    """Batches already stored, by the agent's per-node batch id: a retried batch is acknowledged
    without touching anything (samples and rollups have no natural key of their own)."""

    __tablename__ = "ingest_batches"

    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), primary_key=True)
    batch_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    samples: Mapped[int] = mapped_column(Integer, default=0)
    logs: Mapped[int] = mapped_column(Integer, default=0)
    events: Mapped[int] = mapped_column(Integer, default=0)


class Job(Base):
    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    scheduler: Mapped[str] = mapped_column(String(32), default="local")
    external_id: Mapped[str | None] = mapped_column(String(255))
    owner: Mapped[str | None] = mapped_column(String(255))
    world_size: Mapped[int | None] = mapped_column(Integer)
    checkpoint_dir: Mapped[str | None] = mapped_column(Text)
    hang_timeout_s: Mapped[float | None] = mapped_column(Float)
    policy: Mapped[dict[str, Any] | None] = mapped_column(JSON, doc="recovery policy overrides for this job")
    member_nodes: Mapped[list[str] | None] = mapped_column(
        JSON, doc="the nodes an admin registered the job to (docs/security.md); None: not registered"
    )
    state: Mapped[str] = mapped_column(String(32), default="pending")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class Run(Base):
    """One attempt of a job; a restart is a new run."""

    __tablename__ = "runs"
    __table_args__ = (UniqueConstraint("job_id", "attempt"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    attempt: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(32), default="running")
    command: Mapped[str | None] = mapped_column(Text)
    resume_from: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    signal: Mapped[int | None] = mapped_column(Integer)
    key: Mapped[str | None] = mapped_column(String(64), unique=True, doc="the supervisor's id for the run")
    first_step_at: Mapped[datetime | None] = mapped_column(UTCDateTime, doc="its first step report")
    node_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id", ondelete="SET NULL"))


class JobRank(Base):
    """Where each rank of a job runs (the latest process seen for it)."""

    __tablename__ = "job_ranks"
    __table_args__ = (UniqueConstraint("job_id", "rank"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    rank: Mapped[int] = mapped_column(Integer)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    pid: Mapped[int] = mapped_column(Integer)
    local_rank: Mapped[int | None] = mapped_column(Integer)
    gpu_index: Mapped[int | None] = mapped_column(Integer)
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class LogLineRow(Base):
    __tablename__ = "log_lines"
    __table_args__ = (UniqueConstraint("node_id", "stream", "seq"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    stream: Mapped[str] = mapped_column(String(255))
    seq: Mapped[int] = mapped_column(BigInteger)
    ts: Mapped[datetime] = mapped_column(UTCDateTime)
    text: Mapped[str] = mapped_column(Text)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"), index=True)
    rank: Mapped[int | None] = mapped_column(Integer)


class EventRow(Base):
    __tablename__ = "events"
    __table_args__ = (UniqueConstraint("node_id", "stream", "seq"), Index("ix_events_kind_ts", "kind", "ts"))

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    stream: Mapped[str] = mapped_column(String(255))
    seq: Mapped[int] = mapped_column(BigInteger)
    ts: Mapped[datetime] = mapped_column(UTCDateTime)
    kind: Mapped[str] = mapped_column(String(64))
    gpu_index: Mapped[int | None] = mapped_column(Integer)
    message: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class Checkpoint(Base):
    __tablename__ = "checkpoints"
    __table_args__ = (UniqueConstraint("job_id", "path"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"))
    path: Mapped[str] = mapped_column(Text)
    step: Mapped[int | None] = mapped_column(BigInteger)
    valid: Mapped[bool] = mapped_column(Boolean, default=False)
    invalid_reason: Mapped[str | None] = mapped_column(Text)
    size_bytes: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Incident(Base):
    __tablename__ = "incidents"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"), index=True)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"))
    node_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id", ondelete="SET NULL"))
    trigger: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(32), default="open")
    opened_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    closed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    snapshot: Mapped[dict[str, Any] | None] = mapped_column(
        JSON, doc="the node's recent GPU samples and the job's ranks' last steps when the incident opened"
    )
    cost: Mapped[dict[str, Any] | None] = mapped_column(JSON, doc="work lost: steps, wall time, GPUs, GPU-hours")
    due_at: Mapped[datetime | None] = mapped_column(
        UTCDateTime, index=True, doc="when its next step (diagnosis, decision) is due; None: none is"
    )
    inputs: Mapped[dict[str, Any] | None] = mapped_column(
        JSON, doc="what its next steps need that is not elsewhere: the run's log streams and rank exits, its checkpoint"
    )


class Diagnosis(Base):
    __tablename__ = "diagnoses"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    incident_id: Mapped[int] = mapped_column(ForeignKey("incidents.id", ondelete="CASCADE"), index=True)
    reason: Mapped[str] = mapped_column(String(64))
    category: Mapped[str] = mapped_column(String(32))
    action: Mapped[str] = mapped_column(String(32))
    confidence: Mapped[float] = mapped_column(Float)
    source: Mapped[str] = mapped_column(String(16))
    node_name: Mapped[str | None] = mapped_column(String(255))
    rank: Mapped[int | None] = mapped_column(Integer)
    evidence: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    explanation: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class IncidentLabel(Base):
    """A person's verdict on an incident's diagnosis: the reason it really was (the diagnosed one, for a
    confirmation), beside the diagnosis, which is kept as the machine made it. Every label is kept; the
    newest is the incident's. What `gpuwatch corpus export` turns into test cases and
    `gpuwatch_diagnosis_corrections_total` counts."""

    __tablename__ = "incident_labels"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    incident_id: Mapped[int] = mapped_column(ForeignKey("incidents.id", ondelete="CASCADE"), index=True)
    diagnosis_id: Mapped[int | None] = mapped_column(
        ForeignKey("diagnoses.id", ondelete="SET NULL"), doc="the diagnosis judged"
    )
    diagnosed: Mapped[str] = mapped_column(String(64), doc="its reason, kept here should the diagnosis go")
    reason: Mapped[str] = mapped_column(String(64), doc="the reason it really was")
    note: Mapped[str | None] = mapped_column(Text)
    actor: Mapped[str] = mapped_column(String(255), doc="admin token name and prefix, or the CLI's OS user")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


class Action(Base):
    """An audited recovery step (restart, exclude node, notify) and how it went."""

    __tablename__ = "actions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    incident_id: Mapped[int | None] = mapped_column(ForeignKey("incidents.id", ondelete="SET NULL"), index=True)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"))
    kind: Mapped[str] = mapped_column(String(64))
    executor: Mapped[str | None] = mapped_column(String(32))
    actor: Mapped[str] = mapped_column(String(64), server_default="server", doc="who acted: server or supervisor")
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(32), default="pending")
    detail: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Exclusion(Base):
    """A node kept out of restarts until ``expires_at`` (or until released by hand)."""

    __tablename__ = "exclusions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_name: Mapped[str] = mapped_column(String(255), index=True)
    reason: Mapped[str] = mapped_column(String(64))
    incident_id: Mapped[int | None] = mapped_column(ForeignKey("incidents.id", ondelete="SET NULL"))
    executor: Mapped[str | None] = mapped_column(String(32), doc="the scheduler that drained/cordoned it, if any")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    released_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class AuditEntry(Base):
    """One administrative act (pause, exclusion, token created or revoked): who, what, on what, when."""

    __tablename__ = "admin_audit"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(255), doc="admin token name and prefix, or the CLI's OS user")
    action: Mapped[str] = mapped_column(String(64), doc="e.g. recovery.pause, exclusion.add, token.create")
    target: Mapped[str | None] = mapped_column(String(255))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class Flag(Base):
    """Cluster-wide switches, e.g. ``recovery_paused``."""

    __tablename__ = "flags"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[bool] = mapped_column(Boolean, default=False)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
    updated_by: Mapped[str | None] = mapped_column(String(255))


class GpuRollup(Base):
    """Per-GPU, per-minute aggregates: sums and counts, so replays of partial minutes add up."""

    __tablename__ = "gpu_rollups"

    gpu_id: Mapped[int] = mapped_column(ForeignKey("gpus.id", ondelete="CASCADE"), primary_key=True)
    minute: Mapped[datetime] = mapped_column(UTCDateTime, primary_key=True)
    samples: Mapped[int] = mapped_column(Integer)
    util_sum: Mapped[float] = mapped_column(Float)
    util_max: Mapped[float] = mapped_column(Float)
    mem_util_sum: Mapped[float] = mapped_column(Float)
    fb_used_max_mib: Mapped[float] = mapped_column(Float)
    power_sum_w: Mapped[float] = mapped_column(Float)
    temp_max_c: Mapped[float] = mapped_column(Float)
    gpu_seconds: Mapped[float] = mapped_column(Float, server_default="0")
    idle_seconds: Mapped[float] = mapped_column(Float, server_default="0", doc="utilisation under 5 %")
    unallocated_seconds: Mapped[float] = mapped_column(Float, server_default="0", doc="no job on the GPU")
    energy_j: Mapped[float] = mapped_column(Float, server_default="0")


class JobRollup(Base):
    """Per-job, per-rank, per-minute aggregates (rank -1: GPU samples whose rank is unknown)."""

    __tablename__ = "job_rollups"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    rank: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    minute: Mapped[datetime] = mapped_column(UTCDateTime, primary_key=True)
    steps: Mapped[int] = mapped_column(Integer, default=0)
    step_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    comm_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    tokens: Mapped[float] = mapped_column(Float, default=0.0)
    samples: Mapped[float] = mapped_column(Float, default=0.0)
    gpu_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    idle_gpu_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    util_gpu_seconds: Mapped[float] = mapped_column(Float, default=0.0, doc="sum of utilisation x period")
    energy_j: Mapped[float] = mapped_column(Float, default=0.0)


class StackRequest(Base):
    """A request for the stacks of every rank of a job (hang localisation): made when a hang opens an
    incident, or by an operator (`gpuwatch job stacks`). Pending until every node's dump is in or its
    deadline passes; then ``analysis`` holds the ranks grouped by stack and the suspects."""

    __tablename__ = "stack_requests"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    incident_id: Mapped[int | None] = mapped_column(ForeignKey("incidents.id", ondelete="SET NULL"), index=True)
    requested_by: Mapped[str] = mapped_column(String(255), doc="server (a hang) or the operator's token name")
    state: Mapped[str] = mapped_column(String(16), default="pending", doc="pending, done or expired")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    deadline_at: Mapped[datetime] = mapped_column(UTCDateTime, doc="analysed with what came by then")
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    analysis: Mapped[dict[str, Any] | None] = mapped_column(JSON, doc="server.incidents.stacks.Localisation")


class StackDump(Base):
    """One node's part of a stack request: the ranks of the job there, and what its agent answered."""

    __tablename__ = "stack_dumps"
    __table_args__ = (Index("ix_stack_dumps_node_id_state", "node_id", "state"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    request_id: Mapped[int] = mapped_column(ForeignKey("stack_requests.id", ondelete="CASCADE"), index=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    ranks: Mapped[list[int]] = mapped_column(JSON, doc="the job's ranks on the node when it was asked")
    state: Mapped[str] = mapped_column(String(16), default="pending", doc="pending, done or expired")
    answered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    result: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, doc="gpuwatch.protocol.RankStack, one per rank")
