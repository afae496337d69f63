"""`gpuwatch run -- CMD`: launch a training job, stream its output, report how it ended, and restart it
from its latest valid checkpoint when the recovery policy says so (the local executor).

Each attempt is a run with a key of the supervisor's own (``<job>-<random>``). Its stdout and stderr
go line by line to the server as log streams ``run/<key>/stdout|stderr`` through the agent's spool
and shipper, so an unreachable server only delays them. When the command exits non-zero the
supervisor waits until its lines are delivered, reports the exit with the latest valid checkpoint,
and asks the server for the decision. If the server does not decide within `decision_timeout_s`
(a server restarting meanwhile is waited for, with backoff: it resumes the incident and decides), the
supervisor diagnoses the lines it kept and decides with the same `gpuwatch.diagnosis` and
`gpuwatch.recovery` code over its own history; that run, its diagnosis and its decision wait in an
outbox on disk (`agent.outbox`), with their times on the node's clock, and are recorded by the server
when it is back, as they happened: delivered by this supervisor, or by the node's agent once this
supervisor has ended. Every exchange is a model of `gpuwatch.protocol`.

Inside a Slurm job (or with `--executor slurm|kubernetes`) the scheduler restarts the job, not the
supervisor: it reports the failure, and on a restart decision the server requeues the job through its
executor and the supervisor just exits.

SIGTERM or SIGINT to the supervisor goes to the whole process group of the job; after `grace_s` for
an emergency checkpoint the group is killed. A supervisor told to stop does not restart anything, and
says so: its decision about the exit is a stop (the job was ended from outside), recorded as its own.

While the server is away every retry (log batches, the outbox, the decision watch) backs off
exponentially with jitter, and never sooner than the server's Retry-After.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from agent.api_client import ServerClient, Unanswered
from agent.batching import Pending, make_batch, spool_pending
from agent.outbox import FILE, Outbox, hold_alive
from agent.proctree import descendants, signal_all
from agent.shipper import Backoff, Shipper
from agent.spool import Spool
from gpuwatch.client.checkpoint import CHECKPOINT_LOG_ENV, RESUME_ENV
from gpuwatch.config import Settings
from gpuwatch.diagnosis.diagnose import diagnose
from gpuwatch.diagnosis.model import LogSource
from gpuwatch.protocol import Batch, CheckpointRef, LocalDecision, LogLine, RunExit, RunStart, log_text
from gpuwatch.recovery import Attempt, Checkpoint, Decision, decide, exit_failed, latest_valid, validate
from gpuwatch.recovery.settings import policy_config

log = logging.getLogger("gpuwatch.supervisor")

EXCLUDE_ENV = "GPUWATCH_EXCLUDE_NODES"
KEPT_LINES = 50_000  # per stream, for a local diagnosis when the server is away
#: How long one decision request asks the server to hold its answer (the request's own timeout is longer).
DECISION_POLL_S = 10.0
#: The idle pace of the sending thread (log lines shipped this often while the server answers).
SHIP_PERIOD_S = 0.1


@dataclass(slots=True)
class Options:
    job: str
    command: list[str]
    checkpoint_dir: Path | None = None
    grace_s: float = 30.0
    decision_timeout_s: float = 30.0
    policy: dict[str, Any] = field(default_factory=dict)
    executor: str = "local"  # who restarts: this supervisor, or the server through slurm / kubernetes
    external_id: str | None = None  # the Slurm job id, or namespace/name of the Kubernetes Job


def scheduler_from_env(env: Mapping[str, str]) -> tuple[str, str | None]:
    """Inside a Slurm job the scheduler restarts it (the server requeues it); elsewhere the supervisor."""
    if env.get("SLURM_JOB_ID"):
        return "slurm", env["SLURM_JOB_ID"]
    return "local", None


@dataclass(slots=True)
class Exit:
    code: int | None
    signal: int | None
    at: float = field(default_factory=time.monotonic)  # when the exit was seen
    ts: float = field(default_factory=time.time)  # the same, on the node's clock (for the record)

    @property
    def failed(self) -> bool:
        return exit_failed(self.code, self.signal)


class Supervisor:
    def __init__(self, settings: Settings, options: Options) -> None:
        token = settings.effective_token
        if not token:
            raise ValueError("gpuwatch run needs the node's token: --token, GPUWATCH_TOKEN or GPUWATCH_TOKEN_FILE")
        self.settings = settings
        self.options = options
        policy_config(settings.recovery, options.policy)  # a bad policy fails here, before anything runs
        home = settings.data_dir / "supervisor" / _safe(options.job)
        home.mkdir(parents=True, exist_ok=True)
        self.home = home
        self.client = ServerClient(settings.agent.server_url, token)
        self.outbox = Outbox(home / FILE)
        self.spool = Spool(home / "spool", settings.agent.spool_max_bytes)
        self.shipper = Shipper(
            self.client,
            self.spool,
            None,
            heartbeat_s=None,
            backoff=Backoff(cap=5.0),
            batch_max_bytes=settings.agent.batch_max_bytes,
        )
        self._unspooled = Pending(settings.agent.pending_max_bytes)  # lines not yet on disk (spool thread's)
        self._spooling = threading.Lock()
        self.checkpoint_log = home / "checkpoints.jsonl"
        self.skipped_checkpoints = SkippedCheckpoints(home / "skipped-checkpoints.jsonl")
        self.history: list[Attempt] = []
        self._local_restart: str | None = None  # the key of the attempt this supervisor decided to restart
        self.clock: Callable[[], float] = time.time  # the node's clock, which the lines are stamped with
        self.stop = threading.Event()  # set by SIGTERM/SIGINT: stop the job, restart nothing
        self._done = threading.Event()  # the attempt loop is over: the sending thread drains and ends
        self._proc: subprocess.Popen[bytes] | None = None
        self._tree: dict[int, int] = {}  # the running attempt's processes seen so far: pid → start time
        self._lines: dict[str, deque[str]] = {}
        self._pending: list[LogLine] = []
        self._seq: dict[str, int] = {}  # per stream; streams are unique per run key, so no saved state
        self._lock = threading.Lock()
        self._resumed_from: str | None = None  # the checkpoint the running attempt started from

    # -- the attempt loop -------------------------------------------------------------------------

    def run(self) -> int:
        alive = hold_alive(self.home)  # the agent leaves this job's outbox to us while we live
        sender = threading.Thread(target=self._ship, name="supervisor-shipper", daemon=True)
        sender.start()
        restart_of: str | None = None
        exclude: tuple[str, ...] = ()
        try:
            while True:
                checkpoint = self.latest_checkpoint()
                key = f"{_safe(self.options.job)[:40]}-{uuid.uuid4().hex[:12]}"
                start = RunStart(
                    job=self.options.job,
                    node=self.settings.agent.node,
                    key=key,
                    command=" ".join(self.options.command),
                    resume_from=str(checkpoint.path) if checkpoint else None,
                    restart_of=restart_of,
                    policy=self.options.policy or None,
                    scheduler=self.options.executor,  # type: ignore[arg-type]  # checked by the CLI
                    external_id=self.options.external_id,
                    started_at=self.clock(),
                )
                if restart_of is not None and self._local_restart == restart_of:  # our own decision's restart
                    self.outbox.restarted(restart_of, start.started_at or self.clock())
                    self._local_restart = None
                started = self.client.start_run(start.model_copy(update={"started_at": None}))
                unanswered = started if isinstance(started, Unanswered) and not started.permanent else None
                run_id = None if isinstance(started, Unanswered) else started.id
                began = time.monotonic()
                self._resumed_from = str(checkpoint.path) if checkpoint else None
                result, late_id = self._launch(key, checkpoint, exclude, run_id, start if unanswered else None)
                run_id = run_id if late_id is None else late_id
                took = time.monotonic() - began
                log.info("attempt %s ended after %.1fs: exit %s signal %s", key, took, result.code, result.signal)
                after = self.latest_checkpoint()
                decision = self._report(key, start, run_id, result, after)
                if decision is None or self.stop.is_set():
                    return _status(result)
                if not decision.restart:
                    log.error("not restarting %s: %s", self.options.job, decision.why)
                    return _status(result)
                if self.options.executor != "local":
                    log.warning("%s restarts %s: %s", self.options.executor, self.options.job, decision.why)
                    return _status(result)
                log.warning("restarting %s: %s", self.options.job, decision.why)
                if decision.skip_checkpoint:
                    self.skipped_checkpoints.add(decision.skip_checkpoint)
                if self.stop.wait(decision.delay_s):
                    return _status(result)
                restart_of, exclude = key, decision.exclude_nodes
        finally:
            self._flush_logs(timeout=5.0)
            pending, _ = self.outbox.deliver(self.client)
            if pending:
                log.warning(
                    "%d run record(s) kept in %s: the node's agent delivers them when the server is back",
                    pending,
                    self.outbox.path,
                )
            self._done.set()
            sender.join(timeout=10)
            self.client.close()
            alive.close()

    def latest_checkpoint(self) -> Checkpoint | None:
        """The newest valid checkpoint: reported by the job (checkpoint_saved) or found in the directory;
        never one a decision said to skip (it failed to load)."""
        found: list[Checkpoint] = []
        skip = self.skipped_checkpoints.paths()
        if self.checkpoint_log.exists():
            reported = [json.loads(line) for line in self.checkpoint_log.read_text().splitlines() if line.strip()]
            for entry in sorted(reported, key=lambda e: e.get("step", -1), reverse=True):
                if _resolved(entry["path"]) in skip:
                    continue
                checked = validate(Path(entry["path"]), entry.get("step"))
                if isinstance(checked, Checkpoint):
                    found.append(checked)
                    break
                log.warning("skipping checkpoint %s: %s", checked.path, checked.why)
        if self.options.checkpoint_dir is not None:
            newest, skipped = latest_valid(self.options.checkpoint_dir, exclude=skip)
            for s in skipped:
                log.warning("skipping checkpoint %s: %s", s.path, s.why)
            if newest is not None:
                found.append(newest)
        found = [c for c in found if c.step is not None]
        return max(found, key=lambda c: c.step or 0) if found else None

    # -- one attempt ------------------------------------------------------------------------------

    def _launch(
        self,
        key: str,
        checkpoint: Checkpoint | None,
        exclude: Sequence[str],
        run_id: int | None,
        unregistered: RunStart | None = None,
    ) -> tuple[Exit, int | None]:
        """Run one attempt to its end: its exit, and the run's id when its start (``unregistered``: the
        server did not answer it) was registered while it ran."""
        resume = str(checkpoint.path) if checkpoint else ""
        excluded = ",".join(exclude)
        argv = [a.replace("{checkpoint}", resume).replace("{exclude_nodes}", excluded) for a in self.options.command]
        env = {
            **os.environ,
            "GPUWATCH_JOB": self.options.job,
            "GPUWATCH_RUN_KEY": key,
            CHECKPOINT_LOG_ENV: str(self.checkpoint_log),
            EXCLUDE_ENV: excluded,
        }
        if resume:
            env[RESUME_ENV] = resume
        else:
            env.pop(RESUME_ENV, None)
        if self.options.checkpoint_dir is not None:
            env["GPUWATCH_CHECKPOINT_DIR"] = str(self.options.checkpoint_dir)
        try:
            proc = subprocess.Popen(
                argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
            )
        except OSError as exc:  # not found, not executable: that is the script's failure, diagnosed as such
            line = f"gpuwatch run: cannot start {argv[0]}: {exc}"
            print(line, file=sys.stderr)
            self._line(f"run/{key}/stderr", line)
            return Exit(127, None), None
        self._proc = proc
        readers = [
            threading.Thread(target=self._pump, args=(proc.stdout, f"run/{key}/stdout", sys.stdout), daemon=True),
            threading.Thread(target=self._pump, args=(proc.stderr, f"run/{key}/stderr", sys.stderr), daemon=True),
        ]
        for r in readers:
            r.start()
        if run_id is not None:
            self._start_watch(run_id, proc)
        late = None
        if unregistered is not None:  # registered as soon as the server answers, while the attempt runs
            late = LateStart(self.client, unregistered, lambda run: self._start_watch(run, proc))
        self._tree = {}
        while True:  # note the job's processes as they come (torchrun's workers leave its group)
            self._tree.update(descendants(proc.pid))
            try:
                code = proc.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                continue
        # No process of the attempt outlives it: a worker its launcher left behind (killed, or hung past
        # the launcher's own exit) would hold its GPU and its rendezvous port.
        if left := signal_all(self._tree, signal.SIGKILL):
            log.warning("killed %d process(es) of the job left behind by its launcher", left)
        result = Exit(None, -code) if code < 0 else Exit(code, None)  # stamped now, before anything waits
        for r in readers:
            r.join(timeout=10)
        self._proc = None
        return result, (None if late is None else late.end())

    def _start_watch(self, run_id: int, proc: subprocess.Popen[bytes]) -> None:
        threading.Thread(target=self._watch, args=(run_id, proc), name="decision-watch", daemon=True).start()

    def terminate(self) -> None:
        """Stop the job and restart nothing (from the supervisor's SIGTERM/SIGINT handler)."""
        self.stop.set()
        if self._proc is not None:
            self._kill(self._proc)

    def _kill(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGTERM to the job's process group, SIGKILL after the grace period."""
        if proc.poll() is not None:
            return
        tree = {**self._tree, **descendants(proc.pid)}
        _killpg(proc.pid, signal.SIGTERM)
        signal_all(tree, signal.SIGTERM)

        def kill() -> None:
            _killpg(proc.pid, signal.SIGKILL)
            signal_all(tree, signal.SIGKILL)

        timer = threading.Timer(self.options.grace_s, kill)
        timer.daemon = True
        timer.start()

    def _watch(self, run_id: int, proc: subprocess.Popen[bytes]) -> None:
        """While the job runs, wait for a decision about it: the server decides about a running run when
        it hangs (or its node went silent). Then stop the job; the attempt loop follows the decision."""
        backoff = Backoff(base=1.0, cap=30.0)
        while proc.poll() is None and not self.stop.is_set():
            got = self.client.decision(run_id, wait_s=DECISION_POLL_S)
            if isinstance(got, Unanswered):  # the server is away; the job goes on
                self.stop.wait(backoff.next_delay(got.retry_after))
                continue
            backoff.reset()
            if got.state == "decided" and got.decision is not None and proc.poll() is None:
                log.warning("the server decided about the running job: %s; stopping it", got.decision.get("why"))
                self._kill(proc)
                return

    def _pump(self, pipe: IO[bytes], stream: str, echo: IO[str]) -> None:
        for raw in iter(pipe.readline, b""):
            text = log_text(raw).rstrip("\r\n")
            echo.write(text + "\n")
            echo.flush()
            self._line(stream, text)
        pipe.close()

    def _line(self, stream: str, text: str) -> None:
        with self._lock:
            self._lines.setdefault(stream, deque(maxlen=KEPT_LINES)).append(text)
            seq = self._seq.get(stream, 0)
            self._seq[stream] = seq + 1
            self._pending.append(LogLine(stream=stream, seq=seq, ts=self.clock(), text=text))

    # -- reporting and deciding -------------------------------------------------------------------

    def _report(
        self, key: str, start: RunStart, run_id: int | None, result: Exit, checkpoint: Checkpoint | None
    ) -> Decision | None:
        """Report the exit; for a failure, the decision: the server's, else the supervisor's own (the
        server away, or this supervisor told to stop), which is reported with the exit."""
        streams = [s for s in self._lines if s.startswith(f"run/{key}/")]
        with self._lock:
            counts = {s: self._seq.get(s, 0) for s in streams}  # what the server waits for before diagnosing
        body = RunExit(exit_code=result.code, signal=result.signal, streams=streams, lines=counts, ended_at=result.ts)
        if checkpoint is not None:
            body.checkpoint = CheckpointRef(path=str(checkpoint.path), step=checkpoint.step, saved_at=checkpoint.mtime)
        deadline = time.monotonic() + self.options.decision_timeout_s
        if result.failed:
            self._flush_logs(timeout=5.0)  # the server diagnoses from these lines: deliver them first
        if result.failed and self.stop.is_set():  # ended from outside: our stop is the decision
            return self._decide_here(key, start, run_id, body, result, checkpoint, reported=False)
        reported = self.client.report_exit(run_id, _live(body)) if run_id is not None else Unanswered()
        if not result.failed:
            if isinstance(reported, Unanswered):
                self._keep(start, body)
            return None
        # A server restarting is not a server away: until the deadline its answer is awaited, with backoff
        # (two deciders, the supervisor and a server resuming the incident, would each decide once).
        backoff = Backoff(base=0.25, cap=2.0)
        while run_id is not None and isinstance(reported, Unanswered) and not reported.permanent:
            if not self._pause_until(deadline, backoff.next_delay(reported.retry_after)):
                break
            reported = self.client.report_exit(run_id, self._replayed(body))
        decision = None if isinstance(reported, Unanswered) else self._server_decision(run_id, deadline)
        if decision is not None:
            self.history.append(Attempt.from_json(decision.to_json()))
            log.info("decision by the server %.3fs after the exit", time.monotonic() - result.at)
            return decision
        return self._decide_here(
            key, start, run_id, body, result, checkpoint, reported=not isinstance(reported, Unanswered)
        )

    def _decide_here(
        self,
        key: str,
        start: RunStart,
        run_id: int | None,
        body: RunExit,
        result: Exit,
        checkpoint: Checkpoint | None,
        reported: bool,
    ) -> Decision:
        """Decide about the failure ourselves and report it with the exit: now if the server answers,
        else through the outbox. Told to stop, the decision is a stop, and not a restart."""
        stopped = self.stop.is_set()
        decision, diagnosis = self._local_decision(key, result, checkpoint, stopped=stopped)
        log.info("decision by the supervisor %.3fs after the exit", time.monotonic() - result.at)
        self.history.append(Attempt.from_json(decision.to_json()))
        body.local = LocalDecision(diagnosis=diagnosis, decision=decision.to_json(), decided_at=decision.at)
        if decision.restart:
            self._local_restart = key
        sent = Unanswered() if reported or run_id is None else self.client.report_exit(run_id, _live(body))
        if isinstance(sent, Unanswered):
            self._keep(start, body)
        return decision

    def _server_decision(self, run_id: int | None, deadline: float) -> Decision | None:
        """Long-poll the server for its decision; None if it does not come by ``deadline`` (monotonic),
        the server reachable meanwhile or not (a restarting server is waited for)."""
        backoff = Backoff(base=0.25, cap=2.0)
        while run_id is not None and not self.stop.is_set() and (left := deadline - time.monotonic()) > 0:
            got = self.client.decision(run_id, wait_s=min(left, DECISION_POLL_S))
            if isinstance(got, Unanswered):
                if got.permanent or not self._pause_until(deadline, backoff.next_delay(got.retry_after)):
                    return None
                continue
            backoff.reset()
            if got.state == "decided" and got.decision is not None:
                return Decision.from_json(got.decision)
        return None

    def _pause_until(self, deadline: float, delay: float) -> bool:
        """Wait ``delay`` before asking an unreachable server again; False if that passes ``deadline``
        (monotonic) or the supervisor is told to stop meanwhile."""
        left = deadline - time.monotonic()
        return left > 0 and not self.stop.wait(min(delay, left)) and time.monotonic() < deadline

    def _keep(self, start: RunStart, body: RunExit) -> None:
        """Keep the attempt in the outbox with this supervisor's measured clock offset (known from before
        the outage, if at all) on all its times: one measure for every record of the job, so the order of
        its times (decided, then relaunched, then the next run started) holds on the server's clock."""
        offset = self.client.offset_s
        self.outbox.add(
            start.model_copy(update={"clock_offset_s": offset}), body.model_copy(update={"clock_offset_s": offset})
        )

    def _replayed(self, body: RunExit) -> RunExit:
        """The exit sent again after an unanswered try: with its node-clock times and the measured offset
        when one is known (else as sent live), so the retry is not stamped with its own time."""
        if self.client.offset_s is None:
            return _live(body)
        return body.model_copy(update={"clock_offset_s": self.client.offset_s})

    def _local_decision(
        self, key: str, result: Exit, checkpoint: Checkpoint | None, stopped: bool = False
    ) -> tuple[Decision, dict[str, Any]]:
        sources = [
            LogSource(
                file=s, lines=list(lines), node=self.settings.agent.node, exit_code=result.code, signal=result.signal
            )
            for s, lines in self._lines.items()
            if s.startswith(f"run/{key}/")
        ]
        rules_dir = self.settings.rules_dir
        diagnosis = diagnose(sources, rules_dir=str(rules_dir) if rules_dir else None)
        config = policy_config(self.settings.recovery, self.options.policy)
        decision = decide(
            diagnosis.reason,
            history=self.history,
            config=config,
            now=time.time(),
            node=diagnosis.node or self.settings.agent.node,
            exit_code=result.code,
            checkpoint_step=checkpoint.step if checkpoint else None,
            restart_nodes=(self.settings.agent.node,) if self.options.executor == "local" else None,
            stopped=stopped,
            resumed_from=self._resumed_from,
        )
        if stopped:
            log.warning("told to stop: %s (%s)", decision.outcome, decision.why)
        else:
            log.warning("server away: decided locally: %s (%s)", decision.outcome, decision.why)
        return decision, diagnosis.to_json()

    # -- log shipping -----------------------------------------------------------------------------

    def _ship(self) -> None:
        """Ship log lines and the outbox until the attempt loop is over; while the server is away, wait
        as the backoff says (a failed try is not repeated every `SHIP_PERIOD_S`)."""
        outbox = Backoff(base=1.0, cap=30.0)
        next_lines = next_outbox = 0.0
        while not self._done.is_set():
            now = time.monotonic()
            self._spool_pending()
            if now >= next_lines:
                delay = self.shipper.step()
                next_lines = now + (delay if self.shipper.backoff.failures else 0.0)
            if now >= next_outbox and self.outbox.pending():  # runs decided while the server was away
                _, failed = self.outbox.deliver(self.client)
                if failed is None:
                    outbox.reset()
                next_outbox = now + (outbox.next_delay(failed.retry_after) if failed else 0.0)
            self._done.wait(SHIP_PERIOD_S)
        self._spool_pending()

    def _spool_pending(self) -> None:
        """Spool the lines read so far in batches the server takes; on a spool error they wait in memory."""
        with self._lock:
            lines, self._pending = self._pending, []
        with self._spooling:
            self._unspooled.add("logs", lines)

            def build(items: dict[str, list[Any]]) -> Batch:
                return make_batch(
                    self.spool.next_batch_id(),
                    items,
                    dropped=self.spool.dropped_snapshot(),
                    clock_offset_s=self.client.offset_s,
                )

            spool_pending(self._unspooled, self.spool, self.shipper.batch_max_bytes, build)

    def _flush_logs(self, timeout: float) -> bool:
        """Spool and send what is pending; True when the spool emptied within ``timeout``."""
        deadline = time.monotonic() + timeout
        self._spool_pending()
        while self.spool.peek() is not None and time.monotonic() < deadline:
            if self.shipper.step():
                return False  # the server is away: the lines stay spooled
        return self.spool.peek() is None


class LateStart:
    """An attempt's start the server did not answer (away, or dying mid-request), registered in the
    background as soon as it answers, with the attempt's own start time (node's clock, moved by the
    measured offset): a restart is recorded done when its run registers, so this makes it done at its real
    time while the attempt runs, not when it ends and its outbox record is delivered. A start registered
    twice is one run (by its key)."""

    def __init__(self, client: ServerClient, start: RunStart, registered: Callable[[int], None]) -> None:
        self.client, self.start, self.registered = client, start, registered
        self.run_id: int | None = None
        self._ended = threading.Event()
        self._thread = threading.Thread(target=self._register, name="late-start", daemon=True)
        self._thread.start()

    def _register(self) -> None:
        backoff = Backoff(base=0.25, cap=5.0)
        retry_after: float | None = None
        while not self._ended.wait(backoff.next_delay(retry_after)):
            offset = self.client.offset_s
            got = self.client.start_run(
                self.start if offset is None else self.start.model_copy(update={"clock_offset_s": offset})
            )
            if isinstance(got, Unanswered):
                if got.permanent:
                    log.error("the server refuses run %s's start (HTTP %s): %s", self.start.key, got.status, got.detail)
                    return
                retry_after = got.retry_after
                continue
            self.run_id = got.id
            log.info("run %s registered late, as run %d", self.start.key, got.id)
            self.registered(got.id)
            return

    def end(self) -> int | None:
        """The attempt ended: stop trying (its start then goes in the outbox with its exit); the run's id
        if it was registered."""
        self._ended.set()
        self._thread.join()
        return self.run_id


def _live(body: RunExit) -> RunExit:
    """The exit as sent now: the server stamps it with its own clock (the node's times are for a replay)."""
    local = body.local and body.local.model_copy(update={"decided_at": None})
    return body.model_copy(update={"ended_at": None, "local": local})


class SkippedCheckpoints:
    """Checkpoints a decision said never to resume from again (they failed to load), kept on disk so a
    supervisor started again for the job (a Slurm requeue) skips them too; the server keeps them in the
    decision's record."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def add(self, checkpoint: str) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps({"path": _resolved(checkpoint), "at": time.time()}) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def paths(self) -> set[str]:
        if not self.path.exists():
            return set()
        found = set()
        for line in self.path.read_text().splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                found.add(str(json.loads(line)["path"]))
        return found


def _resolved(path: str | Path) -> str:
    return str(Path(path).resolve())


def _status(result: Exit) -> int:
    if result.signal:
        return 128 + result.signal
    return result.code or 0


def _killpg(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group is gone already
        os.killpg(pid, sig)


def _safe(name: str) -> str:
    """``name`` as one folder name: no separator, no ``.``/``..`` and no leading dot (a job named ``..``
    must not write beside the other jobs' folders), at most 255 bytes (a hash keeps long names apart)."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in name)
    safe = safe.replace("..", "__")
    if safe.startswith("."):
        safe = "_" + safe[1:]
    if len(safe) > 200:
        safe = f"{safe[:180]}-{hashlib.sha256(name.encode(errors='surrogateescape')).hexdigest()[:16]}"
    return safe or "job"
