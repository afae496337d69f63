"""The process-wide buffer of timed steps and the thread that ships them to the local agent.

The split is what keeps training fast: the training thread only appends plain tuples to a deque
and a list (atomic under the GIL: no lock, no I/O, no pydantic); everything that costs something —
aggregating collectives, validating with pydantic, JSON, HTTP, backoff — happens in one daemon
thread that wakes every ``interval_s``. Nothing the thread does can raise into training code, and
when the agent is away the buffers stay bounded and every step that cannot be delivered is counted
as dropped, so ``sent + dropped + buffered`` accounts for every step recorded (give or take one
while a full buffer is being drained).

The wire models (`gpuwatch.protocol`, hence pydantic), `http.client`, `urllib` and `socket` are
imported where they are used, mostly on that thread, never by ``import gpuwatch.client``: a training
script, or a DataLoader worker that imports the client and never steps, does not pay for them
(docs/jobs.md).
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gpuwatch.client import timing
from gpuwatch.client.identity import identity_from_env
from gpuwatch.client.lazy_log import log

if TYPE_CHECKING:  # imported where used, on the reporter's thread: not by `import gpuwatch.client`
    import http.client

    from gpuwatch.protocol import CheckpointReport, JobProcess

DEFAULT_AGENT_URL = "http://127.0.0.1:8601"
AGENT_URL_ENV = "GPUWATCH_AGENT_URL"
REPORT_PATH = "/v1/report"
DEFAULT_MAXLEN = 10_000
INTERVAL_S = 0.5
HTTP_TIMEOUT_S = 0.5
BACKOFF_MAX_S = 30.0
#: With no new steps the thread still posts this often, so the agent keeps seeing a live (maybe hung) process.
HEARTBEAT_S = 5.0
#: Steps per POST: a backlog after an outage goes out in several bodies of a few hundred KB each.
#: At most `gpuwatch.protocol.MAX_BATCH_ITEMS` (a test holds it there; not imported: see the docstring).
MAX_POST_STEPS = 2_000
#: How long the interpreter's exit may wait for the last flush.
EXIT_DEADLINE_S = 1.0
#: Collectives kept between two step boundaries; only a process that times collectives but never
#: steps comes near it, and then further ones are ignored instead of growing without bound.
MAX_PENDING_COLLECTIVES = 16_384
#: Checkpoint reports waiting for the agent (one POST carries them all); the oldest go first.
MAX_PENDING_CHECKPOINTS = 1_000

Sender = Callable[[str, bytes], None]

_Record = timing.Collective | timing.Plain
# (step, ts, duration_s, tokens, samples, collectives recorded during the step or None)
_RawStep = tuple[int, float, float, Any, Any, list[_Record] | None]
# (step, ts, duration_s, tokens, samples, comm_s, {op: [count, seconds, bytes, gpu_s, bus_bytes]}, exposed_s)
_Step = tuple[int, float, float, float | None, float | None, float, timing.OpStats, float]


class HttpSender:
    """POSTs JSON over one kept-alive stdlib connection; any non-2xx answer is a failure.

    Stdlib only, so importing the client pulls in no HTTP library and works in any training image.
    """

    def __init__(self, timeout_s: float = HTTP_TIMEOUT_S) -> None:
        self._timeout_s = timeout_s
        self._conn: http.client.HTTPConnection | None = None
        self._key: tuple[str, str, int | None] | None = None

    def __call__(self, url: str, body: bytes) -> None:
        import http.client  # with email and ssl: not at import (see the module's docstring)
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        key = (parts.scheme, parts.hostname or "127.0.0.1", parts.port)
        if self._conn is None or key != self._key:
            self.close()
            cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
            self._conn, self._key = cls(key[1], key[2], timeout=self._timeout_s), key
        conn = self._conn
        try:
            conn.request("POST", parts.path or "/", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            if resp.will_close:
                self.close()
            if not 200 <= resp.status < 300:
                raise OSError(f"agent answered HTTP {resp.status}")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):  # closing a broken socket
                self._conn.close()
        self._conn = None


def _number(value: Any) -> float | None:
    """tokens / samples as a float, or None when it is not a usable count (a bad value costs the
    field, never the step)."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, RuntimeError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _ready(collectives: list[_Record]) -> bool:
    """Whether a step's timings can be read now (a broken record is read now, and then dropped)."""
    try:
        return timing.ready(collectives)
    except Exception:
        return True


class Reporter:
    """Buffers steps and collective timings of one process and ships them to the local agent.

    One instance per process (``gpuwatch.client`` holds it); tests make their own. ``send`` is the
    transport (default: :class:`HttpSender`), ``env`` where identity and the agent URL are read
    (default ``os.environ``, read lazily, in the background thread). At most ``maxlen`` steps wait
    in each of the two buffers: the training thread's deque, emptied every tick, and the background
    thread's list of aggregated steps, which holds the backlog while the agent is away; the oldest
    go first, counted as dropped.
    """

    def __init__(
        self,
        maxlen: int = DEFAULT_MAXLEN,
        *,
        interval_s: float = INTERVAL_S,
        send: Sender | None = None,
        env: Mapping[str, str] | None = None,
        autostart: bool = True,
    ) -> None:
        self.maxlen = maxlen
        self._interval_s = interval_s
        self._send: Sender = send or HttpSender()
        self._env = env
        self._autostart = autostart
        self._overrides: dict[str, Any] = {}
        self._agent_url: str | None = None
        self._reset_state()
        if hasattr(os, "register_at_fork"):
            ref = weakref.ref(self)  # a weak one: short-lived reporters (tests) must stay collectable
            os.register_at_fork(after_in_child=lambda: (r := ref()) is not None and r._reset_state())

    def _reset_state(self) -> None:
        """Fresh buffers and no thread: also what a forked child (a DataLoader worker) starts with."""
        # Written by the training thread(s):
        self._buf: deque[_RawStep] = deque(maxlen=self.maxlen)
        self._pending: list[_Record] = []
        self._next_step = 0
        self._overflow = 0
        self._started = False
        # Written by any thread (AsyncCheckpointer's), drained by the background thread:
        self._checkpoints: deque[CheckpointReport] = deque(maxlen=MAX_PENDING_CHECKPOINTS)
        self._checkpoints_dropped = 0
        # Owned by the background thread (under _io_lock): steps whose GPU timings are not in yet
        # (with when they were first seen), and steps ready to send.
        self._resolving: deque[tuple[_RawStep, float]] = deque()
        self._staged: list[_Step] = []
        self._sent = 0
        self._dropped = 0
        self._failures = 0
        self._next_attempt = 0.0
        self._last_post = 0.0
        self._process: JobProcess | None = None
        self._io_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- hot path: training thread ------------------------------------------------------------

    def begin_step(self) -> None:
        """Forget collectives recorded outside any step: they belong to no step's comm time."""
        if self._pending:
            self._pending = []

    def end_step(self, n: int | None, duration_s: float, tokens: Any = None, samples: Any = None) -> None:
        """Buffer one finished step; never raises, never blocks (the agent may be away for hours)."""
        try:
            ts = time.time()
            collectives = self._pending
            if collectives:
                # Swap, don't copy: the background thread aggregates the old list later, by which
                # time a collective recorded by another thread in the same instant has landed in it.
                self._pending = []
            else:
                collectives = None
            if n is None:
                n = self._next_step
            self._next_step = n + 1
            buf = self._buf
            if len(buf) == self.maxlen:
                self._overflow += 1  # the deque forgets the oldest step: recent ones matter most
            buf.append((n, ts, duration_s, tokens, samples, collectives))
            if not self._started:
                self._start()
        except Exception:  # pragma: no cover - defensive: training must go on
            log.debug("gpuwatch: could not record a step", exc_info=True)

    def record_collective(self, op: str, seconds: float, nbytes: int = 0) -> None:
        """Note a collective's duration; safe from any thread (a list append is atomic)."""
        pending = self._pending
        if len(pending) < MAX_PENDING_COLLECTIVES:
            pending.append((op, seconds, nbytes))

    def record(self, collective: timing.Collective) -> None:
        """Note a collective by its marks, when it starts: it counts towards the step it starts in,
        and its times are read once its marks are done (any thread; never blocks)."""
        pending = self._pending
        if len(pending) < MAX_PENDING_COLLECTIVES:
            pending.append(collective)

    def record_checkpoint(self, report: CheckpointReport) -> None:
        """Queue one checkpoint save for the agent, sent with the next steps; never raises, never blocks.

        A failed POST keeps the reports for the next one; past ``MAX_PENDING_CHECKPOINTS`` the oldest
        are forgotten and counted in :attr:`checkpoints_dropped`."""
        try:
            checkpoints = self._checkpoints
            if len(checkpoints) == checkpoints.maxlen:
                self._checkpoints_dropped += 1
            checkpoints.append(report)
            if not self._started:
                self._start()
        except Exception:  # pragma: no cover - defensive: training must go on
            log.debug("gpuwatch: could not queue a checkpoint report", exc_info=True)

    # -- configuration ------------------------------------------------------------------------

    def configure(
        self,
        job: str | None = None,
        rank: int | None = None,
        agent_url: str | None = None,
        hang_timeout_s: float | None = None,
    ) -> JobProcess:
        """Override parts of the discovered identity; invalid values raise ValueError here, at setup."""
        overrides = dict(self._overrides)
        for key, value in (("job", job), ("rank", rank), ("hang_timeout_s", hang_timeout_s)):
            if value is not None:
                overrides[key] = value
        process = self._build_process(overrides)  # validates before anything changes
        with self._io_lock:
            self._overrides = overrides
            self._process = process
            if agent_url is not None and agent_url != self._agent_url:
                self._agent_url = agent_url
                self._failures, self._next_attempt = 0, 0.0  # a new agent deserves a try at once
        return process

    def process(self) -> JobProcess:
        """Who this process is to the agent: discovered from the environment once, then cached."""
        if self._process is None:
            self._process = self._build_process(self._overrides)
        return self._process

    def _environ(self) -> Mapping[str, str]:
        return os.environ if self._env is None else self._env

    def _build_process(self, overrides: Mapping[str, Any]) -> JobProcess:
        import socket

        from gpuwatch.protocol import JobProcess

        pid, host = os.getpid(), socket.gethostname()
        found = identity_from_env(self._environ(), pid, host)
        base = found.model_dump() if found else {"job": f"local-{host}-{pid}", "pid": pid, "rank": 0}
        try:
            return JobProcess.model_validate({**base, **overrides})
        except Exception as exc:
            raise ValueError(f"gpuwatch.client.configure: {exc}") from None

    def agent_url(self) -> str:
        return self._agent_url or self._environ().get(AGENT_URL_ENV) or DEFAULT_AGENT_URL

    # -- background thread --------------------------------------------------------------------

    def _start(self) -> None:
        with self._start_lock:
            if self._started:
                return
            self._started = True
            if not self._autostart:
                return
            self._stop.clear()
            thread = threading.Thread(target=self._run, name="gpuwatch-reporter", daemon=True)
            try:
                thread.start()
            except RuntimeError:  # interpreter shutting down, or out of threads
                log.debug("gpuwatch: reporter thread not started", exc_info=True)
                return
            self._thread = thread
            atexit.register(self.close, EXIT_DEADLINE_S)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._tick(final=False)
        self._tick(final=True, deadline=time.monotonic() + EXIT_DEADLINE_S)

    def _tick(self, final: bool, deadline: float | None = None) -> None:
        try:
            with self._io_lock:
                self._collect(deadline)
                self._ship(final, deadline)
        except Exception:
            log.debug("gpuwatch: reporter tick failed", exc_info=True)

    def flush(self, timeout_s: float = EXIT_DEADLINE_S) -> bool:
        """Ship what is buffered now, ignoring backoff; True when nothing is left buffered."""
        deadline = time.monotonic() + timeout_s
        if not self._io_lock.acquire(timeout=timeout_s):
            return False
        try:
            self._collect(deadline)
            self._ship(final=True, deadline=deadline)
        except Exception:
            log.debug("gpuwatch: flush failed", exc_info=True)
        finally:
            self._io_lock.release()
        return not self._buf and not self._resolving and not self._staged and not self._checkpoints

    def close(self, timeout_s: float = EXIT_DEADLINE_S) -> None:
        """Stop the thread after a last flush bounded by ``timeout_s`` (also run at interpreter exit)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
        self._thread = None
        atexit.unregister(self.close)

    def _collect(self, deadline: float | None = None) -> None:
        """Move steps from the training thread's deque into our own list, aggregated and bounded.

        Runs every tick, also while backing off, so a long outage holds one small tuple per step
        rather than every collective of every step. A step waits (in order) until the GPU has got
        past every mark of its collectives (``Event.query()``, never a synchronize), or for
        ``timing.RESOLVE_TIMEOUT_S``, after which its unfinished GPU timings are host timings. With a
        ``deadline`` (a flush, the exit) it polls until then instead of leaving steps for the next tick."""
        buf, resolving, staged = self._buf, self._resolving, self._staged
        now = time.monotonic()
        while buf:
            resolving.append((buf.popleft(), now))
        while resolving:
            raw, seen = resolving[0]
            collectives = raw[5]
            give_up = now - seen > timing.RESOLVE_TIMEOUT_S or len(resolving) > self.maxlen
            if collectives and not give_up and not _ready(collectives):
                if deadline is None:
                    break
                if time.monotonic() < deadline:
                    time.sleep(0.001)  # the reporter's thread or the exit, never the training thread
                    continue
                give_up = True
            resolving.popleft()
            n, ts, duration_s, tokens, samples, _ = raw
            try:
                comm_s, ops, exposed_s = (
                    timing.resolve(list(collectives), give_up=give_up) if collectives else (0.0, {}, 0.0)
                )
            except Exception:  # a caller passed something that is not a duration
                self._dropped += 1
                log.debug("gpuwatch: step %r dropped: bad collective timings", raw[0], exc_info=True)
                continue
            staged.append((n, ts, duration_s, _number(tokens), _number(samples), comm_s, ops, exposed_s))
        excess = len(staged) - self.maxlen
        if excess > 0:
            del staged[:excess]
            self._dropped += excess

    def _ship(self, final: bool, deadline: float | None) -> None:
        now = time.monotonic()
        if not final and now < self._next_attempt:
            return
        while True:
            batch = self._staged[:MAX_POST_STEPS]
            checkpoints = self._take_checkpoints()
            if not batch and not checkpoints and not final and now - self._last_post < HEARTBEAT_S:
                return
            if not batch and not checkpoints and final:
                return
            body, invalid = self._encode(batch, checkpoints)
            try:
                self._send(self.agent_url().rstrip("/") + REPORT_PATH, body)
            except Exception as exc:
                self._checkpoints.extendleft(reversed(checkpoints))  # few and precious: kept for the next try
                del self._staged[: len(batch)]
                self._dropped += len(batch) - invalid  # the invalid ones are counted already
                self._failures += 1
                delay = min(BACKOFF_MAX_S, self._interval_s * 2.0**self._failures)
                self._next_attempt = time.monotonic() + delay
                log.debug("gpuwatch: report to %s failed (%s); next try in %.1fs", self.agent_url(), exc, delay)
                return
            del self._staged[: len(batch)]
            self._sent += len(batch) - invalid
            self._failures, self._next_attempt = 0, 0.0
            now = self._last_post = time.monotonic()
            if not self._staged or (deadline is not None and now >= deadline):
                return

    def _take_checkpoints(self) -> list[CheckpointReport]:
        taken: list[CheckpointReport] = []
        with contextlib.suppress(IndexError):  # popleft is atomic; another thread may append meanwhile
            while self._checkpoints:
                taken.append(self._checkpoints.popleft())
        return taken

    def _encode(self, batch: list[_Step], checkpoints: list[CheckpointReport] | None = None) -> tuple[bytes, int]:
        """The JSON body for ``batch``; a step that fails validation is dropped alone (and counted)."""
        from gpuwatch.protocol import ClientReport, CollectiveStat, StepReport

        process = self.process()
        job, rank = process.job, process.rank or 0
        steps: list[StepReport] = []
        invalid = 0
        for n, ts, duration_s, tokens, samples, comm_s, ops, exposed_s in batch:
            try:
                steps.append(
                    StepReport(
                        job=job,
                        rank=rank,
                        step=n,
                        ts=ts,
                        duration_s=duration_s,
                        comm_s=comm_s,
                        exposed_s=exposed_s,
                        tokens=tokens,
                        samples=samples,
                        collectives={
                            op: CollectiveStat(count=c, seconds=s, bytes=b, gpu_seconds=g, bus_bytes=bus)
                            for op, (c, s, b, g, bus) in ops.items()
                        },
                    )
                )
            except Exception:
                invalid += 1
                log.debug("gpuwatch: invalid step %r dropped", n, exc_info=True)
        self._dropped += invalid
        report = ClientReport(
            process=process, steps=steps, checkpoints=checkpoints or [], dropped=self._dropped + self._overflow
        )
        return report.model_dump_json().encode(), invalid

    # -- introspection ------------------------------------------------------------------------

    @property
    def checkpoints_dropped(self) -> int:
        """Checkpoint reports forgotten because too many waited for the agent."""
        return self._checkpoints_dropped

    def stats(self) -> dict[str, int]:
        """Counts of steps: delivered, dropped (overflow, failed posts, invalid) and still buffered."""
        return {
            "sent": self._sent,
            "dropped": self._dropped + self._overflow,
            "buffered": len(self._buf) + len(self._resolving) + len(self._staged),
        }
