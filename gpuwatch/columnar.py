"""Protocol 3: a batch's GPU samples as typed binary columns, beside protocol 2's JSON.

A protocol 3 body (``Content-Type`` `CONTENT_TYPE`, gzipped like any batch) is three parts:

    b"GWC3" | envelope length (uint32, little-endian) | envelope (JSON) | columns (bytes)

The **envelope** is a protocol 2 batch (`ColumnarBatch`: logs, events, steps, … exactly as there) whose
``series`` carry only who the samples are of and how many there are (`SeriesHead`), and whose
``columns`` say, in order, which columns the binary part holds and how many bytes each takes. A series'
times are ``t0 + i * dt`` when they are that regular (bit for bit), else they are in column ``ts``.

The **columns** are those of the whole batch, not of each series: each holds every series' samples end
to end, in the envelope's order of series, as little-endian typed values (`COLUMN_TYPES`): times and
periods as float64, other measurements as float32 with NaN for a value not reported, counters as int64
and flags as int8 with -1 for one not reported. A column no sample has is left out; one some series
lack is filled with the missing value for them.

Why this shape:

- **One array per column for the batch**: the server views each column with one ``frombuffer`` and
  checks all of a batch's float columns with a handful of array operations (bounds, NaN/inf), whatever
  the number of series; columns kept per series would cost those calls per series, and at the agent's
  default batches (8 series of 2 samples) that per-series cost is what dominates (bench/README.md).
  The consumers (rollups, telemetry, job tracking) fold the batch's columns the same way.
- **The envelope stays JSON**: everything but the samples is decoded and refused by the very code that
  reads protocol 2 (the same models, the same 422s naming the field), and every string in it has its NUL
  replaced as protocol 2's are (PostgreSQL cannot hold one), with one search of the envelope's bytes; a
  binary envelope would hold zero bytes anywhere.
- **Byte lengths are declared**, not implied, so that a truncated body or a column whose length is not a
  whole number of values is refused naming that column, before anything is stored.

Nothing here imports numpy: the agent packs and unpacks columns with the standard `array` module.
"""

from __future__ import annotations

import json
import math
import struct
import sys
from array import array
from collections.abc import Sequence
from typing import Any

from pydantic import Field, create_model

from gpuwatch.protocol import (
    INT64,
    MAX_BATCH_ITEMS,
    SERIES_COLUMNS,
    Batch,
    GpuSample,
    GpuSeries,
    _Model,
    _SeriesKeys,
)

#: The version of a protocol 3 batch; `gpuwatch.protocol.PROTOCOL_VERSION` stays that of the JSON batches.
VERSION = 3
CONTENT_TYPE = "application/vnd.gpuwatch.batch.v3"
MAGIC = b"GWC3"
_HEAD = struct.Struct("<4sI")  # magic, envelope length

#: Missing value of an integer column (every integer field is ≥ 0).
MISSING_INT = -1


def _typecode(name: str) -> str:
    if name in ("ts", "period_s"):
        return "d"  # times: float64
    (kind,) = [a for a in getattr(GpuSample.model_fields[name].annotation, "__args__", ()) if a is not type(None)]
    return {float: "f", int: "q", bool: "b"}[kind]


#: Each column's `array` typecode: d float64, f float32, q int64, b int8.
COLUMN_TYPES: dict[str, str] = {name: _typecode(name) for name in SERIES_COLUMNS}
ITEM_SIZES = {"d": 8, "f": 4, "q": 8, "b": 1}
_LITTLE = sys.byteorder == "little"


class SeriesHead(_SeriesKeys):
    """A series as the envelope names it: its keys (as protocol 2's), its number of samples, and its
    times when they are regular (``t0 + i * dt``; absent: they are in column ``ts``)."""

    n: int = Field(ge=1, le=MAX_BATCH_ITEMS, description="samples in the series")
    t0: float | None = Field(default=None, gt=0, description="time of the first sample, if the times are regular")
    dt: float | None = Field(default=None, ge=0, le=86_400, description="time between samples, if regular")


class ColumnSpan(_Model):
    """One column of the binary part: its name (a `GpuSample` field, or ``ts``) and its length in bytes."""

    name: str = Field(min_length=1, max_length=64)
    bytes: int = Field(ge=0, le=INT64)


ColumnarBatch = create_model(
    "ColumnarBatch",
    __base__=_Model,
    __doc__="The envelope of a protocol 3 batch: a protocol 2 batch whose series are heads (see module).",
    **{
        name: (info.annotation, info)
        for name, info in Batch.model_fields.items()
        if name not in ("version", "series", "samples")
    },
    version=(int, Field(ge=VERSION, le=VERSION)),
    samples=(list[GpuSample], Field(default_factory=list, max_length=0, description="protocol 1's rows: none here")),
    series=(list[SeriesHead], Field(default_factory=list, max_length=MAX_BATCH_ITEMS)),
    columns=(list[ColumnSpan], Field(default_factory=list, max_length=2 * len(SERIES_COLUMNS))),
)


def _regular(ts: Sequence[float]) -> tuple[float, float] | None:
    """(t0, dt) when ``ts[i] == t0 + i * dt`` exactly for every sample, as the server computes it."""
    t0 = ts[0]
    if len(ts) == 1:
        return t0, 0.0
    dt = ts[1] - t0
    if dt < 0 or any(t0 + i * dt != t for i, t in enumerate(ts)):
        return None
    return t0, dt


def _packed(code: str, values: Sequence[Any]) -> bytes:
    if code in "df":
        out = array(code, [math.nan if v is None else v for v in values])
    else:
        out = array(code, [MISSING_INT if v is None else int(v) for v in values])
    if not _LITTLE:
        out.byteswap()
    return out.tobytes()


def encode(batch: Batch) -> bytes:
    """``batch`` (protocol 2, its samples in ``series``) as a protocol 3 body, not gzipped."""
    series: list[Any] = list(batch.series)
    heads, irregular = [], []
    for s in series:
        head = {k: getattr(s, k) for k in ("gpu", "uuid", "job", "rank", "processes")}
        head = {k: v for k, v in head.items() if v is not None}
        if head.get("processes") is not None:
            head["processes"] = [p.model_dump(exclude_none=True) for p in s.processes]
        head["n"] = len(s.ts)
        if (regular := _regular(s.ts)) is not None:
            head["t0"], head["dt"] = regular
        else:
            irregular.append(s)
        heads.append(head)
    spans, parts = [], []
    if irregular:
        column = _packed("d", [t for s in irregular for t in s.ts])
        spans.append({"name": "ts", "bytes": len(column)})
        parts.append(column)
    for name in SERIES_COLUMNS:
        if name == "ts" or all(getattr(s, name) is None for s in series):
            continue
        values = [v for s in series for v in (getattr(s, name) or [None] * len(s.ts))]
        column = _packed(COLUMN_TYPES[name], values)
        spans.append({"name": name, "bytes": len(column)})
        parts.append(column)
    envelope = json.loads(batch.model_dump_json(exclude_none=True, exclude={"series", "samples", "version"}))
    envelope.update(version=VERSION, series=heads, columns=spans)
    head = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode()
    return _HEAD.pack(MAGIC, len(head)) + head + b"".join(parts)


def split(body: bytes) -> tuple[bytes, memoryview]:
    """A protocol 3 body's (envelope JSON, columns); raises ValueError naming what is wrong."""
    if len(body) < _HEAD.size or body[:4] != MAGIC:
        raise ValueError(f"not a protocol 3 body: it must begin with {MAGIC!r} and the envelope's length")
    _, length = _HEAD.unpack_from(body)
    if _HEAD.size + length > len(body):
        raise ValueError(f"the envelope is said to take {length} bytes; the body holds {len(body) - _HEAD.size}")
    view = memoryview(body)
    return bytes(view[_HEAD.size : _HEAD.size + length]), view[_HEAD.size + length :]


def join(envelope: bytes, columns: bytes | memoryview) -> bytes:
    """A protocol 3 body of ``envelope`` (JSON) and ``columns``: what `split` takes apart."""
    return _HEAD.pack(MAGIC, len(envelope)) + envelope + bytes(columns)


def decode(body: bytes) -> Batch:
    """A protocol 3 body as the protocol 2 `Batch` it stands for (the agent splits and re-sends spooled
    batches with it); raises ValueError (or pydantic's ValidationError) for a body that is not one.
    The server has its own, faster decoding (server/ingest/decode.py)."""
    envelope, columns = split(body)
    env = ColumnarBatch.model_validate_json(envelope)
    total = sum(h.n for h in env.series)
    values: dict[str, list[Any]] = {}
    at = 0
    for span in env.columns:
        chunk = columns[at : at + span.bytes]
        at += span.bytes
        if len(chunk) != span.bytes:
            raise ValueError(f"column {span.name} is truncated")
        code = COLUMN_TYPES.get(span.name)
        if code is None:
            continue
        out = array(code)
        out.frombytes(bytes(chunk))
        if not _LITTLE:
            out.byteswap()
        if code in "df":
            values[span.name] = [None if v != v else v for v in out]
        else:
            values[span.name] = [None if v == MISSING_INT else (bool(v) if code == "b" else v) for v in out]
    if any(len(v) != (total if k != "ts" else len(v)) for k, v in values.items()):
        raise ValueError("a column's length does not match the series' samples")
    series, start, irregular = [], 0, 0
    for h in env.series:
        if h.t0 is not None:
            ts = [h.t0 + i * (h.dt or 0.0) for i in range(h.n)]
        else:
            ts = values.get("ts", [])[irregular : irregular + h.n]
            irregular += h.n
        cols = {k: v[start : start + h.n] for k, v in values.items() if k != "ts"}
        cols = {k: v for k, v in cols.items() if any(x is not None for x in v)}
        keys = h.model_dump(include={"gpu", "uuid", "job", "rank", "processes"})
        series.append(GpuSeries(**keys, ts=ts, **cols))
        start += h.n
    fields = env.model_dump(exclude={"series", "columns", "version"})
    return Batch(**fields, series=series)
