"""Versioned wire models shared by the agent and the server.

Every model here is what crosses the network between `gpuwatch agent` and `gpuwatch server`; both
sides import them so the two cannot drift apart. Bump ``PROTOCOL_VERSION`` on an incompatible change;
the server rejects batches newer than it understands with a 422 that says so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter
from typing import Annotated, Any, Literal, TypeVar, Union, get_args

from annotated_types import Ge, Le, MaxLen
from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

#: 2 added `Batch.series` (samples column by column). Agents send series only to a server whose
#: registration answer says it speaks 2: upgrade servers before agents.
PROTOCOL_VERSION = 2

#: Longest log line the server accepts; the agent truncates longer lines before sending.
MAX_LOG_LINE_CHARS = 16_384
#: Largest integer the database stores (BIGINT): counters and ids past it are refused at the door.
INT64 = 2**63 - 1
#: Largest clock offset a batch may ask the server to apply (either way): a node whose clock was never set
#: (1970) is still corrected.
MAX_CLOCK_OFFSET_S = 4e9
#: Most items of one kind in one batch; the agent splits larger backlogs over several batches.
MAX_BATCH_ITEMS = 20_000
#: Free-form ``data`` of an event: containers nested at most this deep, at most this many bytes as JSON.
#: Deeper data was stored and then broke every read of /api/v1/events (docs/security.md).
MAX_DATA_DEPTH = 8
MAX_DATA_BYTES = 16_384
#: Most keys of a counter map (``dropped``, an InfiniBand port's ``errors``): each key is a label value.
MAX_COUNTER_KEYS = 64
#: Largest Xid code accepted (NVIDIA's run to about 160): a code is a label value and an integer column.
MAX_XID = 1023
#: Timestamps are accepted this far before and after the server's clock: generous for a spool replayed
#: after a long outage and for a skewed clock, tight enough that every reader can turn them into dates.
TS_PAST_S = 366 * 86_400
TS_FUTURE_S = 86_400


class Api:
    """Paths of the HTTP API, for every client (agent, supervisor, simulator, demo) and the server's
    routers: one spelling of each. Paths with ``{…}`` are filled with ``str.format``."""

    PREFIX = "/api/v1"
    REGISTER = PREFIX + "/nodes/register"
    HEARTBEAT = PREFIX + "/nodes/heartbeat"
    INGEST = PREFIX + "/ingest"
    RUNS = PREFIX + "/runs"
    RUN = PREFIX + "/runs/{run_id}"
    RUN_EXIT = PREFIX + "/runs/{run_id}/exit"
    RUN_DECISION = PREFIX + "/runs/{run_id}/decision"
    NODES = PREFIX + "/nodes"
    GPUS = PREFIX + "/gpus"
    JOBS = PREFIX + "/jobs"
    JOB_RUNS = PREFIX + "/jobs/{job_id}/runs"
    INCIDENTS = PREFIX + "/incidents"
    INCIDENT = PREFIX + "/incidents/{incident_id}"
    INCIDENT_LABEL = PREFIX + "/incidents/{incident_id}/label"
    INCIDENT_REPORT = PREFIX + "/incidents/{incident_id}/report"
    INCIDENT_PLOT = PREFIX + "/incidents/{incident_id}/plots/{gpu}.png"
    LOGS = PREFIX + "/logs"
    EVENTS = PREFIX + "/events"
    JOB_STACKS = PREFIX + "/jobs/{job_id}/stacks"
    STACK_REQUEST = PREFIX + "/stacks/{request_id}"
    STACK_TASKS = PREFIX + "/stacks/tasks"
    STACK_TASK = PREFIX + "/stacks/tasks/{dump_id}"


def log_text(raw: bytes) -> str:
    """A log line's bytes as text for the wire: invalid UTF-8 and NUL, which a PostgreSQL text column
    cannot hold (the batch would be refused whole), become U+FFFD."""
    return raw.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


_Name = Field(min_length=1, max_length=255)


class _Model(BaseModel):
    # Unknown fields are ignored so an older server accepts a newer agent's optional additions. No float
    # is infinite (1e400 parses as one): msgspec refuses those already, and /metrics would export ``inf``.
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


#: A counter map: a bounded number of named, non-negative counts.
Counters = Annotated[dict[Annotated[str, MaxLen(64)], Annotated[int, Ge(0), Le(INT64)]], MaxLen(MAX_COUNTER_KEYS)]


class GpuInfo(_Model):
    """A GPU as the agent sees it at registration: its identity, not its state."""

    index: int = Field(ge=0, le=1023)
    uuid: str = Field(min_length=1, max_length=96)
    name: str = Field(min_length=1, max_length=255, description="model name, e.g. NVIDIA H100 80GB HBM3")
    memory_total_mib: float | None = Field(default=None, ge=0)
    pci_bus_id: str | None = Field(default=None, max_length=64)


class GpuProcess(_Model):
    """A compute process running on a GPU (from nvmlDeviceGetComputeRunningProcesses)."""

    pid: int = Field(ge=0)
    used_memory_mib: float | None = Field(default=None, ge=0)


class GpuSample(_Model):
    """One reading of one GPU. Every field but the identity is optional: a field the GPU does not
    support (NVML NotSupported) is left out rather than reported as zero."""

    ts: float = Field(gt=0, description="unix time, seconds")
    gpu: int = Field(ge=0, le=1023, description="GPU index on the node")
    uuid: str = Field(min_length=1, max_length=96)
    util_gpu: float | None = Field(default=None, ge=0, le=100, description="% of time a kernel ran")
    util_mem: float | None = Field(default=None, ge=0, le=100, description="% of time memory was read/written")
    fb_used_mib: float | None = Field(default=None, ge=0)
    fb_free_mib: float | None = Field(default=None, ge=0)
    fb_total_mib: float | None = Field(default=None, ge=0)
    power_w: float | None = Field(default=None, ge=0)
    temp_c: float | None = Field(default=None, ge=-50, le=200)
    sm_clock_mhz: float | None = Field(default=None, ge=0)
    mem_clock_mhz: float | None = Field(default=None, ge=0)
    throttle_reasons: int | None = Field(default=None, ge=0, description="NVML clocks-event reason bitmask")
    ecc_sbe_volatile: int | None = Field(default=None, ge=0, description="corrected ECC errors since boot")
    ecc_dbe_volatile: int | None = Field(default=None, ge=0, description="uncorrected ECC errors since boot")
    retired_pages_sbe: int | None = Field(default=None, ge=0)
    retired_pages_dbe: int | None = Field(default=None, ge=0)
    remapped_rows_correctable: int | None = Field(default=None, ge=0)
    remapped_rows_uncorrectable: int | None = Field(default=None, ge=0)
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    pcie_tx_kbps: float | None = Field(default=None, ge=0, description="PCIe TX throughput, KB/s")
    pcie_rx_kbps: float | None = Field(default=None, ge=0, description="PCIe RX throughput, KB/s")
    nvlink_tx_kib: int | None = Field(default=None, ge=0, description="NVLink data TX counter, KiB")
    nvlink_rx_kib: int | None = Field(default=None, ge=0, description="NVLink data RX counter, KiB")
    xid_last: int | None = Field(default=None, ge=0, description="value of the last Xid seen")
    processes: list[GpuProcess] | None = Field(default=None, max_length=1024)
    period_s: float | None = Field(default=None, gt=0, le=3600, description="time this sample stands for")
    job: str | None = Field(default=None, max_length=255, description="job using this GPU, if any (agent's mapping)")
    rank: int | None = Field(default=None, ge=0, le=INT64, description="that job's rank on this GPU")


#: The fields of `GpuSample` that say who the samples are of: one value for a whole `GpuSeries`.
SERIES_KEYS = ("gpu", "uuid", "job", "rank")
#: The fields of `GpuSample` that a `GpuSeries` carries as columns (``processes`` is the last sample's).
SERIES_COLUMNS = tuple(name for name in GpuSample.model_fields if name not in (*SERIES_KEYS, "processes"))
_series_columns = attrgetter(*SERIES_COLUMNS)  # a series' columns, in SERIES_COLUMNS' order


class _SeriesKeys(_Model):
    gpu: int = Field(ge=0, le=1023, description="GPU index on the node")
    uuid: str = Field(min_length=1, max_length=96)
    job: str | None = Field(default=None, max_length=255, description="job using this GPU in every sample")
    rank: int | None = Field(default=None, ge=0, le=INT64, description="that job's rank on this GPU")
    processes: list[GpuProcess] | None = Field(default=None, max_length=1024, description="at the last sample")


def _column(name: str) -> tuple[Any, Any]:
    """A `GpuSample` field as a column: a list of its values, each held to the field's own bounds."""
    info = GpuSample.model_fields[name]
    (kind,) = [a for a in get_args(info.annotation) or (info.annotation,) if a is not type(None)]
    item = Annotated[kind, *info.metadata] if info.metadata else kind
    if info.is_required():  # ts: every sample has one
        return list[item], Field(min_length=1, max_length=MAX_BATCH_ITEMS)  # type: ignore[valid-type]
    return Union[list[item | None], None], Field(default=None, max_length=MAX_BATCH_ITEMS)  # type: ignore[valid-type]  # noqa: UP007


GpuSeries = create_model(  # one definition of the fields and their bounds: GpuSample's
    "GpuSeries",
    __base__=_SeriesKeys,
    __doc__="""Samples of one GPU with one owner (job and rank), in time order, column by column: what a
    list of `GpuSample` says in a quarter of the bytes, decoded by the server at a fraction of the
    cost (bench/README.md). Column ``ts`` has one value per sample; every other column is either absent (no
    sample has the field) or as long as ``ts``, with null where a sample lacks the value.""",
    **{name: _column(name) for name in SERIES_COLUMNS},
)

S = TypeVar("S")


def to_series(samples: Iterable[Any], make: Callable[..., S]) -> list[S]:
    """``samples`` (`GpuSample` or anything with its attributes) as series: one per GPU and owner, in
    time order; ``make`` builds a series from its fields (`GpuSeries`, or the server's decoding type)."""
    runs: dict[tuple[Any, ...], list[Any]] = {}
    for s in samples:
        key = (s.gpu, s.uuid, s.job, s.rank)
        run = runs.get(key)
        if run is None:
            runs[key] = [s]
        else:
            run.append(s)
    out = []
    for (gpu, uuid, job, rank), run in runs.items():
        run.sort(key=_ts)
        columns: dict[str, Any] = {}
        for name in SERIES_COLUMNS:
            values = [getattr(s, name) for s in run]
            if name == "ts" or any(v is not None for v in values):
                columns[name] = values
        out.append(make(gpu=gpu, uuid=uuid, job=job, rank=rank, processes=run[-1].processes, **columns))
    return out


def _ts(sample: Any) -> float:
    return sample.ts


def sample_at(series: Any, i: int, make: Callable[..., S]) -> S:
    """Sample ``i`` of ``series`` (a `GpuSeries` or the server's decoding of one), built by ``make``."""
    values = {name: column[i] for name in SERIES_COLUMNS if (column := getattr(series, name)) is not None}
    keys = {name: getattr(series, name) for name in SERIES_KEYS}
    return make(**keys, processes=series.processes if i == len(series.ts) - 1 else None, **values)


def series_periods(series: Any) -> list[float]:
    """The time each sample of ``series`` stands for (``period_s``; 1 s where the agent did not say).
    A column that says it for every sample is returned as it is, not copied: do not change the list."""
    periods = series.period_s
    if not periods:
        return [1.0] * len(series.ts)
    if None in periods or 0 in periods:
        return [p or 1.0 for p in periods]
    return periods


def series_length_errors(series: Sequence[Any]) -> list[tuple[int, str, str]]:
    """(series index, column, why) for each column not as long as its series' ``ts``. A series whose
    columns all are (every one the server receives) costs one C call for its columns and one set."""
    out = []
    for n, s in enumerate(series):
        size, columns = len(s.ts), _series_columns(s)
        if {len(column) for column in columns if column is not None} <= {size}:
            continue
        for name, column in zip(SERIES_COLUMNS, columns, strict=True):
            if column is not None and len(column) != size:
                out.append((n, name, f"{len(column)} values for {size} timestamps"))
    return out


#: The item lists of a `Batch` whose items carry a ``ts`` (a series carries a list of them).
_TIMED = ("samples", "logs", "events", "steps", "checkpoints", "ib")


def batch_errors(batch: Any, now: float) -> list[tuple[tuple[Any, ...], str]]:
    """(location, why) for each value of ``batch`` (a `Batch` or the server's decoding of one) that its
    fields' static bounds cannot refuse but a reader could not use: a timestamp outside
    [now - `TS_PAST_S`, now + `TS_FUTURE_S`], event ``data`` nested too deep, too large or holding a
    non-finite number, an ``xid`` event whose code is not an integer."""
    lo, hi = now - TS_PAST_S, now + TS_FUTURE_S
    out: list[tuple[tuple[Any, ...], str]] = []
    window = f"outside the accepted window around the server's clock ({lo:.0f} to {hi:.0f})"
    for kind in _TIMED:
        for n, item in enumerate(getattr(batch, kind)):
            if not lo <= item.ts <= hi:
                out.append(((kind, n, "ts"), f"timestamp {item.ts!r} {window}"))
    for n, s in enumerate(batch.series):  # (protocol 3's series have no ts: their columns are checked apart)
        if (ts := getattr(s, "ts", None)) and not (lo <= min(ts) and max(ts) <= hi):
            i = next(i for i, t in enumerate(ts) if not lo <= t <= hi)
            out.append((("series", n, "ts", i), f"timestamp {ts[i]!r} {window}"))
    for n, ev in enumerate(batch.events):
        if why := data_error(ev.data):
            out.append((("events", n, "data"), why))
        elif ev.kind == "xid" and "xid" in ev.data:  # no code at all: stored, counted under no code
            code = ev.data["xid"]
            if type(code) is not int or not 0 <= code <= MAX_XID:
                out.append((("events", n, "data", "xid"), f"an xid event's code is an integer, 0 to {MAX_XID}"))
    return out


def data_error(data: Any) -> str | None:
    """Why free-form ``data`` cannot be stored for every reader (too deep, too large, a non-finite
    number), or None."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > MAX_DATA_DEPTH:
                return f"nested deeper than {MAX_DATA_DEPTH}"
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
        elif isinstance(value, float) and not math.isfinite(value):
            return "a number that is not finite"
    if len(json.dumps(data, ensure_ascii=False).encode()) > MAX_DATA_BYTES:
        return f"over {MAX_DATA_BYTES} bytes as JSON"
    return None


class JobProcess(_Model):
    """One process of a training job on a node: how samples of the GPU it uses are attributed.

    Sent by the training client to its local agent, or discovered by the agent from the process's
    environment (SLURM_JOB_ID / SLURM_PROCID, pod name, torchrun's RANK / LOCAL_RANK / WORLD_SIZE)."""

    job: str = _Name
    pid: int = Field(ge=1, le=INT64)
    rank: int | None = Field(default=None, ge=0, le=INT64)
    local_rank: int | None = Field(default=None, ge=0, le=INT64)
    world_size: int | None = Field(default=None, ge=1, le=INT64)
    gpu: int | None = Field(default=None, ge=0, le=1023, description="GPU index the process uses, if known")
    scheduler: str = Field(default="local", max_length=32, description="local | slurm | kubernetes | torchrun")
    external_id: str | None = Field(default=None, max_length=255, description="SLURM_JOB_ID or namespace/pod")
    hang_timeout_s: float | None = Field(default=None, gt=0)


class CollectiveStat(_Model):
    """One op's collectives in a step. ``seconds`` is device time where ``gpu_seconds`` is set (CUDA
    events), else host time. Bandwidths follow nccl-tests: algbw = bytes / time, busbw = bus_bytes / time."""

    count: int = Field(ge=0)
    seconds: float = Field(ge=0)
    bytes: int = Field(default=0, ge=0)
    gpu_seconds: float | None = Field(default=None, ge=0, description="time on the GPU, from CUDA events")
    bus_bytes: float | None = Field(
        default=None, ge=0, description="sum of bytes x nccl-tests' bus factor for the group's size"
    )


class StepReport(_Model):
    """One training step of one rank, as the training client timed it."""

    job: str = _Name
    rank: int = Field(ge=0, le=INT64)
    step: int = Field(ge=0, le=INT64)
    ts: float = Field(gt=0, description="unix time the step ended")
    duration_s: float = Field(ge=0, description="wall time of the step")
    comm_s: float = Field(default=0.0, ge=0, description="time inside collectives during the step")
    exposed_s: float | None = Field(
        default=None, ge=0, description="time the step waited for collectives (not overlapped by compute)"
    )
    tokens: float | None = Field(default=None, ge=0)
    samples: float | None = Field(default=None, ge=0)
    collectives: dict[str, CollectiveStat] = Field(default_factory=dict, description="by op: all_reduce, …")


class CheckpointReport(_Model):
    """One checkpoint save of a job, as the training client saw it (gpuwatch.client.AsyncCheckpointer)."""

    job: str = _Name
    rank: int = Field(ge=0, le=INT64)
    step: int = Field(ge=0, le=INT64)
    ts: float = Field(gt=0, description="unix time the save ended (complete on disk) or failed")
    path: str = Field(max_length=4096)
    ok: bool = Field(description="complete and valid; false: the save failed (error says why)")
    blocking_s: float = Field(default=0.0, ge=0, description="time the training loop waited (copy to host)")
    write_s: float = Field(default=0.0, ge=0, description="background write time, fsync and marker included")
    size_bytes: int = Field(default=0, ge=0, le=INT64)
    error: str | None = Field(default=None, max_length=2000)


class ClientReport(_Model):
    """What `gpuwatch.client` POSTs to its local agent (http://127.0.0.1:8601/v1/report by default)."""

    version: int = Field(default=PROTOCOL_VERSION, ge=1, le=PROTOCOL_VERSION)
    process: JobProcess
    steps: list[StepReport] = Field(default_factory=list, max_length=MAX_BATCH_ITEMS)
    checkpoints: list[CheckpointReport] = Field(default_factory=list, max_length=1000)
    dropped: int = Field(default=0, ge=0, description="steps the client dropped since it started (agent away)")


class IbPortSample(_Model):
    """One InfiniBand port's counters: rates from consecutive readings, wrap-around corrected."""

    ts: float = Field(gt=0)
    device: str = Field(min_length=1, max_length=64, description="e.g. mlx5_0")
    port: int = Field(ge=0, le=255)
    xmit_bytes_per_s: float | None = Field(default=None, ge=0)
    rcv_bytes_per_s: float | None = Field(default=None, ge=0)
    errors: Counters = Field(default_factory=dict, description="error counters since boot, by sysfs name")


class LogLine(_Model):
    """One line of a log stream. (node, stream, seq) identifies it: a replay stores nothing twice."""

    stream: str = _Name
    seq: int = Field(ge=0, le=INT64)
    ts: float = Field(gt=0)
    text: str = Field(max_length=MAX_LOG_LINE_CHARS)


def xid_code(event: Event) -> int | None:
    """An ``xid`` event's code; None for another kind of event, or for an Xid reported without its code
    (stored, and counted under no code). Takes the decoder's mirror of `Event` too."""
    code = event.data.get("xid") if event.kind == "xid" else None
    return code if type(code) is int else None


class Event(_Model):
    """Something that happened on a node (an Xid, a lost GPU, an ECC error …), sequenced like log lines."""

    stream: str = _Name
    seq: int = Field(ge=0, le=INT64)
    ts: float = Field(gt=0)
    kind: str = Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_]*$")
    gpu: int | None = Field(default=None, ge=0, le=1023)
    message: str = Field(default="", max_length=4096)
    data: dict[str, Any] = Field(
        default_factory=dict,
        description=f"free-form, at most {MAX_DATA_DEPTH} deep and {MAX_DATA_BYTES} bytes as JSON, finite numbers; "
        f"an ``xid`` event's ``xid`` is its integer code (0 to {MAX_XID})",
    )


class Batch(_Model):
    """What the agent ships every few seconds. ``batch_id`` is unique per node; a batch the server has
    already stored is acknowledged and ignored, which makes retries after a lost response safe."""

    version: int = Field(default=PROTOCOL_VERSION, ge=1, le=PROTOCOL_VERSION)
    batch_id: int = Field(ge=0, le=INT64)
    samples: list[GpuSample] = Field(default_factory=list, max_length=MAX_BATCH_ITEMS, description="protocol 1")
    series: list[GpuSeries] = Field(  # type: ignore[valid-type]
        default_factory=list, max_length=MAX_BATCH_ITEMS, description="samples column by column (protocol 2)"
    )
    logs: list[LogLine] = Field(default_factory=list, max_length=MAX_BATCH_ITEMS)
    events: list[Event] = Field(default_factory=list, max_length=MAX_BATCH_ITEMS)
    processes: list[JobProcess] = Field(default_factory=list, max_length=MAX_BATCH_ITEMS)
    steps: list[StepReport] = Field(default_factory=list, max_length=MAX_BATCH_ITEMS)
    checkpoints: list[CheckpointReport] = Field(default_factory=list, max_length=MAX_BATCH_ITEMS)
    ib: list[IbPortSample] = Field(default_factory=list, max_length=MAX_BATCH_ITEMS)
    dropped: Counters = Field(
        default_factory=dict, description="items the agent had to drop since it first started, by kind"
    )
    clock_offset_s: float | None = Field(
        default=None,
        ge=-MAX_CLOCK_OFFSET_S,
        le=MAX_CLOCK_OFFSET_S,
        description="server clock minus the agent's, as the agent measured it: the server adds it to every "
        "time in the batch (absent: the times are taken as they are)",
    )


def sample_count(batch: Any) -> int:
    """GPU samples in a batch (a `Batch` or the server's decoding of one), rows and series alike."""
    series = batch.series
    if (size := getattr(series, "size", None)) is not None:  # the server's block of a protocol 3 batch
        return len(batch.samples) + size
    return len(batch.samples) + sum(len(s.ts) for s in series)


class BatchAck(_Model):
    batch_id: int
    duplicate: bool = False
    samples: int = 0
    logs: int = 0
    events: int = 0
    server_time: float | None = Field(
        default=None, description="the server's clock as it answered: agents measure their clock's offset"
    )
    stack_tasks: int = Field(
        default=0, ge=0, description="stack captures waiting for this node: fetch them from the stack tasks route"
    )


class RegisterRequest(_Model):
    hostname: str = _Name
    node: str | None = Field(default=None, max_length=255, description="the agent's node name; must be the token's")
    agent_version: str = Field(default="", max_length=64)
    collector: str = Field(default="", max_length=64, description="nvml or simulated")
    driver_version: str | None = Field(default=None, max_length=64)
    gpus: list[GpuInfo] = Field(default_factory=list, max_length=1024)


class RegisterResponse(_Model):
    node: str
    server_time: float
    protocol: int = Field(default=1, description="newest batch version the server reads (absent: 1)")
    max_body_bytes: int | None = Field(
        default=None, description="largest request body the server takes, after gunzip too (absent: unknown)"
    )


class Heartbeat(_Model):
    ts: float = Field(gt=0)
    spool_files: int = Field(default=0, ge=0)
    spool_bytes: int = Field(default=0, ge=0)
    dropped: Counters = Field(default_factory=dict)


# -- the run protocol: `gpuwatch run` (the supervisor) and the server ---------------------------------
#
# A supervisor registers each attempt of its job (`RunStart`), reports how it ended (`RunExit`) and asks
# for the decision about a failure (`DecisionAnswer`). When the server is away it decides by itself and
# keeps the run, its exit and its decision (`LocalDecision`) in an outbox on disk; replayed later, the
# times in them are the node's, moved onto the server's clock by ``clock_offset_s`` (as a batch's are).

Scheduler = Literal["local", "slurm", "kubernetes"]


class RunStart(_Model):
    """An attempt of a job begins. A repeated ``key`` is the same run (a replay creates nothing twice)."""

    job: str = _Name
    node: str | None = Field(
        default=None, max_length=255, description="the supervisor's node; must be the token's (403 otherwise)"
    )
    command: str | None = Field(default=None, max_length=10_000)
    key: str | None = Field(
        default=None, min_length=1, max_length=64, description="the supervisor's id: a repeated start is the same run"
    )
    restart_of: str | None = Field(default=None, max_length=64, description="key of the failed run it restarts")
    resume_from: str | None = Field(default=None, max_length=4096, description="the checkpoint it resumes from")
    policy: dict[str, Any] | None = Field(default=None, description="recovery policy overrides for the job")
    scheduler: Scheduler = Field(
        default="local",
        description="who restarts the job: its supervisor (local), or the server through Slurm/Kubernetes",
    )
    external_id: str | None = Field(
        default=None, max_length=255, description="the scheduler's id: Slurm job id, or namespace/name of a Job"
    )
    started_at: float | None = Field(
        default=None, gt=0, description="when it started, on the node's clock (absent: when the server hears of it)"
    )
    clock_offset_s: float | None = Field(
        default=None,
        ge=-MAX_CLOCK_OFFSET_S,
        le=MAX_CLOCK_OFFSET_S,
        description="server clock minus the node's, as the node measured it: added to the times of the request",
    )


class RankExit(_Model):
    rank: int = Field(ge=0, le=INT64)
    exit_code: int | None = Field(default=None, ge=-(2**31), le=2**31 - 1)
    signal: int | None = Field(default=None, ge=1, le=64)
    stream: str | None = Field(default=None, max_length=255, description="the rank's own log stream, if apart")


class CheckpointRef(_Model):
    path: str = Field(max_length=4096)
    step: int | None = Field(default=None, ge=0, le=INT64)
    saved_at: float | None = Field(default=None, gt=0, description="unix time it was written (its mtime)")


class LocalDecision(_Model):
    """A decision the supervisor took by itself (the server away, or the supervisor told to stop), with
    its own diagnosis, recorded by the server as it happened: at ``decided_at``, actor ``supervisor``."""

    diagnosis: dict[str, Any] = Field(description="`gpuwatch.diagnosis.Diagnosis.to_json()`")
    decision: dict[str, Any] = Field(description="`gpuwatch.recovery.Decision.to_json()`")
    decided_at: float | None = Field(
        default=None, gt=0, description="when it was decided, node's clock (absent: when the server hears of it)"
    )
    restarted_at: float | None = Field(
        default=None, gt=0, description="when the supervisor relaunched the job, node's clock (absent: not yet)"
    )


class RunExit(_Model):
    """How an attempt ended, the latest valid checkpoint then, and (server away) the supervisor's decision."""

    exit_code: int | None = Field(default=None, ge=-(2**31), le=2**31 - 1)
    signal: int | None = Field(default=None, ge=1, le=64)
    streams: list[Annotated[str, MaxLen(255)]] = Field(
        default_factory=list, max_length=1024, description="the run's log streams"
    )
    ranks: list[RankExit] = Field(default_factory=list, max_length=100_000, description="how each rank ended")
    lines: dict[Annotated[str, MaxLen(255)], Annotated[int, Ge(0), Le(INT64)]] = Field(
        default_factory=dict,
        max_length=1024,
        description="each stream's number of lines as the supervisor read them: the diagnosis waits for them",
    )
    checkpoint: CheckpointRef | None = Field(default=None, description="the latest valid checkpoint at the exit")
    local: LocalDecision | None = Field(default=None, description="the supervisor's own decision")
    ended_at: float | None = Field(
        default=None, gt=0, description="when it ended, on the node's clock (absent: when the server hears of it)"
    )
    clock_offset_s: float | None = Field(
        default=None,
        ge=-MAX_CLOCK_OFFSET_S,
        le=MAX_CLOCK_OFFSET_S,
        description="server clock minus the node's, as the node measured it: added to the times of the request",
    )

    @model_validator(mode="before")
    @classmethod
    def _flat_local(cls, data: Any) -> Any:
        """An outbox written before `local` existed has ``diagnosis``, ``decision``, ``restarted`` flat;
        those must be objects (anything else is refused, not read as one)."""
        if isinstance(data, dict) and "local" not in data and (data.get("decision") or data.get("diagnosis")):
            decision = data.get("decision") or {}
            for name, value in (("decision", decision), ("diagnosis", data.get("diagnosis") or {})):
                if not isinstance(value, dict):
                    raise ValueError(f"a flat {name} must be an object, not {type(value).__name__}")
            data = dict(data)
            data.pop("decision", None)
            local = {"diagnosis": data.pop("diagnosis", None) or {}, "decision": decision}
            if isinstance(decision.get("at"), int | float):  # it was written as it was decided
                local["decided_at"] = decision["at"]
                if data.pop("restarted", False):
                    local["restarted_at"] = decision["at"]
            data["local"] = local
        return data

    def times(self) -> list[tuple[str, float]]:
        """(field, time) of each node-clock time the exit carries, for the window check."""
        out = [("ended_at", self.ended_at), ("checkpoint.saved_at", self.checkpoint and self.checkpoint.saved_at)]
        if self.local is not None:
            out += [("local.decided_at", self.local.decided_at), ("local.restarted_at", self.local.restarted_at)]
        return [(name, t) for name, t in out if t is not None]


class RunStarted(_Model):
    id: int
    job_id: int
    attempt: int


class RunEnded(_Model):
    run_id: int
    state: str
    incident_id: int | None


class DecisionAnswer(_Model):
    """The answer to a (long-polled) decision request about a run."""

    state: Literal["pending", "decided", "none"] = Field(
        description="pending (not decided yet), decided, or none (the run did not fail)"
    )
    run_id: int
    incident_id: int | None = None
    decision: dict[str, Any] | None = Field(default=None, description="`gpuwatch.recovery.Decision.to_json()`")
    actor: str | None = None


#: Longest wait a decision request may ask the server to hold its answer for.
DECISION_WAIT_MAX_S = 30.0


def on_server_clock(ts: float | None, offset_s: float | None) -> float | None:
    """A node's time moved onto the server's clock by the node's measured offset (absent: as it is)."""
    return None if ts is None else ts + (offset_s or 0.0)


# -- stack captures: the server asks a node's agent for the stacks of a job's ranks (hang localisation) ------


class StackTask(_Model):
    """One capture the server asks of this node: the stacks of ``job``'s ranks ``ranks`` that run here."""

    dump_id: int = Field(ge=1, le=INT64)
    job: str = _Name
    ranks: list[int] = Field(default_factory=list, max_length=4096)


class StackTasks(_Model):
    tasks: list[StackTask] = Field(default_factory=list, max_length=1024)


class StackFrame(_Model):
    """One frame, innermost first in its thread: a Python function, or a native one (``native``)."""

    function: str = Field(max_length=512)
    file: str = Field(default="", max_length=1024, description="the file as py-spy shortens it (train.py)")
    path: str = Field(default="", max_length=4096, description="the full path (tells library from user code)")
    line: int = Field(default=0, ge=0, le=INT64)
    native: bool = False


class ThreadStack(_Model):
    name: str = Field(default="", max_length=255, description="Python's name of it, when py-spy could read it")
    active: bool = False
    main: bool = Field(default=False, description="the process's main thread (its OS thread id is the pid)")
    frames: list[StackFrame] = Field(default_factory=list, max_length=1024)


class FlightRecord(_Model):
    """What PyTorch's NCCL flight recorder dump of a rank says about the default process group: the
    sequence number of the last collective it entered (enqueued), started and completed, and the last
    operations recorded."""

    path: str = Field(max_length=4096)
    error: str | None = Field(default=None, max_length=2000, description="the dump could not be read")
    entered: int | None = Field(default=None, ge=0, le=INT64)
    started: int | None = Field(default=None, ge=0, le=INT64)
    completed: int | None = Field(default=None, ge=0, le=INT64)
    last_op: str | None = Field(default=None, max_length=255, description="e.g. nccl:all_reduce")
    entries: list[dict[str, Any]] = Field(default_factory=list, max_length=64, description="{seq, op, state}")


class RankStack(_Model):
    """One rank's capture: its threads' stacks (py-spy), or why there are none, and its flight recorder."""

    rank: int = Field(ge=0, le=INT64)
    pid: int = Field(ge=1, le=INT64)
    threads: list[ThreadStack] = Field(default_factory=list, max_length=1024)
    native: bool = Field(default=False, description="native frames were asked for and given")
    error: str | None = Field(default=None, max_length=2000)
    flight_recorder: FlightRecord | None = None


class StackAnswer(_Model):
    ranks: list[RankStack] = Field(default_factory=list, max_length=4096)
