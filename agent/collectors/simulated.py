"""A stand-in for NVML on machines without GPUs: the same interface, fed by a model of a training job.

The demo and the tests run the whole pipeline on it. Values are a deterministic function of the
caller's ``now`` and a seed (no wall clock inside), so a test can step time explicitly. Faults are
injected through files in ``fault_dir`` so that a separate command can break a GPU of a running agent;
`collect` consumes them (reads, applies, deletes) before it samples.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import os
import random
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.collectors.base import GpuEvent, Reading
from gpuwatch.protocol import GpuInfo, GpuProcess, GpuSample

log = logging.getLogger(__name__)

#: The faults `write_fault` accepts, for the CLI's help text.
FAULTS = ("xid", "ecc_dbe", "thermal", "silent", "clear")
#: Namespace of the simulated GPU uuids: uuid5(NAMESPACE, f"{node}/{index}").
NAMESPACE = uuid.UUID("5f1c0e9e-3b7a-4a51-9d0c-6a2f3c8e4b10")
MAX_GPUS = 64

GPU_NAME = "NVIDIA H100 80GB HBM3"
MEMORY_TOTAL_MIB = 81559
DRIVER_VERSION = "550.54.15 (simulated)"

SM_CLOCK_MHZ = 1980.0
THROTTLED_SM_CLOCK_MHZ = 1100.0
MEM_CLOCK_MHZ = 2619.0
POWER_CAP_W = 700.0
#: NVML clocks-event reasons: SW thermal slowdown (0x20) | HW thermal slowdown (0x40).
THERMAL_THROTTLE_REASONS = 0x20 | 0x40

_BUSY_UTIL = 93.0
_CHECKPOINT_PERIOD_S = 60.0
_CHECKPOINT_DIP_S = 5.0
_TEMP_TAU_S = 20.0  # thermal time constant of the heatsink: temperature lags utilisation
_NVLINK_KIB_PER_S = 40e9 / 1024  # ~40 GB/s per direction at 100 % utilisation
_GIB = 1024.0
# PCI buses of the eight GPUs of an HGX H100 board; further boards get the next PCI domain.
_HGX_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)

_XID_TEXT = {
    13: "pid={pid}, name=python, Graphics Engine Exception on (GPC 0, TPC 1, SM 0): Illegal Instruction Parameter",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at "
    "partition 0, subpartition 0.",
    74: "NVLink: fatal error detected on link 3(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    79: "GPU has fallen off the bus.",
}

_fault_seq = itertools.count()
_CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(slots=True)
class _Binding:
    """A real process "using" a simulated GPU: the GPU looks as busy as the process's CPU."""

    pid: int
    proc_root: Path
    cpu_ticks: int | None = None
    at: float | None = None

    def utilization(self, now: float) -> float | None:
        """CPU share of the process since the last call, in %; None once the process is gone."""
        try:
            fields = (self.proc_root / str(self.pid) / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        ticks = int(fields[11]) + int(fields[12])  # utime + stime (fields 14 and 15 of proc(5))
        util = 0.0
        if self.cpu_ticks is not None and self.at is not None and now > self.at:
            util = _clamp(100.0 * (ticks - self.cpu_ticks) / _CLK_TCK / (now - self.at), 0.0, 100.0)
        self.cpu_ticks, self.at = ticks, now
        return util


@dataclass(slots=True)
class _Gpu:
    """One simulated GPU: fixed personality (offsets, memory footprint) and the state kept between calls."""

    index: int
    uuid: str
    pci_bus_id: str
    dip_offset_s: float  # when this GPU's checkpoint dip starts within the period
    wave_phase: float  # phase of the slow utilisation wobble
    fb_base_mib: float
    nvlink_tx_kib: float
    nvlink_rx_kib: float
    temp_c: float | None = None
    ecc_dbe: int = 0
    xid_last: int | None = None
    thermal_until: float | None = None
    nvlink_down: bool = False
    silent: bool = False
    lost: bool = False


class SimulatedCollector:
    """`GpuCollector` over ``count`` simulated H100s of ``node``; deterministic given ``seed``."""

    name = "simulated"
    stream = "gpu:simulated"  # where its events are numbered

    def __init__(self, node: str, count: int, fault_dir: Path | None = None, seed: int | None = None) -> None:
        if not node:
            raise ValueError("node must not be empty")
        if not 1 <= count <= MAX_GPUS:
            raise ValueError(f"count must be between 1 and {MAX_GPUS}, not {count}")
        self.node = node
        self.fault_dir = Path(fault_dir) if fault_dir is not None else None
        # hash() is salted per process; the default seed must be the same in every run for one node.
        if seed is None:
            seed = int.from_bytes(hashlib.sha256(node.encode()).digest()[:8], "big")
        self._rng = random.Random(seed)
        self._last_now: float | None = None
        self._bindings: dict[int, _Binding] = {}
        self._proc_root = Path("/proc")
        job_offset = self._rng.uniform(0, _CHECKPOINT_PERIOD_S)  # the node's job started at some time
        self._gpus = [
            _Gpu(
                index=i,
                uuid=f"GPU-{uuid.uuid5(NAMESPACE, f'{node}/{i}')}",
                pci_bus_id=_pci_bus_id(i),
                dip_offset_s=job_offset + self._rng.uniform(0, 2),  # data-parallel ranks stall together
                wave_phase=self._rng.uniform(0, 2 * math.pi),
                fb_base_mib=self._rng.uniform(63, 72) * _GIB,
                nvlink_tx_kib=self._rng.uniform(1e9, 5e9),
                nvlink_rx_kib=self._rng.uniform(1e9, 5e9),
            )
            for i in range(count)
        ]

    def inventory(self) -> list[GpuInfo]:
        return [
            GpuInfo(
                index=g.index,
                uuid=g.uuid,
                name=GPU_NAME,
                memory_total_mib=MEMORY_TOTAL_MIB,
                pci_bus_id=g.pci_bus_id,
            )
            for g in self._gpus
        ]

    def driver_version(self) -> str | None:
        return DRIVER_VERSION

    def collect(self, now: float) -> Reading:
        reading = Reading()
        if self.fault_dir is not None:
            self._consume_faults(self.fault_dir, now, reading.events)
        dt = 0.0 if self._last_now is None else max(0.0, now - self._last_now)
        self._last_now = now
        for gpu in self._gpus:
            # State advances for every GPU, reported or not, so a cleared GPU resumes where it would be.
            sample = self._step(gpu, now, dt)
            if not (gpu.lost or gpu.silent):
                reading.samples.append(sample)
        return reading

    def close(self) -> None:
        pass

    def bind(self, gpu: int, pid: int) -> None:
        """Let the real process ``pid`` use GPU ``gpu``: the GPU reports that process, and its
        utilisation follows the process's CPU use, so a rank that sleeps or hangs shows an idle GPU.
        When the process exits the GPU is free: idle, with no processes."""
        if 0 <= gpu < len(self._gpus) and (gpu not in self._bindings or self._bindings[gpu].pid != pid):
            self._bindings[gpu] = _Binding(pid, self._proc_root)

    def _step(self, gpu: _Gpu, now: float, dt: float) -> GpuSample:
        """Advance one GPU's state to ``now`` and return its sample."""
        sample = self._model(gpu, now, dt)
        binding = self._bindings.get(gpu.index)
        if binding is None:
            return sample
        util = binding.utilization(now)
        if util is None:  # the process is gone: the GPU sits free
            return sample.model_copy(update={"util_gpu": 0.0, "util_mem": 0.0, "processes": [], "power_w": 90.0})
        used = sample.fb_used_mib or 0.0
        return sample.model_copy(
            update={
                "util_gpu": round(util, 1),
                "util_mem": round(0.6 * util, 1),
                "power_w": round(min(POWER_CAP_W, 90.0 + 6.0 * util), 1),
                "processes": [GpuProcess(pid=binding.pid, used_memory_mib=max(0.0, used - 512))],
            }
        )

    def _model(self, gpu: _Gpu, now: float, dt: float) -> GpuSample:
        """Advance one GPU's state to ``now`` and return the modelled training-job sample."""
        rng = self._rng
        if gpu.thermal_until is not None and now >= gpu.thermal_until:
            gpu.thermal_until = None
        throttled = gpu.thermal_until is not None

        in_dip = (now - gpu.dip_offset_s) % _CHECKPOINT_PERIOD_S < _CHECKPOINT_DIP_S
        if in_dip:  # checkpoint: the GPUs wait on the host writing the model out
            util = _clamp(rng.uniform(2, 20), 0, 100)
        else:
            wobble = 3.0 * math.sin(2 * math.pi * now / 17.0 + gpu.wave_phase)
            util = _clamp(_BUSY_UTIL + wobble + rng.gauss(0, 1.5), 85, 99)
        util_mem = _clamp(0.6 * util + rng.gauss(0, 2), 0, 100)

        fb_used = _clamp(gpu.fb_base_mib + 1.5 * _GIB * math.sin(now / 300.0 + gpu.wave_phase), 60 * _GIB, 75 * _GIB)
        clock = THROTTLED_SM_CLOCK_MHZ + rng.uniform(-15, 15) if throttled else SM_CLOCK_MHZ
        # Dynamic power scales with the clock; 90 W is the idle floor of an H100 SXM.
        power = min(POWER_CAP_W, 90.0 + 6.0 * util * clock / SM_CLOCK_MHZ + rng.gauss(0, 3))

        target = 93.0 + rng.uniform(0, 2) if throttled else 30.0 + 0.5 * util
        if gpu.temp_c is None:
            gpu.temp_c = 30.0 + 0.5 * _BUSY_UTIL  # the job was already running when the agent started
        else:
            gpu.temp_c += (target - gpu.temp_c) * (1.0 - math.exp(-dt / _TEMP_TAU_S))
        if throttled:  # the throttle trips because the GPU is already that hot
            gpu.temp_c = max(gpu.temp_c, 90.0)

        if not gpu.nvlink_down:  # Xid 74: the link is down and the counters stall
            rate = _NVLINK_KIB_PER_S * util / 100.0
            gpu.nvlink_tx_kib += rate * dt
            gpu.nvlink_rx_kib += rate * dt * rng.uniform(0.97, 1.03)

        if in_dip:  # the checkpoint goes out over PCIe
            pcie_tx = rng.uniform(6e6, 9e6)
            pcie_rx = rng.uniform(2e4, 6e4)
        else:  # input batches in, metrics and logs out
            pcie_tx = 2_000.0 + 1_500.0 * util + rng.uniform(0, 5e3)
            pcie_rx = 20_000.0 + 4_000.0 * util + rng.uniform(0, 2e4)

        return GpuSample(
            ts=now,
            gpu=gpu.index,
            uuid=gpu.uuid,
            util_gpu=round(util, 1),
            util_mem=round(util_mem, 1),
            fb_used_mib=round(fb_used),
            fb_free_mib=MEMORY_TOTAL_MIB - round(fb_used),
            fb_total_mib=MEMORY_TOTAL_MIB,
            power_w=round(power, 1),
            temp_c=round(gpu.temp_c, 1),
            sm_clock_mhz=round(clock),
            mem_clock_mhz=MEM_CLOCK_MHZ,
            throttle_reasons=THERMAL_THROTTLE_REASONS if throttled else 0,
            ecc_sbe_volatile=0,
            ecc_dbe_volatile=gpu.ecc_dbe,
            retired_pages_sbe=0,
            retired_pages_dbe=0,
            remapped_rows_correctable=0,
            remapped_rows_uncorrectable=0,
            remap_pending=False,
            remap_failure=False,
            pcie_tx_kbps=round(pcie_tx),
            pcie_rx_kbps=round(pcie_rx),
            nvlink_tx_kib=int(gpu.nvlink_tx_kib),
            nvlink_rx_kib=int(gpu.nvlink_rx_kib),
            xid_last=gpu.xid_last,
            # The process holds all of the framebuffer in use but the CUDA context's own ~500 MiB.
            processes=[GpuProcess(pid=10000 + gpu.index, used_memory_mib=round(fb_used) - 512)],
        )

    def _consume_faults(self, fault_dir: Path, now: float, events: list[GpuEvent]) -> None:
        """Apply and delete every fault file in name (= creation) order; a bad one becomes ``*.bad``."""
        try:
            paths = sorted(fault_dir.glob("*.json"))
        except OSError as e:
            log.warning("cannot list fault directory %s: %s", fault_dir, e)
            return
        for path in paths:
            try:
                doc = json.loads(path.read_text())
            except FileNotFoundError:
                continue  # someone else consumed it
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
                _quarantine(path, e)
                continue
            try:
                if not isinstance(doc, dict):
                    raise ValueError("not a JSON object")
                gpu, fault, params = doc.get("gpu"), doc.get("fault"), doc.get("params", {})
                _validate(gpu, fault, params)
                if gpu >= len(self._gpus):
                    raise ValueError(f"no GPU {gpu} on this node ({len(self._gpus)} GPUs)")
            except ValueError as e:
                _quarantine(path, e)
                continue
            try:
                path.unlink()
            except FileNotFoundError:
                continue  # consumed by someone else between the read and now: theirs to apply
            except OSError as e:
                log.warning("cannot delete fault file %s (%s); not applying it", path, e)
                continue
            log.info("applying fault %s %s to GPU %d", fault, params, gpu)
            self._apply(self._gpus[gpu], fault, params, now, events)

    def _apply(self, gpu: _Gpu, fault: str, params: dict[str, Any], now: float, events: list[GpuEvent]) -> None:
        if fault == "clear":
            gpu.lost = gpu.silent = gpu.nvlink_down = False
            gpu.thermal_until = None
            gpu.ecc_dbe = 0  # what a GPU reset does to the volatile counters
            return
        if gpu.lost:
            log.warning("GPU %d has fallen off the bus; ignoring fault %s until cleared", gpu.index, fault)
            return
        if fault == "xid":
            code = params["code"]
            gpu.xid_last = code
            text = _XID_TEXT.get(code, "pid={pid}, name=python, simulated Xid error.")
            pci = gpu.pci_bus_id[4:].rsplit(".", 1)[0].lower()  # "00000000:18:00.0" -> "0000:18:00"
            message = f"NVRM: Xid (PCI:{pci}): {code}, " + text.format(pid=10000 + gpu.index)
            events.append(GpuEvent(ts=now, kind="xid", gpu=gpu.index, message=message, data={"xid": code}))
            if code == 48:
                gpu.ecc_dbe += 1
            elif code == 74:
                gpu.nvlink_down = True
            elif code == 79:
                gpu.lost = True
                events.append(
                    GpuEvent(
                        ts=now,
                        kind="gpu_lost",
                        gpu=gpu.index,
                        message=f"GPU {gpu.index} ({gpu.uuid}) has fallen off the bus and no longer answers",
                        data={"uuid": gpu.uuid, "xid": code},
                    )
                )
        elif fault == "ecc_dbe":
            count = params.get("count", 1)
            gpu.ecc_dbe += count
            events.append(
                GpuEvent(
                    ts=now,
                    kind="ecc_dbe",
                    gpu=gpu.index,
                    message=f"{count} uncorrectable (double bit) ECC error(s) on GPU {gpu.index}",
                    data={"count": count, "total": gpu.ecc_dbe},
                )
            )
        elif fault == "thermal":
            duration = float(params.get("duration_s", 60))
            if gpu.thermal_until is None:
                events.append(
                    GpuEvent(
                        ts=now,
                        kind="thermal_throttle",
                        gpu=gpu.index,
                        message=f"GPU {gpu.index} is thermally throttled (HW and SW thermal slowdown)",
                        data={"throttle_reasons": THERMAL_THROTTLE_REASONS, "duration_s": duration},
                    )
                )
            gpu.thermal_until = max(now + duration, gpu.thermal_until or 0.0)
        elif fault == "silent":
            gpu.silent = True


def write_fault(fault_dir: Path, gpu: int, fault: str, **params: Any) -> Path:
    """Queue ``fault`` for GPU ``gpu`` of the collector watching ``fault_dir``; returns the file written.

    The file appears atomically (temporary file + rename), so a collector never reads half of it, and
    its name sorts in creation order, so faults apply in the order they were written.
    """
    _validate(gpu, fault, params)
    fault_dir = Path(fault_dir)
    fault_dir.mkdir(parents=True, exist_ok=True)
    name = f"{time.time_ns():020d}-{os.getpid()}-{next(_fault_seq):06d}.json"
    path = fault_dir / name
    tmp = fault_dir / f".{name}.tmp"  # does not match the collector's *.json
    tmp.write_text(json.dumps({"gpu": gpu, "fault": fault, "params": params}))
    os.replace(tmp, path)
    return path


def _validate(gpu: Any, fault: Any, params: Any) -> None:
    """Raise ValueError unless (gpu, fault, params) describe a fault the simulator knows how to apply."""
    if not _is_int(gpu) or gpu < 0:
        raise ValueError(f"gpu must be an integer >= 0, not {gpu!r}")
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
    if not isinstance(params, dict):
        raise ValueError("params must be an object")
    allowed = {"xid": {"code"}, "ecc_dbe": {"count"}, "thermal": {"duration_s"}}.get(fault, set())
    if unknown := set(params) - allowed:
        raise ValueError(f"fault {fault!r} takes no parameter(s) {', '.join(sorted(unknown))}")
    if fault == "xid" and not (_is_int(params.get("code")) and params["code"] >= 0):
        raise ValueError("xid needs code, an integer >= 0")
    if fault == "ecc_dbe" and not (_is_int(params.get("count", 1)) and params.get("count", 1) >= 1):
        raise ValueError("ecc_dbe count must be an integer >= 1")
    if fault == "thermal":
        duration = params.get("duration_s", 60)
        if isinstance(duration, bool) or not isinstance(duration, int | float) or not 0 < duration < math.inf:
            raise ValueError("thermal duration_s must be a number > 0")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _quarantine(path: Path, error: Exception) -> None:
    """Set a fault file that cannot be applied aside as ``*.bad``, so it is neither retried nor lost."""
    log.warning("malformed fault file %s: %s; renaming it to .bad", path, error)
    try:
        os.replace(path, path.with_name(path.name + ".bad"))
    except OSError as e:
        log.warning("cannot rename fault file %s: %s", path, e)


def _pci_bus_id(index: int) -> str:
    return f"{index // len(_HGX_BUSES):08X}:{_HGX_BUSES[index % len(_HGX_BUSES)]:02X}:00.0"


def _clamp(value: float, lo: float, hi: float) -> float:
    return min(hi, max(lo, value))
