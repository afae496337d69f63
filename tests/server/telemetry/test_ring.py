"""The per-GPU ring of recent points: what it keeps, whichever way a series is written into it."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from server.telemetry.latest import Point, Ring
from server.telemetry.samples import SampleBlock

BOTH = pytest.mark.parametrize("block", [False, True], ids=["lists", "block"])


def add(ring: Ring, s: SimpleNamespace, block: bool) -> None:
    """A series into the ring as lists (protocol 2) or from a batch's block (protocol 3)."""
    if block:
        ring.add_from(SampleBlock.of_series([s]), 0)
    else:
        ring.add(s)


def series(ts: list[float], util: list[float | None] | None = None) -> SimpleNamespace:
    n = len(ts)
    return SimpleNamespace(
        ts=ts,
        util_gpu=util if util is not None else [float(t) for t in ts],
        fb_used_mib=[100.0] * n,
        power_w=None,  # not reported at all
        temp_c=[60.0] * n,
        xid_last=None,
    )


@BOTH
def test_the_ring_keeps_one_point_a_gap_the_newest_size_and_missing_values_as_none(block: bool) -> None:
    ring = Ring(5, min_gap_s=1.0)
    add(ring, series([0.0, 1.0, 2.0], util=[10.0, None, 30.0]), block)  # in one stretch
    add(ring, series([2.5, 3.0, 3.2, 4.0]), block)  # 2.5 and 3.2 are under a gap from the point before
    add(ring, series([5.0, 6.0, 7.0]), block)  # wraps round the end
    points = ring.points()
    assert [p.ts for p in points] == [3.0, 4.0, 5.0, 6.0, 7.0]
    assert all(p.power_w is None and p.xid_last is None and p.fb_used_mib == 100.0 for p in points)
    assert [p.util_gpu for p in points] == [3.0, 4.0, 5.0, 6.0, 7.0]
    assert ring.points()[0] == Point(3.0, 3.0, 100.0, None, 60.0, None)


@BOTH
def test_a_missing_value_is_none_on_either_path_and_old_samples_are_not_kept(block: bool) -> None:
    ring = Ring(4)
    add(ring, series([10.0, 11.0], util=[None, 5.0]), block)  # slices
    add(
        ring, series([9.0, 11.5, 12.0, 13.0], util=[1.0, 2.0, None, 4.0]), block
    )  # one by one: the first two are dropped
    points = ring.points()
    assert [p.ts for p in points] == [10.0, 11.0, 12.0, 13.0]
    assert [p.util_gpu for p in points] == [None, 5.0, None, 4.0]
    assert not any(isinstance(p.util_gpu, float) and math.isnan(p.util_gpu) for p in points)
