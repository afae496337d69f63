"""Simulated agents for the real-time replay: each node ships a gzipped `Batch` of its GPUs' samples
every `flush_s` with its own token, as `gpuwatch agent` does — in this process, or spread over worker
processes so that the load generator is not what saturates first.

Batch ids are unique per node across writers: the agents use even ids, the replay's own batches (Xid
lines, a run's output) odd ones.
"""

from __future__ import annotations

import asyncio
import gzip
import multiprocessing
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from gpuwatch.protocol import Api, Batch, GpuSample


@dataclass
class AgentStats:
    batches: int = 0
    batch_errors: int = 0
    retries: int = 0  # requests sent again after a transport error
    ingest_s: list[float] = field(default_factory=list)

    def add(self, other: AgentStats) -> None:
        self.batches += other.batches
        self.batch_errors += other.batch_errors
        self.retries += other.retries
        self.ingest_s += other.ingest_s


async def request(http: httpx.AsyncClient, stats: AgentStats, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """One request, sent again on a transport error (a keep-alive connection the server closed just as
    it was reused): every request of the replay is idempotent (run keys, batch ids, repeated exits)."""
    for attempt in range(3):
        try:
            return await http.request(method, url, **kwargs)
        except httpx.TransportError:
            stats.retries += 1
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


async def ship(http: httpx.AsyncClient, stats: AgentStats, token: str, batch: Batch) -> bool:
    """POST one batch to /ingest as an agent does (gzip, bearer token); its latency goes into ``stats``."""
    body = gzip.compress(batch.model_dump_json(exclude_none=True).encode(), compresslevel=1)
    headers = {"Authorization": f"Bearer {token}", "Content-Encoding": "gzip", "Content-Type": "application/json"}
    started = time.perf_counter()
    try:
        resp = await request(http, stats, "POST", Api.INGEST, content=body, headers=headers)
    except httpx.HTTPError:
        stats.batch_errors += 1
        return False
    stats.ingest_s.append(time.perf_counter() - started)
    stats.batches += 1
    if resp.status_code != 200:
        stats.batch_errors += 1
        return False
    return True


class Agents:
    """The telemetry of some nodes (name → (index, token)) until ``stopped()``; a node stops for good
    once ``silenced(node)`` (its agent died with it)."""

    def __init__(
        self,
        base_url: str,
        nodes: Mapping[str, tuple[int, str]],
        gpus_per_node: int,
        flush_s: float,
        sample_s: float,
        silenced: Callable[[str], bool],
        stopped: Callable[[], bool],
    ) -> None:
        self.base_url, self.nodes, self.gpus = base_url, dict(nodes), gpus_per_node
        self.flush_s, self.sample_s = flush_s, sample_s
        self.silenced, self.stopped = silenced, stopped
        self.stats = AgentStats()

    async def run(self) -> AgentStats:
        n = max(1, len(self.nodes))  # one connection per agent, as real agents hold
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
        async with httpx.AsyncClient(base_url=self.base_url, timeout=120, limits=limits) as http:
            await asyncio.gather(*(self._agent(http, node, i, token) for node, (i, token) in self.nodes.items()))
        return self.stats

    async def _agent(self, http: httpx.AsyncClient, node: str, index: int, token: str) -> None:
        rng = random.Random(f"live/{node}")
        per_gpu = max(1, round(self.flush_s / self.sample_s))
        await asyncio.sleep(rng.uniform(0, self.flush_s))  # agents started at different moments
        batch_id = 0
        while not self.stopped() and not self.silenced(node):
            now = time.time()
            samples = [
                GpuSample(
                    ts=now - (per_gpu - k) * self.sample_s,
                    gpu=g,
                    uuid=f"GPU-{index:05d}-{g}",
                    util_gpu=round(rng.uniform(85, 100), 1),
                    util_mem=round(rng.uniform(40, 70), 1),
                    fb_used_mib=70_000.0,
                    fb_total_mib=81_559.0,
                    power_w=round(rng.uniform(550, 700), 1),
                    temp_c=round(rng.uniform(60, 80), 1),
                    sm_clock_mhz=1980.0,
                    period_s=self.sample_s,
                )
                for k in range(per_gpu)
                for g in range(self.gpus)
            ]
            batch_id += 2
            await ship(http, self.stats, token, Batch(batch_id=batch_id, samples=samples))
            due = now + self.flush_s
            while not self.stopped() and time.time() < due:
                await asyncio.sleep(min(0.25, max(0.0, due - time.time())))


def _worker(
    base_url: str,
    nodes: dict[str, tuple[int, str]],
    gpus: int,
    flush_s: float,
    sample_s: float,
    silenced: Any,  # a multiprocessing.Manager dict proxy
    stop: Any,  # a multiprocessing Event
    out: Any,  # a multiprocessing Queue
) -> None:
    agents = Agents(base_url, nodes, gpus, flush_s, sample_s, lambda n: n in silenced, stop.is_set)
    out.put(asyncio.run(agents.run()))


class AgentProcesses:
    """The agents of all nodes, split over ``processes`` worker processes (spawned)."""

    def __init__(
        self,
        base_url: str,
        nodes: Mapping[str, tuple[int, str]],
        gpus: int,
        flush_s: float,
        sample_s: float,
        processes: int,
    ) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._manager = ctx.Manager()
        self.silenced = self._manager.dict()
        self._stop = ctx.Event()
        self._out = ctx.Queue()
        names = list(nodes)
        self._procs = [
            ctx.Process(
                target=_worker,
                args=(
                    base_url,
                    {n: nodes[n] for n in names[k::processes]},
                    gpus,
                    flush_s,
                    sample_s,
                    self.silenced,
                    self._stop,
                    self._out,
                ),
                daemon=True,
            )
            for k in range(processes)
        ]

    def start(self) -> None:
        for p in self._procs:
            p.start()

    def silence(self, node: str) -> None:
        self.silenced[node] = True

    def stop(self, timeout: float = 120.0) -> AgentStats:
        """Stop every agent; their statistics, merged."""
        self._stop.set()
        total = AgentStats()
        for _ in self._procs:
            total.add(self._out.get(timeout=timeout))
        for p in self._procs:
            p.join(timeout)
        self._manager.shutdown()
        return total
