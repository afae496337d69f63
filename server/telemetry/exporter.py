"""/metrics: the latest GPU values under dcgm-exporter's names and labels, plus gpuwatch's own series.

A custom collector renders straight from `Telemetry` on each scrape, so a GPU that disappears stops
being exported instead of lingering as a stale gauge. Every GPU series carries dcgm-exporter's labels
(`gpu`, `UUID`, `device`, `modelName`, `Hostname`) and `instance="<node>"`: the server exports every
node's GPUs, so Prometheus must scrape it with `honor_labels: true` for the standard dcgm-exporter
dashboard (which selects by `instance`) to work unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from gpuwatch.protocol import GpuSample
from server.telemetry.job_tracker import JobTracker
from server.telemetry.latest import NO_FAULTS, Faults, GpuState, Telemetry

_KIB = 1024.0


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    kind: str  # "gauge" | "counter" (dcgm-exporter's counters have no _total suffix added)
    help: str
    value: Callable[[GpuSample], float | int | bool | None]
    fault: str | None = None  # the `Faults` field it is: exported for every GPU with one known, heard or not


def _mib_total(s: GpuSample) -> float | None:
    if s.nvlink_tx_kib is None and s.nvlink_rx_kib is None:
        return None
    return ((s.nvlink_tx_kib or 0) + (s.nvlink_rx_kib or 0)) / _KIB


def _bytes_per_s(kbps: float | None) -> float | None:
    return None if kbps is None else kbps * _KIB


DCGM_FIELDS: tuple[_Field, ...] = (
    _Field("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda s: s.util_gpu),
    _Field("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", lambda s: s.util_mem),
    _Field("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", lambda s: s.fb_used_mib),
    _Field("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", lambda s: s.fb_free_mib),
    _Field("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda s: s.power_w),
    _Field("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda s: s.temp_c),
    _Field("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", lambda s: s.sm_clock_mhz),
    _Field("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", lambda s: s.mem_clock_mhz),
    _Field(
        "DCGM_FI_DEV_XID_ERRORS",
        "gauge",
        "Value of the last XID error encountered.",
        lambda s: s.xid_last or 0,
    ),
    _Field(
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "counter",
        "Total number of single-bit volatile ECC errors.",
        lambda s: s.ecc_sbe_volatile,
        "ecc_sbe_volatile",
    ),
    _Field(
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "counter",
        "Total number of double-bit volatile ECC errors.",
        lambda s: s.ecc_dbe_volatile,
        "ecc_dbe_volatile",
    ),
    _Field(
        "DCGM_FI_DEV_RETIRED_SBE",
        "counter",
        "Total number of retired pages due to single-bit errors.",
        lambda s: s.retired_pages_sbe,
        "retired_pages_sbe",
    ),
    _Field(
        "DCGM_FI_DEV_RETIRED_DBE",
        "counter",
        "Total number of retired pages due to double-bit errors.",
        lambda s: s.retired_pages_dbe,
        "retired_pages_dbe",
    ),
    _Field(
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "gauge",
        "Whether remapping of rows has failed",
        lambda s: s.remap_failure,
        "remap_failure",
    ),
    _Field(
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "gauge",
        "Current clock throttle reasons (NVML bitmask).",
        lambda s: s.throttle_reasons,
    ),
    _Field(
        "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
        "gauge",
        "PCIe TX throughput (in KB/s) via NVML.",
        lambda s: s.pcie_tx_kbps,
    ),
    _Field(
        "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
        "gauge",
        "PCIe RX throughput (in KB/s) via NVML.",
        lambda s: s.pcie_rx_kbps,
    ),
    _Field(
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        "The rate of data transmitted over the PCIe bus (in bytes per second).",
        lambda s: _bytes_per_s(s.pcie_tx_kbps),
    ),
    _Field(
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        "The rate of data received over the PCIe bus (in bytes per second).",
        lambda s: _bytes_per_s(s.pcie_rx_kbps),
    ),
    _Field(
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "counter",
        "Total NVLink data counter for all lanes, tx + rx (in MiB).",
        _mib_total,
    ),
)

GPU_LABELS = ("gpu", "UUID", "device", "modelName", "Hostname", "instance")


def _labels(state: GpuState) -> tuple[str, ...]:
    info = state.info
    return (str(info.index), info.uuid, f"nvidia{info.index}", info.name, state.node, state.node)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _label_text(state: GpuState) -> str:
    return ",".join(f'{k}="{_escape(v)}"' for k, v in zip(GPU_LABELS, _labels(state), strict=True))


def render_dcgm(gpus: list[tuple[GpuState, str]], known: list[tuple[GpuState, str]] | None = None) -> str:
    """The DCGM families of ``gpus`` (each with its label text) in Prometheus text format, written here
    rather than by prometheus-client: the client would declare a counter as `<name>_total` in its TYPE
    line, and dcgm-exporter's counters (`DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`, …) must keep their exact names,
    TYPE line included. The fault counts (ECC, retired pages, row-remap failure) are those of ``known``
    (default ``gpus``): only a reset clears them, so a GPU unheard since, or whose node fell silent,
    still has them, and its alerts hold."""
    out: list[str] = []
    for field in DCGM_FIELDS:
        value = field.value
        if field.fault is None:
            rows = [(labels, v) for state, labels in gpus if (v := value(state.latest)) is not None]  # type: ignore[arg-type]
        else:
            i = Faults._fields.index(field.fault)
            rows = [(labels, v) for state, labels in known or gpus if (v := _faults(state)[i]) is not None]
        if not rows:
            continue
        out.append(f"# HELP {field.name} {field.help}")
        out.append(f"# TYPE {field.name} {field.kind}")
        name = field.name
        out.extend([f"{name}{{{labels}}} {float(v)!r}" for labels, v in rows])
    return "\n".join(out) + "\n" if out else ""


def _faults(state: GpuState) -> Faults:
    """The GPU's fault counts: those it keeps, else (a state built without them) its latest sample's."""
    if state.faults == NO_FAULTS and state.latest is not None:
        return Faults.of(state.latest)
    return state.faults


def _render_ages(gpus: list[tuple[GpuState, str]], now: float) -> str:
    name = "gpuwatch_gpu_last_sample_seconds"
    lines = [f"{name}{{{labels}}} {float(now - s.received_at)!r}" for s, labels in gpus if s.received_at is not None]
    head = f"# HELP {name} Seconds since the GPU's latest sample reached the server.\n# TYPE {name} gauge\n"
    return head + "".join(line + "\n" for line in lines)


def gpu_lost(state: GpuState, agent_seen: float | None, timeout: float) -> bool:
    """A GPU unheard for ``timeout`` while its node's agent still spoke: it fell off the bus. Judged
    against the agent's last word, not the clock, so it holds while the node is silent (silence is no
    repair) and after a restart (both times are in the database). `gpuwatch_gpu_lost` and the server's
    own GpuFellOffTheBus post (server/notify/alert_state.py) both ask this."""
    return fell_off(state.received_at, agent_seen, timeout)


def fell_off(received_at: float | None, agent_seen: float | None, timeout: float) -> bool:
    """`gpu_lost` of a GPU last sampled at ``received_at``."""
    return received_at is not None and agent_seen is not None and agent_seen - received_at > timeout


def _render_lost(gpus: list[tuple[GpuState, str]], agent_seen: dict[str, float | None], timeout: float) -> str:
    """`gpuwatch_gpu_lost`: 1 for a GPU that fell off the bus (`gpu_lost`), else 0."""
    name = "gpuwatch_gpu_lost"
    lines = []
    for s, labels in gpus:
        if s.received_at is not None:
            lost = gpu_lost(s, agent_seen.get(s.node), timeout)
            lines.append(f"{name}{{{labels}}} {1.0 if lost else 0.0}\n")
    head = (
        f"# HELP {name} 1: the GPU has been unheard for node_timeout_s while its node's agent still reported "
        f"(fallen off the bus), held while the node is silent.\n# TYPE {name} gauge\n"
    )
    return head + "".join(lines)


class MetricsExporter:
    """What /metrics serves: the DCGM families of every GPU heard from recently, then the registry's
    gpuwatch_* families.

    A GPU unheard for node_timeout_s is not exported at all, as dcgm-exporter drops a GPU it cannot
    read: a frozen last value would claim a dead GPU is still busy. Its growing
    `gpuwatch_gpu_last_sample_seconds` says what happened instead, and `gpuwatch_gpu_lost` whether it
    fell off the bus while its node reported. Its fault counts (ECC, retired pages, row-remap failure)
    stay exported: only a reset clears them, so silence must not read as a repair.
    """

    def __init__(
        self,
        telemetry: Telemetry,
        registry: CollectorRegistry,
        node_timeout_s: float,
        clock: Callable[[], float] = time.time,
        jobs: JobTracker | None = None,
        max_rank_series: int = 64,
    ) -> None:
        self._jobs = jobs
        self._max_rank_series = max_rank_series
        self._telemetry = telemetry
        self._registry = registry
        self._node_timeout_s = node_timeout_s
        self._clock = clock
        self._label_texts: dict[tuple[str, int, str, str], str] = {}
        registry.register(_GpuwatchCollector(self))

    def render(self) -> bytes:
        now = self._clock()
        gpus = [(state, self._labels_of(state)) for state in self._telemetry.gpus()]
        fresh = [
            (g, labels)
            for g, labels in gpus
            if g.latest is not None and g.received_at is not None and now - g.received_at <= self._node_timeout_s
        ]
        if len(self._label_texts) > 2 * len(gpus) + 1024:  # GPUs gone or renamed: start over
            self._label_texts = {}
        agent_seen = {n.name: n.agent_seen for n in self._telemetry.nodes()}
        text = render_dcgm(fresh, gpus) + _render_ages(gpus, now) + _render_lost(gpus, agent_seen, self._node_timeout_s)
        return text.encode() + generate_latest(self._registry)

    def _labels_of(self, state: GpuState) -> str:
        """A GPU's label text, built once: with 10,000 GPUs, joining and escaping the six labels of each
        of its 20 series took two thirds of a 1 s scrape (bench/README.md)."""
        key = (state.node, state.info.index, state.info.uuid, state.info.name)
        text = self._label_texts.get(key)
        if text is None:
            text = self._label_texts[key] = _label_text(state)
        return text


class _GpuwatchCollector(Collector):
    """gpuwatch's own per-node and per-GPU series, rendered from `Telemetry` at scrape time."""

    def __init__(self, exporter: MetricsExporter) -> None:
        self._exporter = exporter

    def collect(self) -> Iterator[Metric]:
        exporter = self._exporter
        telemetry, timeout, now = exporter._telemetry, exporter._node_timeout_s, exporter._clock()
        free = Metric("gpuwatch_gpus_unallocated", "GPUs reporting with no job on them (idle capacity).", "gauge")
        unallocated: dict[str, int] = {}
        for state in telemetry.gpus():
            if state.received_at is not None and now - state.received_at <= timeout and state.latest is not None:
                unallocated[state.node] = unallocated.get(state.node, 0) + (state.latest.job is None)
        for node_name, count in sorted(unallocated.items()):
            free.add_sample(free.name, {"node": node_name, "instance": node_name}, float(count))
        yield free

        up = Metric("gpuwatch_node_up", "1 if the node's agent was heard from within node_timeout_s.", "gauge")
        dropped = Metric("gpuwatch_agent_dropped", "Items the node's agent dropped (spool full), by kind.", "counter")
        age = Metric("gpuwatch_node_last_seen_seconds", "Seconds since the node's agent was last heard.", "gauge")
        for node in telemetry.nodes():
            labels = {"node": node.name, "instance": node.name}
            seen = node.last_seen is not None and now - node.last_seen <= timeout
            up.add_sample("gpuwatch_node_up", labels, 1.0 if seen else 0.0)
            if node.last_seen is not None:
                age.add_sample("gpuwatch_node_last_seen_seconds", labels, now - node.last_seen)
            for kind, count in sorted(node.dropped.items()):
                dropped.add_sample("gpuwatch_agent_dropped_total", {"node": node.name, "kind": kind}, float(count))
        yield up
        yield age
        yield dropped
        yield from _ib_families(telemetry, now, timeout)
        if exporter._jobs is not None:
            yield from _job_families(exporter._jobs, exporter._max_rank_series)
            refused = Metric(
                "gpuwatch_job_reports_refused",
                "Reports naming a new job from a node with max_jobs_per_node jobs tracked already (not tracked).",
                "counter",
            )
            refused.add_sample("gpuwatch_job_reports_refused_total", {}, float(exporter._jobs.refused_jobs))
            yield refused


def _ib_families(telemetry: Telemetry, now: float, timeout: float) -> Iterator[Metric]:
    """InfiniBand ports heard from within ``timeout``: data rates and error counters."""
    tx = Metric("gpuwatch_ib_port_transmit_bytes_per_second", "InfiniBand port transmit rate (in B/s).", "gauge")
    rx = Metric("gpuwatch_ib_port_receive_bytes_per_second", "InfiniBand port receive rate (in B/s).", "gauge")
    errors = Metric("gpuwatch_ib_port_errors", "InfiniBand port error counters since boot, by counter.", "counter")
    for node, p, received in telemetry.ib_ports():
        if now - received > timeout:
            continue
        labels = {"node": node, "instance": node, "device": p.device, "port": str(p.port)}
        if p.xmit_bytes_per_s is not None:
            tx.add_sample(tx.name, labels, p.xmit_bytes_per_s)
        if p.rcv_bytes_per_s is not None:
            rx.add_sample(rx.name, labels, p.rcv_bytes_per_s)
        for counter, value in sorted(p.errors.items()):
            errors.add_sample("gpuwatch_ib_port_errors_total", {**labels, "counter": counter}, float(value))
    yield from (tx, rx, errors)


# (metric, help, JobSummary attribute) of the per-job checkpoint series (job label only).
_CHECKPOINT_GAUGES = (
    ("gpuwatch_job_checkpoint_age_seconds", "Seconds since the job's last complete checkpoint.", "checkpoint_age_s"),
    (
        "gpuwatch_job_checkpoint_blocking_seconds",
        "Time the training loop waited in the last checkpoint save (copy to host).",
        "checkpoint_blocking_s",
    ),
    (
        "gpuwatch_job_checkpoint_write_seconds",
        "Background write time of the last checkpoint (fsync and marker included).",
        "checkpoint_write_s",
    ),
    ("gpuwatch_job_checkpoint_size_bytes", "Size of the last complete checkpoint.", "checkpoint_size_bytes"),
    ("gpuwatch_job_checkpoint_interval_seconds", "Time between the last two complete saves.", "checkpoint_interval_s"),
    (
        "gpuwatch_job_checkpoint_optimal_interval_seconds",
        "Young/Daly optimal checkpoint interval: sqrt(2 x blocking time x observed MTBF).",
        "optimal_checkpoint_interval_s",
    ),
    (
        "gpuwatch_job_gpu_hours_at_risk",
        "GPU-hours a failure now would lose: the job's GPUs x time since its last complete checkpoint.",
        "gpu_hours_at_risk",
    ),
)

# (metric, help, JobSummary/RankSummary attribute) of the per-job gauges.
_JOB_GAUGES = (
    ("gpuwatch_job_gpu_utilization", "GPU utilization of the job's GPUs over the window (in %).", "gpu_util_mean"),
    ("gpuwatch_job_comm_overhead_ratio", "Time in collectives / step time over the window.", "comm_overhead"),
    (
        "gpuwatch_job_comm_exposed_ratio",
        "Time the steps waited for collectives (not overlapped by compute) / step time over the window.",
        "comm_exposed",
    ),
    ("gpuwatch_job_step_seconds", "Median step time over the window (in s).", "step_s"),
)


#: gpuwatch_job_gpu_attributed's value for each `JobSummary.gpu_attribution`.
_ATTRIBUTED = {"full": 1.0, "partial": 0.5, "none": 0.0}


def _job_families(jobs: JobTracker, max_rank_series: int) -> Iterator[Metric]:
    """Job series. Label cardinality: one series per job and rank (`rank="all"` for the job as a
    whole); a job with more than ``max_rank_series`` ranks exports only its `rank="all"` series.
    Jobs unheard of for an hour leave the tracker, and so the exposition."""
    gauges = {name: Metric(name, text, "gauge") for name, text, _ in _JOB_GAUGES}
    throughput = Metric("gpuwatch_job_throughput", "Job throughput over the window, by unit (per s).", "gauge")
    idle = Metric("gpuwatch_job_idle_gpu_hours", "GPU-hours the job's GPUs sat under 5% utilization.", "counter")
    gpu_hours = Metric("gpuwatch_job_gpu_hours", "GPU-hours allocated to the job (seen by this server).", "counter")
    stragglers = Metric("gpuwatch_straggler_events", "Straggler events raised, by job.", "counter")
    hangs = Metric("gpuwatch_hang_events", "Hang events raised, by job.", "counter")
    checkpoints = {name: Metric(name, text, "gauge") for name, text, _ in _CHECKPOINT_GAUGES}
    ckpt_failures = Metric(
        "gpuwatch_job_checkpoint_failures", "Checkpoint saves that failed in the background, by job.", "counter"
    )
    attributed = Metric(
        "gpuwatch_job_gpu_attributed",
        "Whether the job's GPU samples are tied to it: 1 every rank with steps has GPU samples, 0.5 some "
        "do, 0 none do (its GPU utilization is unknown, not zero). Absent: no steps nor samples in the window.",
        "gauge",
    )
    bandwidth = {
        kind: Metric(
            f"gpuwatch_job_comm_{kind}_bytes_per_second",
            f"Collectives' {text} per rank over the window, by op (nccl-tests' definition).",
            "gauge",
        )
        for kind, text in (("algbw", "algorithm bandwidth: bytes / time"), ("busbw", "bus bandwidth: algbw x factor"))
    }
    for name in jobs.jobs():
        summary = jobs.summary(name)
        if summary is None:
            continue
        if any(r.steps or r.gpus for r in summary.ranks):
            value = _ATTRIBUTED[summary.gpu_attribution]
            attributed.add_sample("gpuwatch_job_gpu_attributed", {"job": name}, value)
        rows: list[tuple[dict[str, str], object]] = [({"job": name, "rank": "all", "node": ""}, summary)]
        if len(summary.ranks) <= max_rank_series:
            rows += [
                ({"job": name, "rank": str(r.rank), "node": r.node or ""}, r) for r in summary.ranks if r.rank >= 0
            ]
        for metric, _, attr in _JOB_GAUGES:
            for labels, source in rows:
                value = getattr(source, attr)
                if value is not None:
                    gauges[metric].add_sample(metric, labels, float(value))
        for unit, value in (("tokens", summary.tokens_per_s), ("samples", summary.samples_per_s)):
            if value is not None:
                throughput.add_sample("gpuwatch_job_throughput", {"job": name, "unit": unit}, value)
        idle.add_sample("gpuwatch_job_idle_gpu_hours_total", {"job": name}, summary.idle_gpu_hours)
        gpu_hours.add_sample("gpuwatch_job_gpu_hours_total", {"job": name}, summary.gpu_hours)
        stragglers.add_sample("gpuwatch_straggler_events_total", {"job": name}, float(summary.straggler_events))
        hangs.add_sample("gpuwatch_hang_events_total", {"job": name}, float(summary.hang_events))
        for metric, _, attr in _CHECKPOINT_GAUGES:
            if (value := getattr(summary, attr)) is not None:
                checkpoints[metric].add_sample(metric, {"job": name}, float(value))
        for op, c in summary.collectives.items():
            for kind, value in (("algbw", c.algbw_bytes_per_s), ("busbw", c.busbw_bytes_per_s)):
                if value is not None:
                    bandwidth[kind].add_sample(bandwidth[kind].name, {"job": name, "op": op}, value)
        if summary.checkpoint_saves or summary.checkpoint_failures:
            failed = float(summary.checkpoint_failures)
            ckpt_failures.add_sample("gpuwatch_job_checkpoint_failures_total", {"job": name}, failed)
    yield from gauges.values()
    yield from (throughput, idle, gpu_hours, stragglers, hangs, attributed)
    yield from checkpoints.values()
    yield ckpt_failures
    yield from bandwidth.values()
