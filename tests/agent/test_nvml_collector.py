"""NvmlCollector: the mapping from NVML calls to samples and events.

The fake below keeps pynvml's real constants, exception classes and ctypes structs and replaces only
the device calls with canned answers for two GPUs, so what is tested is exactly what the collector
would see from the library. The `gpu`-marked test at the end runs against the real driver.
"""

from __future__ import annotations

import ctypes
import shutil
import time
from typing import Any

import pynvml
import pytest

from agent.collectors.base import CollectorUnavailable
from agent.collectors.nvml import NvmlCollector
from gpuwatch.protocol import GpuProcess

GIB = 1024**3
MIB = 1024**2


def _field_value(field_id: int, value: int, ret: int = pynvml.NVML_SUCCESS) -> pynvml.c_nvmlFieldValue_t:
    fv = pynvml.c_nvmlFieldValue_t()
    fv.fieldId = field_id
    fv.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
    fv.nvmlReturn = ret
    fv.value.ullVal = value
    return fv


class FakeNvml:
    """pynvml's real constants, errors and structs, with canned device answers for 2 GPUs.

    ``fail[(gpu, "nvmlDeviceGetX")] = pynvml.NVMLError_Y`` makes that call raise for that GPU.
    ``pcie_kbps[gpu] = (tx, rx)`` changes what nvmlDeviceGetPcieThroughput answers for that GPU.
    """

    def __init__(self, gpus: int = 2) -> None:
        for key, value in vars(pynvml).items():
            if (
                key.startswith(("NVML_", "NVMLError", "nvmlEventType", "nvmlMemory_v"))
                or key == "NVMLLibraryMismatchError"
            ):
                setattr(self, key, value)
        # Real opaque device handles; the structs must outlive the pointers to them.
        self._structs = [pynvml.struct_c_nvmlDevice_t() for _ in range(gpus)]
        self.handles = [pynvml.c_nvmlDevice_t(s) for s in self._structs]
        self.fail: dict[tuple[int, str], type[pynvml.NVMLError]] = {}
        self.init_error: type[pynvml.NVMLError] | None = None
        self.event_set_error: type[pynvml.NVMLError] | None = None
        self.events: list[pynvml.c_nvmlEventData_t] = []
        self.registered: list[int] = []
        self.calls: list[str] = []
        self.event_set = pynvml.c_nvmlEventSet_t()
        self.pcie_kbps: dict[int, tuple[int, int]] = {}

    # -- helpers for tests ------------------------------------------------------------------------

    def queue_event(self, gpu: int, xid: int, event_type: int = pynvml.nvmlEventTypeXidCriticalError) -> None:
        # A fresh pointer object to the same device, as NVML hands back: equal address, not identity.
        self.events.append(
            pynvml.c_nvmlEventData_t(device=ctypes.pointer(self._structs[gpu]), eventType=event_type, eventData=xid)
        )

    def _gpu(self, handle: Any, call: str) -> int:
        self.calls.append(call)
        address = ctypes.cast(handle, ctypes.c_void_p).value
        gpu = next(i for i, h in enumerate(self.handles) if ctypes.cast(h, ctypes.c_void_p).value == address)
        error = self.fail.get((gpu, call))
        if error is not None:
            raise error()
        return gpu

    # -- library ----------------------------------------------------------------------------------

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error()

    def nvmlShutdown(self) -> None:
        self.calls.append("nvmlShutdown")

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlDeviceGetCount(self) -> int:
        return len(self.handles)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        error = self.fail.get((index, "nvmlDeviceGetHandleByIndex"))
        if error is not None:
            raise error()
        return self.handles[index]

    # -- identity ---------------------------------------------------------------------------------

    def nvmlDeviceGetUUID(self, h: Any) -> str:
        return f"GPU-{self._gpu(h, 'nvmlDeviceGetUUID')}a1b2c3d-0000-1111-2222-333344445555"

    def nvmlDeviceGetName(self, h: Any) -> str:
        self._gpu(h, "nvmlDeviceGetName")
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetPciInfo(self, h: Any) -> pynvml.nvmlPciInfo_t:
        gpu = self._gpu(h, "nvmlDeviceGetPciInfo")
        return pynvml.nvmlPciInfo_t(busId=f"00000000:{0x1B + gpu:02X}:00.0".encode())

    # -- fields -----------------------------------------------------------------------------------

    def nvmlDeviceGetUtilizationRates(self, h: Any) -> pynvml.c_nvmlUtilization_t:
        gpu = self._gpu(h, "nvmlDeviceGetUtilizationRates")
        return pynvml.c_nvmlUtilization_t(gpu=87 + gpu, memory=40)

    def nvmlDeviceGetMemoryInfo(self, h: Any, version: int | None = None) -> Any:
        gpu = self._gpu(h, "nvmlDeviceGetMemoryInfo")
        if version == pynvml.nvmlMemory_v2:
            if self.fail.get((gpu, "nvmlMemory_v2")):
                raise self.fail[(gpu, "nvmlMemory_v2")]()
            # v2 reports the driver's reservation apart from "used".
            return pynvml.c_nvmlMemory_v2_t(total=80 * GIB, reserved=GIB // 2, free=60 * GIB, used=20 * GIB - GIB // 2)
        return pynvml.c_nvmlMemory_t(total=80 * GIB, free=60 * GIB, used=20 * GIB)

    def nvmlDeviceGetPowerUsage(self, h: Any) -> int:
        self._gpu(h, "nvmlDeviceGetPowerUsage")
        return 350_500  # mW

    def nvmlDeviceGetTemperature(self, h: Any, sensor: int) -> int:
        self._gpu(h, "nvmlDeviceGetTemperature")
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return 64

    def nvmlDeviceGetClockInfo(self, h: Any, clock: int) -> int:
        self._gpu(h, "nvmlDeviceGetClockInfo")
        return {pynvml.NVML_CLOCK_SM: 1980, pynvml.NVML_CLOCK_MEM: 2619}[clock]

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: Any) -> int:
        self._gpu(h, "nvmlDeviceGetCurrentClocksEventReasons")
        return pynvml.nvmlClocksEventReasonSwPowerCap

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: Any) -> int:
        self._gpu(h, "nvmlDeviceGetCurrentClocksThrottleReasons")
        return pynvml.nvmlClocksThrottleReasonHwSlowdown

    def nvmlDeviceGetTotalEccErrors(self, h: Any, error_type: int, counter: int) -> int:
        self._gpu(h, "nvmlDeviceGetTotalEccErrors")
        assert counter == pynvml.NVML_VOLATILE_ECC
        return {pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED: 3, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED: 1}[error_type]

    def nvmlDeviceGetRetiredPages(self, h: Any, cause: int) -> list[int]:
        self._gpu(h, "nvmlDeviceGetRetiredPages")
        return {
            pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS: [0x1000, 0x2000],
            pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR: [0x3000],
        }[cause]

    def nvmlDeviceGetRemappedRows(self, h: Any) -> tuple[int, int, int, int]:
        self._gpu(h, "nvmlDeviceGetRemappedRows")
        return (5, 0, 1, 0)

    def nvmlDeviceGetPcieThroughput(self, h: Any, counter: int) -> int:
        gpu = self._gpu(h, "nvmlDeviceGetPcieThroughput")
        tx, rx = self.pcie_kbps.get(gpu, (1200, 3400))
        return {pynvml.NVML_PCIE_UTIL_TX_BYTES: tx, pynvml.NVML_PCIE_UTIL_RX_BYTES: rx}[counter]

    def nvmlDeviceGetFieldValues(self, h: Any, field_ids: list[int]) -> Any:
        self._gpu(h, "nvmlDeviceGetFieldValues")
        canned = {
            pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: 5_000_000_000,  # beyond 32 bits: read as u64
            pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: 7_000_000_000,
        }
        values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        for i, field_id in enumerate(field_ids):
            values[i] = _field_value(field_id, canned[field_id])
        return values

    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[Any]:
        self._gpu(h, "nvmlDeviceGetComputeRunningProcesses")
        return [
            pynvml.nvmlFriendlyObject({"pid": 4242, "usedGpuMemory": 2 * GIB}),
            pynvml.nvmlFriendlyObject({"pid": 4243, "usedGpuMemory": None}),
            pynvml.nvmlFriendlyObject({"pid": 4244, "usedGpuMemory": pynvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value}),
        ]

    # -- events -----------------------------------------------------------------------------------

    def nvmlEventSetCreate(self) -> Any:
        if self.event_set_error is not None:
            raise self.event_set_error()
        return self.event_set

    def nvmlDeviceRegisterEvents(self, h: Any, event_types: int, event_set: Any) -> None:
        gpu = self._gpu(h, "nvmlDeviceRegisterEvents")
        assert event_types & pynvml.nvmlEventTypeXidCriticalError
        assert event_set is self.event_set
        self.registered.append(gpu)

    def nvmlEventSetWait_v2(self, event_set: Any, timeout_ms: int) -> pynvml.c_nvmlEventData_t:
        self.calls.append("nvmlEventSetWait_v2")
        assert event_set is self.event_set
        assert timeout_ms == 0, "collect() must never block on events"
        if not self.events:
            raise pynvml.NVMLError_Timeout()
        return self.events.pop(0)

    def nvmlEventSetFree(self, event_set: Any) -> None:
        assert event_set is self.event_set
        self.calls.append("nvmlEventSetFree")


@pytest.fixture
def fake() -> FakeNvml:
    return FakeNvml()


def _by_gpu(reading: Any) -> dict[int, Any]:
    return {s.gpu: s for s in reading.samples}


# -- mapping ----------------------------------------------------------------------------------------


def test_fully_supported_gpu_maps_every_field_with_unit_conversion(fake: FakeNvml) -> None:
    collector = NvmlCollector(nvml=fake)
    reading = collector.collect(now=1_700_000_000.0)

    assert reading.events == []
    samples = _by_gpu(reading)
    assert sorted(samples) == [0, 1]
    assert samples[0].model_dump(exclude={"period_s", "job", "rank"}) == {  # the agent fills those
        "ts": 1_700_000_000.0,
        "gpu": 0,
        "uuid": "GPU-0a1b2c3d-0000-1111-2222-333344445555",
        "util_gpu": 87.0,
        "util_mem": 40.0,
        "fb_used_mib": 20 * 1024.0 - 512,  # bytes -> MiB, v2: driver-reserved memory not counted as used
        "fb_free_mib": 60 * 1024.0,
        "fb_total_mib": 80 * 1024.0,
        "power_w": 350.5,  # mW -> W
        "temp_c": 64.0,
        "sm_clock_mhz": 1980.0,
        "mem_clock_mhz": 2619.0,
        "throttle_reasons": pynvml.nvmlClocksEventReasonSwPowerCap,
        "ecc_sbe_volatile": 3,
        "ecc_dbe_volatile": 1,
        "retired_pages_sbe": 2,
        "retired_pages_dbe": 1,
        "remapped_rows_correctable": 5,
        "remapped_rows_uncorrectable": 0,
        "remap_pending": True,
        "remap_failure": False,
        "pcie_tx_kbps": 1200.0,
        "pcie_rx_kbps": 3400.0,
        "nvlink_tx_kib": 5_000_000_000,
        "nvlink_rx_kib": 7_000_000_000,
        "xid_last": None,
        "processes": [
            {"pid": 4242, "used_memory_mib": 2048.0},
            {"pid": 4243, "used_memory_mib": None},
            {"pid": 4244, "used_memory_mib": None},
        ],
    }
    assert samples[1].util_gpu == 88.0
    assert samples[1].uuid.startswith("GPU-1")


def test_inventory_and_driver_version_come_from_cached_identity(fake: FakeNvml) -> None:
    collector = NvmlCollector(nvml=fake)
    inventory = collector.inventory()

    assert [g.index for g in inventory] == [0, 1]
    assert inventory[0].uuid == "GPU-0a1b2c3d-0000-1111-2222-333344445555"
    assert inventory[0].name == "NVIDIA H100 80GB HBM3"
    assert inventory[0].memory_total_mib == 80 * 1024.0
    assert inventory[1].pci_bus_id == "00000000:1C:00.0"
    assert collector.driver_version() == "550.54.15"
    # Identity is read once, not on every inventory() call.
    calls = len(fake.calls)
    collector.inventory()
    assert len(fake.calls) == calls


def test_unsupported_fields_are_none_and_the_rest_is_still_filled(fake: FakeNvml) -> None:
    fake.fail[(0, "nvmlDeviceGetPowerUsage")] = pynvml.NVMLError_NotSupported
    fake.fail[(0, "nvmlDeviceGetTotalEccErrors")] = pynvml.NVMLError_NotSupported
    fake.fail[(0, "nvmlDeviceGetRetiredPages")] = pynvml.NVMLError_NotSupported
    fake.fail[(0, "nvmlDeviceGetFieldValues")] = pynvml.NVMLError_NotSupported
    fake.fail[(0, "nvmlDeviceGetComputeRunningProcesses")] = pynvml.NVMLError_NoPermission
    # Unknown is a field-level failure, not a lost GPU (see the module docstring).
    fake.fail[(0, "nvmlDeviceGetTemperature")] = pynvml.NVMLError_Unknown
    collector = NvmlCollector(nvml=fake)

    reading = collector.collect(now=1_700_000_000.0)

    assert reading.events == []
    s0 = _by_gpu(reading)[0]
    for name in (
        "power_w",
        "temp_c",
        "ecc_sbe_volatile",
        "ecc_dbe_volatile",
        "retired_pages_sbe",
        "retired_pages_dbe",
        "nvlink_tx_kib",
        "nvlink_rx_kib",
        "processes",
    ):
        assert getattr(s0, name) is None, name
    assert (s0.util_gpu, s0.fb_used_mib, s0.sm_clock_mhz) == (87.0, 20 * 1024.0 - 512, 1980.0)
    assert s0.remapped_rows_correctable == 5
    assert _by_gpu(reading)[1].power_w == 350.5  # the other GPU is unaffected


def test_nvlink_field_with_an_error_return_is_none(fake: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> None:
    def field_values(h: Any, field_ids: list[int]) -> Any:
        tx, rx = field_ids
        return [_field_value(tx, 123), _field_value(rx, 0, ret=pynvml.NVML_ERROR_NOT_SUPPORTED)]

    monkeypatch.setattr(fake, "nvmlDeviceGetFieldValues", field_values)
    s0 = _by_gpu(NvmlCollector(nvml=fake).collect(now=1.0))[0]

    assert (s0.nvlink_tx_kib, s0.nvlink_rx_kib) == (123, None)


def test_throttle_reasons_fall_back_to_the_legacy_call(fake: FakeNvml) -> None:
    fake.fail[(0, "nvmlDeviceGetCurrentClocksEventReasons")] = pynvml.NVMLError_FunctionNotFound
    samples = _by_gpu(NvmlCollector(nvml=fake).collect(now=1.0))

    assert samples[0].throttle_reasons == pynvml.nvmlClocksThrottleReasonHwSlowdown  # old driver
    assert samples[1].throttle_reasons == pynvml.nvmlClocksEventReasonSwPowerCap


def test_implausible_value_is_dropped_not_fatal(fake: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fake, "nvmlDeviceGetTemperature", lambda h, sensor: 4_294_967_295)
    s0 = _by_gpu(NvmlCollector(nvml=fake).collect(now=1.0))[0]

    assert s0.temp_c is None
    assert s0.power_w == 350.5


# -- PCIe throughput ---------------------------------------------------------------------------------


def _pcie(reading: Any) -> dict[int, tuple[float | None, float | None]]:
    return {s.gpu: (s.pcie_tx_kbps, s.pcie_rx_kbps) for s in reading.samples}


def test_pcie_throughput_is_read_for_one_gpu_per_reading_and_at_most_every_period(fake: FakeNvml) -> None:
    collector = NvmlCollector(nvml=fake, pcie_period_s=10.0)

    def pcie_calls() -> int:
        return fake.calls.count("nvmlDeviceGetPcieThroughput")

    assert _pcie(collector.collect(now=100.0)) == {0: (1200.0, 3400.0), 1: (1200.0, 3400.0)}  # all at the start
    assert pcie_calls() == 4
    fake.pcie_kbps = {0: (10, 20), 1: (30, 40)}
    assert _pcie(collector.collect(now=101.0)) == {0: (1200.0, 3400.0), 1: (1200.0, 3400.0)}  # carried
    assert pcie_calls() == 4
    # Both are due at 110 s; one GPU per reading, so a reading never waits 40 ms per GPU.
    assert _pcie(collector.collect(now=110.0)) == {0: (10.0, 20.0), 1: (1200.0, 3400.0)}
    assert _pcie(collector.collect(now=111.0)) == {0: (10.0, 20.0), 1: (30.0, 40.0)}
    assert pcie_calls() == 8
    collector.collect(now=112.0)
    assert pcie_calls() == 8
    # A clock stepped back does not freeze the values until it catches up.
    fake.pcie_kbps = {0: (50, 60)}
    assert _pcie(collector.collect(now=50.0))[0] == (50.0, 60.0)


def test_pcie_read_failure_carries_none_not_the_old_value(fake: FakeNvml) -> None:
    collector = NvmlCollector(nvml=fake, pcie_period_s=10.0)
    collector.collect(now=100.0)
    fake.fail[(0, "nvmlDeviceGetPcieThroughput")] = pynvml.NVMLError_Unknown
    assert _pcie(collector.collect(now=110.0))[0] == (None, None)
    assert _pcie(collector.collect(now=111.0))[0] == (None, None)  # carried: None, until the next read
    del fake.fail[(0, "nvmlDeviceGetPcieThroughput")]
    assert _pcie(collector.collect(now=121.0))[0] == (1200.0, 3400.0)


# -- Xid events -------------------------------------------------------------------------------------


def test_xid_events_are_drained_into_events_and_set_xid_last(fake: FakeNvml) -> None:
    collector = NvmlCollector(nvml=fake)
    assert fake.registered == [0, 1]
    fake.queue_event(gpu=1, xid=13)
    fake.queue_event(gpu=0, xid=31)
    fake.queue_event(gpu=1, xid=79)
    fake.queue_event(gpu=0, xid=0, event_type=pynvml.nvmlEventTypePState)  # not an Xid: ignored

    reading = collector.collect(now=1_700_000_000.0)

    assert [(e.kind, e.gpu, e.message, e.data) for e in reading.events] == [
        ("xid", 1, "Xid 13 on GPU 1", {"xid": 13}),
        ("xid", 0, "Xid 31 on GPU 0", {"xid": 31}),
        ("xid", 1, "Xid 79 on GPU 1", {"xid": 79}),
    ]
    assert all(e.ts == 1_700_000_000.0 for e in reading.events)
    assert fake.events == []
    samples = _by_gpu(reading)
    assert (samples[0].xid_last, samples[1].xid_last) == (31, 79)

    # The last Xid is remembered across readings; no event is repeated.
    again = collector.collect(now=1_700_000_001.0)
    assert again.events == []
    assert _by_gpu(again)[1].xid_last == 79


def test_collector_works_without_event_support(fake: FakeNvml) -> None:
    fake.event_set_error = pynvml.NVMLError_NotSupported
    reading = NvmlCollector(nvml=fake).collect(now=1.0)

    assert len(reading.samples) == 2
    assert "nvmlEventSetWait_v2" not in fake.calls


def test_event_set_is_freed_when_no_gpu_supports_xid_events(fake: FakeNvml) -> None:
    fake.fail[(0, "nvmlDeviceRegisterEvents")] = pynvml.NVMLError_NotSupported
    fake.fail[(1, "nvmlDeviceRegisterEvents")] = pynvml.NVMLError_NotSupported
    collector = NvmlCollector(nvml=fake)

    assert "nvmlEventSetFree" in fake.calls
    assert len(collector.collect(now=1.0).samples) == 2
    assert "nvmlEventSetWait_v2" not in fake.calls


# -- lost GPUs --------------------------------------------------------------------------------------


@pytest.mark.parametrize("error", [pynvml.NVMLError_GpuIsLost, pynvml.NVMLError_ResetRequired])
def test_lost_gpu_yields_no_sample_and_one_event_then_recovers(fake: FakeNvml, error: type[pynvml.NVMLError]) -> None:
    collector = NvmlCollector(nvml=fake)
    fake.fail[(1, "nvmlDeviceGetMemoryInfo")] = error

    first = collector.collect(now=100.0)
    assert sorted(_by_gpu(first)) == [0]
    assert [(e.kind, e.gpu, e.ts) for e in first.events] == [("gpu_lost", 1, 100.0)]
    assert first.events[0].data["uuid"] == collector.inventory()[1].uuid

    second = collector.collect(now=101.0)
    assert sorted(_by_gpu(second)) == [0]
    assert second.events == []  # reported once, not every round

    del fake.fail[(1, "nvmlDeviceGetMemoryInfo")]
    third = collector.collect(now=102.0)
    assert sorted(_by_gpu(third)) == [0, 1]
    assert [(e.kind, e.gpu) for e in third.events] == [("gpu_recovered", 1)]
    assert collector.collect(now=103.0).events == []


def test_gpu_dead_at_startup_is_left_out_and_reported_once(fake: FakeNvml) -> None:
    fake.fail[(1, "nvmlDeviceGetHandleByIndex")] = pynvml.NVMLError_GpuIsLost
    collector = NvmlCollector(nvml=fake)

    assert [g.index for g in collector.inventory()] == [0]
    first = collector.collect(now=5.0)
    assert sorted(_by_gpu(first)) == [0]
    assert [(e.kind, e.gpu, e.ts) for e in first.events] == [("gpu_lost", 1, 5.0)]
    assert collector.collect(now=6.0).events == []


# -- start-up and shutdown --------------------------------------------------------------------------


def test_init_failure_is_one_line_pointing_at_simulate(fake: FakeNvml) -> None:
    fake.init_error = pynvml.NVMLError_DriverNotLoaded
    with pytest.raises(CollectorUnavailable) as excinfo:
        NvmlCollector(nvml=fake)

    message = str(excinfo.value)
    assert "Driver Not Loaded" in message
    assert "--simulate" in message
    assert "\n" not in message


def test_no_driver_on_this_machine_raises_collector_unavailable() -> None:
    try:
        collector = NvmlCollector()
    except CollectorUnavailable as e:
        assert "--simulate" in str(e)
        assert "\n" not in str(e)
        return
    collector.close()
    pytest.skip("NVML initialised on this machine (a driver is present), so there is no failure to test")


def test_close_frees_the_event_set_and_shuts_nvml_down_once(fake: FakeNvml) -> None:
    collector = NvmlCollector(nvml=fake)
    collector.close()
    collector.close()

    assert fake.calls.count("nvmlEventSetFree") == 1
    assert fake.calls.count("nvmlShutdown") == 1


# -- real hardware ----------------------------------------------------------------------------------


@pytest.mark.gpu
def test_real_gpus_are_sampled(capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("nvidia-smi") is None:
        pytest.skip("nvidia-smi not found: this machine has no NVIDIA driver")
    collector = NvmlCollector()
    try:
        inventory = collector.inventory()
        t0 = time.perf_counter()
        collector.collect(now=1.0)  # the first reading also reads every GPU's PCIe throughput (40 ms each)
        first_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        reading = collector.collect(now=2.0)
        pass_s = time.perf_counter() - t0
        driver = collector.driver_version()
    finally:
        collector.close()

    with capsys.disabled():  # recorded in the test log even without -s
        print(f"\nNVML driver {driver}")
        for gpu in inventory:
            print(f"inventory: {gpu.model_dump_json()}")
        for sample in reading.samples:
            print(f"sample: {sample.model_dump_json(exclude_none=False)}")
        for event in reading.events:
            print(f"event: {event}")
        print(f"reading: first {first_s * 1e3:.2f} ms, second {pass_s * 1e3:.2f} ms, {len(inventory)} GPU(s)")

    assert inventory, "NVML reports no GPUs although nvidia-smi is installed"
    samples = _by_gpu(reading)
    assert sorted(samples) == [g.index for g in inventory]
    for gpu in inventory:
        s = samples[gpu.index]
        assert s.uuid == gpu.uuid
        assert s.util_gpu is not None and 0 <= s.util_gpu <= 100
        assert s.fb_used_mib is not None and s.fb_total_mib is not None
        assert 0 <= s.fb_used_mib <= s.fb_total_mib
        assert s.temp_c is not None and 0 < s.temp_c < 110
        assert s.power_w is not None and 0 < s.power_w < 2000
        assert s.pcie_tx_kbps is not None and s.pcie_rx_kbps is not None
        assert all(isinstance(p, GpuProcess) for p in s.processes or [])
    # PCIe throughput is not due again yet: no 20 ms nvmlDeviceGetPcieThroughput calls in this reading.
    assert pass_s < 0.015 * len(inventory), f"the second reading took {pass_s * 1e3:.1f} ms"


def test_memory_falls_back_to_v1_on_drivers_without_v2() -> None:
    fake = FakeNvml()
    fake.fail[(0, "nvmlMemory_v2")] = pynvml.NVMLError_FunctionNotFound
    s0, s1 = NvmlCollector(nvml=fake).collect(now=1_700_000_000.0).samples
    assert (s0.fb_used_mib, s0.fb_total_mib) == (20 * 1024.0, 80 * 1024.0)
    assert s1.fb_used_mib == 20 * 1024.0 - 512
