"""Time torch.distributed collectives and DDP's gradient all-reduce without touching model code.

    import gpuwatch.client.torch
    gpuwatch.client.torch.instrument()  # before building DDP models

Only for users who have torch: ``gpuwatch.client`` itself never imports it.

What is timed, and how:

- ``all_reduce``, ``all_gather``, ``all_gather_into_tensor``, ``reduce_scatter``,
  ``reduce_scatter_tensor``, ``broadcast``, ``all_to_all``, ``all_to_all_single`` and ``barrier`` are
  replaced in both ``torch.distributed`` and ``torch.distributed.distributed_c10d``. A blocking call
  is timed from call to return; with ``async_op=True`` the returned Work is wrapped so that
  ``wait()`` records the time from the call to the end of the wait (or, for code that uses
  ``get_future()``, to the future's completion). Bytes are those of the larger
  side, as nccl-tests counts them: the tensor of all_reduce / broadcast, the gathered output of
  all_gather, the scattered input of reduce_scatter and all_to_all.
- Every DDP model gets a communication hook that runs the default all-reduce (or the hook the user
  registers later, which replaces it instead of failing with "already registered") and records the
  time from the hook's call to its future's completion as ``ddp_allreduce``. That time overlaps
  the backward pass: it is time spent communicating, not time the step waited for it.

Names bound before ``instrument()`` (``from torch.distributed import all_reduce``) keep the
original, so call it early. A collective that runs inside another timed one (the all-reduce inside
a DDP hook, say) is not counted twice.

Host clocks measure what the host sees: exact for gloo (CPU), but NCCL calls return once the
kernels are queued, so on GPUs these times are launch and wait times, not transfer times.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import threading
from collections.abc import Callable
from time import perf_counter
from typing import Any

import torch
import torch.distributed as dist

from gpuwatch import client as _client

log = logging.getLogger("gpuwatch.client")

#: op -> the argument whose tensors are counted as the op's bytes (None: no data moved).
COLLECTIVES: dict[str, str | None] = {
    "all_reduce": "tensor",
    "all_gather": "tensor_list",
    "all_gather_into_tensor": "output_tensor",
    "reduce_scatter": "input_list",
    "reduce_scatter_tensor": "input",
    "broadcast": "tensor",
    "all_to_all": "input_tensor_list",
    "all_to_all_single": "input",
    "barrier": None,
}
DDP_OP = "ddp_allreduce"

_WRAPPED = "__gpuwatch_wrapped__"
_lock = threading.Lock()
_local = threading.local()  # .busy: inside a timed collective or DDP hook on this thread


def _nbytes(value: Any) -> int:
    """Bytes of a tensor or of a list of tensors; 0 for anything else (never raises)."""
    try:
        if isinstance(value, torch.Tensor):
            return value.numel() * value.element_size()
        if isinstance(value, list | tuple):
            return sum(t.numel() * t.element_size() for t in value if isinstance(t, torch.Tensor))
    except Exception:  # pragma: no cover - exotic tensor subclasses
        pass
    return 0


class _TimedWork:
    """A Work that records its collective when ``wait()`` returns, or when the future from
    ``get_future()`` completes, whichever comes first; everything else goes to the real Work."""

    __slots__ = ("_nbytes", "_op", "_recorded", "_t0", "_work")

    def __init__(self, work: Any, op: str, t0: float, nbytes: int) -> None:
        self._work, self._op, self._t0, self._nbytes, self._recorded = work, op, t0, nbytes, False

    def _record(self) -> None:
        if not self._recorded:
            self._recorded = True
            _client.record_collective(self._op, perf_counter() - self._t0, self._nbytes)

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self._work.wait(*args, **kwargs)
        finally:
            self._record()

    def get_future(self) -> Any:
        # A chained future, not a done-callback: whoever waits on it then waits for the record too,
        # so the collective lands in the step it ran in.
        def recorded(fut: Any) -> Any:
            self._record()
            return fut.value()

        return self._work.get_future().then(recorded)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)

    def __repr__(self) -> str:
        return f"<gpuwatch timed {self._op} {self._work!r}>"


def _position(params: list[str], name: str | None) -> int | None:
    return params.index(name) if name is not None and name in params else None


def _wrap(op: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    params = list(inspect.signature(fn).parameters)
    data_name = COLLECTIVES[op]
    data_pos = _position(params, data_name)
    async_pos = _position(params, "async_op")

    def arg(args: tuple[Any, ...], kwargs: dict[str, Any], name: str | None, pos: int | None) -> Any:
        if name is None:
            return None
        if name in kwargs:
            return kwargs[name]
        return args[pos] if pos is not None and pos < len(args) else None

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        if getattr(_local, "busy", False):
            return fn(*args, **kwargs)
        t0 = perf_counter()
        _local.busy = True
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            _local.busy = False
            # A collective that failed (a timeout, a peer gone) still spent that time communicating.
            _client.record_collective(op, perf_counter() - t0, 0)
            raise
        _local.busy = False
        try:
            nbytes = _nbytes(arg(args, kwargs, data_name, data_pos))
            if result is not None and arg(args, kwargs, "async_op", async_pos):
                return _TimedWork(result, op, t0, nbytes)
            _client.record_collective(op, perf_counter() - t0, nbytes)
        except Exception:  # pragma: no cover - timing must never break the collective
            log.debug("gpuwatch: could not time %s", op, exc_info=True)
        return result

    setattr(timed, _WRAPPED, fn)
    return timed


def _patch_collectives() -> None:
    for op in COLLECTIVES:
        wrappers: dict[int, Callable[..., Any]] = {}
        for namespace in (dist.distributed_c10d, dist):
            current = getattr(namespace, op, None)
            if current is None or hasattr(current, _WRAPPED):
                continue
            # torch.distributed re-exports distributed_c10d's functions: one wrapper serves both names.
            if id(current) not in wrappers:
                wrappers[id(current)] = _wrap(op, current)
            setattr(namespace, op, wrappers[id(current)])


class _HookState:
    """What the DDP reducer holds as our hook's state: the hook we time, and its own state."""

    __slots__ = ("hook", "state")

    def __init__(self, state: Any, hook: Callable[..., Any]) -> None:
        self.state, self.hook = state, hook


# ``bucket`` is left unannotated on purpose: DDP rejects any annotation but dist.GradBucket, and
# with postponed annotations it would see a string.
def _timed_comm_hook(state: _HookState, bucket):
    """DDP comm hook: run the inner hook and record from its call to its future's completion."""
    t0 = perf_counter()
    try:
        nbytes = _nbytes(bucket.buffer())
    except Exception:
        nbytes = 0
    busy = getattr(_local, "busy", False)
    _local.busy = True  # the inner hook's own all_reduce is this same transfer: not counted twice
    try:
        fut = state.hook(state.state, bucket)
    finally:
        _local.busy = busy
    if not hasattr(fut, "then"):
        return fut

    def done(f: torch.futures.Future[Any]) -> Any:
        _client.record_collective(DDP_OP, perf_counter() - t0, nbytes)
        return f.value()

    return fut.then(done)


def _patch_ddp() -> None:
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel as DDP

    if hasattr(DDP.__init__, _WRAPPED):
        return
    original_init = DDP.__init__
    original_register = DDP.register_comm_hook

    @functools.wraps(original_register)
    def register_comm_hook(self: DDP, state: object, hook: Callable[..., Any]) -> None:
        timed: _HookState | None = getattr(self, "_gpuwatch_hook", None)
        self._check_comm_hook(hook)  # the user's hook still gets DDP's own checks
        if timed is None:
            timed = _HookState(state, hook)
            original_register(self, timed, _timed_comm_hook)
            self._gpuwatch_hook = timed
            return
        timed.state, timed.hook = state, hook
        with contextlib.suppress(Exception):  # DDP's usage logging only
            self.logger._set_comm_hook_name(hook.__qualname__)

    @functools.wraps(original_init)
    def __init__(self: DDP, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        if getattr(self, "_gpuwatch_hook", None) is None:
            try:
                register_comm_hook(self, getattr(self, "process_group", None), allreduce_hook)
            except Exception:
                log.warning("gpuwatch: DDP gradient all-reduce is not timed for this model", exc_info=True)

    setattr(register_comm_hook, _WRAPPED, original_register)
    setattr(__init__, _WRAPPED, original_init)
    DDP.register_comm_hook = register_comm_hook  # type: ignore[method-assign]
    DDP.__init__ = __init__  # type: ignore[method-assign]


def instrument(ddp: bool = True) -> None:
    """Start timing torch.distributed collectives (and, with ``ddp``, DDP gradient all-reduce).

    Idempotent; safe to call before ``init_process_group``. Failures are logged, never raised:
    a training job must not die of its monitoring.
    """
    with _lock:
        if not dist.is_available():
            log.warning("gpuwatch: torch.distributed is not available; nothing to instrument")
            return
        try:
            _patch_collectives()
        except Exception:
            log.warning("gpuwatch: could not instrument torch.distributed collectives", exc_info=True)
        if ddp:
            try:
                _patch_ddp()
            except Exception:
                log.warning("gpuwatch: could not instrument DistributedDataParallel", exc_info=True)
