"""The agent's on-disk spool: ordered by batch id, durable across re-opening, bounded, never silent."""

from __future__ import annotations

import json
from pathlib import Path

from agent.spool import Spool

BIG = 1 << 30


def _counts(samples: int = 0, logs: int = 0, events: int = 0) -> dict[str, int]:
    return {"samples": samples, "logs": logs, "events": events, "steps": 0}


def _drain(spool: Spool) -> list[tuple[int, bytes, dict[str, int]]]:
    out = []
    while (item := spool.peek()) is not None:
        out.append((item.batch_id, item.read(), item.counts))
        spool.remove(item)
    return out


def test_spool_peek_returns_lowest_batch_id_and_remove_advances(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", BIG)
    assert spool.peek() is None
    spool.put(3, b"three", _counts(1, 2, 3))
    spool.put(10, b"ten", _counts(logs=1))
    spool.put(7, b"seven", _counts(samples=4))  # out of order (a clock stepped back): the id orders, not arrival
    first = spool.peek()
    assert first is not None and first.batch_id == 3 and first.read() == b"three"
    assert first.counts == _counts(1, 2, 3)
    assert spool.peek() == first  # peek does not consume
    spool.remove(first)
    assert not first.path.exists()
    # The running spool serves the same order a re-opened one would.
    assert [b for b, _, _ in _drain(spool)] == [7, 10]


def test_spool_in_order_put_is_replayed_in_batch_id_order(tmp_path: Path) -> None:
    spool = Spool(tmp_path, BIG)
    for bid in (1, 2, 1_000_000_000_000, 1_700_000_000_000_000):
        spool.put(bid, f"body-{bid}".encode(), _counts(samples=bid % 7))
    assert [(b, body) for b, body, _ in _drain(spool)] == [
        (1, b"body-1"),
        (2, b"body-2"),
        (1_000_000_000_000, b"body-1000000000000"),
        (1_700_000_000_000_000, b"body-1700000000000000"),
    ]
    assert spool.peek() is None
    assert spool.stats() == (0, 0)


def test_spool_reopened_sees_same_items_in_order_and_removes_stale_tmp(tmp_path: Path) -> None:
    d = tmp_path / "spool"
    spool = Spool(d, BIG)
    spool.put(20, b"b" * 20, _counts(logs=2))
    spool.put(10, b"a" * 10, _counts(samples=1, events=5))
    spool.put(30, b"c" * 30, _counts())
    stale = d / "00000000000000000040.0-0-0.json.gz.tmp"  # a write that crashed before os.replace
    stale.write_bytes(b"half a batch")
    (d / "notes.txt").write_text("not a batch")  # foreign files are ignored, not served

    again = Spool(d, BIG)
    assert not stale.exists()
    assert again.stats() == (3, 60)
    assert _drain(again) == [
        (10, b"a" * 10, _counts(samples=1, events=5)),
        (20, b"b" * 20, _counts(logs=2)),
        (30, b"c" * 30, _counts()),
    ]
    assert Spool(d, BIG).peek() is None  # removals are durable too


def test_spool_stats_counts_files_and_bytes_waiting(tmp_path: Path) -> None:
    spool = Spool(tmp_path, BIG)
    assert spool.stats() == (0, 0)
    spool.put(1, b"x" * 100, {"samples": 1})
    spool.put(2, b"y" * 50, _counts(samples=1))
    assert spool.stats() == (2, 150)
    item = spool.peek()
    assert item is not None
    assert item.counts == _counts(samples=1)  # every kind, as a re-opened spool reads it from the name
    spool.remove(item)
    assert spool.stats() == (1, 50)
    item = spool.peek()
    assert item is not None
    spool.reject(item, "HTTP 422")
    assert spool.stats() == (0, 0)


def test_spool_over_bound_drops_oldest_and_counts_it(tmp_path: Path) -> None:
    d = tmp_path / "spool"
    spool = Spool(d, max_bytes=250)
    spool.put(1, b"1" * 100, _counts(samples=8, logs=3))
    spool.put(2, b"2" * 100, _counts(samples=8, events=1))
    assert spool.dropped_snapshot() == {}
    spool.put(3, b"3" * 100, _counts(logs=5))  # 300 > 250: batch 1 (the oldest) goes

    assert spool.stats() == (2, 200)
    item = spool.peek()
    assert item is not None and item.batch_id == 2
    assert spool.dropped == {"samples": 8, "logs": 3}
    assert not list(d.glob("00000000000000000001.*"))

    spool.put(4, b"4" * 200, _counts(samples=1))  # 400 > 250: batches 2 and 3 both go
    assert spool.stats() == (1, 200)
    assert spool.dropped == {"samples": 16, "logs": 8, "events": 1}

    # The count of what was lost survives a restart of the agent (it is reported with every batch).
    again = Spool(d, max_bytes=250)
    assert again.dropped_snapshot() == {"samples": 16, "logs": 8, "events": 1}
    assert [b for b, _, _ in _drain(again)] == [4]


def test_spool_keeps_the_newest_batch_even_when_it_alone_exceeds_the_bound(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=10)
    spool.put(1, b"small", _counts(samples=1))
    spool.put(2, b"z" * 50, _counts(samples=2))
    assert spool.stats() == (1, 50)
    item = spool.peek()
    assert item is not None and item.batch_id == 2
    assert spool.dropped == {"samples": 1}


def test_spool_reject_moves_file_to_rejected_and_counts_it(tmp_path: Path) -> None:
    d = tmp_path / "spool"
    spool = Spool(d, BIG)
    spool.put(5, b"bad batch", _counts(samples=2, logs=0, events=4))
    spool.put(6, b"good batch", _counts(logs=1))
    bad = spool.peek()
    assert bad is not None and bad.batch_id == 5

    spool.reject(bad, "HTTP 422: batch_id must be >= 0")

    assert not bad.path.exists()
    kept = d / "rejected" / bad.path.name
    assert kept.read_bytes() == b"bad batch"
    assert spool.dropped_snapshot() == {"rejected_samples": 2, "rejected_events": 4}
    nxt = spool.peek()
    assert nxt is not None and nxt.batch_id == 6  # the queue moves on

    again = Spool(d, BIG)
    assert again.dropped_snapshot() == {"rejected_samples": 2, "rejected_events": 4}
    assert [b for b, _, _ in _drain(again)] == [6]  # the rejected file is not replayed
    assert kept.exists()
    assert json.loads((d / "dropped.json").read_text()) == {"rejected_samples": 2, "rejected_events": 4}


def test_spool_dropped_snapshot_is_a_copy(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1024)
    spool.put(1, b"a" * 1000, _counts(logs=1))
    spool.put(2, b"b" * 1000, _counts(logs=1))
    snap = spool.dropped_snapshot()
    snap["logs"] = 999
    assert spool.dropped_snapshot() == {"logs": 1}
