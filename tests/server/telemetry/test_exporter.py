"""The /metrics rendering of telemetry: names, units, absent fields, silent GPUs, and the server's own
counters."""

from __future__ import annotations

import httpx
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.protocol import GpuInfo, GpuSample
from gpuwatch.taxonomy import REASONS
from server.telemetry.exporter import MetricsExporter
from server.telemetry.latest import Telemetry
from tests.helpers import InProcessServer, add_samples


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _render(telemetry: Telemetry, clock: Clock) -> str:
    text = MetricsExporter(telemetry, CollectorRegistry(), node_timeout_s=30, clock=clock).render().decode()
    # Every line must parse as the Prometheus text format, and every family's TYPE must name its samples.
    for family in text_string_to_metric_families(text):
        assert all(s.name.startswith(family.name) for s in family.samples), family.name
    return text


def test_silent_gpu_stops_being_exported_but_its_age_grows() -> None:
    clock = Clock(1_000.0)
    t = Telemetry()
    t.set_inventory("n1", [GpuInfo(index=i, uuid=f"GPU-{i}", name="NVIDIA H100 80GB HBM3") for i in range(2)])
    add_samples(t, "n1", [GpuSample(ts=999.0, gpu=i, uuid=f"GPU-{i}", util_gpu=97.0) for i in range(2)], now=1_000.0)
    t.touch("n1", now=1_000.0)
    assert _render(t, clock).count("DCGM_FI_DEV_GPU_UTIL{") == 2

    clock.now = 1_020.0  # GPU 0 keeps reporting, GPU 1 has gone silent
    add_samples(t, "n1", [GpuSample(ts=1_019.0, gpu=0, uuid="GPU-0", util_gpu=95.0)], now=1_020.0)
    t.touch("n1", now=1_020.0)
    clock.now = 1_045.0
    text = _render(t, clock)
    assert text.count("DCGM_FI_DEV_GPU_UTIL{") == 1
    assert 'gpu="0"' in text.split("DCGM_FI_DEV_GPU_UTIL{")[1].split("\n")[0]
    ages = {
        line.split('gpu="')[1][0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("gpuwatch_gpu_last_sample_seconds{")
    }
    assert ages == {"0": 25.0, "1": 45.0}
    assert 'gpuwatch_node_up{instance="n1",node="n1"} 1.0' in text


def test_node_down_after_timeout_and_counters_keep_dcgm_names() -> None:
    clock = Clock(2_000.0)
    t = Telemetry()
    add_samples(
        t,
        "n1",
        [
            GpuSample(
                ts=1_999.0,
                gpu=0,
                uuid="GPU-0",
                ecc_dbe_volatile=3,
                nvlink_tx_kib=2048,
                nvlink_rx_kib=1024,
                pcie_tx_kbps=10.0,
                power_w=412.5,
            )
        ],
        now=2_000.0,
    )
    t.touch("n1", {"logs": 7}, now=2_000.0)
    text = _render(t, clock)
    assert "# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter" in text
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{" in text and "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL_total" not in text
    line = next(ln for ln in text.splitlines() if ln.startswith("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{"))
    assert line.endswith(" 3.0")  # (2048 + 1024) KiB = 3 MiB
    assert any(ln.startswith("DCGM_FI_PROF_PCIE_TX_BYTES{") and ln.endswith(" 10240.0") for ln in text.splitlines())
    assert 'gpuwatch_agent_dropped_total{kind="logs",node="n1"} 7.0' in text
    clock.now = 2_031.0
    assert 'gpuwatch_node_up{instance="n1",node="n1"} 0.0' in _render(t, clock)


def test_counters_of_known_label_values_are_at_zero_on_a_fresh_server(live_server: InProcessServer) -> None:
    """So that increase() and rate() see their first event (a series born at 1 shows none)."""
    text = httpx.get(f"{live_server.url}/metrics").text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }

    def values(name: str, label: str) -> dict[str, float]:
        return {dict(labels)[label]: v for (n, labels), v in samples.items() if n == name}

    taxonomy = {(reason, info.category): 0.0 for reason, info in REASONS.items()}
    for name in ("gpuwatch_failures_total", "gpuwatch_lost_gpu_hours_total"):
        by_reason = {
            (dict(labels)["reason"], dict(labels)["category"]): v for (n, labels), v in samples.items() if n == name
        }
        assert by_reason == taxonomy, name
    assert values("gpuwatch_incidents_total", "trigger") == dict.fromkeys(
        ["run_failed", "xid", "node_silent", "hang"], 0.0
    )
    assert values("gpuwatch_recovery_decisions_total", "action") == dict.fromkeys(
        ["restart", "restart_exclude_node", "notify", "stop", "dry_run"], 0.0
    )
    assert values("gpuwatch_detections_total", "kind") == {"straggler": 0.0, "hang": 0.0}
    assert values("gpuwatch_ingest_batches_total", "outcome") == dict.fromkeys(["stored", "duplicate", "rejected"], 0.0)
    # Labelled by what only an event names: nothing yet, but declared.
    assert values("gpuwatch_restarts_total", "job") == {} and values("gpuwatch_xid_events_total", "xid") == {}
    assert "# TYPE gpuwatch_xid_events_total counter" in text
    assert "# TYPE gpuwatch_incident_info gauge" in text and "\ngpuwatch_incident_info{" not in text


def test_the_server_exports_its_own_cpu_and_memory(live_server: InProcessServer) -> None:
    """One process runs on one core: its CPU seconds say when to add a replica (docs/scale-out.md)."""
    families = {f.name: f for f in text_string_to_metric_families(httpx.get(f"{live_server.url}/metrics").text)}
    cpu = families["process_cpu_seconds"].samples[0].value
    rss = families["process_resident_memory_bytes"].samples[0].value
    assert cpu > 0 and rss > 10 * 2**20


def test_a_nodes_gpus_are_its_own_in_index_order_however_they_were_learnt() -> None:
    """`Telemetry.gpus(node)` (an incident's snapshot) finds a node's GPUs by its own index, not by a scan
    of every GPU: from the inventory, and from samples of GPUs the inventory did not list."""
    t = Telemetry()
    for node in ("n1", "n10", "n2"):
        t.set_inventory(node, [GpuInfo(index=i, uuid=f"{node}-GPU-{i}", name="H100") for i in (3, 0, 1)])
    add_samples(t, "n1", [GpuSample(ts=1.0, gpu=2, uuid="n1-GPU-2", util_gpu=5.0)], now=1.0)
    add_samples(t, "n9", [GpuSample(ts=1.0, gpu=7, uuid="n9-GPU-7", util_gpu=5.0)], now=1.0)  # no inventory
    assert [(s.node, s.info.index) for s in t.gpus("n1")] == [("n1", 0), ("n1", 1), ("n1", 2), ("n1", 3)]
    assert [(s.node, s.info.uuid) for s in t.gpus("n9")] == [("n9", "n9-GPU-7")]
    assert t.gpus("unknown") == []
    assert [(s.node, s.info.index) for s in t.gpus()][:5] == [("n1", 0), ("n1", 1), ("n1", 2), ("n1", 3), ("n10", 0)]
    assert len(t.gpus()) == 4 + 3 + 3 + 1
