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

import time
import types
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import annotated_types as at
import msgspec
from pydantic import BaseModel, ValidationError

from gpuwatch.protocol import SERIES_COLUMNS, Batch, GpuSeries, batch_errors, series_length_errors, to_series

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
_decoder = msgspec.json.Decoder(WireBatch)


def as_model(model: type[M], item: M | msgspec.Struct) -> M:
    """A mirror back as its pydantic model (for responses); a model is returned as is."""
    return item if isinstance(item, model) else model.model_validate(msgspec.to_builtins(item))


def decode_batch(raw: bytes, now: float | None = None) -> Batch:
    """``raw`` as a `WireBatch`, which has `Batch`'s attributes, with every sample in ``series``, each
    series in time order (protocol 1's ``samples`` are turned into series: the ingest path reads only
    those); raises pydantic's `ValidationError` for what the wire model refuses, and for what
    `gpuwatch.protocol.batch_errors` finds (timestamps far from ``now``, the server's clock, unreadable
    event data): decoded either way, by msgspec or by pydantic, a batch meets the same checks."""
    batch = decode_wire(raw)
    errors = [(("series", n, name), why) for n, name, why in series_length_errors(batch.series)]
    now = time.time() if now is None else now
    errors += batch_errors(batch, now - (batch.clock_offset_s or 0.0))  # the window on the agent's own clock
    if errors:
        raise ValidationError.from_exception_data(
            "Batch",
            [{"type": "value_error", "loc": loc, "input": None, "ctx": {"error": why}} for loc, why in errors],
        )
    if batch.samples:
        batch.series = [*batch.series, *to_series(batch.samples, WireSeries)]
        batch.samples = []
    for s in batch.series:
        _in_time_order(s)
    if batch.clock_offset_s:
        _on_server_clock(batch, batch.clock_offset_s)
    return batch


def _on_server_clock(batch: Batch, offset: float) -> None:
    """Every time in ``batch`` moved by the agent's measured clock offset, so that what a node with a wrong
    clock logged still falls inside its run (whose start the server stamped with its own clock)."""
    for s in batch.series:
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


def decode_wire(raw: bytes) -> Batch:
    """``raw`` as a `WireBatch` as it came (what pydantic would make of it); raises pydantic's
    `ValidationError` for what the wire model refuses."""
    try:
        return _decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        pass  # pydantic decides, and says why (its parser limits nesting depth too)
    batch = Batch.model_validate_json(raw)  # the authority: raises the canonical error
    try:
        return msgspec.convert(batch.model_dump(), WireBatch)
    except msgspec.ValidationError as exc:  # valid for pydantic, not for msgspec (e.g. NaN past a bound)
        raise ValidationError.from_exception_data(
            "Batch", [{"type": "value_error", "loc": (), "input": None, "ctx": {"error": str(exc)}}]
        ) from None
