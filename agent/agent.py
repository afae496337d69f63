"""The node agent: run the collectors, batch what they read into the spool; the shipper sends it. It
also delivers what ended `gpuwatch run` supervisors of this node left behind: their spooled log lines and
their outboxes."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import start_http_server

from agent.api_client import ServerClient, Unanswered
from agent.attribution import JobDirectory
from agent.batching import Pending, make_batch, spool_pending
from agent.collectors.base import Collector, GpuCollector, GpuEvent, Reading, Resumable
from agent.collectors.registry import REGISTRY, Registry
from agent.local_api import LocalApi
from agent.metrics import AgentMetrics
from agent.outbox import deliver_ended
from agent.shipper import Backoff, Shipper
from agent.spool import Spool
from agent.stacks import StackResponder, find_py_spy
from agent.state import AgentState
from gpuwatch import __version__
from gpuwatch.config import Settings
from gpuwatch.diagnosis.xid import xid_reason
from gpuwatch.protocol import (
    Batch,
    CheckpointReport,
    ClientReport,
    Event,
    JobProcess,
    LogLine,
    RegisterRequest,
    StepReport,
)

log = logging.getLogger("gpuwatch.agent")

_TAIL_PERIOD_S = 0.2
#: How often the outboxes of ended supervisors are looked at while the server answers.
OUTBOX_PERIOD_S = 5.0


class Agent:
    """One node's agent; ``registry`` names the collectors it may run (the settings pick among them)."""

    def __init__(
        self, settings: Settings, registry: Registry = REGISTRY, clock: Callable[[], float] = time.time
    ) -> None:
        token = settings.effective_token
        if not token:
            raise ValueError(
                "the agent needs a token: --token, GPUWATCH_TOKEN or GPUWATCH_TOKEN_FILE "
                "(create one with `gpuwatch token create --node N`)"
            )
        self.settings = settings
        self.clock = clock
        self.state = AgentState.load(settings.agent_dir / "state.json")
        self.spool = Spool(settings.effective_spool_dir, settings.agent.spool_max_bytes)
        built = registry.build(settings, self.state)
        self.collectors: dict[str, Collector] = {spec.name: c for spec, c in built}
        self._sampled = [(spec.name, c) for spec, c in built if not spec.follows]
        self._followed = [(spec.name, c) for spec, c in built if spec.follows]
        #: The node registers with its GPUs; None when the gpu collector is off (an InfiniBand-only node).
        self.gpu: GpuCollector | None = next((c for c in self.collectors.values() if isinstance(c, GpuCollector)), None)
        self.shipper = Shipper(
            ServerClient(settings.agent.server_url, token, clock=clock),
            self.spool,
            self._registration,
            heartbeat_s=settings.agent.heartbeat_s,
            backoff=Backoff(cap=settings.agent.backoff_max_s),
            batch_max_bytes=settings.agent.batch_max_bytes,
            on_ack=self._on_ack,
        )
        #: What was read and not yet spooled; it leaves memory only once on disk.
        self.pending = Pending(settings.agent.pending_max_bytes)
        self.jobs = JobDirectory(socket.gethostname())
        client = self.shipper.client
        self.stacks = StackResponder(
            fetch=lambda: tasks.tasks if not isinstance(tasks := client.stack_tasks(), Unanswered) else None,
            send=client.answer_stacks,
            processes=self.jobs.processes_of,
            py_spy=find_py_spy(settings.agent.py_spy),
        )
        # Filled by the local API's threads, drained by the main loop.
        self._client_lock = threading.Lock()
        self._steps: list[StepReport] = []
        self._checkpoints: list[CheckpointReport] = []
        self._binds: list[JobProcess] = []
        self._client_dropped: dict[int, int] = {}
        self.metrics = AgentMetrics()
        self.metrics.watch(self.spool, self.pending)
        self.local_api = LocalApi(
            self._on_client_report, port=settings.agent.client_port, metrics=self.metrics.exposition
        )
        self._metrics_server: WSGIServer | None = None
        if settings.agent.metrics_address:  # for a Prometheus off the node: the client port is loopback only
            host, port = _address(settings.agent.metrics_address)
            self._metrics_server, _ = start_http_server(port, host, registry=self.metrics.registry)
        #: Streams of the collectors that resume from a saved position (job logs, the kernel log).
        self._resumed_streams: set[str] = set()
        self._urgent = False  # a fatal Xid was seen: ship now, not at the next flush
        self.stop = threading.Event()

    def run(self) -> None:
        """Run until `stop` is set (SIGTERM/SIGINT in the CLI); flush what is pending on the way out."""
        sender = threading.Thread(target=self.shipper.run, args=(self.stop,), name="shipper", daemon=True)
        sender.start()
        threading.Thread(target=self._deliver_outboxes, name="outboxes", daemon=True).start()
        threading.Thread(target=self.stacks.run, args=(self.stop,), name="stacks", daemon=True).start()
        self.local_api.start()
        s = self.settings.agent
        next_sample = next_flush = self.clock()
        next_flush += s.flush_s
        log.info(
            "agent %s: collectors %s, %d GPUs via %s, shipping to %s",
            s.node,
            ", ".join(self.collectors) or "none",
            len(self.gpu.inventory()) if self.gpu else 0,
            self.gpu.name if self.gpu else "none",
            s.server_url,
        )
        try:
            while not self.stop.is_set():
                now = self.clock()
                if now >= next_sample:
                    self._sample(now)
                    next_sample = max(next_sample + s.interval_s, now)  # skip missed ticks, never burst
                self._follow(now)
                if now >= next_flush or self._urgent:
                    self._urgent = False
                    self.flush()
                    next_flush = now + s.flush_s
                self.stop.wait(max(0.0, min(next_sample, next_flush, now + _TAIL_PERIOD_S) - self.clock()))
        finally:
            self._follow(self.clock())
            self.flush()
            self.stop.set()
            self.local_api.close()
            sender.join()
            self.shipper.client.close()
            if self._metrics_server is not None:
                self._metrics_server.shutdown()
                self._metrics_server.server_close()
            for name, c in self.collectors.items():
                try:
                    c.close()
                except Exception:  # one collector's trouble does not keep the others open
                    log.exception("collector %s failed to close", name)

    def _on_ack(self, ack: dict[str, Any]) -> None:
        """A batch's acknowledgement: stack captures waiting for this node wake their thread."""
        if ack.get("stack_tasks"):
            self.stacks.wake()

    def _deliver_outboxes(self) -> None:
        """Deliver the log lines and run records of this node's supervisors that ended before the server
        had them (`agent.outbox.deliver_ended`); while the server is away, back off as the shipper does."""
        root = self.settings.data_dir / "supervisor"
        backoff = Backoff(base=1.0, cap=self.settings.agent.backoff_max_s)
        while not self.stop.is_set():
            try:
                _, failed = deliver_ended(root, self.shipper.client)
            except Exception:  # nothing may end this thread; the records stay on disk
                log.exception("delivering the supervisors' outboxes failed")
                self.stop.wait(backoff.next_delay())
                continue
            if failed is None:
                backoff.reset()
            self.stop.wait(OUTBOX_PERIOD_S if failed is None else backoff.next_delay(failed.retry_after))

    def flush(self) -> None:
        """Turn everything pending into spooled batches; then, only if all of it is on disk, remember the
        positions and sequence numbers it covers (else a restarted agent reads those lines again)."""
        with self._client_lock:
            steps, self._steps = self._steps, []
            checkpoints, self._checkpoints = self._checkpoints, []
            client_dropped = sum(self._client_dropped.values())
        self._queue("steps", steps)
        self._queue("checkpoints", checkpoints)
        self._queue("processes", self.jobs.take_new())
        dropped = self.spool.dropped_snapshot()
        if client_dropped:
            dropped["client_steps"] = client_dropped

        def build(items: dict[str, list[Any]]) -> Batch:
            offset = self.shipper.client.offset_s
            return make_batch(self.spool.next_batch_id(), items, dropped=dropped, clock_offset_s=offset)

        max_bytes, protocol = self.shipper.batch_max_bytes, self.shipper.protocol
        if spool_pending(self.pending, self.spool, max_bytes, build, self._rereadable, protocol):
            for c in self.collectors.values():
                if isinstance(c, Resumable):
                    c.save(self.state)
            try:
                self.state.save()
            except OSError as exc:  # the same full disk, as a rule: the old positions stand, lines are re-read
                log.warning("could not save the agent's state (%s); it is saved at the next flush", exc)
            else:  # lines dropped from memory are now behind the saved positions: never read again
                self.spool.commit_dropped()
        self.shipper.wakeup.set()

    def _rereadable(self, kind: str, item: Any) -> bool:
        """Would an agent restarted now read ``item`` again (a line or event of a resumable collector)?"""
        return kind in ("logs", "events") and item.stream in self._resumed_streams

    def _queue(self, kind: str, items: list[Any]) -> None:
        """Hold ``items`` until spooled (`agent.batching.spool_pending` bounds what waits)."""
        if items:
            self.pending.add(kind, items)

    def _on_client_report(self, report: ClientReport) -> None:
        """A training process's steps and identity (called on the local API's threads)."""
        with self._client_lock:
            self._steps.extend(report.steps)
            self._checkpoints.extend(report.checkpoints)
            self._client_dropped[report.process.pid] = report.dropped
            self._binds.append(report.process)

    def _sample(self, now: float) -> None:
        """Run the collectors of the sampling interval (GPUs, InfiniBand)."""
        with self._client_lock:
            binds, self._binds = self._binds, []
        for proc in binds:
            if self.jobs.register(proc) and proc.gpu is not None and hasattr(self.gpu, "bind"):
                self.gpu.bind(proc.gpu, proc.pid)  # simulated GPUs follow the process's activity
        for name, collector in self._sampled:
            if (reading := self.metrics.collect(name, collector, now)) is not None:
                self._take(collector, reading)

    def _follow(self, now: float) -> None:
        """Run the followers of appended lines (job logs, the kernel log)."""
        for name, collector in self._followed:
            if (reading := self.metrics.collect(name, collector, now)) is not None:
                self._take(collector, reading)

    def _take(self, collector: Collector, reading: Reading) -> None:
        """Queue a reading for the next flush: samples attributed to jobs, events and lines numbered."""
        if isinstance(collector, Resumable):  # read on from a saved position: its streams are read again
            self._resumed_streams.add(collector.stream)
            self._resumed_streams.update(line.stream for line in reading.lines)
        if collector is self.gpu:
            self.jobs.prune({p.pid for s in reading.samples for p in s.processes or ()})
        if reading.samples:
            self._queue("samples", self.jobs.attribute(reading.samples, self.settings.agent.interval_s))
        self._queue("ib", reading.ib)
        self._queue("events", [self._sequence(e, collector.stream) for e in reading.events])
        self._queue(
            "logs",
            [
                LogLine(stream=line.stream, seq=self.state.next_seq(line.stream), ts=line.ts, text=line.text)
                for line in reading.lines
            ],
        )
        if reading.urgent or any(e.kind == "xid" and xid_reason(int(e.data.get("xid") or 0)) for e in reading.events):
            self._urgent = True

    def _sequence(self, event: GpuEvent, stream: str) -> Event:
        return Event(
            stream=stream,
            seq=self.state.next_seq(stream),
            ts=event.ts,
            kind=event.kind,
            gpu=event.gpu,
            message=event.message,
            data=event.data,
        )

    def _registration(self) -> RegisterRequest:
        return RegisterRequest(
            hostname=socket.gethostname(),
            node=self.settings.agent.node,
            agent_version=__version__,
            collector=self.gpu.name if self.gpu else "",
            driver_version=self.gpu.driver_version() if self.gpu else None,
            gpus=self.gpu.inventory() if self.gpu else [],
        )


def _address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::]:9601`` for IPv6; no host: every interface) as (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"metrics_address {text!r}: expected HOST:PORT, e.g. 0.0.0.0:9601")
    return host.strip("[]") or "0.0.0.0", int(port)
