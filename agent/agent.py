"""The node agent: sample GPUs, tail logs, batch everything into the spool; the shipper sends it."""

from __future__ import annotations

import gzip
import logging
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from agent.collectors.base import GpuCollector, GpuEvent
from agent.collectors.logfile import LogTailer, TailPosition
from agent.shipper import Backoff, ServerClient, Shipper
from agent.spool import Spool
from agent.state import AgentState
from gpuwatch import __version__
from gpuwatch.config import Settings
from gpuwatch.protocol import MAX_BATCH_ITEMS, Batch, Event, GpuSample, LogLine, RegisterRequest

log = logging.getLogger("gpuwatch.agent")

_TAIL_PERIOD_S = 0.2


class Agent:
    def __init__(self, settings: Settings, collector: GpuCollector, clock: Callable[[], float] = time.time) -> None:
        token = settings.effective_token
        if not token:
            raise ValueError(
                "the agent needs a token: --token, GPUWATCH_TOKEN or GPUWATCH_TOKEN_FILE "
                "(create one with `gpuwatch token create --node N`)"
            )
        self.settings = settings
        self.collector = collector
        self.clock = clock
        self.state = AgentState.load(settings.agent_dir / "state.json")
        self.spool = Spool(settings.effective_spool_dir, settings.spool_max_bytes)
        self.tailers = [
            LogTailer(p, self.state.files.get(str(p), TailPosition())) for p in map(Path, settings.log_files)
        ]
        self.shipper = Shipper(
            ServerClient(settings.server_url, token),
            self.spool,
            self._registration,
            heartbeat_s=settings.heartbeat_s,
            backoff=Backoff(cap=settings.backoff_max_s),
        )
        self._samples: list[GpuSample] = []
        self._events: list[Event] = []
        self._logs: list[LogLine] = []
        self._last_batch_id = 0
        self.stop = threading.Event()

    def run(self) -> None:
        """Run until `stop` is set (SIGTERM/SIGINT in the CLI); flush what is pending on the way out."""
        sender = threading.Thread(target=self.shipper.run, args=(self.stop,), name="shipper", daemon=True)
        sender.start()
        s = self.settings
        next_sample = next_flush = self.clock()
        next_flush += s.flush_s
        log.info(
            "agent %s: %d GPUs via %s, shipping to %s",
            s.node,
            len(self.collector.inventory()),
            self.collector.name,
            s.server_url,
        )
        try:
            while not self.stop.is_set():
                now = self.clock()
                if now >= next_sample:
                    self._sample(now)
                    next_sample = max(next_sample + s.interval_s, now)  # skip missed ticks, never burst
                self._tail(now)
                if now >= next_flush:
                    self.flush()
                    next_flush = now + s.flush_s
                self.stop.wait(max(0.0, min(next_sample, next_flush, now + _TAIL_PERIOD_S) - self.clock()))
        finally:
            self._tail(self.clock())
            self.flush()
            self.stop.set()
            sender.join()
            self.shipper.client.close()
            self.collector.close()
            for t in self.tailers:
                t.close()

    def flush(self) -> None:
        """Turn everything pending into spooled batches, then remember the positions they cover."""
        while self._samples or self._logs or self._events:
            take = MAX_BATCH_ITEMS // 4  # keeps a batch well under the server's body limit
            samples, self._samples = self._samples[:take], self._samples[take:]
            logs, self._logs = self._logs[:take], self._logs[take:]
            events, self._events = self._events[:take], self._events[take:]
            batch = Batch(
                batch_id=self._next_batch_id(),
                samples=samples,
                logs=logs,
                events=events,
                dropped=self.spool.dropped_snapshot(),
            )
            body = gzip.compress(batch.model_dump_json(exclude_none=True).encode(), compresslevel=5)
            self.spool.put(batch.batch_id, body, {"samples": len(samples), "logs": len(logs), "events": len(events)})
        for t in self.tailers:
            self.state.files[str(t.path)] = TailPosition(t.position.inode, t.committed_offset)
        self.state.save()
        self.shipper.wakeup.set()

    def _next_batch_id(self) -> int:
        # Microseconds since the epoch: unique across agent restarts without any saved state, and
        # increasing, so the spool replays in order.
        self._last_batch_id = max(self._last_batch_id + 1, time.time_ns() // 1000)
        return self._last_batch_id

    def _sample(self, now: float) -> None:
        reading = self.collector.collect(now)
        self._samples.extend(reading.samples)
        self._events.extend(self._sequence(e) for e in reading.events)

    def _sequence(self, event: GpuEvent) -> Event:
        stream = f"gpu:{self.collector.name}"
        return Event(
            stream=stream,
            seq=self.state.next_seq(stream),
            ts=event.ts,
            kind=event.kind,
            gpu=event.gpu,
            message=event.message,
            data=event.data,
        )

    def _tail(self, now: float) -> None:
        for tailer in self.tailers:
            for text in tailer.poll():
                self._logs.append(
                    LogLine(stream=tailer.stream, seq=self.state.next_seq(tailer.stream), ts=now, text=text)
                )

    def _registration(self) -> RegisterRequest:
        return RegisterRequest(
            hostname=socket.gethostname(),
            agent_version=__version__,
            collector=self.collector.name,
            driver_version=self.collector.driver_version(),
            gpus=self.collector.inventory(),
        )
