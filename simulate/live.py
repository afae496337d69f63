"""Real time: a compressed slice of the seeded failure trace, replayed against a running gpuwatch server
while simulated agents load it with a whole cluster's telemetry.

Every node ships a gzipped `Batch` of GPU samples (one per GPU per `sample_s`) every `flush_s` over
HTTP with its own token, as `gpuwatch agent` does (`agents.py`; in `agent_processes` worker processes
when one would not keep up). The failures of the trace that strike jobs are
replayed in order, their gaps compressed to fit `duration_s`:

- a failure with log evidence: the failing node registers a run of its job (`POST /runs`, as
  `gpuwatch run` does), ships a fatal Xid's kernel line at once when the fault has one (an agent ships
  those without waiting for the flush), ships the run's output lines, reports the exit
  (`POST /runs/{id}/exit`) and long-polls the decision (`GET /runs/{id}/decision`); on a restart it
  registers the next run (`restart_of`).
- a node failure: the node stops sending; the server's silence watch must notice.

A watcher follows the incidents as the server opens and diagnoses them (`GET /incidents/{id}`, every
`poll_s`). Measured: detection (failure → incident diagnosed, by trigger; includes up to `poll_s` of
polling), restart decision (exit reported → decision received), the ingest latency of the telemetry
batches, and whether the server's diagnosis names the injected reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import statistics
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from gpuwatch.protocol import Api, Batch, LogLine
from simulate.agents import AgentProcesses, Agents, AgentStats, request, ship
from simulate.config import SimConfig
from simulate.evidence import Where, generate
from simulate.trace import HANG, Fault, JobSpec, Trace, rng_for
from simulate.trace import generate as generate_trace


@dataclass(frozen=True, slots=True)
class LiveSettings:
    flush_s: float = 5.0
    sample_s: float = 1.0
    duration_s: float = 90.0  # the failures are spread over this long
    failures: int = 30
    poll_s: float = 0.05
    settle_s: float = 60.0  # how long to wait, after the last failure, for what it should cause
    agent_processes: int = 1  # worker processes for the agents' telemetry (1: in this process)
    faults: Sequence[Fault] | None = None  # replay these instead of the trace's (times in seconds from start)


@dataclass
class LiveResult:
    nodes: int
    gpus_per_node: int
    flush_s: float
    batches: int = 0
    batch_errors: int = 0
    retries: int = 0  # requests sent again after a transport error
    ingest_s: list[float] = field(default_factory=list)
    detection_s: dict[str, list[float]] = field(default_factory=dict)  # by incident trigger
    decision_s: list[float] = field(default_factory=list)
    diagnosed: list[tuple[str, str]] = field(default_factory=list)  # (injected, the server's), run failures
    decisions: dict[str, int] = field(default_factory=dict)  # by rule
    missed: list[str] = field(default_factory=list)  # failures whose incident never showed up

    def summary(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "gpus": self.nodes * self.gpus_per_node,
            "flush_s": self.flush_s,
            "batches": self.batches,
            "batch_errors": self.batch_errors,
            "retries": self.retries,
            "ingest_ms": _percentiles(self.ingest_s, 1000),
            "detection_s": {k: _percentiles(v) for k, v in sorted(self.detection_s.items())},
            "decision_s": _percentiles(self.decision_s),
            "diagnosed_as_injected": f"{sum(a == b for a, b in self.diagnosed)}/{len(self.diagnosed)}",
            "confused": sorted(f"{a} -> {b}" for a, b in self.diagnosed if a != b),
            "decisions": dict(sorted(self.decisions.items())),
            "missed": self.missed,
        }


def _percentiles(values: Sequence[float], scale: float = 1.0) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "n": len(ordered),
        "p50": round(statistics.median(ordered) * scale, 3),
        "p99": round(p99 * scale, 3),
        "max": round(ordered[-1] * scale, 3),
    }


def plan(trace: Trace, settings: LiveSettings) -> list[tuple[float, Fault]]:
    """The failures to replay and when (seconds from the start): the first ``failures`` of the trace that
    strike a job (hangs left out: they need training steps), their gaps compressed to ``duration_s``."""
    if settings.faults is not None:
        return [(f.at, f) for f in settings.faults]
    on_jobs = {n for job in trace.jobs for n in job.nodes}
    chosen = [f for f in trace.faults if f.reason != HANG and (f.job is not None or f.node in on_jobs)][
        : settings.failures
    ]
    if not chosen:
        return []
    last = chosen[-1].at or 1.0
    return [(settings.duration_s * f.at / last, f) for f in chosen]


class Replay:
    """One replay against one server; `run()` once."""

    def __init__(
        self,
        base_url: str,
        tokens: Mapping[str, str],
        config: SimConfig,
        settings: LiveSettings,
        admin_token: str | None = None,
    ) -> None:
        """``admin_token`` registers each job to its nodes first (`POST /api/v1/jobs`): a job whose
        nodes each start its runs, with no scheduler to vouch for them (docs/security.md)."""
        self.base_url, self.tokens, self.config, self.settings = base_url, tokens, config, settings
        self.admin_token = admin_token
        self.trace = generate_trace(config)
        missing = sorted(set(self.trace.nodes) - set(tokens))
        if missing:
            raise ValueError(f"no token for {len(missing)} node(s), e.g. {missing[0]}")
        self.jobs: dict[str, JobSpec] = {j.name: j for j in self.trace.jobs}
        self.job_of: dict[str, str] = {n: j.name for j in self.trace.jobs for n in j.nodes}
        gpn = config.cluster.gpus_per_node
        self.result = LiveResult(len(self.trace.nodes), gpn, settings.flush_s)
        self.stats = AgentStats()  # the replay's own requests
        self._processes: AgentProcesses | None = None
        self._batch_id: dict[str, int] = dict.fromkeys(self.trace.nodes, -1)
        self._kernel_seq: dict[str, int] = dict.fromkeys(self.trace.nodes, 0)
        self._silenced: dict[str, float] = {}
        self._excluded: set[str] = set()  # by the server's decisions: no job runs there any more
        self._locks: dict[str, asyncio.Lock] = {}
        self._stop = asyncio.Event()
        self._seen: dict[int, tuple[float, dict[str, Any]]] = {}  # incident id -> (diagnosed at, incident)
        self._expect: list[tuple[str, str, float, str, int | None]] = []  # (trigger, node, t0, reason, id)

    # --- HTTP ---------------------------------------------------------------------------------------

    def _auth(self, node: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[node]}"}

    async def _request(self, http: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response:
        return await request(http, self.stats, method, url, **kwargs)

    async def _ship(self, http: httpx.AsyncClient, node: str, **items: Any) -> None:
        """A batch of the replay's own (Xid lines, a run's output), shipped at once; odd batch ids."""
        self._batch_id[node] += 2
        await ship(http, self.stats, self.tokens[node], Batch(batch_id=self._batch_id[node], **items))

    def _silence(self, node: str) -> None:
        self._silenced[node] = time.time()
        if self._processes is not None:
            self._processes.silence(node)

    # --- failures -------------------------------------------------------------------------------------

    async def _inject(self, http: httpx.AsyncClient, fault: Fault) -> None:
        job = self.jobs[fault.job] if fault.job else self.jobs[self.job_of[fault.node or ""]]
        rng = rng_for(self.trace.seed, "live", fault.id)
        if fault.reason == "node_failure":
            assert fault.node is not None
            if fault.node not in self._silenced:
                self._silence(fault.node)
                self._expect.append(("node_silent", fault.node, self._silenced[fault.node], fault.reason, None))
            return
        async with self._locks.setdefault(job.name, asyncio.Lock()):  # one failure of a job at a time
            usable = [n for n in job.nodes if n not in self._silenced and n not in self._excluded]
            node = fault.node or (usable[rng.randrange(len(usable))] if usable else None)
            if node in usable:  # not on a node that is gone or excluded by now
                await self._run_failure(http, job, node, fault, rng)

    async def _run_failure(
        self, http: httpx.AsyncClient, job: JobSpec, node: str, fault: Fault, rng: random.Random
    ) -> None:
        gpn = self.config.cluster.gpus_per_node
        i = job.nodes.index(node)
        others = [n for n in job.nodes if n != node] or [node]
        peers = tuple((n, job.nodes.index(n) * gpn + rng.randrange(gpn)) for n in others[:2])
        gpu = rng.randrange(gpn)
        where = Where(node, i * gpn + gpu, gpu, peers, job.name, rng.randrange(1, 100_000))
        evidence = generate(fault.reason, fault.variant, where, rng)
        key = uuid.UUID(int=rng.getrandbits(128)).hex
        started = await self._request(
            http, "POST", Api.RUNS, json={"job": job.name, "node": node, "key": key}, headers=self._auth(node)
        )
        started.raise_for_status()
        run_id = started.json()["id"]
        kernel = [line for s in evidence.sources if s.file.endswith("kern.log") for line in s.lines]
        if kernel:  # the agent ships a fatal Xid at once
            t_xid = time.time()
            await self._ship(http, node, logs=self._kernel_lines(node, kernel))
            if evidence.xid is not None:
                self._expect.append(("xid", node, t_xid, fault.reason, None))
        stream = f"run/{key}/stdout"
        output = [line for s in evidence.sources if not s.file.endswith("kern.log") for line in s.lines]
        now = time.time()
        logs = [LogLine(stream=stream, seq=n, ts=now, text=text) for n, text in enumerate(output)]
        await self._ship(http, node, logs=logs)
        t0 = time.time()
        exit_body = {"exit_code": evidence.exit_code, "streams": [stream]}
        ended = await self._request(
            http, "POST", Api.RUN_EXIT.format(run_id=run_id), json=exit_body, headers=self._auth(node)
        )
        ended.raise_for_status()
        incident = ended.json().get("incident_id")
        self._expect.append(("run_failed", node, t0, fault.reason, incident))
        deadline = t0 + 60
        decision: dict[str, Any] | None = None
        while decision is None and time.time() < deadline:
            resp = await self._request(
                http, "GET", Api.RUN_DECISION.format(run_id=run_id), params={"wait": 30}, headers=self._auth(node)
            )
            if resp.status_code == 200 and resp.json()["state"] == "decided":
                decision = resp.json()["decision"]
        if decision is None:
            self.result.missed.append(f"decision for run {run_id} ({fault.reason})")
            return
        self.result.decision_s.append(time.time() - t0)
        rule = str(decision.get("rule"))
        self.result.decisions[rule] = self.result.decisions.get(rule, 0) + 1
        if decision.get("restart"):
            self._excluded |= set(decision.get("exclude_nodes") or ())
            where_next = next((n for n in job.nodes if n not in self._excluded and n not in self._silenced), node)
            body = {"job": job.name, "node": where_next, "key": uuid.uuid4().hex, "restart_of": key}
            await self._request(http, "POST", Api.RUNS, json=body, headers=self._auth(where_next))

    def _kernel_lines(self, node: str, lines: list[str]) -> list[LogLine]:
        out = []
        for text in lines:
            out.append(LogLine(stream="kernel", seq=self._kernel_seq[node], ts=time.time(), text=text))
            self._kernel_seq[node] += 1
        return out

    async def _failures(self, http: httpx.AsyncClient) -> None:
        start = time.monotonic()
        tasks = []
        for offset, fault in plan(self.trace, self.settings):
            await asyncio.sleep(max(0.0, start + offset - time.monotonic()))
            tasks.append(asyncio.create_task(self._inject(http, fault)))
        await asyncio.gather(*tasks)

    # --- incidents ------------------------------------------------------------------------------------

    async def _watch(self, http: httpx.AsyncClient) -> None:
        """Follow every incident from the moment it exists until it has a diagnosis."""
        next_id, open_ids = 1, set[int]()
        while not self._stop.is_set():
            resp = await self._request(http, "GET", Api.INCIDENT.format(incident_id=next_id))
            if resp.status_code == 200:
                open_ids.add(next_id)
                next_id += 1
                continue
            for incident_id in sorted(open_ids):
                resp = await self._request(http, "GET", Api.INCIDENT.format(incident_id=incident_id))
                if resp.status_code == 200 and resp.json().get("diagnosis") is not None:
                    self._seen[incident_id] = (time.time(), resp.json())
                    open_ids.discard(incident_id)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=self.settings.poll_s)

    def _match(self, trigger: str, node: str, t0: float, incident: int | None) -> tuple[float, dict[str, Any]] | None:
        if incident is not None:
            return self._seen.get(incident)
        for seen_at, data in sorted(self._seen.values(), key=lambda x: x[0]):
            if data["trigger"] == trigger and data["node"] == node and seen_at >= t0:
                return seen_at, data
        return None

    def _all_seen(self) -> bool:
        return all(self._match(tr, node, t0, inc) is not None for tr, node, t0, _, inc in self._expect)

    async def _register_jobs(self, http: httpx.AsyncClient) -> None:
        if self.admin_token is None:
            return
        auth = {"Authorization": f"Bearer {self.admin_token}"}
        for job in self.trace.jobs:
            body = {"name": job.name, "member_nodes": list(job.nodes)}
            (await self._request(http, "POST", Api.JOBS, json=body, headers=auth)).raise_for_status()

    # --- the whole replay -----------------------------------------------------------------------------

    async def run(self) -> LiveResult:
        s = self.settings
        nodes = {n: (i, self.tokens[n]) for i, n in enumerate(self.trace.nodes)}
        gpn = self.config.cluster.gpus_per_node
        local: asyncio.Task[AgentStats] | None = None
        if s.agent_processes > 1:
            self._processes = AgentProcesses(self.base_url, nodes, gpn, s.flush_s, s.sample_s, s.agent_processes)
            self._processes.start()
        else:
            agents = Agents(
                self.base_url, nodes, gpn, s.flush_s, s.sample_s, self._silenced.__contains__, self._stop.is_set
            )
            local = asyncio.create_task(agents.run())
        # The failures and the watcher have connections of their own: they never queue behind telemetry.
        async with (
            httpx.AsyncClient(base_url=self.base_url, timeout=120) as control_http,
            httpx.AsyncClient(base_url=self.base_url, timeout=120) as watch_http,
        ):
            await self._register_jobs(control_http)
            watcher = asyncio.create_task(self._watch(watch_http))
            try:
                await self._failures(control_http)
                deadline = time.monotonic() + s.settle_s
                while not self._all_seen() and time.monotonic() < deadline:
                    await asyncio.sleep(s.poll_s)
            finally:
                self._stop.set()
                telemetry = await local if local is not None else None
                if self._processes is not None:
                    telemetry = await asyncio.to_thread(self._processes.stop)
                await watcher
        assert telemetry is not None
        r = self.result
        r.batches, r.batch_errors, r.ingest_s = telemetry.batches, telemetry.batch_errors, telemetry.ingest_s
        r.retries = telemetry.retries + self.stats.retries
        for trigger, node, t0, reason, incident in self._expect:
            found = self._match(trigger, node, t0, incident)
            if found is None:
                self.result.missed.append(f"{trigger} on {node} ({reason})")
                continue
            seen_at, data = found
            self.result.detection_s.setdefault(trigger, []).append(seen_at - t0)
            if trigger == "run_failed":
                self.result.diagnosed.append((reason, data["diagnosis"]["reason"]))
        return self.result


def replay(
    base_url: str,
    tokens: Mapping[str, str],
    config: SimConfig,
    settings: LiveSettings,
    admin_token: str | None = None,
) -> LiveResult:
    """Run a replay to the end (blocking)."""
    return asyncio.run(Replay(base_url, tokens, config, settings, admin_token).run())
