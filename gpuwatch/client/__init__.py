"""Step and collective timing for training scripts, shipped to the node's gpuwatch agent.

    import gpuwatch.client as gw

    for batch in loader:
        with gw.step(tokens=batch.numel()):
            loss = model(batch).sum()
            loss.backward()
            with gw.collective("all_reduce", nbytes=buf.nbytes):
                dist.all_reduce(buf)
            opt.step()

Public names:

- :func:`step` — times one training step; a context manager and a decorator.
- :class:`collective` — times a collective inside a step; :func:`record_collective` reports one
  timed elsewhere (any thread, e.g. a communication hook's future callback).
- :func:`configure` — overrides the job, rank, agent URL or hang timeout found in the environment.
- :func:`stats` — how many steps were sent, dropped and are still buffered.

Checkpoints and preemption (:mod:`gpuwatch.client.checkpoint`): :func:`resume_path`,
:func:`checkpoint_saved`, :func:`install_preemption_handler` and :func:`preemption_point`.
:class:`AsyncCheckpointer` (:mod:`gpuwatch.client.async_checkpoint`) saves from the training loop
with only the copy to host memory on the critical path, and raises :class:`CheckpointError` for a
background save that failed.

``gpuwatch.client.torch.instrument()`` times ``torch.distributed`` collectives and DDP's gradient
all-reduce without changes to the model code.

Guarantees, because this runs inside someone else's training loop: importing needs neither torch nor
a running agent; nothing here raises into the training code (an exception inside a step propagates
unchanged, and the step is still recorded); a step costs a few microseconds and never waits on the
network — a background thread ships the steps every 0.5 s, and when the agent is away it counts what
it cannot deliver instead of growing.

A step's communication time is the sum of the collectives recorded, by any thread, between its start
and its end; its *exposed* communication is the time it waited for them (a :class:`collective`
block's whole time; see :mod:`gpuwatch.client.timing` for what the torch integration measures).
Steps do not nest.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from time import perf_counter
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from gpuwatch.client import checkpoint as _checkpoint_module
from gpuwatch.client.checkpoint import (
    checkpoint_saved,
    install_preemption_handler,
    preemption_point,
    preemption_requested,
    resume_path,
)
from gpuwatch.client.reporter import Reporter
from gpuwatch.client.timing import HOST, Collective

if TYPE_CHECKING:
    from gpuwatch.client.async_checkpoint import AsyncCheckpointer, CheckpointError

__all__ = [
    "AsyncCheckpointer",
    "CheckpointError",
    "checkpoint_saved",
    "collective",
    "configure",
    "install_preemption_handler",
    "preemption_point",
    "preemption_requested",
    "record_collective",
    "resume_path",
    "stats",
    "step",
]

F = TypeVar("F", bound=Callable[..., Any])

# The process's one reporter; module-level so the hot path is one global lookup (tests swap it).
_reporter = Reporter()
_checkpoint_module.default_reporter = lambda: _reporter


class _Step:
    """One training step's timer; see :func:`step`."""

    __slots__ = ("_t0", "n", "samples", "tokens")

    def __init__(self, tokens: Any = None, samples: Any = None, n: int | None = None) -> None:
        self.tokens = tokens
        self.samples = samples
        self.n = n

    def __enter__(self) -> _Step:
        _reporter.begin_step()
        self._t0 = perf_counter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        duration = perf_counter() - self._t0
        _reporter.end_step(self.n, duration, self.tokens, self.samples)

    def __call__(self, fn: F) -> F:
        tokens, samples, first = self.tokens, self.samples, [self.n]

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            n, first[0] = first[0], None  # ``n`` numbers the first call; later calls count on from it
            with _Step(tokens, samples, n):
                return fn(*args, **kwargs)

        return timed  # type: ignore[return-value]


def step(tokens: Any = None, samples: Any = None, n: int | None = None) -> _Step:
    """Time one training step: ``with step(tokens=...):`` or ``@step(...)`` on the step function.

    ``tokens`` / ``samples`` are this step's counts (for throughput); they may also be set on the
    object ``with`` returns once known (``with step() as s: …; s.tokens = k``). ``n`` is the step's
    number; left out, steps count on from the last one (0 first). A bare ``@step`` works too.
    """
    if callable(tokens):  # bare decorator: @step
        return _Step()(tokens)  # type: ignore[return-value]
    return _Step(tokens, samples, n)


class collective:
    """Time a collective: ``with collective("all_reduce", nbytes=t.nbytes): dist.all_reduce(t)``.

    The time counts towards the step it runs in, as time the step waited (exposed); an exception
    still records it and propagates.
    """

    __slots__ = ("_timed", "nbytes", "op")

    def __init__(self, op: str, nbytes: int = 0) -> None:
        self.op = op
        self.nbytes = nbytes

    def __enter__(self) -> collective:
        self._timed = Collective(self.op, self.nbytes, None, HOST)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._timed.nbytes = self.nbytes
        self._timed.finish()
        _reporter.record(self._timed)


def record_collective(op: str, seconds: float, nbytes: int = 0) -> None:
    """Report a collective timed elsewhere; callable from any thread (e.g. a future's callback)."""
    _reporter.record_collective(op, seconds, nbytes)


def configure(
    job: str | None = None,
    rank: int | None = None,
    agent_url: str | None = None,
    hang_timeout_s: float | None = None,
) -> None:
    """Override what the environment says (best called before the first step).

    Without it, identity comes from GPUWATCH_JOB / Slurm / Kubernetes / torchrun variables (see
    :mod:`gpuwatch.client.identity`), else job ``local-<hostname>-<pid>`` and rank 0; the agent is
    GPUWATCH_AGENT_URL or http://127.0.0.1:8601. Invalid values raise ValueError here, at setup.
    """
    _reporter.configure(job=job, rank=rank, agent_url=agent_url, hang_timeout_s=hang_timeout_s)


def __getattr__(name: str) -> Any:
    """`AsyncCheckpointer` and `CheckpointError`, imported on first use: their module (and the checkpoint
    validation it needs) is a third of the import time of a client that may never checkpoint."""
    if name in ("AsyncCheckpointer", "CheckpointError"):
        from gpuwatch.client import async_checkpoint

        return getattr(async_checkpoint, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def stats() -> dict[str, int]:
    """Steps ``sent`` to the agent, ``dropped`` (agent away, buffer full, invalid), still ``buffered``."""
    return _reporter.stats()
