"""InfiniBand port counters from sysfs: throughput, error counters and link state for each (device, port).

A slow all-reduce is as often a sick fabric (a flapping link, a cable throwing symbol errors) as a sick
GPU, so the agent ships port counters next to the GPU samples. It reads the layout every RDMA driver
(mlx5, mlx4, hfi1, …) exposes, ``<root>/class/infiniband/<device>/ports/<port>/counters/<name>`` and
``.../state``, with ``root`` configurable so tests read checked-in fixture trees.

How the counters are read:

* ``port_xmit_data`` / ``port_rcv_data`` count 4-byte words (the IB spec defines PortXmitData as octets
  divided by 4); rates are converted to bytes/s.
* A rate is the difference from the previous reading of the same counter over the time between them;
  a port's first reading (at start-up, or after it disappeared and came back) has no rate.
* A data counter that went *down* wrapped. If its previous value fitted in 32 bits the modulus is 2**32
  (legacy 32-bit PortCounters), otherwise 2**64 (64-bit PortCountersExtended, which at 400 Gb/s need
  decades to wrap, so in practice never do). A counter reset (``perfquery -R``, a driver reload that
  kept the directory) looks the same and yields one bogus rate.
* Error counters are reported as they stand (cumulative since boot or the last reset). One that rose
  between readings is an ``ib_errors`` event; one that fell was reset and becomes the new baseline
  (IB error counters saturate, they do not wrap).
* ``ib_link_down`` is emitted once per down transition: when ``link_downed`` rises (the link may have
  come back between readings) or the port state leaves ACTIVE. A port already down at its first reading
  is not reported: unused ports sit DOWN forever and would only be noise.
* A counter file that is missing, unreadable or not an integer is left out of that reading; the last
  good value stays the baseline, so the next good reading still gets a rate.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from agent.collectors.base import GpuEvent, Reading
from gpuwatch.protocol import IbPortSample

log = logging.getLogger(__name__)

#: Data counters, in 4-byte words; their rates become IbPortSample's *_bytes_per_s.
_XMIT_DATA = "port_xmit_data"
_RCV_DATA = "port_rcv_data"
_DATA_WORD_BYTES = 4
#: Error counters reported in IbPortSample.errors when the driver exposes them.
ERROR_COUNTERS = (
    "symbol_error",
    "link_downed",
    "link_error_recovery",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_xmit_discards",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_rcv_constraint_errors",
    "port_xmit_constraint_errors",
    "VL15_dropped",
)
_COUNTERS = (_XMIT_DATA, _RCV_DATA, *ERROR_COUNTERS)
_ACTIVE = "ACTIVE"


@dataclass(slots=True)
class _PortState:
    """What the previous readings of one port left behind, to difference the next one against."""

    counters: dict[str, tuple[int, float]] = field(default_factory=dict)  # name -> (value, time read)
    state: str | None = None  # "ACTIVE", "DOWN", "INIT", … ; None until a state file was readable
    down_reported: bool = False  # an ib_link_down was emitted and the port has not been ACTIVE since


def _counter_delta(old: int, new: int) -> int:
    """Increase from ``old`` to ``new``, assuming a decrease is one wrap of a 32- or 64-bit counter."""
    if new >= old:
        return new - old
    modulus = 2**32 if old < 2**32 else 2**64
    return new + modulus - old


class InfinibandCollector:
    """Reads every InfiniBand port under ``sysfs_root`` once per ``collect``; never raises for one port's
    trouble, and a machine without InfiniBand simply yields nothing."""

    stream = "infiniband"

    def __init__(self, sysfs_root: Path = Path("/sys")) -> None:
        self._class_dir = Path(sysfs_root) / "class" / "infiniband"
        self._ports: dict[tuple[str, int], _PortState] = {}

    def collect(self, now: float) -> Reading:
        samples: list[IbPortSample] = []
        events: list[GpuEvent] = []
        seen: set[tuple[str, int]] = set()
        for device, port, path in self._list_ports():
            seen.add((device, port))
            sample = self._read_port(device, port, path, now, events)
            if sample is not None:
                samples.append(sample)
        for device, port in sorted(self._ports.keys() - seen):
            del self._ports[(device, port)]  # if it comes back, it starts afresh: no rates, no events
            events.append(
                GpuEvent(
                    ts=now,
                    kind="ib_port_gone",
                    gpu=None,
                    message=f"InfiniBand {device} port {port} disappeared",
                    data={"device": device, "port": port},
                )
            )
        return Reading(events=events, ib=samples)

    def close(self) -> None:
        pass  # every read opens and closes its file: a port may vanish between readings

    def _list_ports(self) -> list[tuple[str, int, Path]]:
        """(device, port, port dir), sorted. Every step tolerates the tree changing under it (hot unplug)."""
        try:
            devices = list(self._class_dir.iterdir())
        except OSError:  # FileNotFoundError: no InfiniBand on this machine
            return []
        found: list[tuple[str, int, Path]] = []
        for device in devices:
            try:
                port_dirs = list((device / "ports").iterdir())
            except OSError:
                continue  # vanished while we looked, or not a device directory
            for port_dir in port_dirs:
                try:
                    port = int(port_dir.name)
                    if port >= 0 and port_dir.is_dir():
                        found.append((device.name, port, port_dir))
                except (ValueError, OSError):
                    continue
        return sorted(found, key=lambda f: (f[0], f[1]))

    def _read_port(self, device: str, port: int, path: Path, now: float, events: list[GpuEvent]) -> IbPortSample | None:
        prev = self._ports.get((device, port))
        counters = _read_counters(path / "counters")
        state = _read_state(path / "state")
        old = prev.counters if prev is not None else {}

        def rate(name: str) -> float | None:
            if name not in counters or name not in old:
                return None
            old_value, old_ts = old[name]
            if now <= old_ts:  # clock stepped back or no time passed: no meaningful rate
                return None
            return _counter_delta(old_value, counters[name]) * _DATA_WORD_BYTES / (now - old_ts)

        increase = {
            name: counters[name] - old[name][0]
            for name in ERROR_COUNTERS
            if name in counters and name in old and counters[name] > old[name][0]
        }
        where = f"InfiniBand {device} port {port}"
        if increase:
            rose = ", ".join(f"{name} +{n}" for name, n in increase.items())
            events.append(
                GpuEvent(
                    ts=now,
                    kind="ib_errors",
                    gpu=None,
                    message=f"{where}: error counters rose: {rose}",
                    data={"device": device, "port": port, "increase": increase},
                )
            )

        if state is None and prev is not None:
            state = prev.state  # unreadable this time: keep the last known state rather than invent one
        down_now = state is not None and state != _ACTIVE
        left_active = prev is not None and prev.state == _ACTIVE and down_now
        downed = increase.get("link_downed", 0)
        already_reported = prev is not None and prev.down_reported
        report_down = (downed > 0 or left_active) and not already_reported
        if report_down:
            how = f"state {prev.state} -> {state}" if left_active and prev is not None else f"now {state or 'unknown'}"
            events.append(
                GpuEvent(
                    ts=now,
                    kind="ib_link_down",
                    gpu=None,
                    message=f"{where}: link went down ({how}, link_downed +{downed})",
                    data={"device": device, "port": port, "state": state, "link_downed_increase": downed},
                )
            )

        self._ports[(device, port)] = _PortState(
            counters={**old, **{name: (value, now) for name, value in counters.items()}},
            state=state,
            down_reported=down_now and (report_down or already_reported),
        )
        try:
            return IbPortSample(
                ts=now,
                device=device,
                port=port,
                xmit_bytes_per_s=rate(_XMIT_DATA),
                rcv_bytes_per_s=rate(_RCV_DATA),
                errors={name: counters[name] for name in ERROR_COUNTERS if name in counters},
            )
        except ValidationError as e:  # e.g. a device name longer than the protocol allows
            log.warning("%s: dropping a sample the protocol refuses: %s", where, e)
            return None


def _read_counters(counters_dir: Path) -> dict[str, int]:
    """The counters we use that this driver exposes and that read as non-negative integers."""
    values: dict[str, int] = {}
    for name in _COUNTERS:
        try:
            text = (counters_dir / name).read_text()
        except FileNotFoundError:
            continue  # not every driver exposes every counter (irdma has no counters/ at all)
        except (OSError, ValueError) as e:  # EINVAL/EOPNOTSUPP from the driver, EACCES, undecodable bytes
            log.debug("cannot read %s: %s", counters_dir / name, e)
            continue
        try:
            value = int(text.strip())
        except ValueError:
            log.debug("not a counter in %s: %r", counters_dir / name, text[:64])  # e.g. "N/A (no PMA)"
            continue
        if value < 0:
            log.debug("negative counter in %s: %d", counters_dir / name, value)
            continue
        values[name] = value
    return values


def _read_state(path: Path) -> str | None:
    """The state's name from e.g. ``4: ACTIVE``, or None when the file is missing or unreadable."""
    try:
        text = path.read_text()
    except (OSError, ValueError) as e:
        if not isinstance(e, FileNotFoundError):
            log.debug("cannot read %s: %s", path, e)
        return None
    name = text.partition(":")[2].strip() if ":" in text else text.strip()
    return name or None
