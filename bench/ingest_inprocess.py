"""The server's CPU per ingest batch, in-process: the whole ASGI app, no sockets, no load generator.

`ingest_saturate.py` measures what a client sees, but on a 2-core machine its load generator, the
reference server and the kernel's loopback share the CPUs with gpuwatch, and its figures move by 10 %
from run to run. Here the app `gpuwatch server` serves (with uvicorn's proxy-headers middleware around
it, as uvicorn adds it) is called directly with the same gzipped batches (`ingest._payloads`: 8 GPUs at
1 Hz, 10 log lines, an event every 10th batch), 64 nodes at once on one event loop, the ingest writer
thread as in the server. What it leaves out is uvicorn's HTTP parsing and the socket writes, the same
for any app. CPU seconds of the whole process over the timed batches, divided by their number.

    .venv/bin/python bench/ingest_inprocess.py [--size 16] [--nodes 64] [--batches 200] [--repeats 3] [--protocol 2|3]

``--protocol 3`` sends the same batches as protocol 3 bodies (`gpuwatch.columnar`, whatever their size).

To compare two commits in one sitting, copy this file into a `git worktree` of the other one's `bench/` and
run the two alternately: each measures the tree it is in (the output names it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from ingest import _payloads, _templates, _tokens  # noqa: E402
from ingest_saturate import GPUS, _load, as_protocol_3  # noqa: E402
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware  # noqa: E402

from agent.collectors.simulated import SimulatedCollector  # noqa: E402
from gpuwatch.columnar import CONTENT_TYPE  # noqa: E402
from gpuwatch.config import Settings  # noqa: E402
from gpuwatch.protocol import Api, RegisterRequest  # noqa: E402
from server.app import create_app  # noqa: E402
from server.main import _tune_gc  # noqa: E402
from server.store.migrate import upgrade  # noqa: E402

WARM_UP = 5  # batches per node before the clock starts


async def _post(app: Any, path: str, body: bytes, token: str, gzipped: bool, columnar: bool = False) -> int:
    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-length", str(len(body)).encode()),
        (b"authorization", f"Bearer {token}".encode()),
    ]
    if gzipped:
        headers.append((b"content-encoding", b"gzip"))
    if columnar:
        headers.append((b"content-type", CONTENT_TYPE.encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
        "state": {},
    }
    sent = False
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client never goes away
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


def run(size: int, nodes: int, batches: int, protocol: int = 2) -> dict[str, float]:
    """One server, ``nodes`` registered nodes, ``batches`` timed batches each: CPU and wall µs a batch."""
    tmp = Path(tempfile.mkdtemp(prefix="gpuwatch-inprocess-"))
    url = f"sqlite:///{tmp}/bench.db"
    upgrade(url)
    tokens = _tokens(url, nodes)
    settings = Settings(data_dir=tmp, database_url=url, rate_limit_per_s=0, node_timeout_s=600, log_level="WARNING")
    fastapi_app = create_app(settings)
    svc = fastapi_app.state.services
    app = ProxyHeadersMiddleware(fastapi_app, trusted_hosts="127.0.0.1")
    load = _load(size, WARM_UP + batches)
    start = time.time() - 3600
    bodies = {i: [p for _, p in _payloads(_templates(name, i, load), i, load, start)] for i, name, _ in tokens}
    if protocol == 3:
        bodies = {i: [as_protocol_3(b) for b in mine] for i, mine in bodies.items()}

    async def node(i: int, token: str, first: int, end: int) -> None:
        for k in range(first, end):
            status = await _post(app, Api.INGEST, bodies[i][k], token, True, protocol == 3)
            assert status == 200, f"node {i} batch {k}: {status}"

    async def main() -> dict[str, float]:
        for i, name, token in tokens:
            gpus = SimulatedCollector(name, GPUS, seed=i).inventory()
            reg = RegisterRequest(hostname=name, agent_version="bench", collector="simulated", gpus=gpus)
            status = await _post(app, f"{Api.PREFIX}/nodes/register", reg.model_dump_json().encode(), token, False)
            assert status == 200, f"{name} could not register: {status}"
        await asyncio.gather(*(node(i, token, 0, WARM_UP) for i, _, token in tokens))
        _tune_gc()  # as `gpuwatch server` does before serving
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(node(i, token, WARM_UP, WARM_UP + batches) for i, _, token in tokens))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        n = batches * len(tokens)
        return {"cpu_us_per_batch": cpu / n * 1e6, "wall_us_per_batch": wall / n * 1e6}

    svc.start()
    try:
        return asyncio.run(main())
    finally:
        svc.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=16, help="samples a batch (8 GPUs)")
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--batches", type=int, default=200, help="timed batches a node")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--protocol", type=int, choices=(2, 3), default=2, help="3: the batches as protocol 3 bodies")
    args = ap.parse_args()
    import server  # the tree measured

    runs = [run(args.size, args.nodes, args.batches, args.protocol) for _ in range(args.repeats)]
    print(
        json.dumps(
            {
                "tree": str(Path(server.__file__).resolve().parent.parent),
                "size": args.size,
                "protocol": args.protocol,
                "cpu_us_per_batch": round(statistics.median(r["cpu_us_per_batch"] for r in runs), 1),
                "runs": [round(r["cpu_us_per_batch"], 1) for r in runs],
            }
        )
    )


if __name__ == "__main__":
    main()
