"""Protocol 3 (`gpuwatch.columnar`): what the server decodes of a batch's binary columns, what it refuses
(naming the field) and that a refused batch stores nothing; protocol 2 beside it; and a real agent
shipping protocol 3 to a real server over loopback."""

from __future__ import annotations

import gzip
import json
import math
import sqlite3
import struct
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from agent.batching import COLUMNAR_MIN_SAMPLES, encode
from gpuwatch import columnar
from gpuwatch.protocol import Batch, GpuSeries, LogLine
from server.ingest.decode import decode_batch
from tests.helpers import Proc, free_port, migrated_sqlite, new_token, start_server, wait_until

NOW = 1_800_000_000.0


def _batch(n: int = 3, **extra: Any) -> Batch:
    gpu0 = GpuSeries(
        gpu=0,
        uuid="GPU-0",
        job="j",
        rank=1,
        processes=[{"pid": 7, "used_memory_mib": 10.0}],
        ts=[NOW - n + i for i in range(n)],
        util_gpu=[50.0, None, 2.5][:n] + [1.0] * max(0, n - 3),
        power_w=[300.0] * n,
        ecc_sbe_volatile=[3] * n,
        remap_failure=[False] * (n - 1) + [True],
        period_s=[1.0] * n,
    )
    gpu1 = GpuSeries(gpu=1, uuid="GPU-1", ts=[NOW - 2.5, NOW - 1.25, NOW - 0.5], temp_c=[40.0, 41.0, None])  # irregular
    logs = [LogLine(stream="file:/t.log", seq=0, ts=NOW, text="step 1")]
    return Batch(batch_id=5, series=[gpu0, gpu1], logs=logs, **extra)


def _lists(decoded: Any) -> list[dict[str, Any]]:
    keep = ("gpu", "uuid", "job", "rank", "ts", "util_gpu", "power_w", "temp_c", "ecc_sbe_volatile", "remap_failure")
    return [{k: getattr(s, k) for k in keep} for s in decoded.series]


def test_a_protocol_3_batch_decodes_to_what_its_protocol_2_twin_does() -> None:
    batch = _batch()
    as_json = decode_batch(batch.model_dump_json().encode(), now=NOW)
    as_columns = decode_batch(columnar.encode(batch), now=NOW, columnar=True)
    assert _lists(as_columns) == _lists(as_json)  # the values are float32-exact here
    assert as_columns.series.size == 6 and as_columns.batch_id == 5
    assert [ln.text for ln in as_columns.logs] == ["step 1"]
    assert as_columns.series.processes[0][0].pid == 7
    assert columnar.decode(columnar.encode(batch)) == batch  # the agent's own decoding (splitting a 413)


def test_regular_times_travel_as_t0_and_dt_and_irregular_ones_as_a_column() -> None:
    body = columnar.encode(_batch())
    envelope = json.loads(columnar.split(body)[0])
    assert [("t0" in h, h["n"]) for h in envelope["series"]] == [(True, 3), (False, 3)]
    assert [c["name"] for c in envelope["columns"]][:2] == ["ts", "util_gpu"]
    assert next(c for c in envelope["columns"] if c["name"] == "ts")["bytes"] == 3 * 8  # only GPU 1's times


def test_the_clock_offset_moves_the_columns_times_too() -> None:
    decoded = decode_batch(columnar.encode(_batch(clock_offset_s=100.0)), now=NOW + 100, columnar=True)
    assert decoded.series.ts.tolist()[:3] == [NOW - 3 + 100, NOW - 2 + 100, NOW - 1 + 100]
    assert decoded.logs[0].ts == NOW + 100


def _refused(body: bytes) -> list[dict[str, Any]]:
    with pytest.raises(ValidationError) as err:
        decode_batch(body, now=NOW, columnar=True)
    return err.value.errors()


def _parts(batch: Batch | None = None) -> tuple[dict[str, Any], bytes]:
    envelope, region = columnar.split(columnar.encode(batch or _batch()))
    return json.loads(envelope), bytes(region)


def _body(envelope: dict[str, Any], region: bytes) -> bytes:
    return columnar.join(json.dumps(envelope).encode(), region)


def _column(envelope: dict[str, Any], region: bytes, name: str) -> tuple[int, int, int]:
    """(index in the envelope's columns, offset in the region, bytes) of column ``name``."""
    at = 0
    for k, c in enumerate(envelope["columns"]):
        if c["name"] == name:
            return k, at, c["bytes"]
        at += c["bytes"]
    raise KeyError(name)


def test_a_body_that_is_not_protocol_3_is_refused() -> None:
    assert "not a protocol 3 body" in _refused(b'{"batch_id": 1}')[0]["msg"]
    assert "envelope" in _refused(struct.pack("<4sI", b"GWC3", 10_000) + b"{}")[0]["msg"]
    errors = _refused(columnar.join(b'{"batch_id": "x", "version": 3}', b""))
    assert errors[0]["loc"] == ("batch_id",)  # the envelope refused as protocol 2 refuses a batch


def test_a_truncated_column_is_refused_naming_it() -> None:
    envelope, region = _parts()
    k, _, _ = _column(envelope, region, envelope["columns"][-1]["name"])
    errors = _refused(_body(envelope, region[:-3]))
    assert errors[0]["loc"] == ("columns", k, "bytes") and "truncated" in errors[0]["msg"]


def test_a_column_not_a_whole_number_of_values_is_refused() -> None:
    envelope, region = _parts()
    k, at, size = _column(envelope, region, "power_w")
    envelope["columns"][k]["bytes"] = size + 2
    errors = _refused(_body(envelope, region[: at + size] + b"\0\0" + region[at + size :]))
    assert errors[0]["loc"] == ("columns", k, "bytes") and "whole number of 4-byte values" in errors[0]["msg"]


def test_a_column_longer_or_shorter_than_the_samples_is_refused() -> None:
    envelope, region = _parts()
    k, at, size = _column(envelope, region, "power_w")
    envelope["columns"][k]["bytes"] = size - 4
    errors = _refused(_body(envelope, region[: at + size - 4] + region[at + size :]))
    assert errors[0]["loc"] == ("columns", k, "bytes") and "holds 5 values for 6 samples" in errors[0]["msg"]
    envelope, region = _parts()
    errors = _refused(_body(envelope, region + b"\0" * 8))
    assert errors[0]["loc"] == ("columns",) and "after the last column" in errors[0]["msg"]


def _poke(name: str, index: int, value: Any) -> bytes:
    """The batch's body with sample ``index`` of column ``name`` set to ``value``."""
    envelope, region = _parts()
    _, at, _ = _column(envelope, region, name)
    code = columnar.COLUMN_TYPES[name]
    size = columnar.ITEM_SIZES[code]
    packed = struct.pack("<" + code, value)
    return _body(envelope, region[: at + index * size] + packed + region[at + (index + 1) * size :])


@pytest.mark.parametrize(
    ("name", "index", "value", "loc", "words"),
    [
        ("util_gpu", 2, math.inf, ("series", 0, "util_gpu", 2), "not finite"),
        ("power_w", 4, -math.inf, ("series", 1, "power_w", 1), "not finite"),
        ("util_gpu", 0, 150.0, ("series", 0, "util_gpu", 0), "outside [0, 100]"),
        ("temp_c", 3, -60.0, ("series", 1, "temp_c", 0), "outside [-50, 200]"),
        ("period_s", 1, 0.0, ("series", 0, "period_s", 1), "not over 0"),
        ("ecc_sbe_volatile", 5, -2, ("series", 1, "ecc_sbe_volatile", 2), "nor -1"),
        ("remap_failure", 0, 2, ("series", 0, "remap_failure", 0), "0 or 1"),
        ("ts", 1, math.nan, ("series", 1, "ts", 1), "not a positive finite number"),
        ("ts", 0, NOW + 3 * 86_400, ("series", 1, "ts", 0), "outside the accepted window"),
    ],
)
def test_a_value_past_its_fields_bounds_is_refused_naming_series_column_and_sample(
    name: str, index: int, value: float, loc: tuple[Any, ...], words: str
) -> None:
    errors = _refused(_poke(name, index, value))
    assert errors[0]["loc"] == loc and words in errors[0]["msg"], errors


def test_nan_is_a_missing_value_not_an_error() -> None:
    decoded = decode_batch(_poke("power_w", 0, math.nan), now=NOW, columnar=True)
    assert decoded.series.series_at(0).power_w == [None, 300.0, 300.0]


def test_a_regular_series_needs_dt_and_an_irregular_one_its_times() -> None:
    envelope, region = _parts()
    del envelope["series"][0]["dt"]
    assert _refused(_body(envelope, region))[0]["loc"] == ("series", 0, "dt")
    envelope, region = _parts()
    k, at, size = _column(envelope, region, "ts")
    del envelope["columns"][k]
    errors = _refused(_body(envelope, region[:at] + region[at + size :]))
    assert errors[0]["loc"] == ("columns",) and "no column ts" in errors[0]["msg"]


def test_samples_out_of_time_order_are_sorted_within_their_series() -> None:
    batch = Batch(batch_id=1, series=[GpuSeries(gpu=0, uuid="G", ts=[NOW - 1, NOW - 3, NOW - 2], util_gpu=[1, 3, 2])])
    (series,) = decode_batch(columnar.encode(batch), now=NOW, columnar=True).series
    assert (series.ts, series.util_gpu) == ([NOW - 3, NOW - 2, NOW - 1], [3.0, 2.0, 1.0])


def test_a_nul_in_the_envelope_is_replaced_as_in_protocol_2() -> None:
    batch = _batch()
    batch.logs[0].text = "a\x00b"
    assert decode_batch(columnar.encode(batch), now=NOW, columnar=True).logs[0].text == "a\ufffdb"


def test_the_agent_sends_protocol_3_only_to_a_server_that_reads_it_and_for_large_batches() -> None:
    small, large = _batch(), _batch(n=COLUMNAR_MIN_SAMPLES)
    assert gzip.decompress(encode(large, 3)[0]).startswith(columnar.MAGIC)
    assert gzip.decompress(encode(large, 2)[0]).startswith(b"{")
    assert gzip.decompress(encode(small, 3)[0]).startswith(b"{")


# -- over HTTP ----------------------------------------------------------------------------------------


def _post(base: str, token: str, body: bytes, kind: str = columnar.CONTENT_TYPE) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": kind, "Content-Encoding": "gzip"}
    return httpx.post(f"{base}/api/v1/ingest", content=gzip.compress(body), headers=headers, timeout=30)


def test_over_http_bad_columns_are_a_422_naming_the_field_and_store_nothing(tmp_path: Path) -> None:
    url = migrated_sqlite(tmp_path)
    token = new_token(url, "n1")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(tmp_path, port, tmp_path / "server.log", {"GPUWATCH_MAX_BODY_BYTES": "200000"})
    now = time.time()
    try:
        good = Batch(
            batch_id=1,
            series=[GpuSeries(gpu=0, uuid="GPU-0", ts=[now - 1, now], util_gpu=[10.0, 20.0])],
            logs=[LogLine(stream="s", seq=0, ts=now, text="kept")],
        )
        resp = _post(base, token, columnar.encode(good))
        assert resp.status_code == 200 and resp.json()["samples"] == 2, resp.text
        envelope, region = columnar.split(columnar.encode(good.model_copy(update={"batch_id": 2})))
        envelope = json.loads(envelope)
        envelope["logs"][0].update(seq=1, text="must not be stored")
        bad = columnar.join(json.dumps(envelope).encode(), bytes(region)[:-1])  # truncated column
        resp = _post(base, token, bad)
        assert resp.status_code == 422 and resp.json()["detail"][0]["loc"][:2] == ["body", "columns"], resp.text
        assert _post(base, token, b"\0" * 300_000).status_code == 413  # oversized, after gunzip
        assert _post(base, token, good.model_dump_json().encode(), "application/json").json()["duplicate"]  # v2
        with sqlite3.connect(tmp_path / "gpuwatch.db") as conn:
            assert conn.execute("SELECT text FROM log_lines").fetchall() == [("kept",)]
        (gpu,) = httpx.get(f"{base}/api/v1/gpus").json()
        assert gpu["sample"]["util_gpu"] == 20.0
    finally:
        server.stop()


def _protocol_counts(base: str) -> dict[str, float]:
    text = httpx.get(f"{base}/metrics").text
    out = {}
    for line in text.splitlines():
        if line.startswith("gpuwatch_ingest_batches_by_protocol_total{"):
            out[line.split('"')[1]] = float(line.rsplit(" ", 1)[1])
    return out


@pytest.mark.slow
def test_a_real_agent_ships_protocol_3_to_a_real_server_and_nothing_is_lost(tmp_path: Path) -> None:
    url = migrated_sqlite(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_file = tmp_path / "train.log"
    log_file.write_text("".join(f"line {n}\n" for n in range(50)))
    server = start_server(tmp_path, port, tmp_path / "server.log")
    gpus = 64  # 64 GPUs a flush of 2 s: 128 samples a batch, sent as protocol 3
    agent_cmd = ["agent", "--server", base, "--token", new_token(url, "n1"), "--node", "n1", "--client-port", "0"]
    agent_cmd += ["--simulate", str(gpus), "--flush", "2", "--log-file", str(log_file), "--data-dir", str(tmp_path)]
    agent = Proc(agent_cmd, tmp_path / "agent.log")
    try:
        wait_until(lambda: _protocol_counts(base).get("3", 0) >= 2, timeout=60, what="two protocol 3 batches")
        listed = httpx.get(f"{base}/api/v1/gpus").json()
        assert len(listed) == gpus and all(g["sample"] and g["sample"]["util_gpu"] is not None for g in listed)
        with sqlite3.connect(tmp_path / "gpuwatch.db") as conn:
            wait_until(lambda: conn.execute("SELECT count(*) FROM log_lines").fetchone()[0] == 50, what="50 lines")
            assert conn.execute("SELECT count(DISTINCT seq) FROM log_lines").fetchone()[0] == 50
    finally:
        assert agent.stop() == 0
        server.stop()


def test_a_spooled_protocol_3_batch_gets_its_clock_offset_splits_in_two_and_downgrades_to_json(tmp_path: Path) -> None:
    from agent.spool import Spool

    spool = Spool(tmp_path / "spool", 10_000_000)
    batch = _batch(n=COLUMNAR_MIN_SAMPLES)
    item = spool.put_encoded(batch, encode(batch, 3)[0], columnar=True)
    assert item.path.name.endswith(".c3.gz") and spool.peek() == item
    timed = item.read_timed(100.0)
    decoded = decode_batch(gzip.decompress(timed), now=NOW + 100, columnar=True)
    assert decoded.clock_offset_s == 100.0 and decoded.series.ts[0] == NOW - COLUMNAR_MIN_SAMPLES + 100
    as_json = Batch.model_validate_json(gzip.decompress(item.as_json(timed)))
    assert as_json.clock_offset_s == 100.0 and as_json.series == batch.series
    assert spool.split(item) is not None  # a 413: two halves, each a batch of its own
    halves = [Batch.model_validate_json(gzip.decompress(i.read())) for i in spool._items]
    assert sum(len(h.series) + len(h.logs) for h in halves) == len(batch.series) + len(batch.logs)
