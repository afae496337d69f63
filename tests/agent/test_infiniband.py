"""The InfiniBand collector against real sysfs-format fixture trees (tests/fixtures/sysfs-ib): rates and
wrap-around, error and link events, ports that vanish and return, unreadable counters, no IB at all."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent.collectors.base import GpuEvent, Reading
from agent.collectors.infiniband import ERROR_COUNTERS, InfinibandCollector
from gpuwatch.protocol import IbPortSample
from tests.helpers import TESTS

FIXTURE = TESTS / "fixtures" / "sysfs-ib"
T0 = 1_700_000_000.0


@pytest.fixture
def sysfs(tmp_path: Path) -> Path:
    """A writable copy of the fixture tree, so a test can move counters between readings."""
    root = tmp_path / "sys"
    shutil.copytree(FIXTURE, root)
    return root


def _port_dir(root: Path, device: str, port: int = 1) -> Path:
    return root / "class" / "infiniband" / device / "ports" / str(port)


def _write(root: Path, device: str, counter: str, value: int | str) -> None:
    (_port_dir(root, device) / "counters" / counter).write_text(f"{value}\n")


def _read(root: Path, device: str, counter: str) -> int:
    return int((_port_dir(root, device) / "counters" / counter).read_text())


def _add(root: Path, device: str, counter: str, n: int) -> None:
    _write(root, device, counter, _read(root, device, counter) + n)


def _set_state(root: Path, device: str, state: str) -> None:
    (_port_dir(root, device) / "state").write_text(f"{state}\n")


def _collect(c: InfinibandCollector, now: float) -> tuple[dict[tuple[str, int], IbPortSample], list[GpuEvent]]:
    reading = c.collect(now)
    samples, events = reading.ib, reading.events
    for s in samples:  # every sample must survive the wire, exactly as the server will parse it
        assert IbPortSample.model_validate_json(s.model_dump_json()) == s
    by_port = {(s.device, s.port): s for s in samples}
    assert len(by_port) == len(samples)
    return by_port, events


def _kinds(events: list[GpuEvent]) -> list[str]:
    return [e.kind for e in events]


def test_first_reading_reports_error_counters_but_no_rates() -> None:
    samples, events = _collect(InfinibandCollector(FIXTURE), T0)
    assert sorted(samples) == [("mlx5_0", 1), ("mlx5_1", 1)]
    assert events == []
    for s in samples.values():
        assert s.ts == T0
        assert s.xmit_bytes_per_s is None and s.rcv_bytes_per_s is None
        assert sorted(s.errors) == sorted(ERROR_COUNTERS)  # the fixture exposes them all, nothing else
    assert samples[("mlx5_1", 1)].errors["symbol_error"] == 14
    assert samples[("mlx5_0", 1)].errors["link_downed"] == 1
    assert samples[("mlx5_0", 1)].errors["port_xmit_discards"] == 3


def test_rates_are_bytes_per_second_from_four_byte_words(sysfs: Path) -> None:
    c = InfinibandCollector(sysfs)
    _collect(c, T0)
    _add(sysfs, "mlx5_0", "port_xmit_data", 2_500_000)  # 10 MB in 4-byte words
    _add(sysfs, "mlx5_0", "port_rcv_data", 125)  # 500 bytes
    samples, events = _collect(c, T0 + 10)
    assert samples[("mlx5_0", 1)].xmit_bytes_per_s == 1_000_000.0
    assert samples[("mlx5_0", 1)].rcv_bytes_per_s == 50.0
    assert samples[("mlx5_1", 1)].xmit_bytes_per_s == 0.0  # an idle port: a rate of zero, not None
    assert samples[("mlx5_1", 1)].rcv_bytes_per_s == 0.0
    assert events == []


def test_32_bit_counter_that_went_down_wrapped_modulo_2_32(sysfs: Path) -> None:
    c = InfinibandCollector(sysfs)
    _write(sysfs, "mlx5_1", "port_xmit_data", 2**32 - 1000)
    _collect(c, T0)
    _write(sysfs, "mlx5_1", "port_xmit_data", 500)
    samples, _ = _collect(c, T0 + 2)
    assert samples[("mlx5_1", 1)].xmit_bytes_per_s == 1500 * 4 / 2


def test_64_bit_counter_that_went_down_wrapped_modulo_2_64(sysfs: Path) -> None:
    c = InfinibandCollector(sysfs)
    _write(sysfs, "mlx5_0", "port_rcv_data", 2**64 - 100)
    _collect(c, T0)
    _write(sysfs, "mlx5_0", "port_rcv_data", 300)
    samples, _ = _collect(c, T0 + 4)
    assert samples[("mlx5_0", 1)].rcv_bytes_per_s == 400 * 4 / 4
    assert samples[("mlx5_0", 1)].errors["link_downed"] == 1  # 64-bit data values do not disturb the rest


def test_error_counter_increase_emits_one_ib_errors_event_with_the_increase(sysfs: Path) -> None:
    c = InfinibandCollector(sysfs)
    _collect(c, T0)
    _add(sysfs, "mlx5_1", "symbol_error", 7)
    _add(sysfs, "mlx5_1", "port_rcv_errors", 2)
    samples, events = _collect(c, T0 + 5)
    assert _kinds(events) == ["ib_errors"]
    (ev,) = events
    assert ev.gpu is None and ev.ts == T0 + 5
    assert ev.data == {"device": "mlx5_1", "port": 1, "increase": {"symbol_error": 7, "port_rcv_errors": 2}}
    assert "mlx5_1" in ev.message and "symbol_error +7" in ev.message and "port_rcv_errors +2" in ev.message
    assert samples[("mlx5_1", 1)].errors["symbol_error"] == 21  # reported cumulatively
    _, events = _collect(c, T0 + 10)
    assert events == []  # nothing rose since


def test_error_counter_reset_is_a_new_baseline_not_an_event(sysfs: Path) -> None:
    c = InfinibandCollector(sysfs)
    _collect(c, T0)
    _write(sysfs, "mlx5_1", "symbol_error", 0)  # perfquery -R
    samples, events = _collect(c, T0 + 5)
    assert events == [] and samples[("mlx5_1", 1)].errors["symbol_error"] == 0
    _write(sysfs, "mlx5_1", "symbol_error", 1)
    _, events = _collect(c, T0 + 10)
    assert [e.data["increase"] for e in events] == [{"symbol_error": 1}]


def test_link_downed_increase_emits_ib_link_down(sysfs: Path) -> None:
    c = InfinibandCollector(sysfs)
    _collect(c, T0)
    _add(sysfs, "mlx5_0", "link_downed", 1)  # the link flapped and retrained between readings: still ACTIVE
    _, events = _collect(c, T0 + 5)
    assert sorted(_kinds(events)) == ["ib_errors", "ib_link_down"]
    down = next(e for e in events if e.kind == "ib_link_down")
    assert down.data == {"device": "mlx5_0", "port": 1, "state": "ACTIVE", "link_downed_increase": 1}
    assert next(e for e in events if e.kind == "ib_errors").data["increase"] == {"link_downed": 1}
    _add(sysfs, "mlx5_0", "link_downed", 1)  # a port that is back up and flaps again: a new transition
    _, events = _collect(c, T0 + 10)
    assert sorted(_kinds(events)) == ["ib_errors", "ib_link_down"]


def test_state_leaving_active_emits_ib_link_down_once_per_transition(sysfs: Path) -> None:
    c = InfinibandCollector(sysfs)
    _collect(c, T0)
    _set_state(sysfs, "mlx5_1", "1: DOWN")
    samples, events = _collect(c, T0 + 5)
    assert _kinds(events) == ["ib_link_down"]
    assert events[0].data["device"] == "mlx5_1" and events[0].data["state"] == "DOWN"
    assert "ACTIVE -> DOWN" in events[0].message
    assert ("mlx5_1", 1) in samples  # a down port is still sampled

    _add(sysfs, "mlx5_1", "link_downed", 1)  # the counter catching up with the same transition
    _, events = _collect(c, T0 + 10)
    assert _kinds(events) == ["ib_errors"]
    _set_state(sysfs, "mlx5_1", "2: INIT")  # still not ACTIVE: the same down period
    _, events = _collect(c, T0 + 15)
    assert events == []

    _set_state(sysfs, "mlx5_1", "4: ACTIVE")
    _, events = _collect(c, T0 + 20)
    assert events == []
    _set_state(sysfs, "mlx5_1", "1: DOWN")
    _, events = _collect(c, T0 + 25)
    assert _kinds(events) == ["ib_link_down"]


def test_port_down_at_start_is_not_reported(sysfs: Path) -> None:
    _set_state(sysfs, "mlx5_1", "1: DOWN")  # an uncabled port: DOWN forever, not news
    c = InfinibandCollector(sysfs)
    _, events = _collect(c, T0)
    assert events == []
    _, events = _collect(c, T0 + 5)
    assert events == []


def test_removed_port_emits_ib_port_gone_once_and_the_others_are_still_sampled(sysfs: Path) -> None:
    c = InfinibandCollector(sysfs)
    _collect(c, T0)
    shutil.rmtree(_port_dir(sysfs, "mlx5_1"))
    _add(sysfs, "mlx5_0", "port_xmit_data", 1000)
    samples, events = _collect(c, T0 + 5)
    assert list(samples) == [("mlx5_0", 1)]
    assert samples[("mlx5_0", 1)].xmit_bytes_per_s == 1000 * 4 / 5
    assert _kinds(events) == ["ib_port_gone"]
    assert events[0].data == {"device": "mlx5_1", "port": 1} and events[0].gpu is None
    samples, events = _collect(c, T0 + 10)
    assert list(samples) == [("mlx5_0", 1)] and events == []


def test_removed_device_emits_ib_port_gone_for_its_port(sysfs: Path) -> None:
    c = InfinibandCollector(sysfs)
    _collect(c, T0)
    shutil.rmtree(sysfs / "class" / "infiniband" / "mlx5_0")
    samples, events = _collect(c, T0 + 5)
    assert list(samples) == [("mlx5_1", 1)]
    assert [e.data for e in events if e.kind == "ib_port_gone"] == [{"device": "mlx5_0", "port": 1}]


def test_port_that_comes_back_starts_again_without_rates(sysfs: Path, tmp_path: Path) -> None:
    c = InfinibandCollector(sysfs)
    _collect(c, T0)
    saved = tmp_path / "saved-port"
    shutil.copytree(_port_dir(sysfs, "mlx5_1"), saved)
    shutil.rmtree(_port_dir(sysfs, "mlx5_1"))
    _, events = _collect(c, T0 + 5)
    assert _kinds(events) == ["ib_port_gone"]

    shutil.copytree(saved, _port_dir(sysfs, "mlx5_1"))
    _write(sysfs, "mlx5_1", "port_xmit_data", 0)  # the driver reloaded: counters start over
    _write(sysfs, "mlx5_1", "symbol_error", 0)
    samples, events = _collect(c, T0 + 10)
    assert events == []  # no wrap, no error increase, no link event against the forgotten state
    assert samples[("mlx5_1", 1)].xmit_bytes_per_s is None and samples[("mlx5_1", 1)].rcv_bytes_per_s is None

    _write(sysfs, "mlx5_1", "port_xmit_data", 250)
    samples, events = _collect(c, T0 + 15)
    assert samples[("mlx5_1", 1)].xmit_bytes_per_s == 250 * 4 / 5
    assert samples[("mlx5_1", 1)].rcv_bytes_per_s == 0.0
    assert events == []


@pytest.mark.parametrize("garbage", ["N/A (no PMA)", "", "12ab", "-5", b"\xff\xfe"])
def test_garbage_in_a_counter_file_leaves_that_counter_out(sysfs: Path, garbage: str | bytes) -> None:
    c = InfinibandCollector(sysfs)
    _collect(c, T0)
    xmit = _port_dir(sysfs, "mlx5_0") / "counters" / "port_xmit_data"
    good = int(xmit.read_text())
    symbol_error = _port_dir(sysfs, "mlx5_0") / "counters" / "symbol_error"
    for f in (xmit, symbol_error):
        f.write_bytes(garbage if isinstance(garbage, bytes) else garbage.encode())
    _add(sysfs, "mlx5_0", "port_rcv_data", 10)
    samples, events = _collect(c, T0 + 5)
    s = samples[("mlx5_0", 1)]
    assert s.xmit_bytes_per_s is None
    assert s.rcv_bytes_per_s == 10 * 4 / 5  # the rest of the port is unaffected
    assert "symbol_error" not in s.errors and s.errors["link_downed"] == 1
    assert events == []

    xmit.write_text(f"{good + 1000}\n")  # readable again: a rate against the last good value
    _write(sysfs, "mlx5_0", "symbol_error", 2)
    samples, events = _collect(c, T0 + 10)
    assert samples[("mlx5_0", 1)].xmit_bytes_per_s == 1000 * 4 / 10
    assert [e.data["increase"] for e in events] == [{"symbol_error": 2}]


def test_counter_that_cannot_be_read_is_left_out(sysfs: Path) -> None:
    counter = _port_dir(sysfs, "mlx5_0") / "counters" / "port_rcv_errors"
    counter.unlink()
    counter.mkdir()  # read() fails with an OSError, as a driver's EINVAL / EOPNOTSUPP does
    samples, events = _collect(InfinibandCollector(sysfs), T0)
    assert "port_rcv_errors" not in samples[("mlx5_0", 1)].errors
    assert samples[("mlx5_0", 1)].errors["symbol_error"] == 0
    assert events == []


def test_port_without_counters_or_state_is_sampled_empty(sysfs: Path) -> None:
    port = _port_dir(sysfs, "mlx5_1")
    shutil.rmtree(port / "counters")  # irdma-like: a port directory without counters/
    (port / "state").unlink()
    samples, events = _collect(InfinibandCollector(sysfs), T0)
    assert samples[("mlx5_1", 1)].errors == {} and samples[("mlx5_1", 1)].xmit_bytes_per_s is None
    assert events == []


def test_clock_that_did_not_advance_gives_no_rate(sysfs: Path) -> None:
    c = InfinibandCollector(sysfs)
    _collect(c, T0)
    _add(sysfs, "mlx5_0", "port_xmit_data", 100)
    samples, _ = _collect(c, T0)
    assert samples[("mlx5_0", 1)].xmit_bytes_per_s is None
    _add(sysfs, "mlx5_0", "port_xmit_data", 100)
    samples, _ = _collect(c, T0 + 1)
    assert samples[("mlx5_0", 1)].xmit_bytes_per_s == 400.0


def test_no_infiniband_gives_empty_results(tmp_path: Path) -> None:
    assert InfinibandCollector(tmp_path / "no-such-root").collect(T0) == Reading()
    (tmp_path / "sys" / "class").mkdir(parents=True)  # a sysfs without class/infiniband
    assert InfinibandCollector(tmp_path / "sys").collect(T0) == Reading()


def test_infiniband_class_vanishing_reports_every_port_gone(sysfs: Path) -> None:
    c = InfinibandCollector(sysfs)
    _collect(c, T0)
    shutil.rmtree(sysfs / "class" / "infiniband")  # the driver was unloaded
    samples, events = _collect(c, T0 + 5)
    assert samples == {}
    assert [(e.kind, e.data["device"]) for e in events] == [("ib_port_gone", "mlx5_0"), ("ib_port_gone", "mlx5_1")]
    assert InfinibandCollector(sysfs).collect(T0 + 10) == Reading()
