"""Follows the kernel's ring buffer through ``/dev/kmsg``: NVRM Xid lines, the OOM killer, bus errors.

Each read of /dev/kmsg returns one record, ``PRIO,SEQ,MONOTONIC_US,FLAGS;TEXT`` followed by
continuation lines (`` KEY=VALUE``, dropped here). The kernel numbers records itself, so the follower
remembers the last sequence number it returned together with the boot id: a restarted agent skips
what it already shipped, and after a reboot (new boot id, numbers from zero) it reads the new boot's
buffer from its start. Records the kernel overwrote before they were read make the read fail with
EPIPE; the follower counts them as lost and goes on with the oldest record still there.

Reading /dev/kmsg needs root or CAP_SYSLOG where ``kernel.dmesg_restrict`` is set.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.collectors.base import Line, Reading
from agent.collectors.logfile import LogTailer, TailPosition
from gpuwatch.diagnosis.xid import fatal_xid_in_line
from gpuwatch.protocol import MAX_LOG_LINE_CHARS, log_text

if TYPE_CHECKING:
    from agent.state import AgentState

log = logging.getLogger("gpuwatch.agent.kernel")

KMSG = Path("/dev/kmsg")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_RECORD_MAX = 8192  # the kernel refuses reads shorter than one record (EINVAL); records are < 8 KiB
_MAX_RECORDS_PER_POLL = 10_000  # a flood of kernel lines cannot stall the sampling loop


@dataclass(frozen=True, slots=True)
class KernelRecord:
    seq: int  # the kernel's own record number (per boot)
    ts: float  # wall-clock seconds, from the record's monotonic timestamp
    text: str


@dataclass(slots=True)
class KmsgPosition:
    boot_id: str = ""
    seq: int = -1  # last record returned


def is_kmsg(path: Path) -> bool:
    """True for the kernel's character device (as opposed to a log file that holds kernel lines)."""
    try:
        return stat.S_ISCHR(path.stat().st_mode)
    except OSError:
        return False


def current_boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


def parse_record(raw: bytes, mono_to_wall: float) -> KernelRecord | None:
    """One /dev/kmsg record; None for a continuation line or something that is not a record."""
    header, sep, body = raw.partition(b";")
    if not sep or raw[:1] == b" ":
        return None
    fields = header.split(b",")
    if len(fields) < 3:
        return None
    try:
        seq, mono_us = int(fields[1]), int(fields[2])
    except ValueError:
        return None
    text = log_text(body.split(b"\n", 1)[0])[:MAX_LOG_LINE_CHARS]
    return KernelRecord(seq=seq, ts=mono_to_wall + mono_us / 1e6, text=text)


class KmsgFollower:
    """Yields the kernel records appended since the last poll (never blocks)."""

    stream = "kernel"

    def __init__(self, path: Path = KMSG, position: KmsgPosition | None = None) -> None:
        self.path = path
        boot = current_boot_id()
        previous = position or KmsgPosition()
        # A different boot: its numbering started again from zero, so every record is new.
        self.position = previous if previous.boot_id == boot else KmsgPosition(boot, -1)
        self.lost = 0
        self._fd: int | None = None
        self._warned = False

    def poll(self) -> list[KernelRecord]:
        if self._fd is None and not self._open():
            return []
        assert self._fd is not None
        # The record's timestamp is CLOCK_MONOTONIC; this offset turns it into wall-clock time.
        mono_to_wall = time.time() - time.clock_gettime(time.CLOCK_MONOTONIC)
        records: list[KernelRecord] = []
        while len(records) < _MAX_RECORDS_PER_POLL:
            try:
                raw = os.read(self._fd, _RECORD_MAX)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # overwritten before we read it; the next read goes on
                    self.lost += 1
                    continue
                raise
            if not raw:
                break
            for chunk in raw.splitlines():  # one record per read from the device, several from a pipe
                record = parse_record(chunk, mono_to_wall)
                if record is not None and record.seq > self.position.seq:
                    records.append(record)
                    self.position.seq = record.seq
        return records

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> bool:
        try:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            if not self._warned:  # said once; the open is retried every poll, so a fixed permission takes
                log.warning("cannot read the kernel log %s (%s); Xids will come from NVML only", self.path, exc)
                self._warned = True
            return False
        return True


class KernelLogCollector:
    """The kernel log as a collector, in stream ``kernel``: the records of /dev/kmsg, or the lines of a
    file of kernel lines (a syslog ``kern.log``, or a test's). A fatal Xid line makes its reading urgent:
    the server opens an incident from it, so it should not wait for the next flush."""

    stream = KmsgFollower.stream

    def __init__(self, path: Path, kmsg: KmsgPosition, file: TailPosition) -> None:
        self._kmsg: KmsgFollower | None = None
        self._file: LogTailer | None = None
        if is_kmsg(path):
            self._kmsg = KmsgFollower(path, KmsgPosition(kmsg.boot_id, kmsg.seq))
        else:
            self._file = LogTailer(path, file, stream=self.stream)

    def collect(self, now: float) -> Reading:
        if self._kmsg is not None:
            lines = [Line(self.stream, r.ts, r.text) for r in self._kmsg.poll()]
        else:
            assert self._file is not None
            lines = [Line(self.stream, now, text) for text in self._file.poll()]
        return Reading(lines=lines, urgent=any(fatal_xid_in_line(line.text) is not None for line in lines))

    def save(self, state: AgentState) -> None:
        if self._kmsg is not None:
            state.kmsg = KmsgPosition(self._kmsg.position.boot_id, self._kmsg.position.seq)
        elif self._file is not None:
            state.files[str(self._file.path)] = self._file.saved_position()

    def close(self) -> None:
        if self._kmsg is not None:
            self._kmsg.close()
        if self._file is not None:
            self._file.close()
