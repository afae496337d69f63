"""Decoding ingest batches fast, with the pydantic wire models as the only definition.

`gpuwatch.protocol.Batch` is what agents send; validating it with pydantic costs about 6.5 µs per GPU
sample, most of a one-core server's budget at 100,000 samples/s (bench/README.md). Here each wire
model is mirrored once, at import, into a `msgspec.Struct` with the same fields, defaults and
constraints, and the body is decoded by msgspec (about 1.3 µs per sample). Anything msgspec refuses
is handed to pydantic, which stays the authority: it either accepts it (lax input msgspec is stricter
about, such as ``1.0`` for an integer) or raises the canonical 422 naming the field.

The ingest path then reads the mirrors' attributes, which have the wire models' names and types.
"""

from __future__ import annotations

import math
import re
import time
import types
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import annotated_types as at
import msgspec
import numpy as np
from pydantic import BaseModel, ValidationError

from gpuwatch import columnar
from gpuwatch.columnar import COLUMN_TYPES, ITEM_SIZES, MISSING_INT, ColumnarBatch
from gpuwatch.protocol import (
    SERIES_COLUMNS,
    TS_FUTURE_S,
    TS_PAST_S,
    Batch,
    GpuSample,
    GpuSeries,
    batch_errors,
    series_length_errors,
    to_series,
)
from server.telemetry.samples import SampleBlock

M = TypeVar("M", bound=BaseModel)
_CONSTRAINTS = {at.Gt: "gt", at.Ge: "ge", at.Lt: "lt", at.Le: "le", at.MinLen: "min_length", at.MaxLen: "max_length"}
_mirrors: dict[type[BaseModel], type[msgspec.Struct]] = {}


def mirror(model: type[BaseModel]) -> type[msgspec.Struct]:
    """A `msgspec.Struct` type with ``model``'s fields, defaults and constraints (nested models too)."""
    if model in _mirrors:
        return _mirrors[model]
    if model.__pydantic_decorators__.field_validators or model.__pydantic_decorators__.model_validators:
        raise TypeError(f"{model.__name__} has validators that a msgspec mirror cannot run")
    required: list[tuple[str, Any]] = []
    optional: list[tuple[str, Any, Any]] = []
    for name, info in model.model_fields.items():
        kind = _annotated(info.annotation, _meta(info.metadata))
        if info.is_required():
            required.append((name, kind))
        elif info.default_factory is not None:
            optional.append((name, kind, msgspec.field(default_factory=info.default_factory)))
        else:
            optional.append((name, kind, info.default))
    # gc=False: wire values hold no reference cycles, and untracked structs spare the cyclic collector
    struct = msgspec.defstruct(f"{model.__name__}Wire", [*required, *optional], kw_only=True, gc=False)
    _mirrors[model] = struct
    return struct


def _meta(metadata: list[Any]) -> msgspec.Meta | None:
    kwargs: dict[str, Any] = {}
    for item in metadata:
        if type(item) in _CONSTRAINTS:
            key = _CONSTRAINTS[type(item)]
            kwargs[key] = getattr(item, key)
        elif getattr(item, "pattern", None) is not None:
            kwargs["pattern"] = item.pattern
        else:
            raise TypeError(f"no msgspec equivalent for the constraint {item!r}")
    return msgspec.Meta(**kwargs) if kwargs else None


def _annotated(annotation: Any, meta: msgspec.Meta | None) -> Any:
    """``annotation`` with models replaced by their mirrors and ``meta`` on its non-None part."""
    origin = get_origin(annotation)
    if origin is Annotated:  # a list's items held to bounds of their own, e.g. GpuSeries' columns
        if meta is not None:
            raise TypeError(f"constraints both outside and inside {annotation!r}")
        kind, *inner = get_args(annotation)
        return _annotated(kind, _meta(inner))
    if origin in (Union, types.UnionType):
        args = get_args(annotation)
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"unsupported union {annotation!r}")
        return _annotated(inner[0], meta) | None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        kind: Any = mirror(annotation)
    elif origin in (list, dict):  # list[Model], dict[str, Model], dict[str, Any] ...
        kind = origin[tuple(_annotated(arg, None) for arg in get_args(annotation))]
    elif origin is None:
        kind = annotation  # float, int, str, bool, Any
    else:
        raise TypeError(f"unsupported annotation {annotation!r}")
    return Annotated[kind, meta] if meta is not None else kind


WireBatch = mirror(Batch)
WireSeries = mirror(GpuSeries)
_decoders = {Batch: msgspec.json.Decoder(WireBatch), ColumnarBatch: msgspec.json.Decoder(mirror(ColumnarBatch))}


def as_model(model: type[M], item: M | msgspec.Struct) -> M:
    """A mirror back as its pydantic model (for responses); a model is returned as is."""
    return item if isinstance(item, model) else model.model_validate(msgspec.to_builtins(item))


# ``\u0000`` preceded by an even number of backslashes: an escaped NUL, not the text "\u0000".
_NUL = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")


def without_nul(raw: bytes) -> bytes:
    """JSON ``raw`` with each NUL in a string (key or value) replaced by U+FFFD; the same bytes, at the
    cost of one substring search, when there is none."""
    if b"\\u0000" not in raw:
        return raw
    return _NUL.sub(rb"\1\\ufffd", raw)


def decode_batch(raw: bytes, now: float | None = None, *, columnar: bool = False) -> Batch:
    """``raw`` (protocol 1 or 2's JSON; with ``columnar``, a protocol 3 body) as a `WireBatch`, which has
    `Batch`'s attributes, with every sample in ``series``, each series in time order (protocol 1's
    ``samples`` are turned into series: the ingest path reads only those; protocol 3's series are one
    `SampleBlock`, which every consumer of samples folds as arrays); raises
    pydantic's `ValidationError` for what the wire model refuses, and for what
    `gpuwatch.protocol.batch_errors` finds (timestamps far from ``now``, the server's clock, unreadable
    event data): decoded either way, by msgspec or by pydantic, a batch meets the same checks."""
    now = time.time() if now is None else now
    if columnar:
        return decode_columnar(raw, now)
    batch = decode_wire(raw)
    errors = [(("series", n, name), why) for n, name, why in series_length_errors(batch.series)]
    errors += batch_errors(batch, now - (batch.clock_offset_s or 0.0))  # the window on the agent's own clock
    if errors:
        raise _invalid(errors)
    if batch.samples:
        batch.series = [*batch.series, *to_series(batch.samples, WireSeries)]
        batch.samples = []
    for s in batch.series:
        _in_time_order(s)
    if batch.clock_offset_s:
        _on_server_clock(batch, batch.series, batch.clock_offset_s)
    return batch


def _invalid(errors: list[tuple[tuple[Any, ...], str]], title: str = "Batch") -> ValidationError:
    return ValidationError.from_exception_data(
        title, [{"type": "value_error", "loc": loc, "input": None, "ctx": {"error": why}} for loc, why in errors]
    )


def decode_columnar(raw: bytes, now: float) -> Batch:
    """A protocol 3 body (`gpuwatch.columnar`) as `decode_batch` decodes a JSON one: its envelope by the
    same decoder and checks as protocol 2, its columns viewed as arrays and checked all at once (lengths,
    NaN and infinity, each field's bounds, the time window), each refusal naming its column, series and
    sample."""
    try:
        envelope, region = columnar.split(raw)
    except ValueError as exc:
        raise _invalid([((), str(exc))]) from None
    batch = decode_wire(without_nul(envelope), ColumnarBatch)
    agent_now = now - (batch.clock_offset_s or 0.0)  # the window on the agent's own clock
    errors = batch_errors(batch, agent_now)
    block = None
    try:
        block = _block(batch.series, batch.columns, region)
    except _Refused as refused:
        errors += refused.errors
    if block is not None:
        errors += _window_errors(block, agent_now)
    if errors:
        raise _invalid(errors)
    assert block is not None
    _sort_series(block)  # after the checks, which name a sample by its place as sent (as protocol 2's)
    batch.series = block  # type: ignore[assignment]
    batch.samples = []
    if batch.clock_offset_s:
        _on_server_clock(batch, block, batch.clock_offset_s)
    return batch


class _Refused(Exception):
    def __init__(self, errors: list[tuple[tuple[Any, ...], str]]) -> None:
        self.errors = errors


#: Each column's bounds (ge, gt, le) from `GpuSample`'s fields: what a protocol 2 value is held to.
_BOUNDS: dict[str, tuple[float, float, float]] = {}
for _name in COLUMN_TYPES:
    _limits = {"ge": -math.inf, "gt": -math.inf, "le": math.inf}
    for _item in GpuSample.model_fields[_name].metadata:
        for _key in _limits:
            if getattr(_item, _key, None) is not None:
                _limits[_key] = float(getattr(_item, _key))
    _BOUNDS[_name] = (_limits["ge"], _limits["gt"], _limits["le"])
_DTYPES = {"d": "<f8", "f": "<f4", "q": "<i8", "b": "<i1"}


def _block(heads: list[Any], spans: list[Any], region: memoryview) -> SampleBlock:
    """The block of a protocol 3 batch's columns, or `_Refused` with every error found."""
    lengths = [h.n for h in heads]
    total = sum(lengths)
    irregular = sum(h.n for h in heads if h.t0 is None)
    errors: list[tuple[tuple[Any, ...], str]] = []
    for n, h in enumerate(heads):
        if h.t0 is not None and h.n > 1 and h.dt is None:
            errors.append((("series", n, "dt"), "a series with t0 and more than one sample needs dt"))
    at = 0
    found: dict[str, tuple[int, int]] = {}
    for k, span in enumerate(spans):
        name, size = span.name, span.bytes
        if at + size > len(region):
            errors.append(
                (("columns", k, "bytes"), f"column {name} is truncated: {size} bytes said, {len(region) - at} left")
            )
            break
        start, at = at, at + size
        code = COLUMN_TYPES.get(name)
        if code is None:
            continue  # a column this server does not know (a newer agent's): skipped, as JSON's unknown fields
        if name in found:
            errors.append((("columns", k, "name"), f"column {name} twice"))
            continue
        item = ITEM_SIZES[code]
        if size % item:
            errors.append((("columns", k, "bytes"), f"{size} bytes is not a whole number of {item}-byte values"))
            continue
        want = irregular if name == "ts" else total
        if size // item != want:
            what = "samples of series without t0" if name == "ts" else "samples"
            errors.append((("columns", k, "bytes"), f"column {name} holds {size // item} values for {want} {what}"))
            continue
        found[name] = (start, size)
    if not errors and at != len(region):
        errors.append((("columns",), f"{len(region) - at} bytes after the last column"))
    if irregular and "ts" not in found and not any(loc[:1] == ("columns",) for loc, _ in errors):
        errors.append((("columns",), f"no column ts for the {irregular} samples of series without t0"))
    if errors:
        raise _Refused(errors)
    starts = np.zeros(len(heads) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    groups: dict[str, list[str]] = {}
    for name in found:
        if name != "ts":
            groups.setdefault(COLUMN_TYPES[name], []).append(name)
    floats: dict[str, np.ndarray] = {}
    ints: dict[str, np.ndarray] = {}
    for code, names in groups.items():
        data = b"".join(region[found[n][0] : found[n][0] + found[n][1]] for n in names)
        matrix = np.frombuffer(data, dtype=_DTYPES[code]).reshape(len(names), total)
        if code in "df":
            matrix = matrix.astype(np.float64)
            errors += _float_errors(names, matrix, starts)
            floats.update(zip(names, matrix, strict=True))
        else:
            errors += _int_errors(names, matrix, starts, code)
            ints.update(zip(names, matrix.astype(np.int64) if code == "b" else matrix, strict=True))
    ts = _times(heads, lengths, starts, region, found.get("ts"))
    bad = ~(ts > 0) | np.isinf(ts)
    if bad.any():
        j = int(np.argmax(bad))
        errors.append((_loc(starts, j, "ts"), f"timestamp {float(ts[j])!r} is not a positive finite number"))
    if errors:
        raise _Refused(errors)
    keys = {k: [getattr(h, k) for h in heads] for k in ("gpu", "uuid", "job", "rank", "processes")}
    return SampleBlock(keys, starts, ts, floats, ints)


def _loc(starts: np.ndarray, j: int, name: str) -> tuple[Any, ...]:
    """Where sample ``j`` of the block is: ("series", series index, column, index in the series)."""
    n = int(np.searchsorted(starts, j, side="right")) - 1
    return ("series", n, name, j - int(starts[n]))


def _float_errors(names: list[str], matrix: np.ndarray, starts: np.ndarray) -> list[tuple[tuple[Any, ...], str]]:
    """Each float column's first value that is infinite or outside its field's bounds (NaN: missing)."""
    ge, gt, le = (np.array([_BOUNDS[n][k] for n in names])[:, None] for k in range(3))
    bad = np.isinf(matrix) | (matrix < ge) | (matrix <= gt) | (matrix > le)
    if not bad.any():
        return []
    out = []
    for row in np.flatnonzero(bad.any(axis=1)).tolist():
        j = int(np.argmax(bad[row]))
        v, (lo, above, hi) = float(matrix[row, j]), _BOUNDS[names[row]]
        why = (
            "not finite"
            if math.isinf(v)
            else f"outside [{lo:g}, {hi:g}]" + (f", not over {above:g}" if above > -math.inf else "")
        )
        out.append((_loc(starts, j, names[row]), f"value {v!r} {why}"))
    return out


def _int_errors(
    names: list[str], matrix: np.ndarray, starts: np.ndarray, code: str
) -> list[tuple[tuple[Any, ...], str]]:
    """Each integer (or flag) column's first value that is neither a count (≥ 0; a flag 0 or 1) nor -1 (missing)."""
    bad = (matrix < MISSING_INT) if code == "q" else (matrix < MISSING_INT) | (matrix > 1)
    if not bad.any():
        return []
    out = []
    for row in np.flatnonzero(bad.any(axis=1)).tolist():
        j = int(np.argmax(bad[row]))
        want = "a count (>= 0)" if code == "q" else "0 or 1"
        out.append((_loc(starts, j, names[row]), f"value {int(matrix[row, j])} is neither {want} nor -1 (missing)"))
    return out


def _times(
    heads: list[Any], lengths: list[int], starts: np.ndarray, region: memoryview, ts: tuple[int, int] | None
) -> np.ndarray:
    """Every sample's time: ``t0 + i * dt`` for a regular series (as the agent checked it), else column ts."""
    given = None if ts is None else np.frombuffer(region[ts[0] : ts[0] + ts[1]], dtype="<f8")
    if given is not None and len(given) == starts[-1]:
        return given.astype(np.float64)  # every series irregular: the column as it is (a copy we own)
    t0 = np.array([h.t0 or 0.0 for h in heads])
    dt = np.array([h.dt or 0.0 for h in heads])
    index = np.arange(starts[-1], dtype=np.float64) - np.repeat(starts[:-1], lengths)
    out = np.repeat(t0, lengths) + index * np.repeat(dt, lengths)
    if given is not None:  # some regular, some not: the others' times in order from the column
        irregular = np.repeat([h.t0 is None for h in heads], lengths)
        out[irregular] = given
    return out


def _sort_series(block: SampleBlock) -> None:
    """Sort each series' samples by time, if they are not (agents send them in order)."""
    ts, starts = block.ts, block.starts
    if len(ts) < 2:
        return
    down = ts[1:] < ts[:-1]
    down[starts[1:-1] - 1] = False  # one series' last sample to the next's first is not an order
    if not down.any():
        return
    series = np.repeat(np.arange(len(block)), np.diff(starts))
    order = np.lexsort((ts, series))
    block.ts = ts[order]
    for columns in (block.floats, block.ints):
        for name in columns:
            columns[name] = columns[name][order]


def _window_errors(block: SampleBlock, now: float) -> list[tuple[tuple[Any, ...], str]]:
    """The block's first timestamp outside [now - `TS_PAST_S`, now + `TS_FUTURE_S`] (as `batch_errors`)."""
    lo, hi = now - TS_PAST_S, now + TS_FUTURE_S
    ts = block.ts
    bad = (ts < lo) | (ts > hi)
    if not bad.any():
        return []
    j = int(np.argmax(bad))
    window = f"outside the accepted window around the server's clock ({lo:.0f} to {hi:.0f})"
    return [(_loc(block.starts, j, "ts"), f"timestamp {float(ts[j])!r} {window}")]


def _on_server_clock(batch: Batch, series: SampleBlock | list[Any], offset: float) -> None:
    """Every time in ``batch`` moved by the agent's measured clock offset, so that what a node with a wrong
    clock logged still falls inside its run (whose start the server stamped with its own clock)."""
    if isinstance(series, SampleBlock):
        series.ts = np.maximum(series.ts + offset, 1e-3)
    else:
        for s in series:
            s.ts = [_shift(t, offset) for t in s.ts]
    for items in (batch.logs, batch.events, batch.steps, batch.checkpoints, batch.ib):
        for item in items:
            item.ts = _shift(item.ts, offset)


def _shift(ts: float, offset: float) -> float:
    return max(ts + offset, 1e-3)  # a time stays a time (> 0) whatever the node's clock said


def _in_time_order(series: Any) -> None:
    """Sort a series' samples by time, if they are not (agents send them in order)."""
    ts = series.ts
    if ts == sorted(ts):  # C all the way: timsort finds one run
        return
    order = sorted(range(len(ts)), key=ts.__getitem__)
    for name in SERIES_COLUMNS:
        if (column := getattr(series, name)) is not None:
            setattr(series, name, [column[i] for i in order])


def decode_wire(raw: bytes, model: type[BaseModel] = Batch) -> Batch:
    """``raw`` as a `WireBatch` (or, with ``model`` `ColumnarBatch`, a protocol 3 envelope's mirror) as it
    came (what pydantic would make of it); raises pydantic's `ValidationError` for what the model refuses."""
    try:
        return _decoders[model].decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        pass  # pydantic decides, and says why (its parser limits nesting depth too)
    batch = model.model_validate_json(raw)  # the authority: raises the canonical error
    try:
        return msgspec.convert(batch.model_dump(), mirror(model))
    except msgspec.ValidationError as exc:  # valid for pydantic, not for msgspec (e.g. NaN past a bound)
        raise ValidationError.from_exception_data(
            "Batch", [{"type": "value_error", "loc": (), "input": None, "ctx": {"error": str(exc)}}]
        ) from None
