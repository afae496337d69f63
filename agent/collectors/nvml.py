"""The NVML collector: reads real NVIDIA GPUs through nvidia-ml-py (``pynvml``).

Every field is read in its own guarded call, because support varies by GPU, driver and permissions
(a consumer card has no ECC, an H100 has remapped rows but no retired pages, NVLink counters need
NVLink). A call that fails leaves its field None: never a crash, never a made-up zero.

A GPU that fell off the bus is another matter: reading its other fields would only fail slowly, so
the GPU yields no sample, one ``gpu_lost`` event is emitted, and ``gpu_recovered`` once it answers again.
Which errors mean "lost" (see ``_LOST_ERRORS``):

* ``GpuIsLost``: the driver says so.
* ``ResetRequired``: the GPU is unusable until it is reset (after a fatal Xid); its readings would be
  meaningless, so it counts as lost too.
* ``Unknown`` is *not* lost: NVML also returns it for transient or field-specific trouble, and one
  such field must not hide a healthy GPU. A GPU that is really gone soon answers GpuIsLost anyway.

PCIe throughput is read less often than the rest (see ``_PcieThroughput``): ``nvmlDeviceGetPcieThroughput``
counts bytes over a 20 ms window inside the call, so reading TX and RX of every GPU on every reading held
each reading 42 ms per GPU and cost about 2 ms of CPU per GPU (H100, driver 580; bench/README.md).
"""

from __future__ import annotations

import ctypes
import logging
import math
from collections.abc import Callable
from typing import Any

import pynvml
from pydantic import ValidationError

from agent.collectors.base import CollectorUnavailable, GpuEvent, Reading
from gpuwatch.protocol import GpuInfo, GpuProcess, GpuSample

log = logging.getLogger(__name__)

_MIB = 1024 * 1024
_LOST_ERRORS = ("NVMLError_GpuIsLost", "NVMLError_ResetRequired")
#: Upper bound on events drained per collect(), so a flood of Xids cannot stall sampling.
_MAX_EVENTS_PER_COLLECT = 1000
#: c_nvmlValue_t member to read for each NVML_VALUE_TYPE_* (field values are a tagged union).
_VALUE_MEMBERS = {
    pynvml.NVML_VALUE_TYPE_DOUBLE: "dVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal",
}

# A reader takes (nvml module, device handle) and returns one value per field it fills.
_Reader = Callable[[Any, Any], tuple[Any, ...]]


def _utilization(nvml: Any, h: Any) -> tuple[Any, ...]:
    u = nvml.nvmlDeviceGetUtilizationRates(h)
    return float(u.gpu), float(u.memory)


def _memory(nvml: Any, h: Any) -> tuple[Any, ...]:
    # The v2 struct counts driver-reserved memory apart from "used", as nvidia-smi and DCGM's FB_USED
    # do (on an H100 v1 reports ~480 MiB "used" on an idle GPU); drivers before R510 only have v1.
    version = getattr(nvml, "nvmlMemory_v2", None)
    try:
        m = nvml.nvmlDeviceGetMemoryInfo(h, version=version) if version is not None else None
    except (TypeError, nvml.NVMLError_FunctionNotFound, nvml.NVMLError_NotSupported):
        m = None
    if m is None:
        m = nvml.nvmlDeviceGetMemoryInfo(h)
    return m.used / _MIB, m.free / _MIB, m.total / _MIB


def _throttle_reasons(nvml: Any, h: Any) -> tuple[Any, ...]:
    # "ClocksEventReasons" is the R535+ name; older drivers only have the "ThrottleReasons" one.
    fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if fn is not None:
        try:
            return (int(fn(h)),)
        except nvml.NVMLError_FunctionNotFound:
            pass
    return (int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)),)


def _remapped_rows(nvml: Any, h: Any) -> tuple[Any, ...]:
    corr, unc, pending, failure = nvml.nvmlDeviceGetRemappedRows(h)
    return int(corr), int(unc), bool(pending), bool(failure)


def _field_value(nvml: Any, fv: Any) -> int | None:
    """One NVLink counter from a c_nvmlFieldValue_t: None if NVML could not read that field."""
    if fv.nvmlReturn != nvml.NVML_SUCCESS:
        return None
    value = int(getattr(fv.value, _VALUE_MEMBERS.get(fv.valueType, "ullVal")))
    return value if value >= 0 else None


def _nvlink(nvml: Any, h: Any) -> tuple[Any, ...]:
    tx, rx = nvml.nvmlDeviceGetFieldValues(
        h, [nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX]
    )
    return _field_value(nvml, tx), _field_value(nvml, rx)


def _processes(nvml: Any, h: Any) -> tuple[Any, ...]:
    not_available = nvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value
    procs = []
    for p in nvml.nvmlDeviceGetComputeRunningProcesses(h):
        used = p.usedGpuMemory  # pynvml already maps "not available" to None; older versions do not
        mib = None if used is None or used == not_available else used / _MIB
        procs.append(GpuProcess(pid=p.pid, used_memory_mib=mib))
    return (procs,)


def _scalar(fn: str, *constants: str, convert: Callable[[Any], Any] = float) -> _Reader:
    """A reader for ``nvml.<fn>(handle, *nvml.<constants>)``, which returns one value."""

    def read(nvml: Any, h: Any) -> tuple[Any, ...]:
        return (convert(getattr(nvml, fn)(h, *(getattr(nvml, c) for c in constants))),)

    return read


#: (GpuSample fields, reader) in reading order; one NVML call per row, each guarded on its own. PCIe
#: throughput is read after these by the collector's `_PcieThroughput`, which paces its slow calls.
_READERS: tuple[tuple[tuple[str, ...], _Reader], ...] = (
    (("util_gpu", "util_mem"), _utilization),
    (("fb_used_mib", "fb_free_mib", "fb_total_mib"), _memory),
    (("power_w",), _scalar("nvmlDeviceGetPowerUsage", convert=lambda mw: mw / 1000)),
    (("temp_c",), _scalar("nvmlDeviceGetTemperature", "NVML_TEMPERATURE_GPU")),
    (("sm_clock_mhz",), _scalar("nvmlDeviceGetClockInfo", "NVML_CLOCK_SM")),
    (("mem_clock_mhz",), _scalar("nvmlDeviceGetClockInfo", "NVML_CLOCK_MEM")),
    (("throttle_reasons",), _throttle_reasons),
    (
        ("ecc_sbe_volatile",),
        _scalar("nvmlDeviceGetTotalEccErrors", "NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_VOLATILE_ECC", convert=int),
    ),
    (
        ("ecc_dbe_volatile",),
        _scalar("nvmlDeviceGetTotalEccErrors", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_VOLATILE_ECC", convert=int),
    ),
    (
        ("retired_pages_sbe",),
        _scalar("nvmlDeviceGetRetiredPages", "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", convert=len),
    ),
    (
        ("retired_pages_dbe",),
        _scalar("nvmlDeviceGetRetiredPages", "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", convert=len),
    ),
    (
        ("remapped_rows_correctable", "remapped_rows_uncorrectable", "remap_pending", "remap_failure"),
        _remapped_rows,
    ),
    (("nvlink_tx_kib", "nvlink_rx_kib"), _nvlink),
    (("processes",), _processes),
)


_PCIE_FIELDS = ("pcie_tx_kbps", "pcie_rx_kbps")
#: How often one GPU's PCIe throughput is read at most; between reads its samples carry the last value.
PCIE_PERIOD_S = 10.0


class _PcieThroughput:
    """PCIe TX/RX throughput (KB/s) per GPU, read at most every ``period_s`` and for at most one GPU
    per reading (the one read longest ago), except that every GPU is read at its first reading. So a
    reading waits about 42 ms at most, whatever the GPU count, and a GPU's value is refreshed every
    ``max(period_s, GPUs x interval)``; in between, its samples carry the last value read (as DCGM's
    watched fields do), and a GPU whose reads fail carries None.

    Why not the cumulative counters (``NVML_FI_DEV_PCIE_COUNT_{TX,RX}_BYTES``), which do not wait: on an
    H100 (driver 580) they are 32-bit and wrap about ten times a second at 44 GB/s, so no rate can be
    made from readings a second apart; and one read costs 0.3 ms of CPU.
    """

    def __init__(self, period_s: float = PCIE_PERIOD_S) -> None:
        self.period_s = period_s
        self._values: dict[Any, tuple[Any, Any]] = {}  # handle key -> (tx, rx) last read
        self._read_at: dict[Any, float] = {}
        self._now = 0.0
        self._due: Any = None  # the one GPU this reading refreshes

    def begin(self, now: float, handles: list[Any]) -> None:
        """Start a reading at ``now``: pick the GPU to refresh, if one is due."""
        self._now = now
        keys = [_handle_key(h) for h in handles]
        last = {k: self._read_at.get(k, -math.inf) for k in keys}
        # A clock stepped back (now before the last read) makes a GPU due rather than frozen.
        waiting = [k for k in keys if not 0 <= now - last[k] < self.period_s]
        self._due = min(waiting, key=last.__getitem__, default=None)

    def forget(self, h: Any) -> None:
        """A GPU stopped answering: when it is back, read it afresh rather than carry a value from before."""
        key = _handle_key(h)
        self._values.pop(key, None)
        self._read_at.pop(key, None)

    def __call__(self, nvml: Any, h: Any) -> tuple[Any, ...]:
        key = _handle_key(h)
        if key != self._due and key in self._read_at:
            return self._values.get(key, (None, None))
        self._read_at[key] = self._now
        self._values[key] = (None, None)  # if the reads below fail, the old value must not linger
        tx = float(nvml.nvmlDeviceGetPcieThroughput(h, nvml.NVML_PCIE_UTIL_TX_BYTES))
        rx = float(nvml.nvmlDeviceGetPcieThroughput(h, nvml.NVML_PCIE_UTIL_RX_BYTES))
        self._values[key] = (tx, rx)
        return tx, rx


class _GpuLost(Exception):
    """Internal: a reader hit an error that means the whole GPU is gone, not just one field."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _handle_key(handle: Any) -> Any:
    """A hashable key for a device handle: ctypes pointers compare by identity, so use the address."""
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value
    except (ctypes.ArgumentError, TypeError):
        return handle


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class NvmlCollector:
    """GpuCollector for real NVIDIA GPUs. ``nvml`` is injectable so tests can substitute the calls;
    ``pcie_period_s`` is how often a GPU's (slow) PCIe throughput is read at most."""

    name = "nvml"
    stream = "gpu:nvml"  # where its events are numbered

    def __init__(self, nvml: Any = None, pcie_period_s: float = PCIE_PERIOD_S) -> None:
        nvml = pynvml if nvml is None else nvml
        self._nvml = nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as e:
            raise CollectorUnavailable(
                f"NVML is not available on this machine ({e}): no NVIDIA driver? "
                "Run the agent with --simulate N to use simulated GPUs."
            ) from None
        self._closed = False
        self._field_errors: tuple[type[BaseException], ...] = tuple(
            t for t in (nvml.NVMLError, getattr(nvml, "NVMLLibraryMismatchError", None)) if t is not None
        )
        self._lost_errors = tuple(getattr(nvml, n) for n in _LOST_ERRORS if hasattr(nvml, n))
        self._gpus: list[tuple[GpuInfo, Any]] = []  # (identity, handle), in index order
        self._absent: list[tuple[int, str]] = []  # (index, error) of GPUs dead at start-up
        self._lost: set[int] = set()
        self._xid_last: dict[int, int] = {}
        self._pcie = _PcieThroughput(pcie_period_s)
        self._readers = (*_READERS, (_PCIE_FIELDS, self._pcie))
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as e:
            self._shutdown()
            raise CollectorUnavailable(f"NVML initialised but could not count the GPUs ({e}).") from None
        for index in range(count):
            self._add_gpu(index)
        self._index_by_handle = {_handle_key(h): info.index for info, h in self._gpus}
        self._event_set = self._register_xid_events()

    # -- start-up ---------------------------------------------------------------------------------

    def _add_gpu(self, index: int) -> None:
        """Cache a GPU's identity; one that does not answer at start-up is left out, with an event."""
        nvml = self._nvml
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(nvml.nvmlDeviceGetUUID(handle))
        except nvml.NVMLError as e:
            log.warning("GPU %d did not answer NVML at start-up (%s); leaving it out", index, e)
            self._absent.append((index, str(e)))
            return
        name = self._optional(lambda: _text(nvml.nvmlDeviceGetName(handle))) or "unknown NVIDIA GPU"
        memory = self._optional(lambda: nvml.nvmlDeviceGetMemoryInfo(handle).total / _MIB)
        bus_id = self._optional(lambda: _text(nvml.nvmlDeviceGetPciInfo(handle).busId))
        info = GpuInfo(index=index, uuid=uuid, name=name, memory_total_mib=memory, pci_bus_id=bus_id or None)
        self._gpus.append((info, handle))

    def _optional(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except self._field_errors:
            return None

    def _register_xid_events(self) -> Any:
        """An event set watching every GPU for Xid errors, or None where NVML does not support it."""
        nvml = self._nvml
        try:
            event_set = nvml.nvmlEventSetCreate()
        except nvml.NVMLError as e:
            log.info("NVML events not supported (%s); Xids will not be reported", e)
            return None
        registered = 0
        for info, handle in self._gpus:
            try:
                nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, event_set)
                registered += 1
            except nvml.NVMLError as e:
                log.info("GPU %d: Xid events not supported (%s)", info.index, e)
        if registered:
            return event_set
        self._optional(lambda: nvml.nvmlEventSetFree(event_set))
        return None

    # -- GpuCollector -----------------------------------------------------------------------------

    def inventory(self) -> list[GpuInfo]:
        return [info for info, _ in self._gpus]

    def driver_version(self) -> str | None:
        version = self._optional(self._nvml.nvmlSystemGetDriverVersion)
        return None if version is None else _text(version)

    def collect(self, now: float) -> Reading:
        reading = Reading()
        # GPUs that were dead at start-up are reported once, with the first reading (events need a ts).
        for index, error in self._absent:
            reading.events.append(
                GpuEvent(
                    ts=now,
                    kind="gpu_lost",
                    gpu=index,
                    message=f"GPU {index} did not answer NVML at start-up ({error}); it is not monitored",
                    data={"error": error},
                )
            )
        self._absent.clear()
        # Events first, so a sample carries the Xid that arrived since the last reading.
        reading.events.extend(self._drain_xids(now))
        self._pcie.begin(now, [h for info, h in self._gpus if info.index not in self._lost])
        for info, handle in self._gpus:
            try:
                values = self._read_fields(handle)
            except _GpuLost as lost:
                if info.index not in self._lost:
                    self._lost.add(info.index)
                    self._pcie.forget(handle)
                    reading.events.append(self._lost_event(now, info, lost.error))
                continue
            if info.index in self._lost:
                self._lost.discard(info.index)
                reading.events.append(
                    GpuEvent(
                        ts=now,
                        kind="gpu_recovered",
                        gpu=info.index,
                        message=f"GPU {info.index} answers NVML again",
                        data={"uuid": info.uuid},
                    )
                )
            values["xid_last"] = self._xid_last.get(info.index)
            reading.samples.append(self._sample(now, info, values))
        return reading

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._event_set is not None:
            self._optional(lambda: self._nvml.nvmlEventSetFree(self._event_set))
            self._event_set = None
        self._shutdown()

    # -- reading ----------------------------------------------------------------------------------

    def _read_fields(self, handle: Any) -> dict[str, Any]:
        """Every field of one GPU; raises _GpuLost as soon as one call says the GPU is gone."""
        values: dict[str, Any] = {}
        for fields, reader in self._readers:
            try:
                got = reader(self._nvml, handle)
            except self._lost_errors as e:
                raise _GpuLost(e) from e
            except self._field_errors:
                got = (None,) * len(fields)
            values.update(zip(fields, got, strict=True))
        return values

    def _sample(self, now: float, info: GpuInfo, values: dict[str, Any]) -> GpuSample:
        """Build the sample; a value outside the protocol's range is dropped (None), not fatal."""
        try:
            return GpuSample(ts=now, gpu=info.index, uuid=info.uuid, **values)
        except ValidationError as e:
            bad = {str(err["loc"][0]) for err in e.errors() if err["loc"]}
            log.warning("GPU %d: dropping implausible NVML values for %s", info.index, sorted(bad))
            kept = {k: v for k, v in values.items() if k not in bad}
            return GpuSample(ts=now, gpu=info.index, uuid=info.uuid, **kept)

    def _drain_xids(self, now: float) -> list[GpuEvent]:
        """Every Xid waiting in the event set (timeout 0: never blocks the sampling loop)."""
        if self._event_set is None:
            return []
        nvml = self._nvml
        wait = getattr(nvml, "nvmlEventSetWait_v2", None) or nvml.nvmlEventSetWait
        events: list[GpuEvent] = []
        for _ in range(_MAX_EVENTS_PER_COLLECT):
            try:
                data = wait(self._event_set, 0)
            except nvml.NVMLError_Timeout:
                break
            except nvml.NVMLError as e:
                log.warning("NVML event wait failed (%s); will retry next reading", e)
                break
            if not data.eventType & nvml.nvmlEventTypeXidCriticalError:
                continue
            xid = int(data.eventData)
            gpu = self._index_by_handle.get(_handle_key(data.device))
            if gpu is not None:
                self._xid_last[gpu] = xid
            where = f"GPU {gpu}" if gpu is not None else "an unknown GPU"
            events.append(GpuEvent(ts=now, kind="xid", gpu=gpu, message=f"Xid {xid} on {where}", data={"xid": xid}))
        return events

    def _lost_event(self, now: float, info: GpuInfo, error: Exception) -> GpuEvent:
        return GpuEvent(
            ts=now,
            kind="gpu_lost",
            gpu=info.index,
            message=f"GPU {info.index} ({info.uuid}) stopped answering NVML: {error}",
            data={"uuid": info.uuid, "error": str(error)},
        )

    def _shutdown(self) -> None:
        self._optional(self._nvml.nvmlShutdown)
