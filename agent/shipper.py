"""Sends spooled batches to the server in order: retries with exponential backoff and full jitter,
keeps everything on disk while the server is away, and registers/heartbeats the node."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from agent.api_client import ServerClient, retry_after
from agent.spool import Spool, SpoolItem
from gpuwatch.columnar import VERSION as COLUMNAR_VERSION
from gpuwatch.protocol import PROTOCOL_VERSION, Heartbeat, RegisterRequest, RegisterResponse

log = logging.getLogger("gpuwatch.agent.shipper")

# Statuses after which resending the same bytes can never succeed (413: a smaller batch may).
_PERMANENT = {400, 413, 415, 422}
#: Room left under the server's body limit for what a batch's estimate does not see.
_LIMIT_MARGIN = 1024


#: Longest Retry-After honoured: a server's mistake must not park a node for a day.
RETRY_AFTER_MAX_S = 600.0


class Backoff:
    """Exponential backoff with full jitter: after n failures wait uniform(0, min(cap, base·2ⁿ)), and
    never less than the server's Retry-After when it said one (even past ``cap``: it knows its load).
    The one backoff of the node side: the agent's shipper, and the supervisor's shipper, outbox and
    decision watch."""

    def __init__(self, base: float = 0.5, cap: float = 30.0, rng: random.Random | None = None) -> None:
        self.base, self.cap, self.failures = base, cap, 0
        self._rng = rng or random.Random()

    def next_delay(self, retry_after: float | None = None) -> float:
        delay = self._rng.uniform(0, min(self.cap, self.base * 2 ** min(self.failures, 64)))
        self.failures += 1
        if retry_after is not None:
            delay = max(delay, min(retry_after, RETRY_AFTER_MAX_S))
        return delay

    def reset(self) -> None:
        self.failures = 0


class Shipper:
    """The sending side of the agent, run on its own thread so slow networks never delay sampling."""

    def __init__(
        self,
        client: ServerClient,
        spool: Spool,
        registration: Callable[[], RegisterRequest] | None,
        heartbeat_s: float | None = 10.0,
        backoff: Backoff | None = None,
        batch_max_bytes: int = 4 * 1024 * 1024,
        on_ack: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.client = client
        #: Called with each batch acknowledgement (the agent learns of the server's stack captures from it).
        self.on_ack = on_ack
        self.spool = spool
        self._registration = registration
        self._heartbeat_s = heartbeat_s
        self.backoff = backoff or Backoff()
        self.registered = registration is None  # the supervisor ships log lines only: no registration
        self.sent_batches = 0
        self.wakeup = threading.Event()
        self._last_beat = 0.0
        self._probed = False
        #: Largest batch JSON to spool: the setting, lowered to what the server says it takes (at registration)
        #: or shows it refuses (413).
        self.batch_max_bytes = batch_max_bytes
        #: Newest batch version the server reads, from its registration answer (2 until then): the agent
        #: spools protocol 3 batches only for a server that reads them (`agent.batching.encode`).
        self.protocol = PROTOCOL_VERSION

    def run(self, stop: threading.Event, drain_s: float = 5.0) -> None:
        """Ship until ``stop`` is set, then try for up to ``drain_s`` to empty the spool."""
        while not stop.is_set():
            delay = self.step()
            if delay:
                # Backing off: only shutdown interrupts. Idle: new data (wakeup) does too.
                (stop if self.backoff.failures else self.wakeup).wait(delay)
                self.wakeup.clear()
        deadline = time.monotonic() + drain_s
        while self.spool.peek() is not None and time.monotonic() < deadline:
            if self.step():
                break  # the server is away: what is left stays spooled for the next start

    def step(self) -> float:
        """Do one unit of work; return how long to wait before the next (0 = go on at once)."""
        try:
            if not self.registered:
                self._register()
            item = self.spool.peek()
            if item is None:
                self._measure_clock()
                self._maybe_heartbeat()
                return 0.25
            if not item.timed:
                self._measure_clock()
            self._send(item)
        except (httpx.TransportError, _Retry) as exc:
            delay = self.backoff.next_delay(exc.after if isinstance(exc, _Retry) else None)  # 429, 503: it said
            log.warning(
                "server unreachable or unwilling (%s); retrying in %.1fs, %d batches spooled",
                exc,
                delay,
                self.spool.stats()[0],
            )
            return delay
        except Exception:  # nothing unexpected may kill the sending thread; the spool keeps the data
            delay = self.backoff.next_delay()
            log.exception("unexpected error while shipping; retrying in %.1fs", delay)
            return delay
        self.backoff.reset()
        return 0.0

    def _register(self) -> None:
        assert self._registration is not None
        resp = self.client.register(self._registration())
        _check(resp, "registration")
        answer = RegisterResponse.model_validate_json(resp.content)
        if answer.protocol < PROTOCOL_VERSION:  # it would refuse every batch: keep them until it is upgraded
            raise _Retry(
                f"the server reads batches up to protocol {answer.protocol}, this agent sends {PROTOCOL_VERSION}: "
                "upgrade the server (batches stay spooled meanwhile)"
            )
        self.protocol = min(answer.protocol, COLUMNAR_VERSION)
        if answer.max_body_bytes is not None:  # a server older than this field: the setting stands
            self.batch_max_bytes = min(self.batch_max_bytes, max(1024, answer.max_body_bytes - _LIMIT_MARGIN))
        self.registered = True
        log.info("registered with the server as %s", answer.node)

    def _measure_clock(self) -> None:
        """Without a registration (the supervisor) the clock offset is unknown until an ack tells the
        server's time: an empty batch asks for it, once."""
        if self.client.offset_s is not None or self._probed:
            return
        self._probed = True  # an older server's ack has no time: ask once, then send times as they are
        _check(self.client.read_clock(), "clock probe")

    def _send(self, item: SpoolItem) -> None:
        body = item.read_timed(self.client.offset_s)
        columnar = item.columnar
        if columnar and self.protocol < COLUMNAR_VERSION:  # spooled for a server since downgraded
            body, columnar = item.as_json(body), False
        resp = self.client.send_batch(body, columnar=True) if columnar else self.client.send_batch(body)
        if resp.status_code == 413:  # too large: halves are sent instead, and later batches are smaller
            size = self.spool.split(item)
            if size is not None:
                self.batch_max_bytes = min(self.batch_max_bytes, max(1024, size // 2))
                return
        if resp.status_code in _PERMANENT:
            self.spool.reject(item, f"HTTP {resp.status_code}: {resp.text[:500]}")
            return
        _check(resp, f"batch {item.batch_id}")
        self.spool.remove(item)
        self.sent_batches += 1
        if self.on_ack is not None:
            try:
                ack = resp.json()
            except ValueError:
                return
            if isinstance(ack, dict):
                self.on_ack(ack)

    def _maybe_heartbeat(self) -> None:
        now = time.time()
        if self._heartbeat_s is None or now - self._last_beat < self._heartbeat_s:
            return
        files, size = self.spool.stats()
        beat = Heartbeat(ts=now, spool_files=files, spool_bytes=size, dropped=self.spool.dropped_snapshot())
        _check(self.client.heartbeat(beat), "heartbeat")
        self._last_beat = now


class _Retry(Exception):
    """A response that means: try the same request again later (``after`` seconds, if the server said)."""

    def __init__(self, message: str, after: float | None = None) -> None:
        super().__init__(message)
        self.after = after


def _check(resp: httpx.Response, what: str) -> None:
    """Return on success; otherwise raise _Retry: the request (a batch kept on the spool) is sent again
    later. Over the node's rate (429) or with the database away (503) the server's Retry-After is kept."""
    if resp.status_code < 300:
        return
    if resp.status_code in (401, 403):
        log.error(
            "%s refused: %s: check --token and --node (create a token with `gpuwatch token create --node NAME`)",
            what,
            resp.text[:200],
        )
    raise _Retry(f"{what}: HTTP {resp.status_code}", retry_after(resp))
