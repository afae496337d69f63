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

from prometheus_client import Counter, Gauge, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from gpuwatch.protocol import GpuSample
from server.telemetry.latest import GpuState, Telemetry

_KIB = 1024.0


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    kind: str  # "gauge" | "counter" (dcgm-exporter's counters have no _total suffix added)
    help: str
    value: Callable[[GpuSample], float | int | bool | None]


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
    ),
    _Field(
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "counter",
        "Total number of double-bit volatile ECC errors.",
        lambda s: s.ecc_dbe_volatile,
    ),
    _Field(
        "DCGM_FI_DEV_RETIRED_SBE",
        "counter",
        "Total number of retired pages due to single-bit errors.",
        lambda s: s.retired_pages_sbe,
    ),
    _Field(
        "DCGM_FI_DEV_RETIRED_DBE",
        "counter",
        "Total number of retired pages due to double-bit errors.",
        lambda s: s.retired_pages_dbe,
    ),
    _Field(
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "gauge",
        "Whether remapping of rows has failed",
        lambda s: s.remap_failure,
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


def render_dcgm(gpus: list[GpuState]) -> str:
    """The DCGM families in Prometheus text format, written here rather than by prometheus-client:
    the client would declare a counter as `<name>_total` in its TYPE line, and dcgm-exporter's
    counters (`DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`, …) must keep their exact names, TYPE line included."""
    out: list[str] = []
    for field in DCGM_FIELDS:
        rows = [(state, field.value(state.latest)) for state in gpus if state.latest is not None]
        rows = [(state, value) for state, value in rows if value is not None]
        if not rows:
            continue
        out.append(f"# HELP {field.name} {field.help}")
        out.append(f"# TYPE {field.name} {field.kind}")
        for state, value in rows:
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in zip(GPU_LABELS, _labels(state), strict=True))
            out.append(f"{field.name}{{{labels}}} {float(value)!r}")
    return "\n".join(out) + "\n" if out else ""


class MetricsExporter:
    """What /metrics serves: the DCGM families of every GPU heard from recently, then the registry's
    gpuwatch_* families.

    A GPU unheard for node_timeout_s is not exported at all, as dcgm-exporter drops a GPU it cannot
    read: a frozen last value would claim a dead GPU is still busy. Its growing
    `gpuwatch_gpu_last_sample_seconds` says what happened instead.
    """

    def __init__(
        self,
        telemetry: Telemetry,
        registry: CollectorRegistry,
        node_timeout_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._telemetry = telemetry
        self._registry = registry
        self._node_timeout_s = node_timeout_s
        self._clock = clock
        registry.register(_GpuwatchCollector(self))

    def render(self) -> bytes:
        now = self._clock()
        fresh = [
            g
            for g in self._telemetry.gpus()
            if g.received_at is not None and now - g.received_at <= self._node_timeout_s
        ]
        return render_dcgm(fresh).encode() + generate_latest(self._registry)


class _GpuwatchCollector(Collector):
    """gpuwatch's own per-node and per-GPU series, rendered from `Telemetry` at scrape time."""

    def __init__(self, exporter: MetricsExporter) -> None:
        self._exporter = exporter

    def collect(self) -> Iterator[Metric]:
        exporter = self._exporter
        telemetry, timeout, now = exporter._telemetry, exporter._node_timeout_s, exporter._clock()
        age_gpu = Metric(
            "gpuwatch_gpu_last_sample_seconds", "Seconds since the GPU's latest sample reached the server.", "gauge"
        )
        for state in telemetry.gpus():
            if state.received_at is not None:
                labels = dict(zip(GPU_LABELS, _labels(state), strict=True))
                age_gpu.add_sample("gpuwatch_gpu_last_sample_seconds", labels, now - state.received_at)
        yield age_gpu

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


class IngestMetrics:
    """The server's own counters, registered on the app's registry (not the global one, so several
    apps can live in one test process)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.batches = Counter("gpuwatch_ingest_batches", "Ingest batches, by outcome.", ["outcome"], registry=registry)
        self.items = Counter(
            "gpuwatch_ingest_items", "Items stored from ingest batches, by kind.", ["kind"], registry=registry
        )
        self.duplicates = Counter(
            "gpuwatch_ingest_duplicate_items",
            "Log lines and events already stored (replays).",
            ["kind"],
            registry=registry,
        )
        self.rejected = Counter(
            "gpuwatch_ingest_rejected_requests", "Requests refused, by HTTP status.", ["status"], registry=registry
        )
        self.request_bytes = Counter(
            "gpuwatch_ingest_bytes",
            "Request body bytes received on ingest (as sent, compressed or not).",
            registry=registry,
        )
        self.latency = Gauge(
            "gpuwatch_ingest_last_batch_seconds", "Time the last batch took to store.", registry=registry
        )
