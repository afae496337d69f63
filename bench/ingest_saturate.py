"""Ingest at saturation: gpuwatch against a parse-only server, same batches, interleaved rounds (issue 25).

Both servers run for the whole script: a real `gpuwatch server` and a parse-only ASGI server under the
same uvicorn (gunzip, msgspec JSON decode, keep each node's latest batch, acknowledge). Load-generator
processes hold one keep-alive connection per node and send closed-loop (the next batch as soon as the
last is acknowledged), so with enough connections the server, not the offered rate, sets the pace.
Rounds alternate reference, gpuwatch, reference, … for each batch size; the figures are medians over
rounds. gpuwatch gets each node's batches in order, each once (the parse-only server cycles through
the same bodies): nothing a retry or a replay could make cheap.

The server's CPU per batch at two batch sizes gives the fixed cost of a batch and the cost of a sample
apart: ``cpu(n) = fixed + n * per_sample``. gpuwatch's rounds also read its ingest writer's busy seconds
(`gpuwatch_ingest_writer_busy_seconds_total`): near 100 % of a round, the writer thread set the pace.

    .venv/bin/python bench/ingest_saturate.py [--sizes 16,400] [--conns 64] [--rounds 3] [--round-s 15]
                                              [--db sqlite|postgresql] [--soak-s S] [--check] [--json FILE]
                                              [--protocol 2|3]

``--protocol 3`` sends both servers the same batches as protocol 3 bodies (`gpuwatch.columnar`); the
parse-only server then splits the body, decodes its JSON envelope and views each column as an array.

``--soak-s`` then runs gpuwatch alone, saturated with the largest batches, for S more seconds, and reads
its RSS every 30 s: memory that grows under load shows there.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import math
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import httpx
import msgspec
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from ingest import EVENT_EVERY, LINES_PER_BATCH, Load, _Conn, _cpu_rss, _payloads, _templates, _tokens, check, machine  # noqa: E402

from agent.collectors.simulated import SimulatedCollector  # noqa: E402
from gpuwatch import columnar  # noqa: E402
from gpuwatch.config import RetentionSettings  # noqa: E402
from gpuwatch.protocol import Batch, RegisterRequest  # noqa: E402
from server.store.migrate import upgrade  # noqa: E402
from tests.helpers import Proc, free_port, metric_values, wait_until  # noqa: E402

GPUS = 8
SOAK_SLICE_S = 30.0  # the soak's RSS is read this often
LOG_LINES_KEPT_S = RetentionSettings().log_lines_days * 86_400  # older lines are pruned: --check would miss them


def _load(samples: int, batches: int) -> Load:
    """``batches`` batches of ``samples`` samples a node: 8 GPUs at 1 Hz, flushed every samples/8 s."""
    flush = samples / GPUS
    return Load(nodes=0, gpus=GPUS, hz=1.0, flush=flush, duration=flush * batches, warmup=0.0)


# -- the parse-only server ---------------------------------------------------------------------------


def as_protocol_3(body: bytes) -> bytes:
    """A gzipped protocol 2 batch as a gzipped protocol 3 one (gzip level 1, as `ingest._payloads`)."""
    return gzip.compress(columnar.encode(Batch.model_validate_json(gzip.decompress(body))), compresslevel=1)


_DTYPES = {"d": "<f8", "f": "<f4", "q": "<i8", "b": "<i1"}
COLUMNAR = columnar.CONTENT_TYPE.encode()


def serve_reference(port: int) -> None:
    """gunzip, decode the JSON (protocol 3: split, decode the envelope, view the columns), keep each node's
    latest batch, acknowledge: the least an ingest server does."""
    import numpy as np
    import uvicorn

    latest: dict[bytes, Any] = {}
    decode = msgspec.json.decode

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        more = True
        while more:
            msg = await receive()
            body += msg.get("body", b"")
            more = msg.get("more_body", False)
        headers = dict(scope["headers"])
        if scope["path"].endswith("/ingest") and headers.get(b"content-type", b"").startswith(COLUMNAR):
            envelope, region = columnar.split(zlib.decompress(body, 16 + zlib.MAX_WBITS))
            batch = decode(envelope)
            at, arrays = 0, []
            for c in batch["columns"]:  # each column viewed as an array, as gpuwatch does
                dtype = _DTYPES[columnar.COLUMN_TYPES[c["name"]]]
                arrays.append(np.frombuffer(region[at : at + c["bytes"]], dtype=dtype))
                at += c["bytes"]
            latest[headers.get(b"authorization", b"")] = (batch, arrays)
            samples = sum(s["n"] for s in batch["series"])
            out = msgspec.json.encode({"batch_id": batch["batch_id"], "samples": samples, "logs": len(batch["logs"])})
        elif scope["path"].endswith("/ingest"):
            batch = decode(zlib.decompress(body, 16 + zlib.MAX_WBITS))
            latest[headers.get(b"authorization", b"")] = batch
            samples = sum(len(s["ts"]) for s in batch.get("series", ()))
            out = msgspec.json.encode({"batch_id": batch["batch_id"], "samples": samples, "logs": len(batch["logs"])})
        else:
            out = b'{"status": "ready"}'
        head = [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        await send({"type": "http.response.body", "body": out})

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# -- the generators ----------------------------------------------------------------------------------


Nodes = list[tuple[int, str, str]]


def _start(span_s: float) -> float:
    """When a node's first batch is dated: far enough back that its last (``span_s`` of data later) is not
    in the future. Saturated, a node sends far more data than real time: at 100,000 samples/s in 400-sample
    batches, 200 s of it each second, so batches dated from an hour ago ran past the server's window of one
    day ahead after seven minutes of soak, and every one was refused (the first PostgreSQL soak)."""
    back = span_s + 3600
    if back > LOG_LINES_KEPT_S:
        days = span_s / 86_400
        raise SystemExit(f"{days:.0f} days of data a node: more than the server keeps log lines; run fewer seconds")
    return time.time() - back


def _generator(by_size: dict[int, Nodes], per_node: dict[int, int], cmds: Any, results: Any, protocol: int = 2) -> None:
    """Build every node's batches (a set of nodes for each batch size: each node's batch ids and sequence
    numbers start at 0), then run the rounds the parent sends: (kind, url, size, seconds) → samples
    acknowledged, batches, refusals, whether a node ran out of batches. At the end: what gpuwatch acknowledged."""
    bodies: dict[int, dict[int, list[bytes]]] = {}
    start = _start(max(_load(size, per_node[size]).duration for size in by_size))
    for size, nodes in by_size.items():
        load = _load(size, per_node[size])
        bodies[size] = {i: [p for _, p in _payloads(_templates(name, i, load), i, load, start)] for i, name, _ in nodes}
        if protocol == 3:
            bodies[size] = {i: [as_protocol_3(b) for b in mine] for i, mine in bodies[size].items()}
    sent = {(kind, size, i): 0 for kind in ("ref", "gw") for size, nodes in by_size.items() for i, _, _ in nodes}
    every = [n for nodes in by_size.values() for n in nodes]
    results.put("built")

    async def register(url: str) -> None:
        async def one(i: int, name: str, token: str) -> None:
            conn = _Conn(url)
            gpus = SimulatedCollector(name, GPUS, seed=i).inventory()
            reg = RegisterRequest(hostname=name, agent_version="bench", collector="simulated", gpus=gpus)
            status, body, _ = await conn.post("/api/v1/nodes/register", reg.model_dump_json().encode(), _auth(token))
            await conn.close()
            if status != 200:
                raise RuntimeError(f"{name} could not register: {status} {body!r}")

        await asyncio.gather(*(one(*n) for n in every))

    async def run(kind: str, url: str, size: int, seconds: float) -> dict[str, Any]:
        out: dict[str, Any] = {"samples": 0, "batches": 0, "refused": 0, "ran_out": False, "first_refusal": None}
        end = time.monotonic() + seconds

        async def node(i: int, token: str) -> None:
            conn, headers = _Conn(url), _auth(token) | {"Content-Encoding": "gzip"}
            if protocol == 3:
                headers["Content-Type"] = columnar.CONTENT_TYPE
            mine = bodies[size][i]
            try:
                while time.monotonic() < end:
                    k = sent[kind, size, i]
                    if kind == "gw" and k >= len(mine):
                        out["ran_out"] = True
                        return
                    status, body, after = await conn.post("/api/v1/ingest", mine[k % len(mine)], headers)
                    if status != 200:
                        out["refused"] += 1
                        out["first_refusal"] = out["first_refusal"] or f"{status} {body[:300]!r}"
                        await asyncio.sleep(after or 0.2)
                        continue
                    sent[kind, size, i] = k + 1
                    out["samples"] += json.loads(body)["samples"]
                    out["batches"] += 1
            finally:
                await conn.close()

        await asyncio.gather(*(node(i, token) for i, _, token in by_size[size]))
        return out

    while (cmd := cmds.get()) is not None:
        if cmd[0] == "register":
            asyncio.run(register(cmd[1]))
            results.put("registered")
        else:
            results.put(asyncio.run(run(*cmd)))
    acked = [k for (kind, _, _), k in sent.items() if kind == "gw"]  # each node's batches 0..k-1
    results.put({"lines": sum(LINES_PER_BATCH * k for k in acked), "events": sum(-(-k // EVENT_EVERY) for k in acked)})


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# -- the rounds ---------------------------------------------------------------------------------------


def _writer_busy(url: str | None) -> float:
    """gpuwatch's `gpuwatch_ingest_writer_busy_seconds_total` (0 for the reference, which has none)."""
    if url is None:
        return 0.0
    name = "gpuwatch_ingest_writer_busy_seconds_total"
    if not (values := metric_values(httpx.get(f"{url}/metrics", timeout=30).text, name)):
        raise RuntimeError(f"the server exports no {name}")
    return values[0]


def _round(gens: list[tuple[Any, Any]], pid: int, cmd: tuple[Any, ...], metrics: str | None = None) -> dict[str, Any]:
    """One round: the generators run ``cmd``; the server's CPU, RSS and (gpuwatch's, from ``metrics``) its
    ingest writer's busy share of the round."""
    cpu0, _ = _cpu_rss(pid)
    busy0 = _writer_busy(metrics)
    t0 = time.monotonic()
    for cmds, _ in gens:
        cmds.put(cmd)
    outs = [results.get(timeout=600) for _, results in gens]
    wall = time.monotonic() - t0
    busy1 = _writer_busy(metrics)
    cpu1, rss = _cpu_rss(pid)
    samples, batches = sum(o["samples"] for o in outs), sum(o["batches"] for o in outs)
    return {
        "samples_per_s": samples / wall,
        "batches_per_s": batches / wall,
        "cpu_pct": 100 * (cpu1 - cpu0) / wall,
        "cpu_us_per_batch": 1e6 * (cpu1 - cpu0) / max(1, batches),
        "writer_busy": (busy1 - busy0) / wall,
        "refused": sum(o["refused"] for o in outs),
        "ran_out": any(o["ran_out"] for o in outs),
        "first_refusal": next((o["first_refusal"] for o in outs if o["first_refusal"]), None),
        "rss_mib": rss,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="16,400", help="samples a batch, comma-separated")
    ap.add_argument("--conns", type=int, default=64, help="nodes, one keep-alive connection each")
    ap.add_argument("--procs", type=int, default=2, help="load-generator processes")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each server for each size")
    ap.add_argument("--round-s", type=float, default=15.0)
    ap.add_argument("--max-samples-per-s", type=float, default=400_000, help="sizes the batches built for gpuwatch")
    ap.add_argument("--db", choices=["sqlite", "postgresql"], default="sqlite")
    ap.add_argument(
        "--postgres",
        default=os.environ.get("GPUWATCH_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"),
    )
    ap.add_argument("--soak-s", type=float, default=0.0, help="then gpuwatch alone, saturated, this long (RSS)")
    ap.add_argument("--check", action="store_true", help="read back every line and event gpuwatch acknowledged")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--protocol", type=int, choices=(2, 3), default=2, help="3: both servers get protocol 3 bodies")
    ap.add_argument("--serve-reference", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_reference:
        serve_reference(args.serve_reference)
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    seconds = args.rounds * args.round_s + args.soak_s
    # Enough batches for gpuwatch at up to 5,000 batches/s or --max-samples-per-s, warm-up included.
    per_node = {s: math.ceil(min(args.max_samples_per_s, 5_000 * s) * (seconds + 3) / (s * args.conns)) for s in sizes}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        admin = None
        if args.db == "sqlite":
            db_url = f"sqlite:///{tmp}/bench.db"
        else:
            admin = create_engine(args.postgres, isolation_level="AUTOCOMMIT")
            name = f"gpuwatch_bench_{uuid.uuid4().hex[:8]}"
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            db_url = args.postgres.rsplit("/", 1)[0] + f"/{name}"
        try:
            results = _measure(args, tmp, db_url, sizes, per_node)
        finally:
            if admin is not None:
                with admin.connect() as conn:
                    conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                admin.dispose()
    _report(results, args)


def _measure(
    args: argparse.Namespace, tmp: Path, db_url: str, sizes: list[int], per_node: dict[int, int]
) -> dict[str, Any]:
    upgrade(db_url)
    tokens = _tokens(db_url, args.conns * len(sizes))
    by_size = {size: tokens[k * args.conns : (k + 1) * args.conns] for k, size in enumerate(sizes)}
    ref_port, gw_port = free_port(), free_port()
    ref_log = open(tmp / "reference.log", "wb")  # noqa: SIM115 - closed below
    ref = subprocess.Popen(
        [sys.executable, __file__, "--serve-reference", str(ref_port)], stdout=ref_log, stderr=ref_log
    )
    server = Proc(
        ["server", "--port", str(gw_port), "--data-dir", str(tmp), "--database-url", db_url],
        tmp / "server.log",
        {"GPUWATCH_LOG_LEVEL": "WARNING", "GPUWATCH_NODE_TIMEOUT_S": "600", "GPUWATCH_RATE_LIMIT_PER_S": "0"},
    )
    ctx = mp.get_context("spawn")
    gens = [(ctx.Queue(), ctx.Queue()) for _ in range(args.procs)]
    workers = [
        ctx.Process(
            target=_generator,
            args=({s: n[k :: args.procs] for s, n in by_size.items()}, per_node, cmds, res, args.protocol),
        )
        for k, (cmds, res) in enumerate(gens)
    ]
    ref_url, gw_url = f"http://127.0.0.1:{ref_port}", f"http://127.0.0.1:{gw_port}"
    try:
        for w in workers:
            w.start()
        for url in (ref_url, gw_url):
            wait_until(lambda u=url: httpx.get(f"{u}/readyz").status_code == 200, timeout=60, what=url)
        for _, res in gens:
            assert res.get(timeout=1200) == "built"
        for cmds, _ in gens:
            cmds.put(("register", gw_url))
        for _, res in gens:
            assert res.get(timeout=600) == "registered"
        rounds: dict[str, list[dict[str, Any]]] = {}
        for size in sizes:
            _round(gens, ref.pid, ("ref", ref_url, size, 3.0))  # warm-ups, not counted
            _round(gens, server.popen.pid, ("gw", gw_url, size, 3.0))
            for _ in range(args.rounds):
                rounds.setdefault(f"reference {size}", []).append(
                    _round(gens, ref.pid, ("ref", ref_url, size, args.round_s))
                )
                rounds.setdefault(f"gpuwatch {size}", []).append(
                    _round(gens, server.popen.pid, ("gw", gw_url, size, args.round_s), gw_url)
                )
                print(size, rounds[f"reference {size}"][-1], rounds[f"gpuwatch {size}"][-1], flush=True)
        soak = []  # gpuwatch alone, saturated with the last size's batches, RSS at the end of each slice
        started = time.monotonic()
        while time.monotonic() - started < args.soak_s:
            soak.append(_round(gens, server.popen.pid, ("gw", gw_url, sizes[-1], SOAK_SLICE_S)))
            print("soak", round(time.monotonic() - started), soak[-1], flush=True)
        for cmds, _ in gens:
            cmds.put(None)
        acked = [res.get(timeout=60) for _, res in gens]
        for w in workers:
            w.join(60)
    finally:
        server.stop()
        ref.terminate()
        ref.wait(15)
        ref_log.close()
    out: dict[str, Any] = {"rounds": rounds, "soak": soak}
    if args.check:
        lines, events = sum(a["lines"] for a in acked), sum(a["events"] for a in acked)
        out["check"] = check(db_url, len(tokens), _load(sizes[0], 1), lines, events) | {"lines_acked": lines}
    return out


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def _report(results: dict[str, Any], args: argparse.Namespace) -> None:
    rounds = results["rounds"]
    sizes = sorted({int(k.split()[1]) for k in rounds})
    print(
        f"{args.conns} connections, {args.rounds} rounds of {args.round_s:g} s each, {args.db}, "
        f"protocol {args.protocol}; {os.cpu_count()} CPUs"
    )
    print(
        "| batch | reference samples/s | gpuwatch samples/s | ratio | ref. µs/batch | gpuwatch µs/batch | "
        "gpuwatch CPU | its writer busy | refused |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    cost: dict[int, float] = {}
    for size in sizes:
        ref, gw = rounds[f"reference {size}"], rounds[f"gpuwatch {size}"]
        ratios = [g["samples_per_s"] / r["samples_per_s"] for r, g in zip(ref, gw, strict=True)]
        cost[size] = _median(gw, "cpu_us_per_batch")
        print(
            f"| {size} | {_median(ref, 'samples_per_s'):,.0f} | {_median(gw, 'samples_per_s'):,.0f} | "
            f"{statistics.median(ratios):.2f} ({min(ratios):.2f} to {max(ratios):.2f}) | "
            f"{_median(ref, 'cpu_us_per_batch'):,.0f} | {cost[size]:,.0f} | {_median(gw, 'cpu_pct'):.0f} % | "
            f"{100 * _median(gw, 'writer_busy'):.0f} % | {sum(g['refused'] for g in gw)} |"
        )
        if any(g["ran_out"] for g in gw):
            print(f"  gpuwatch {size}: some node ran out of batches: raise --max-samples-per-s")
    if len(sizes) >= 2:
        lo, hi = sizes[0], sizes[-1]
        per_sample = (cost[hi] - cost[lo]) / (hi - lo)
        print(
            f"gpuwatch server CPU a batch = {cost[lo] - lo * per_sample:,.0f} µs fixed + {per_sample:.2f} µs a sample"
        )
    if soak := results.get("soak"):
        rss = [round(r["rss_mib"]) for r in soak]
        rates = [r["samples_per_s"] for r in soak]
        print(f"soak: {len(soak)} slices of {SOAK_SLICE_S:g} s, {statistics.median(rates):,.0f} samples/s (median);")
        refused = sum(r["refused"] for r in soak)
        print(f"  RSS every {SOAK_SLICE_S:g} s (MiB): {', '.join(map(str, rss))}; refused {refused}")
    if "check" in results:
        print(f"check: {results['check']}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"machine": machine(), "args": vars(args) | {"json": str(args.json)}} | results, indent=2, default=str
            )
        )


if __name__ == "__main__":
    main()
