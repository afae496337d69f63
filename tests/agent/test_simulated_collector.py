"""Behaviour of the simulated collector: the stand-in for NVML that the demo and the other tests run on."""

from __future__ import annotations

import itertools
import json
import logging
import uuid
from pathlib import Path

import pytest

from agent.collectors.base import GpuCollector, Reading
from agent.collectors.simulated import FAULTS, NAMESPACE, SimulatedCollector, write_fault
from gpuwatch.protocol import GpuInfo, GpuSample

T0 = 1_700_000_000.0
TOTAL_MIB = 81559
GIB = 1024


def _collect(collector: SimulatedCollector, now: float) -> Reading:
    """Collect once, and check every sample survives the wire model's validation."""
    reading = collector.collect(now)
    for sample in reading.samples:
        assert isinstance(sample, GpuSample)
        GpuSample.model_validate(sample.model_dump())
        assert sample.ts == now
    return reading


def _by_gpu(reading: Reading) -> dict[int, GpuSample]:
    return {s.gpu: s for s in reading.samples}


def _run(collector: SimulatedCollector, start: float, seconds: float, step: float = 1.0) -> list[Reading]:
    return [_collect(collector, start + i * step) for i in range(int(seconds / step))]


@pytest.fixture
def faults(tmp_path: Path) -> Path:
    return tmp_path / "faults"


@pytest.fixture
def sim(faults: Path) -> SimulatedCollector:
    return SimulatedCollector("node-a", 4, fault_dir=faults, seed=7)


# --- inventory ------------------------------------------------------------------------------------


def test_inventory_is_stable_and_uuids_unique_across_gpus_and_nodes() -> None:
    a = SimulatedCollector("node-a", 8)
    inv = a.inventory()
    assert [g.index for g in inv] == list(range(8))
    for g in inv:
        GpuInfo.model_validate(g.model_dump())
        assert g.name == "NVIDIA H100 80GB HBM3"
        assert g.memory_total_mib == TOTAL_MIB
        assert g.uuid == f"GPU-{uuid.uuid5(NAMESPACE, f'node-a/{g.index}')}"
    assert inv[0].pci_bus_id == "00000000:18:00.0"
    assert len({g.pci_bus_id for g in inv}) == 8
    assert len({g.uuid for g in inv}) == 8

    assert SimulatedCollector("node-a", 8, seed=123).inventory() == inv  # stable per (node, index)
    other = {g.uuid for g in SimulatedCollector("node-b", 8).inventory()}
    assert not other & {g.uuid for g in inv}

    big = SimulatedCollector("node-a", 64).inventory()
    assert len({g.pci_bus_id for g in big}) == 64


def test_identity_and_bounds() -> None:
    collector: GpuCollector = SimulatedCollector("node-a", 1)
    assert collector.name == "simulated"
    assert collector.driver_version() == "550.54.15 (simulated)"
    collector.close()
    for bad in (0, 65):
        with pytest.raises(ValueError):
            SimulatedCollector("node-a", bad)


def test_deterministic_given_seed() -> None:
    def trace(c: SimulatedCollector) -> list[dict]:
        return [s.model_dump() for r in _run(c, T0, 30) for s in r.samples]

    assert trace(SimulatedCollector("n", 2, seed=1)) == trace(SimulatedCollector("n", 2, seed=1))
    assert trace(SimulatedCollector("n", 2)) == trace(SimulatedCollector("n", 2))  # seed from node name
    assert trace(SimulatedCollector("n", 2, seed=1)) != trace(SimulatedCollector("n", 2, seed=2))


# --- normal operation -----------------------------------------------------------------------------


def test_values_are_plausible_and_vary(sim: SimulatedCollector) -> None:
    readings = _run(sim, T0, 600)
    samples = [s for r in readings for s in r.samples]
    assert len(samples) == 600 * 4
    assert all(not r.events for r in readings)

    for s in samples:
        assert 0 <= s.util_gpu <= 100 and 0 <= s.util_mem <= 100
        assert 60 * GIB <= s.fb_used_mib <= 75 * GIB
        assert s.fb_total_mib == TOTAL_MIB
        assert s.fb_used_mib + s.fb_free_mib == TOTAL_MIB
        assert 0 < s.power_w <= 700
        assert s.power_w == pytest.approx(90 + 6 * s.util_gpu, abs=15)
        assert 30 <= s.temp_c <= 85
        assert s.sm_clock_mhz == 1980 and s.mem_clock_mhz == 2619
        assert s.throttle_reasons == 0
        assert s.ecc_sbe_volatile == 0 and s.ecc_dbe_volatile == 0
        assert s.retired_pages_sbe == s.retired_pages_dbe == 0
        assert s.remapped_rows_correctable == s.remapped_rows_uncorrectable == 0
        assert s.pcie_tx_kbps >= 100 and s.pcie_rx_kbps >= 100  # MB/s scale, in KB/s
        assert s.xid_last is None
        assert s.processes is not None and len(s.processes) == 1
        assert s.processes[0].pid == 10000 + s.gpu
        assert s.processes[0].used_memory_mib == pytest.approx(s.fb_used_mib, abs=1024)

    for gpu in range(4):
        util = [s.util_gpu for s in samples if s.gpu == gpu]
        busy = [u for u in util if 85 <= u <= 99]
        assert len(busy) >= 0.85 * len(util)  # mostly busy …
        assert 8 <= sum(u < 50 for u in util) <= 80  # … with a short checkpoint dip every ~60 s
        assert len(set(util)) > 20
        assert len({s.temp_c for s in samples if s.gpu == gpu}) > 5
        assert len({s.fb_used_mib for s in samples if s.gpu == gpu}) > 5


def test_util_mem_tracks_util_gpu(sim: SimulatedCollector) -> None:
    samples = [s for r in _run(sim, T0, 300) for s in r.samples]
    busy = [s.util_mem for s in samples if s.util_gpu >= 85]
    idle = [s.util_mem for s in samples if s.util_gpu < 50]
    assert busy and idle
    assert min(busy) > max(idle)


def test_gpus_have_their_own_phase(sim: SimulatedCollector) -> None:
    readings = _run(sim, T0, 120)
    per_gpu = [[r.samples[g].util_gpu for r in readings] for g in range(4)]
    assert len({tuple(u) for u in per_gpu}) == 4


def test_temperature_lags_utilisation(sim: SimulatedCollector) -> None:
    samples = [s for r in _run(sim, T0, 300) for s in r.samples if s.gpu == 0]
    for prev, cur in itertools.pairwise(samples):
        assert abs(cur.temp_c - prev.temp_c) < 3  # no jumps from one second to the next
    dips = [s for s in samples if s.util_gpu < 50]
    assert dips
    # during a few-second dip the GPU stays much warmer than its steady state at that utilisation
    assert all(s.temp_c > 30 + 0.5 * s.util_gpu + 10 for s in dips)


def test_nvlink_counters_are_monotonic_at_tens_of_gb_per_s(sim: SimulatedCollector) -> None:
    readings = _run(sim, T0, 300)
    for gpu in range(4):
        tx = [r.samples[gpu].nvlink_tx_kib for r in readings]
        rx = [r.samples[gpu].nvlink_rx_kib for r in readings]
        assert tx == sorted(tx) and rx == sorted(rx)
        rate = (tx[-1] - tx[0]) * 1024 / 299  # bytes/s
        assert 10e9 <= rate <= 100e9


def test_uses_callers_clock_only(sim: SimulatedCollector) -> None:
    first = _by_gpu(_collect(sim, T0))
    again = _by_gpu(_collect(sim, T0))  # no time passed: counters and temperature stand still
    assert again[0].nvlink_tx_kib == first[0].nvlink_tx_kib
    assert again[0].temp_c == first[0].temp_c


# --- fault injection ------------------------------------------------------------------------------


def test_xid_79_loses_only_that_gpu(sim: SimulatedCollector, faults: Path) -> None:
    _collect(sim, T0)
    write_fault(faults, 2, "xid", code=79)
    reading = _collect(sim, T0 + 1)

    assert sorted(_by_gpu(reading)) == [0, 1, 3]
    xid, lost = reading.events
    assert (xid.kind, xid.gpu, xid.data, xid.ts) == ("xid", 2, {"xid": 79}, T0 + 1)
    assert xid.message.startswith("NVRM: Xid (PCI:0000:3a:00): 79,")
    assert "fallen off the bus" in xid.message
    assert (lost.kind, lost.gpu) == ("gpu_lost", 2)

    for later in _run(sim, T0 + 2, 10):
        assert sorted(_by_gpu(later)) == [0, 1, 3]
        assert not later.events


def test_xid_48_counts_a_double_bit_error(sim: SimulatedCollector, faults: Path) -> None:
    _collect(sim, T0)
    write_fault(faults, 1, "xid", code=48)
    reading = _collect(sim, T0 + 1)
    [event] = reading.events
    assert event.kind == "xid" and event.data == {"xid": 48}
    assert "double bit error" in event.message
    samples = _by_gpu(reading)
    assert samples[1].ecc_dbe_volatile == 1 and samples[1].xid_last == 48
    assert samples[0].ecc_dbe_volatile == 0 and samples[0].xid_last is None


def test_xid_74_stalls_nvlink(sim: SimulatedCollector, faults: Path) -> None:
    _collect(sim, T0)
    write_fault(faults, 3, "xid", code=74)
    reading = _collect(sim, T0 + 1)
    assert "NVLink" in reading.events[0].message
    before = _by_gpu(reading)
    after = _by_gpu(_run(sim, T0 + 2, 30)[-1])
    assert after[3].nvlink_tx_kib == before[3].nvlink_tx_kib
    assert after[3].nvlink_rx_kib == before[3].nvlink_rx_kib
    assert after[3].xid_last == 74
    assert after[0].nvlink_tx_kib > before[0].nvlink_tx_kib


def test_xid_13_is_an_application_error_and_the_gpu_carries_on(sim: SimulatedCollector, faults: Path) -> None:
    _collect(sim, T0)
    write_fault(faults, 0, "xid", code=13)
    reading = _collect(sim, T0 + 1)
    [event] = reading.events
    assert "Graphics Engine Exception" in event.message
    for later in _run(sim, T0 + 2, 10):
        s = _by_gpu(later)[0]
        assert s.xid_last == 13 and s.ecc_dbe_volatile == 0


def test_other_xids_get_a_generic_message(sim: SimulatedCollector, faults: Path) -> None:
    write_fault(faults, 0, "xid", code=31)
    reading = _collect(sim, T0)
    [event] = reading.events
    assert event.message.startswith("NVRM: Xid (PCI:0000:18:00): 31,")
    assert _by_gpu(reading)[0].xid_last == 31


def test_ecc_dbe(sim: SimulatedCollector, faults: Path) -> None:
    write_fault(faults, 2, "ecc_dbe")
    write_fault(faults, 2, "ecc_dbe", count=3)
    reading = _collect(sim, T0)
    assert [(e.kind, e.gpu, e.data["count"]) for e in reading.events] == [("ecc_dbe", 2, 1), ("ecc_dbe", 2, 3)]
    assert _by_gpu(reading)[2].ecc_dbe_volatile == 4
    assert _by_gpu(_collect(sim, T0 + 1))[2].ecc_dbe_volatile == 4  # a counter, not a one-off


def test_thermal_throttle_then_recovery(sim: SimulatedCollector, faults: Path) -> None:
    normal = _by_gpu(_collect(sim, T0))[1]
    write_fault(faults, 1, "thermal", duration_s=30)
    reading = _collect(sim, T0 + 1)
    [event] = reading.events
    assert (event.kind, event.gpu) == ("thermal_throttle", 1)

    during = _run(sim, T0 + 2, 28)
    assert all(not r.events for r in during)  # one event, at the start
    for s in [_by_gpu(reading)[1]] + [_by_gpu(r)[1] for r in during]:
        assert s.temp_c >= 90
        assert s.throttle_reasons & 0x40 and s.throttle_reasons & 0x20
        assert 1000 <= s.sm_clock_mhz <= 1200
    assert _by_gpu(during[-1])[0].throttle_reasons == 0  # the other GPUs are fine

    after = _run(sim, T0 + 31, 120)
    first_after = _by_gpu(after[0])[1]
    assert first_after.throttle_reasons == 0 and first_after.sm_clock_mhz == 1980
    assert not any(r.events for r in after)
    assert _by_gpu(after[-1])[1].temp_c < 85  # cooled back down
    assert _by_gpu(after[-1])[1].temp_c == pytest.approx(normal.temp_c, abs=8)


def test_silent_gpu_stops_reporting_without_an_event(sim: SimulatedCollector, faults: Path) -> None:
    write_fault(faults, 0, "silent")
    for reading in _run(sim, T0, 10):
        assert sorted(_by_gpu(reading)) == [1, 2, 3]
        assert not reading.events


def test_clear_restores_the_gpu_but_keeps_xid_last(sim: SimulatedCollector, faults: Path) -> None:
    _collect(sim, T0)
    write_fault(faults, 0, "xid", code=79)
    write_fault(faults, 1, "silent")
    write_fault(faults, 2, "thermal", duration_s=600)
    write_fault(faults, 3, "xid", code=74)
    _collect(sim, T0 + 1)
    stalled = _by_gpu(_collect(sim, T0 + 2))[3].nvlink_tx_kib
    assert sorted(_by_gpu(_collect(sim, T0 + 3))) == [2, 3]

    for gpu in range(4):
        write_fault(faults, gpu, "clear")
    reading = _collect(sim, T0 + 4)
    assert not reading.events
    samples = _by_gpu(reading)
    assert sorted(samples) == [0, 1, 2, 3]
    assert samples[0].xid_last == 79
    assert samples[2].throttle_reasons == 0 and samples[2].sm_clock_mhz == 1980
    assert samples[3].nvlink_tx_kib > stalled


def test_faults_apply_in_the_order_written(sim: SimulatedCollector, faults: Path) -> None:
    write_fault(faults, 0, "silent")
    write_fault(faults, 0, "clear")
    write_fault(faults, 1, "clear")
    write_fault(faults, 1, "silent")
    assert sorted(_by_gpu(_collect(sim, T0))) == [0, 2, 3]


def test_fault_files_are_consumed(sim: SimulatedCollector, faults: Path) -> None:
    paths = [write_fault(faults, 0, "ecc_dbe") for _ in range(5)]
    assert paths == sorted(paths) and len(set(paths)) == 5  # names sort in creation order
    assert sorted(faults.iterdir()) == paths  # no temporary files left behind
    assert len(_collect(sim, T0).events) == 5
    assert list(faults.iterdir()) == []
    assert not _collect(sim, T0 + 1).events  # applied once


def test_malformed_fault_files_become_bad(
    sim: SimulatedCollector, faults: Path, caplog: pytest.LogCaptureFixture
) -> None:
    faults.mkdir()
    (faults / "0001.json").write_text("{not json")
    (faults / "0002.json").write_text(json.dumps({"gpu": 0, "fault": "meltdown"}))
    (faults / "0003.json").write_text(json.dumps({"gpu": 9, "fault": "silent"}))  # no GPU 9 here
    (faults / "0004.json").write_text(json.dumps([1, 2]))
    (faults / "0005.json").write_bytes(b"\xff\xfe")
    write_fault(faults, 1, "xid", code=13)

    with caplog.at_level(logging.WARNING, logger="agent.collectors.simulated"):
        reading = _collect(sim, T0)

    assert len(reading.samples) == 4
    assert [e.data for e in reading.events] == [{"xid": 13}]
    assert sorted(p.name for p in faults.iterdir()) == [f"000{i}.json.bad" for i in range(1, 6)]
    assert sum("malformed fault file" in r.getMessage() for r in caplog.records) == 5
    assert len(_collect(sim, T0 + 1).samples) == 4  # and carries on


def test_missing_fault_dir_is_fine(tmp_path: Path) -> None:
    collector = SimulatedCollector("node-a", 2, fault_dir=tmp_path / "nowhere")
    assert len(_collect(collector, T0).samples) == 2


def test_write_fault_rejects_bad_faults(faults: Path) -> None:
    assert FAULTS == ("xid", "ecc_dbe", "thermal", "silent", "clear")
    bad = [
        ((0, "meltdown"), {}),
        ((-1, "silent"), {}),
        ((0, "xid"), {}),
        ((0, "xid"), {"code": "79"}),
        ((0, "ecc_dbe"), {"count": 0}),
        ((0, "thermal"), {"duration_s": -5}),
        ((0, "silent"), {"code": 1}),
    ]
    for (gpu, fault), params in bad:
        with pytest.raises(ValueError):
            write_fault(faults, gpu, fault, **params)
    assert not faults.exists() or not list(faults.iterdir())
