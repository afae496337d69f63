"""Ingest throughput: a real `gpuwatch server`, and separate load-generator processes that play agents.

Each generator process plays a slice of the nodes: every node registers, then every ``--flush``
seconds sends what an agent would: a gzipped batch of its GPUs' samples at ``--hz`` (values from the
simulated collector, attributed to jobs), a few log lines and, every tenth batch, an event, each
numbered per node. Sending is open-loop, on the nodes' own schedules, so a slow server shows as
latency and backlog rather than as a lower offered rate; a refused batch is retried, as the agent's
spool would.

Measured after a warm-up: samples/s stored (from the acknowledgements), request latency p50/p99, the
server's CPU (one core = 100 %) and RSS (sampled every 2 s: start, max and the trend in MB/min).
With ``--check`` the database is then read back: every log line and event sent must be stored once,
with no gap in any node's sequence numbers.

The reference is the same generators against a minimal handler that only gunzips and validates each
batch with pydantic (no storage, no telemetry): gpuwatch's server CPU per sample reads as a ratio of it.

    .venv/bin/python bench/ingest.py                        # 1,250 nodes x 8 GPUs at 10 Hz, 60 s, both DBs
    .venv/bin/python bench/ingest.py --duration 600 --check --db postgresql   # the 10-minute load test
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import multiprocessing as mp
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import msgspec
import uvicorn
from fastapi import FastAPI, Request, Response
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.collectors.simulated import SimulatedCollector  # noqa: E402
from gpuwatch.protocol import PROTOCOL_VERSION, SERIES_COLUMNS, Batch, RegisterRequest, sample_count  # noqa: E402
from server.store.db import make_engine, make_sessionmaker, transaction  # noqa: E402
from server.store.migrate import upgrade  # noqa: E402
from server.store.nodes import create_token  # noqa: E402
from tests.helpers import Proc, free_port, wait_until  # noqa: E402

LINES_PER_BATCH = 10
EVENT_EVERY = 10  # batches
GPUS_PER_JOB = 32


@dataclass
class Load:
    nodes: int
    gpus: int
    hz: float
    flush: float
    duration: float
    warmup: float
    protocol: int = PROTOCOL_VERSION  # 1: samples as rows; 2: column by column (series)
    scrape_s: float = 0.0  # GET /metrics this often meanwhile, as Prometheus would (0: never)

    @property
    def offered(self) -> float:
        return self.nodes * self.gpus * self.hz


# -- the generators ---------------------------------------------------------------------------------


def _templates(node: str, index: int, load: Load) -> list[dict[str, Any]]:
    """One flush interval of a node's samples, as dicts whose ``ts`` is an offset into the interval."""
    collector = SimulatedCollector(node, load.gpus, seed=index)
    ticks = max(1, round(load.flush * load.hz))
    out = []
    for k in range(ticks):
        for s in collector.collect(1_000_000.0 + k / load.hz).samples:
            d = s.model_dump(exclude_none=True)
            rank = (index * load.gpus + s.gpu) % GPUS_PER_JOB
            d.update(ts=k / load.hz, period_s=1 / load.hz, job=f"job-{index * load.gpus // GPUS_PER_JOB}", rank=rank)
            out.append(d)
    return out


class _Conn:
    """One keep-alive HTTP/1.1 connection, as an agent holds: the least a generator can spend on a
    request (httpx's async client cost about 1 ms a request, a large share of a 2-core machine)."""

    def __init__(self, url: str) -> None:
        parsed = httpx.URL(url)
        self.host, self.port = parsed.host, parsed.port or 80
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes, float | None]:
        """(status, body, Retry-After seconds or None)."""
        reused = self._streams is not None
        try:
            return await self._post(path, body, headers)
        except ConnectionError:
            if not reused:
                raise
            return await self._post(path, body, headers)  # the server closed an idle keep-alive connection

    async def _post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes, float | None]:
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        try:
            if self._streams is None:  # a refused or timed-out connect is retried as a failed request is
                self._streams = await asyncio.open_connection(self.host, self.port)
            reader, writer = self._streams
            writer.write(
                f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Length: {len(body)}\r\n{head}\r\n".encode()
                + body
            )
            await writer.drain()
            status = int((await reader.readline()).split()[1])  # IndexError: closed before answering
            length, after = 0, None
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"retry-after":
                    after = float(value)
            return status, await reader.readexactly(length), after
        except (OSError, IndexError, ValueError, asyncio.IncompleteReadError) as exc:
            await self.close()
            raise ConnectionError(f"{path}: {exc!r}") from exc

    async def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None


def _series(templates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The templates column by column, as protocol 2 sends them: one series per GPU."""
    runs: dict[int, list[dict[str, Any]]] = {}
    for d in templates:
        runs.setdefault(d["gpu"], []).append(d)
    out = []
    for run in runs.values():
        series = {k: run[0][k] for k in ("gpu", "uuid", "job", "rank")}
        series |= {name: [d.get(name) for d in run] for name in SERIES_COLUMNS if name in run[0]}
        series["processes"] = run[-1].get("processes")
        out.append(series)
    return out


def _payloads(templates: list[dict[str, Any]], index: int, load: Load, start: float) -> Iterator[tuple[float, bytes]]:
    """A node's batches, gzipped as the agent sends them, with the times they are due."""
    series = _series(templates) if load.protocol >= 2 else []
    offsets = [d["ts"] for d in templates]
    t = start + (index % 97) / 97 * load.flush  # nodes' flushes spread over the interval
    batch_id = seq = events = 0
    while t < start + load.duration:
        base = t - load.flush
        body: dict[str, Any] = {"version": load.protocol, "batch_id": batch_id}
        if series:
            body["series"] = [{**s, "ts": [base + off for off in s["ts"]]} for s in series]
        else:
            for d, off in zip(templates, offsets, strict=True):
                d["ts"] = base + off
            body["samples"] = templates
        body["logs"] = [
            {"stream": "file:/train.log", "seq": seq + n, "ts": t, "text": f"step {seq + n} loss=2.{n:03d}"}
            for n in range(LINES_PER_BATCH)
        ]
        if batch_id % EVENT_EVERY == 0:
            body["events"] = [{"stream": "gpu:nvml", "seq": events, "ts": t, "kind": "bench", "message": "ok"}]
            events += 1
        yield t, gzip.compress(msgspec.json.encode(body), compresslevel=1)
        seq += LINES_PER_BATCH
        batch_id += 1
        t += load.flush


async def _node(
    http: _Conn,
    name: str,
    token: str,
    index: int,
    payloads: Iterable[tuple[float, bytes]],
    load: Load,
    start: float,
    out: dict[str, Any],
    register_at: float,
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    await asyncio.sleep(max(0.0, register_at - time.time()))  # agents start at different times
    gpus = SimulatedCollector(name, load.gpus, seed=index).inventory()  # as an agent registers them
    reg = RegisterRequest(hostname=name, agent_version="bench", collector="simulated", gpus=gpus)
    for _ in range(100):
        try:
            status, text, _ = await http.post("/api/v1/nodes/register", reg.model_dump_json().encode(), headers)
            if status == 200:
                break
            why = f"{status} {text!r}"
        except ConnectionError as exc:
            why = repr(exc)
        out["errors"] += 1
        await asyncio.sleep(0.5)
    else:
        raise RuntimeError(f"{name} could not register: {why}")
    headers["Content-Encoding"] = "gzip"
    for batch_id, (t, payload) in enumerate(payloads):
        await asyncio.sleep(max(0.0, t - time.time()))
        while True:  # the agent's spool: retry until stored, after the server's Retry-After if it gave one
            sent = time.time()
            after = None
            try:
                status, text, after = await http.post("/api/v1/ingest", payload, headers)
                ok = status == 200
            except ConnectionError:
                ok = False
            done = time.time()
            if ok:
                break
            out["errors"] += 1
            await asyncio.sleep(0.2 if after is None else after)
        ack = json.loads(text)
        if start + load.warmup <= sent and done <= start + load.duration:  # stored within the window
            out["latency"].append((sent - start, done - sent))
            out["samples"] += ack["samples"]
        out["lines"] += LINES_PER_BATCH
        out["events"] += int(batch_id % EVENT_EVERY == 0)


def _generator(
    url: str, nodes: list[tuple[int, str, str]], load: Load, prebuild: bool, ready: Any, go: Any, results: Any
) -> None:
    templates = {i: _templates(name, i, load) for i, name, _ in nodes}  # before the clock starts
    ready.put(len(templates))
    start = go.get()
    payloads: dict[int, Iterable[tuple[float, bytes]]] = {
        i: _payloads(templates[i], i, load, start) for i, _, _ in nodes
    }
    if prebuild:  # every batch encoded and gzipped now: sending is then all the generator does
        payloads = {i: list(p) for i, p in payloads.items()}

    async def run() -> dict[str, Any]:
        out: dict[str, Any] = {"latency": [], "samples": 0, "errors": 0, "lines": 0, "events": 0}
        clients = [_Conn(url) for _ in nodes]
        now = time.time()
        spread = max(0.0, start - 1 - now) / len(nodes)  # registrations spread over the lead, not all at once
        try:
            await asyncio.gather(
                *(
                    _node(http, name, token, i, payloads[i], load, start, out, now + k * spread)
                    for k, (http, (i, name, token)) in enumerate(zip(clients, nodes, strict=True))
                )
            )
        finally:
            for http in clients:
                await http.close()
        return out

    t0 = os.times()
    out = asyncio.run(run())
    t1 = os.times()
    out["cpu_s"] = (t1.user - t0.user) + (t1.system - t0.system)
    results.put(out)


# -- the servers ------------------------------------------------------------------------------------


def _cpu_rss(pid: int) -> tuple[float, float]:
    """(CPU seconds, RSS MiB) of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    rss = next(
        int(ln.split()[1]) for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("VmRSS")
    )
    return cpu, rss / 1024


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (t, y), per minute."""
    if len(points) < 3:
        return 0.0
    ts, ys = [p[0] for p in points], [p[1] for p in points]
    mt, my = statistics.fmean(ts), statistics.fmean(ys)
    den = sum((t - mt) ** 2 for t in ts)
    return 60 * sum((t - mt) * (y - my) for t, y in zip(ts, ys, strict=True)) / den if den else 0.0


def _p99_by_minute(timed: list[tuple[float, float]], warmup: float) -> list[tuple[int, float]]:
    """(minute after the warm-up, p99 ms of the requests sent in it): where in a long run latency grew."""
    minutes: dict[int, list[float]] = {}
    for sent, latency in timed:
        minutes.setdefault(int((sent - warmup) // 60), []).append(latency)
    return [(m, round(sorted(xs)[int(len(xs) * 0.99)] * 1e3, 1)) for m, xs in sorted(minutes.items())]


def _tokens(db_url: str, n: int) -> list[tuple[int, str, str]]:
    engine = make_engine(db_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            return [(i, f"node-{i:05d}", create_token(session, f"node-{i:05d}")) for i in range(n)]
    finally:
        engine.dispose()


def _scrape(url: str, every: float, stop: threading.Event, out: list[tuple[float, int]]) -> None:
    """GET /metrics every ``every`` seconds until ``stop``: (seconds it took, bytes)."""
    with httpx.Client(timeout=120) as http:
        while not stop.wait(every):
            t0 = time.perf_counter()
            resp = http.get(f"{url}/metrics")
            out.append((time.perf_counter() - t0, len(resp.content)))


def drive(
    url: str, pid: int, nodes: list[tuple[int, str, str]], load: Load, procs: int, prebuild: bool, scrape: bool = False
) -> dict[str, Any]:
    """Run the generators against a server at ``url`` (process ``pid``); measure it (and scrape its
    /metrics every ``load.scrape_s`` if ``scrape``)."""
    ctx = mp.get_context("spawn")
    results, ready, gos = ctx.Queue(), ctx.Queue(), [ctx.Queue() for _ in range(procs)]
    workers = [
        ctx.Process(target=_generator, args=(url, nodes[k::procs], load, prebuild, ready, gos[k], results))
        for k in range(procs)
    ]
    for w in workers:
        w.start()
    for _ in workers:
        ready.get(timeout=600)  # every generator has built its nodes' samples
    batches = len(nodes) * load.duration / load.flush
    build = batches * 0.003 / procs if prebuild else 0.0  # about 3 ms to encode and gzip a batch
    start = time.time() + 2 + len(nodes) / 200 + build  # the nodes register meanwhile, then batches go
    for go in gos:
        go.put(start)
    rss: list[tuple[float, float]] = []
    wait_until(
        lambda: time.time() >= start + load.warmup,
        timeout=start - time.time() + load.warmup + 60,
        what="the warm-up",
        every=0.5,
    )
    scrapes: list[tuple[float, int]] = []
    stop = threading.Event()
    scraper = threading.Thread(target=_scrape, args=(url, load.scrape_s, stop, scrapes), daemon=True)
    if scrape and load.scrape_s > 0:
        scraper.start()
    cpu0, _ = _cpu_rss(pid)
    t0 = time.time()
    while any(w.is_alive() for w in workers) and time.time() < start + load.duration:
        _, mib = _cpu_rss(pid)
        rss.append((time.time() - t0, mib))
        time.sleep(2)  # the sampling period
    cpu1, _ = _cpu_rss(pid)
    window = time.time() - t0
    stop.set()
    if scraper.is_alive():
        scraper.join(120)
    scrape_s = sorted(t for t, _ in scrapes)
    outs = [results.get(timeout=600) for _ in workers]
    for w in workers:
        w.join()
    timed = [x for o in outs for x in o["latency"]]  # (sent, after the start; latency)
    latency = sorted(x for _, x in timed)
    samples = sum(o["samples"] for o in outs)
    measured = load.duration - load.warmup
    return {
        "offered_samples_per_s": load.offered,
        "samples_per_s": samples / measured,
        "p50_ms": latency[len(latency) // 2] * 1e3 if latency else None,
        "p99_ms": latency[int(len(latency) * 0.99)] * 1e3 if latency else None,
        "batches": len(latency),
        "errors": sum(o["errors"] for o in outs),
        "server_cpu_pct": 100 * (cpu1 - cpu0) / window,
        "server_cpu_us_per_sample": 1e6 * (cpu1 - cpu0) / max(1, samples * window / measured),
        "rss_start_mib": rss[0][1] if rss else None,
        "rss_max_mib": max(r[1] for r in rss) if rss else None,
        "rss_slope_mib_per_min": _slope(rss[len(rss) // 2 :]),  # the second half: past the job window's filling
        "rss_mib": [(round(t), round(mib, 1)) for t, mib in rss[::15]],  # every 30 s
        "p99_ms_by_minute": _p99_by_minute(timed, load.warmup),
        "scrapes": len(scrapes),
        "scrape_ms_p50": scrape_s[len(scrape_s) // 2] * 1e3 if scrape_s else None,
        "scrape_ms_max": scrape_s[-1] * 1e3 if scrape_s else None,
        "scrape_bytes": scrapes[-1][1] if scrapes else None,
        "generators_cpu_pct": 100 * sum(o["cpu_s"] for o in outs) / load.duration,
        "lines_sent": sum(o["lines"] for o in outs),
        "events_sent": sum(o["events"] for o in outs),
    }


def check(db_url: str, nodes: int, load: Load, lines_sent: int, events_sent: int) -> dict[str, Any]:
    """Every line and event sent is stored exactly once, with no gap in any node's sequence."""
    engine = create_engine(db_url)
    with engine.connect() as conn:
        per = conn.execute(
            text("SELECT node_id, count(*), count(DISTINCT seq), min(seq), max(seq) FROM log_lines GROUP BY node_id")
        ).all()
        ev = conn.execute(
            text("SELECT node_id, count(*), count(DISTINCT seq), min(seq), max(seq) FROM events GROUP BY node_id")
        ).all()
    engine.dispose()
    gaps = [r for r in [*per, *ev] if not (r[1] == r[2] == r[4] - r[3] + 1 and r[3] == 0)]
    stored_lines, stored_events = sum(r[1] for r in per), sum(r[1] for r in ev)
    return {
        "lines_stored": stored_lines,
        "events_stored": stored_events,
        "nodes_with_lines": len(per),
        "sequence_gaps_or_doubles": len(gaps),
        "lost_or_doubled": (lines_sent - stored_lines) + (events_sent - stored_events),
    }


def run_gpuwatch(db_url: str, tmp: Path, load: Load, procs: int, prebuild: bool, do_check: bool) -> dict[str, Any]:
    upgrade(db_url)
    nodes = _tokens(db_url, load.nodes)
    port = free_port()
    server = Proc(
        ["server", "--port", str(port), "--data-dir", str(tmp), "--database-url", db_url],
        tmp / f"server-{port}.log",
        {"GPUWATCH_LOG_LEVEL": "WARNING", "GPUWATCH_NODE_TIMEOUT_S": "60"},
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200, timeout=60, what="server")
        result = drive(base, server.popen.pid, nodes, load, procs, prebuild, scrape=True)
    finally:
        server.stop()
    if do_check:
        result |= check(db_url, load.nodes, load, result["lines_sent"], result["events_sent"])
    return result


def run_reference(tmp: Path, load: Load, procs: int, prebuild: bool) -> dict[str, Any]:
    port = free_port()
    with open(tmp / "reference.log", "wb") as log:
        ref = subprocess.Popen([sys.executable, __file__, "--serve-reference", str(port)], stdout=log, stderr=log)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200, timeout=60, what="reference")
            nodes = [(i, f"node-{i:05d}", "x") for i in range(load.nodes)]
            return drive(base, ref.pid, nodes, load, procs, prebuild)
        finally:
            ref.terminate()
            ref.wait(15)


def serve_reference(port: int) -> None:
    """The minimal handler: gunzip, validate with pydantic, acknowledge."""
    app = FastAPI()

    @app.get("/readyz")
    def ready() -> dict[str, str]:
        return {"status": "ready"}

    @app.post("/api/v1/nodes/register")
    async def register(request: Request) -> dict[str, str]:
        RegisterRequest.model_validate_json(await request.body())
        return {"node": "x"}

    @app.post("/api/v1/ingest")
    async def ingest(request: Request) -> Response:
        batch = Batch.model_validate_json(gzip.decompress(await request.body()))
        ack = {"batch_id": batch.batch_id, "samples": sample_count(batch), "logs": len(batch.logs)}
        return Response(json.dumps(ack), media_type="application/json")

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def compare_parsers(load: Load, repeat: int = 200) -> None:
    """The same batch body (one node's flush interval) through each way of validating it, per sample."""
    from server.ingest.decode import decode_batch, decode_wire

    samples = [{**d, "ts": 1.8e9 + d["ts"]} for d in _templates("node-00000", 0, load)]
    body = msgspec.json.encode({"batch_id": 1, "samples": samples})
    columns = msgspec.json.encode({"version": 2, "batch_id": 1, "series": _series(samples)})
    n = len(samples)
    ways = {
        "rows: pydantic Batch.model_validate_json (the old path)": lambda: Batch.model_validate_json(body),
        "rows: json.loads + Batch.model_validate": lambda: Batch.model_validate(json.loads(body)),
        "rows: msgspec mirror (server/ingest/decode.py)": lambda: decode_wire(body),
        "rows: msgspec mirror, then turned into series (protocol 1 today)": lambda: decode_batch(body),
        "rows: json.loads only (no validation)": lambda: json.loads(body),
        "series: pydantic Batch.model_validate_json": lambda: Batch.model_validate_json(columns),
        "series: msgspec mirror (protocol 2 today)": lambda: decode_batch(columns),
        "series: json.loads only (no validation)": lambda: json.loads(columns),
    }
    print(
        f"one batch of {n} samples: {len(body):,} bytes of JSON as rows ({len(gzip.compress(body, 1)):,} gzipped), "
        f"{len(columns):,} as series ({len(gzip.compress(columns, 1)):,}); median of {repeat}"
    )
    base = None
    for label, fn in ways.items():
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        per = statistics.median(times) / n * 1e6
        base = base or per
        print(f"| {label} | {per:.2f} µs/sample | {base / per:.1f}x |")


def machine() -> dict[str, Any]:
    """What the results were measured on: the same code differs 1.7x in CPU per sample between two
    instances of the 2-core VM (bench/README.md), so every result file says which it came from."""
    model = ""
    with open("/proc/cpuinfo") as f:  # Linux only, as the bench's /proc reads are
        model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": commit.stdout.strip(),
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "packages": {name: version(name) for name in ("fastapi", "starlette", "uvicorn", "msgspec", "sqlalchemy")},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1250)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--hz", type=float, default=10.0, help="samples per GPU per second")
    ap.add_argument("--flush", type=float, default=5.0, help="seconds between a node's batches")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=15.0)
    ap.add_argument("--procs", type=int, default=2, help="load-generator processes")
    ap.add_argument(
        "--protocol", type=int, choices=[1, 2], default=PROTOCOL_VERSION, help="1: samples as rows; 2: as series"
    )
    ap.add_argument("--db", choices=["sqlite", "postgresql", "both"], default="both")
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--check", action="store_true", help="read back every line and event sent")
    ap.add_argument("--json", type=Path, help="write the results here too")
    ap.add_argument(
        "--postgres",
        default=os.environ.get("GPUWATCH_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"),
    )
    ap.add_argument(
        "--prebuild",
        action="store_true",
        help="encode and gzip every batch before the clock starts (the generators then only send)",
    )
    ap.add_argument("--scrape", type=float, default=0.0, help="GET /metrics every this many seconds (0: never)")
    ap.add_argument("--parsers", action="store_true", help="only compare the ways of parsing a batch")
    ap.add_argument("--serve-reference", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_reference:
        serve_reference(args.serve_reference)
        return
    load = Load(args.nodes, args.gpus, args.hz, args.flush, args.duration, args.warmup, args.protocol, args.scrape)
    if args.parsers:
        compare_parsers(load)
        return
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_reference:
            results["reference (parse only)"] = run_reference(Path(tmp), load, args.procs, args.prebuild)
        if args.db in ("sqlite", "both"):
            url = f"sqlite:///{tmp}/bench.db"
            results["gpuwatch, SQLite"] = run_gpuwatch(url, Path(tmp), load, args.procs, args.prebuild, args.check)
        if args.db in ("postgresql", "both"):
            admin = create_engine(args.postgres, isolation_level="AUTOCOMMIT")
            name = f"gpuwatch_bench_{uuid.uuid4().hex[:8]}"
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            try:
                pg_url = args.postgres.rsplit("/", 1)[0] + f"/{name}"
                results["gpuwatch, PostgreSQL"] = run_gpuwatch(
                    pg_url, Path(tmp), load, args.procs, args.prebuild, args.check
                )
            finally:
                with admin.connect() as conn:
                    conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                admin.dispose()
    print(
        f"{load.nodes} nodes x {load.gpus} GPUs at {load.hz:g} Hz, a batch every {load.flush:g} s "
        f"(offered {load.offered:,.0f} samples/s), {load.duration:g} s ({load.warmup:g} s warm-up), "
        f"{args.procs} generator processes; {os.cpu_count()} CPUs"
    )
    print("| server | samples/s | p50 | p99 | server CPU | µs CPU/sample | RSS start → max | RSS trend | errors |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, r in results.items():
        print(
            f"| {label} | {r['samples_per_s']:,.0f} | {r['p50_ms']:.0f} ms | {r['p99_ms']:.0f} ms | "
            f"{r['server_cpu_pct']:.0f} % | {r['server_cpu_us_per_sample']:.2f} | "
            f"{r['rss_start_mib']:.0f} → {r['rss_max_mib']:.0f} MiB | {r['rss_slope_mib_per_min']:+.2f} MiB/min | "
            f"{r['errors']} |"
        )
        print(f"  {label}: load generators used {r['generators_cpu_pct']:.0f} % of a core")
        if r.get("scrapes"):
            print(
                f"  {label}: {r['scrapes']} scrapes of /metrics ({r['scrape_bytes']:,} bytes): "
                f"p50 {r['scrape_ms_p50']:.0f} ms, max {r['scrape_ms_max']:.0f} ms"
            )
    for label, r in results.items():
        if "lines_stored" in r:
            print(
                f"{label}: {r['lines_sent']:,} lines and {r['events_sent']:,} events sent, {r['lines_stored']:,} and "
                f"{r['events_stored']:,} stored; {r['sequence_gaps_or_doubles']} sequences with a gap or a double"
            )
    if args.json:
        out = {"machine": machine(), "load": asdict(load), "results": results}
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
