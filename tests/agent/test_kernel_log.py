"""Following the kernel log through /dev/kmsg: records, resume after a restart, a new boot."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from agent.collectors import kernel
from agent.collectors.kernel import KmsgFollower, KmsgPosition, is_kmsg, parse_record
from tests.helpers import wait_until

XID = "NVRM: Xid (PCI:0000:3a:00): 79, pid=4471, name=python, GPU has fallen off the bus."


def test_parse_record() -> None:
    rec = parse_record(f"3,1201,8812113321,-;{XID}".encode(), mono_to_wall=1_000_000.0)
    assert rec is not None and (rec.seq, rec.text) == (1201, XID)
    assert rec.ts == pytest.approx(1_000_000.0 + 8812.113321)
    assert parse_record(b" SUBSYSTEM=pci", 0.0) is None, "continuation lines are dropped"
    assert parse_record(b"garbage without a header", 0.0) is None
    assert parse_record(b"x,y,z,-;text", 0.0) is None


@pytest.fixture
def boot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    boot_id = tmp_path / "boot_id"
    boot_id.write_text("boot-1\n")
    monkeypatch.setattr(kernel, "BOOT_ID", boot_id)
    return boot_id


def _fifo(tmp_path: Path) -> tuple[Path, int]:
    """A named pipe standing in for the device: non-blocking reads, records written by the test.
    Opening it for reading first (non-blocking) lets the write end open without waiting for a reader."""
    path = tmp_path / "kmsg"
    os.mkfifo(path)
    os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # kept open (and reclaimed) with the test process
    return path, os.open(path, os.O_WRONLY)


def test_follower_resumes_after_its_last_record_and_restarts_on_a_new_boot(tmp_path: Path, boot: Path) -> None:
    path, writer = _fifo(tmp_path)
    follower = KmsgFollower(path)
    os.write(writer, f"6,10,1000,-;first\n SUBSYSTEM=x\n4,11,2000,-;{XID}\n".encode())
    records = wait_until(follower.poll, timeout=5, what="two records")
    assert [(r.seq, r.text) for r in records] == [(10, "first"), (11, XID)]
    assert follower.poll() == []
    # A restarted agent with the saved position skips what was shipped; a record seen again is dropped.
    again = KmsgFollower(path, KmsgPosition("boot-1", 11))
    os.write(writer, b"6,11,2000,-;dup\n6,12,3000,-;after restart\n")
    assert [r.text for r in wait_until(again.poll, timeout=5, what="the new record")] == ["after restart"]
    # After a reboot the kernel numbers records from zero again: nothing of the new boot is skipped.
    boot.write_text("boot-2\n")
    rebooted = KmsgFollower(path, KmsgPosition("boot-1", 12))
    os.write(writer, b"6,0,5,-;Linux version 6.1.0\n")
    assert [r.seq for r in wait_until(rebooted.poll, timeout=5, what="the new boot")] == [0]
    for f in (follower, again, rebooted):
        f.close()
    os.close(writer)


def test_unreadable_kernel_log_is_a_warning_not_a_crash(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    follower = KmsgFollower(tmp_path / "missing")
    assert follower.poll() == [] and follower.poll() == []
    assert sum("cannot read the kernel log" in r.message for r in caplog.records) == 1


@pytest.mark.skipif(not os.access("/dev/kmsg", os.R_OK | os.W_OK), reason="needs read and write access to /dev/kmsg")
def test_real_dev_kmsg_record_is_followed() -> None:
    """Writes one harmless line into this machine's kernel log and finds it through the follower."""
    assert is_kmsg(Path("/dev/kmsg")) and not is_kmsg(Path("/etc/hostname"))
    follower = KmsgFollower()
    follower.poll()  # the buffer so far
    marker = f"gpuwatch-test {uuid.uuid4()}: kmsg follower check"
    with open("/dev/kmsg", "w") as f:
        f.write(f"<6>{marker}\n")
    records = wait_until(lambda: [r for r in follower.poll() if marker in r.text], timeout=5, what="the marker")
    assert records[0].seq > 0
    follower.close()
