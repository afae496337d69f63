"""The agent soak (issue 21, acceptance 3), a minute of it: 2,000 lines/s of mixed 100-byte and 5 KB
lines, the spool on a 2 MiB tmpfs that fills and empties, the server SIGKILLed twice, the log rotated
while the agent is down. Every line written is stored exactly once or counted as dropped with a reason;
nothing is silently missing. `bench/agent_soak.py` runs the same scenario for longer (tests/agent/soak.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.soak import SoakConfig, mount_tmpfs, run_soak, unmount


@pytest.fixture
def spool_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "spool-disk"
    if not mount_tmpfs(disk, "2m"):
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield disk
    finally:
        unmount(disk)


@pytest.mark.slow
def test_the_agent_loses_no_line_silently_through_full_disks_server_crashes_and_a_rotation(
    tmp_path: Path, spool_disk: Path
) -> None:
    cfg = SoakConfig(duration_s=45, rate=2000, outage_s=6, agent_down_s=2, drain_timeout_s=90)
    result = run_soak(tmp_path, spool_disk, cfg)
    print(result.summary(), *result.events, sep="\n")

    assert result.written == 45 * 2000
    # The spool's disk really filled during an outage, and emptied again.
    assert result.disk_min_free < 64 * 1024, result.summary()
    assert result.spool_files_end == 0, result.summary()
    # Stored exactly once, with the text written, or counted as dropped with a reason: nothing else.
    assert result.duplicates == 0 and result.wrong_text == 0, result.summary()
    assert result.missing == 0, result.summary()
    assert result.stored_lines + result.dropped_total == result.written, result.summary()
    assert set(result.dropped) <= {"spool_error", "spool_full", "rejected"}, result.summary()
    # Dropped lines leave their sequence numbers unused, and only they do; the server knows the count too.
    assert result.seq_gaps == result.dropped_total, result.summary()
    assert result.server_dropped.get("spool_error_logs", 0) == result.dropped.get("spool_error", 0), result.summary()
