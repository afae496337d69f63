"""Checkpoints and preemption, from inside the training script.

    import gpuwatch.client as gw

    state = load(gw.resume_path()) if gw.resume_path() else fresh()
    gw.install_preemption_handler(lambda: save(state, "emergency"))
    for step in range(state.step, total):
        train_one_step()
        if step % 100 == 0:
            gw.checkpoint_saved(save(state, step), step)
        gw.preemption_point()  # at the step boundary: save and exit here if SIGTERM came

`gpuwatch run` puts the checkpoint to resume from in GPUWATCH_RESUME_FROM and reads what
`checkpoint_saved` appends to the file named by GPUWATCH_CHECKPOINT_LOG (one JSON object a line).
`checkpoint_saved` also queues a CheckpointReport for the node's agent (as the AsyncCheckpointer's
saves are), so the server knows every job's checkpoint age while it runs, supervised or not.

A signal handler cannot save safely in the middle of a step (half-applied optimizer state), so by
default SIGTERM/SIGUSR1 only set a flag and the save happens at the next :func:`preemption_point`;
in a distributed job pass ``agree`` (e.g. an all-reduce of the flag with MAX) so every rank stops at
the same step. The process then exits with status 143 (128 + SIGTERM) after printing a line the
diagnosis recognises as a preemption. ``immediate=True`` saves inside the handler instead, for scripts
without a step loop.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from gpuwatch.client.lazy_log import log

RESUME_ENV = "GPUWATCH_RESUME_FROM"
CHECKPOINT_LOG_ENV = "GPUWATCH_CHECKPOINT_LOG"
PREEMPTED_EXIT = 143  # 128 + SIGTERM: what a process killed by SIGTERM reports, and what schedulers expect

#: The process's reporter: set by `gpuwatch.client` (which imports this module, so this one cannot
#: import it back), read at each report (tests swap the reporter).
default_reporter: Callable[[], Any] | None = None

_requested = threading.Event()
_signal_name = ""
_save_fn: Callable[[], object] | None = None
_exit_code = PREEMPTED_EXIT


def resume_path() -> str | None:
    """The checkpoint to resume from, when `gpuwatch run` restarted this job; else None."""
    return os.environ.get(RESUME_ENV) or None


def checkpoint_saved(
    path: str | os.PathLike[str], step: int, *, reporter: Any = None, **timing: float | int | None
) -> None:
    """Tell the supervisor and the agent that a complete checkpoint of ``step`` is at ``path``.
    ``timing``: CheckpointReport fields the caller measured (blocking_s, write_s, size_bytes). Never raises."""
    from pathlib import Path  # with urllib.parse and ipaddress: not at import (docs/jobs.md)

    now = time.time()
    report_checkpoint(reporter, path, int(step), now, True, **timing)
    log_path = os.environ.get(CHECKPOINT_LOG_ENV)
    if not log_path:
        return
    line = json.dumps({"path": str(Path(path).resolve()), "step": int(step), "ts": now}) + "\n"
    try:  # one small O_APPEND write: whole lines even with several ranks appending
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except OSError as exc:
        print(f"gpuwatch: could not record checkpoint {path}: {exc}", file=sys.stderr)


def report_checkpoint(
    reporter: Any, path: str | os.PathLike[str], step: int, ts: float, ok: bool, **fields: Any
) -> None:
    """Queue a CheckpointReport for the agent (``reporter``, default the process's); never raises."""
    try:
        from pathlib import Path

        from gpuwatch.protocol import CheckpointReport

        if reporter is None and default_reporter is not None:
            reporter = default_reporter()
        if reporter is None:
            return
        process = reporter.process()
        report = CheckpointReport(
            job=process.job, rank=process.rank or 0, step=step, ts=ts, path=str(Path(path).resolve()), ok=ok, **fields
        )
        reporter.record_checkpoint(report)
    except Exception:
        log.debug("gpuwatch: checkpoint report not queued", exc_info=True)


def install_preemption_handler(
    save_fn: Callable[[], object],
    *,
    signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGUSR1),
    immediate: bool = False,
    exit_code: int = PREEMPTED_EXIT,
) -> None:
    """On any of ``signals``: run ``save_fn`` (at the next preemption point, or at once when
    ``immediate``), then exit with ``exit_code``. Call from the main thread."""
    global _save_fn, _exit_code
    _save_fn, _exit_code = save_fn, exit_code

    def handler(signum: int, _frame: object) -> None:
        global _signal_name
        _signal_name = signal.Signals(signum).name
        _requested.set()
        if immediate:
            _save_and_exit()

    for sig in signals:
        signal.signal(sig, handler)


def preemption_requested() -> bool:
    return _requested.is_set()


def preemption_point(agree: Callable[[bool], bool] | None = None) -> None:
    """Call at each step boundary: when a preemption signal arrived (on this rank, or on any rank as
    ``agree`` decides), save and exit."""
    flag = _requested.is_set()
    if agree is not None:
        flag = agree(flag)
    if flag:
        _save_and_exit()


def _save_and_exit() -> None:
    where = "no emergency checkpoint (no save function)"
    if _save_fn is not None:
        saved = _save_fn()
        where = f"emergency checkpoint saved{f' to {saved}' if saved else ''}"
    print(f"gpuwatch: preempted: received {_signal_name or 'SIGTERM'}, {where}; exiting {_exit_code}", flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(_exit_code)
