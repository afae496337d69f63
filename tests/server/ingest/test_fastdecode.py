"""The ingest decoder's msgspec mirrors accept exactly what the pydantic wire models accept.

`server.ingest.decode` decodes batches with msgspec for speed and leaves every refusal to pydantic.
These tests hold the two to the same contract: the mirrors have the models' fields and defaults, a
valid batch decodes to the same values either way, and a batch with any one field set to an arbitrary
JSON value is refused by both or accepted by both with the same result.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from gpuwatch.protocol import (
    Batch,
    CheckpointReport,
    Event,
    GpuProcess,
    GpuSample,
    GpuSeries,
    IbPortSample,
    JobProcess,
    LogLine,
    StepReport,
    to_series,
)
from server.ingest.decode import decode_batch, decode_wire, mirror

MODELS = [Batch, GpuSample, GpuSeries, LogLine, Event, JobProcess, StepReport, CheckpointReport, IbPortSample]


def _valid() -> dict[str, Any]:
    sample = GpuSample(
        ts=1.7e9, gpu=3, uuid="GPU-x", util_gpu=97.0, fb_used_mib=1.0, temp_c=60, job="j", rank=1, period_s=0.1
    )
    return json.loads(
        Batch(
            batch_id=7,
            samples=[sample, sample.model_copy(update={"gpu": 4, "processes": [GpuProcess(pid=5, used_memory_mib=2)]})],
            series=to_series([sample, sample.model_copy(update={"ts": 1.7e9 + 1, "util_gpu": None})], GpuSeries),
            logs=[LogLine(stream="file:/a.log", seq=1, ts=1.7e9, text="step 1")],
            events=[Event(stream="kmsg", seq=2, ts=1.7e9, kind="xid", gpu=0, data={"xid": 79, "nested": [1, {}]})],
            processes=[JobProcess(job="j", pid=10, rank=1)],
            steps=[
                StepReport(
                    job="j",
                    rank=1,
                    step=3,
                    ts=1.7e9,
                    duration_s=1.0,
                    comm_s=0.2,
                    collectives={"all_reduce": {"count": 2, "seconds": 0.1}},
                )
            ],
            dropped={"log": 3},
        ).model_dump_json()
    )


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_mirrors_have_the_models_fields_and_defaults(model: type[BaseModel]) -> None:
    fields = {f.name: f for f in msgspec.structs.fields(mirror(model))}
    assert set(fields) == set(model.model_fields)
    for name, info in model.model_fields.items():
        f = fields[name]
        if info.is_required():
            assert f.required, name
        elif info.default_factory is not None:
            assert f.default_factory() == info.default_factory(), name  # type: ignore[call-arg]
        else:
            assert f.default == info.default, name


def _same(raw: bytes) -> None:
    """decode_wire and pydantic agree on ``raw``: both refuse it, or both give the same values."""
    try:
        want = Batch.model_validate_json(raw).model_dump()
    except ValidationError:
        with pytest.raises(ValidationError):
            decode_wire(raw)
        return
    assert msgspec.to_builtins(decode_wire(raw)) == json.loads(json.dumps(want))


def test_a_valid_batch_decodes_to_the_same_values() -> None:
    _same(json.dumps(_valid()).encode())


def test_lax_input_pydantic_accepts_is_accepted() -> None:
    body = _valid()
    body["batch_id"] = 7.0  # an integral float where an int is due: pydantic accepts it, msgspec does not
    body["samples"][0]["gpu"] = "3"
    _same(json.dumps(body).encode())


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=300),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
PATHS = [
    ("batch_id",),
    ("version",),
    ("samples", 0, "ts"),
    ("samples", 0, "gpu"),
    ("samples", 0, "uuid"),
    ("samples", 0, "util_gpu"),
    ("samples", 0, "temp_c"),
    ("samples", 1, "processes"),
    ("samples", 0, "rank"),
    ("samples", 0, "period_s"),
    ("logs", 0, "text"),
    ("logs", 0, "seq"),
    ("events", 0, "kind"),
    ("events", 0, "data"),
    ("events", 0, "gpu"),
    ("processes", 0, "pid"),
    ("steps", 0, "collectives"),
    ("dropped",),
    ("samples",),
    ("logs", 0),
    ("series", 0, "ts"),
    ("series", 0, "ts", 1),
    ("series", 0, "util_gpu"),
    ("series", 0, "util_gpu", 0),
    ("series", 0, "temp_c", 1),
    ("series", 0, "processes"),
    ("series", 0, "job"),
    ("series",),
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), value=json_values)
def test_any_one_field_set_to_any_json_value_is_judged_alike(path: tuple[Any, ...], value: Any) -> None:
    body = _valid()
    target: Any = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    _same(json.dumps(body).encode())


def test_malformed_json_nesting_and_bad_utf8_are_refused() -> None:
    bad_text = b'{"batch_id": 1, "logs": [{"stream": "s", "seq": 1, "ts": 1, "text": "a\xffb"}]}'
    for raw in (b"{", b"[]", b'{"batch_id": 1, "logs": [' + b"[" * 100_000 + b"]}", bad_text):
        with pytest.raises(ValidationError):
            decode_batch(raw)
    # The one known difference: msgspec skips the value of a field the batch does not have without
    # checking its UTF-8, where pydantic refuses the body. Nothing of such a field is kept.
    assert decode_batch(b'{"batch_id": 1, "x": "\xff"}').batch_id == 1


def test_integers_past_64_bits_are_refused() -> None:
    """The store's BIGINT columns cannot hold them (SQLite's driver raised OverflowError: a 500)."""
    for raw in (
        b'{"batch_id": 18446744073709551616}',
        b'{"batch_id": 1, "logs": [{"stream": "s", "seq": 9223372036854775808, "ts": 1, "text": ""}]}',
    ):
        with pytest.raises(ValidationError):
            decode_batch(raw)
    assert decode_batch(b'{"batch_id": 9223372036854775807}').batch_id == 2**63 - 1


def test_protocol_1_samples_become_series_in_time_order() -> None:
    """The ingest path reads only series: a batch of rows is turned into one series per GPU and owner."""
    rows = [
        GpuSample(ts=1.7e9 + t, gpu=g, uuid=f"GPU-{g}", util_gpu=float(t), job="j" if t < 2 else None)
        for t in (1, 0, 2)
        for g in (0, 1)
    ]
    batch = decode_batch(Batch(batch_id=1, samples=rows).model_dump_json().encode(), now=1.7e9)
    assert batch.samples == []
    got = {(s.gpu, s.job): (s.ts, s.util_gpu, s.power_w) for s in batch.series}
    assert got == {
        (0, "j"): ([1.7e9, 1.7e9 + 1], [0.0, 1.0], None),
        (1, "j"): ([1.7e9, 1.7e9 + 1], [0.0, 1.0], None),
        (0, None): ([1.7e9 + 2], [2.0], None),
        (1, None): ([1.7e9 + 2], [2.0], None),
    }


def test_a_series_out_of_time_order_is_sorted_column_by_column() -> None:
    body = {"batch_id": 1, "series": [{"gpu": 0, "uuid": "GPU-0", "ts": [3, 1, 2], "util_gpu": [30, 10, None]}]}
    (series,) = decode_batch(json.dumps(body).encode(), now=2.0).series
    assert (series.ts, series.util_gpu) == ([1.0, 2.0, 3.0], [10.0, None, 30.0])


def test_a_column_longer_or_shorter_than_ts_is_refused() -> None:
    for util in ([1.0], [1.0, 2.0, 3.0]):
        body = {"batch_id": 1, "series": [{"gpu": 0, "uuid": "GPU-0", "ts": [1, 2], "util_gpu": util}]}
        with pytest.raises(ValidationError) as err:
            decode_batch(json.dumps(body).encode())
        assert err.value.errors()[0]["loc"] == ("series", 0, "util_gpu")
