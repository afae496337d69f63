"""A batch's GPU samples as one block of columns, what every consumer of samples folds.

The ingest path decodes a batch's series (protocol 2's JSON lists, protocol 3's binary columns) into a
`SampleBlock`: each column one numpy array of every series' samples end to end, and each series a
range of them. Rollups, the latest values and rings, and the job tracker then fold a batch with a few
array operations across all its series (`numpy.add.reduceat` over the series' or minutes' starts)
and a short Python loop per series for what is keyed (dicts of GPUs, jobs, minutes), instead of a pass
per consumer per series per column: at the agent's default batches (8 series of 2 samples) that per-
series Python was most of the server's time (bench/README.md, protocol 3).

Floats are float64 with NaN for a value not reported; integer and flag columns are int64 with -1 for one
not reported (every integer field is ≥ 0). What several consumers derive (periods, the ring's columns,
each series' last sample) is computed once per block and kept on it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from types import SimpleNamespace
from typing import Any, TypeVar

import numpy as np

from gpuwatch.columnar import COLUMN_TYPES, MISSING_INT
from gpuwatch.protocol import INT64, SERIES_COLUMNS

S = TypeVar("S")
_KEYS = ("gpu", "uuid", "job", "rank", "processes")
#: The integer and flag columns (the rest of `SERIES_COLUMNS` but ``ts`` are floats).
INT_COLUMNS = frozenset(name for name, code in COLUMN_TYPES.items() if code in "qb")
BOOL_COLUMNS = frozenset(name for name, code in COLUMN_TYPES.items() if code == "b")
#: What a GPU's ring of recent points keeps, besides the time (`server.telemetry.latest.Ring`).
RING_COLUMNS = ("util_gpu", "fb_used_mib", "power_w", "temp_c", "xid_last")


class SampleBlock:
    """The samples of a batch's series, column by column across the series (see the module docstring).
    Series ``i`` is samples ``starts[i]:starts[i + 1]``, in time order."""

    __slots__ = ("_cache", "floats", "gpu", "ints", "job", "processes", "rank", "starts", "ts", "uuid")

    def __init__(
        self,
        keys: dict[str, list[Any]],
        starts: np.ndarray,
        ts: np.ndarray,
        floats: dict[str, np.ndarray],
        ints: dict[str, np.ndarray],
    ) -> None:
        self.gpu: list[int] = keys["gpu"]
        self.uuid: list[str] = keys["uuid"]
        self.job: list[str | None] = keys["job"]
        self.rank: list[int | None] = keys["rank"]
        self.processes: list[Any] = keys["processes"]
        self.starts, self.ts, self.floats, self.ints = starts, ts, floats, ints
        self._cache: dict[str, Any] = {}

    @classmethod
    def of_series(cls, series: Sequence[Any]) -> SampleBlock:
        """A block of series with list columns (protocol 2's decoding, `GpuSeries`, or anything with
        their attributes; a column absent from a series is all missing there)."""
        keys = {k: [getattr(s, k, None) for s in series] for k in _KEYS}
        lengths = [len(s.ts) for s in series]
        starts = np.zeros(len(series) + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        ts = np.array(list(chain.from_iterable(s.ts for s in series)), dtype=np.float64)
        floats: dict[str, np.ndarray] = {}
        ints: dict[str, np.ndarray] = {}
        for name in SERIES_COLUMNS:
            if name == "ts":
                continue
            columns = [getattr(s, name, None) for s in series]
            if all(c is None for c in columns):
                continue
            values = list(chain.from_iterable(c or [None] * n for c, n in zip(columns, lengths, strict=True)))
            if name in INT_COLUMNS:
                if None in values or any(v > INT64 for v in values):  # past int64: held at its largest
                    values = [MISSING_INT if v is None else min(int(v), INT64) for v in values]
                ints[name] = np.array(values, dtype=np.int64)
            else:
                floats[name] = np.array(values, dtype=np.float64)  # None becomes NaN
        return cls(keys, starts, ts, floats, ints)

    def __len__(self) -> int:
        return len(self.gpu)

    def __iter__(self) -> Iterator[SimpleNamespace]:
        """Each series as lists (`series_at`): for tests and debugging, not for the ingest path."""
        return (self.series_at(i) for i in range(len(self)))

    def series_at(self, i: int) -> SimpleNamespace:
        """Series ``i`` with `GpuSeries`' attributes: its keys, and its columns as lists (None: missing; a
        column without a value in the series is None, as in protocol 2)."""
        a, b = int(self.starts[i]), int(self.starts[i + 1])
        out = SimpleNamespace(**{k: getattr(self, k)[i] for k in _KEYS}, ts=self.ts[a:b].tolist())
        for name in SERIES_COLUMNS[1:]:
            values = None
            if name in self.ints:
                kind = bool if name in BOOL_COLUMNS else int
                values = [None if v == MISSING_INT else kind(v) for v in self.ints[name][a:b].tolist()]
            elif name in self.floats:
                values = [None if v != v else v for v in self.floats[name][a:b].tolist()]
            setattr(out, name, values if values is not None and values.count(None) < len(values) else None)
        return out

    @property
    def size(self) -> int:
        """Samples in the block."""
        return len(self.ts)

    def has(self, name: str) -> bool:
        return name in self.floats or name in self.ints

    def column(self, name: str) -> np.ndarray | None:
        """A column as float64, NaN where a value is missing (an integer column converted); None if absent."""
        if (out := self.floats.get(name)) is not None:
            return out
        if (raw := self.ints.get(name)) is None:
            return None
        key = "f:" + name
        if (out := self._cache.get(key)) is None:
            out = self._cache[key] = np.where(raw == MISSING_INT, math.nan, raw.astype(np.float64))
        return out

    def cached(self, key: str, make: Callable[[SampleBlock], Any]) -> Any:
        """``make(self)``, computed once per block: what a consumer derives from the columns and reads often."""
        if (out := self._cache.get(key)) is None:
            out = self._cache[key] = make(self)
        return out

    def bounds(self) -> list[int]:
        """``starts`` as a list: series ``i`` is ``bounds[i]:bounds[i + 1]``."""
        if (out := self._cache.get("bounds")) is None:
            out = self._cache["bounds"] = self.starts.tolist()
        return out

    def ts_list(self) -> list[float]:
        if (out := self._cache.get("ts")) is None:
            out = self._cache["ts"] = self.ts.tolist()
        return out

    def last(self) -> np.ndarray:
        """Each series' last sample's index."""
        if (out := self._cache.get("last")) is None:
            out = self._cache["last"] = self.starts[1:] - 1
        return out

    def last_ts(self) -> list[float]:
        if (out := self._cache.get("last_ts")) is None:
            out = self._cache["last_ts"] = self.ts[self.last()].tolist()
        return out

    def periods(self) -> np.ndarray:
        """The time each sample stands for: ``period_s``, 1 s where the agent did not say (or said 0)."""
        if (out := self._cache.get("periods")) is None:
            p = self.floats.get("period_s")
            out = np.ones(self.size) if p is None else np.where(np.isnan(p) | (p == 0), 1.0, p)
            self._cache["periods"] = out
        return out

    def at_last(self, names: Sequence[str]) -> list[tuple[Any, ...]]:
        """The values of ``names`` at each series' last sample, as Python values (None: not reported)."""
        key = "at:" + ",".join(names)
        if (out := self._cache.get(key)) is not None:
            return out
        last, rows = self.last(), []
        for name in names:
            if name in self.ints:
                values = self.ints[name][last].tolist()
                rows.append([None if v == MISSING_INT else (bool(v) if name in BOOL_COLUMNS else v) for v in values])
            elif name in self.floats:
                rows.append([None if v != v else v for v in self.floats[name][last].tolist()])
            else:
                rows.append([None] * len(self))
        out = self._cache[key] = list(zip(*rows, strict=True)) if rows else [()] * len(self)
        return out

    def ring_values(self) -> np.ndarray:
        """The ring's columns (`RING_COLUMNS`) as one float32 matrix, NaN where not reported."""
        if (out := self._cache.get("ring")) is None:
            out = np.full((len(RING_COLUMNS), self.size), np.nan, dtype=np.float32)
            for row, name in enumerate(RING_COLUMNS):
                if (column := self.column(name)) is not None:
                    out[row] = column
            self._cache["ring"] = out
        return out

    def sample(self, i: int, make: Callable[..., S]) -> S:
        """Series ``i``'s last sample (with its processes), built by ``make`` (as `gpuwatch.protocol.sample_at`)."""
        j = int(self.starts[i + 1]) - 1
        values: dict[str, Any] = {"ts": float(self.ts[j])}
        for name, column in self.floats.items():
            if (v := float(column[j])) == v:
                values[name] = v
        for name, column in self.ints.items():
            if (v := int(column[j])) != MISSING_INT:
                values[name] = bool(v) if name in BOOL_COLUMNS else v
        keys = {k: getattr(self, k)[i] for k in ("gpu", "uuid", "job", "rank", "processes")}
        return make(**keys, **values)


def as_block(series: SampleBlock | Sequence[Any]) -> SampleBlock:
    """``series`` as a block (a block is returned as it is)."""
    return series if isinstance(series, SampleBlock) else SampleBlock.of_series(series)
