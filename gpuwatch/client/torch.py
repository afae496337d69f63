"""Time torch.distributed collectives and DDP's gradient all-reduce without touching model code.

    import gpuwatch.client.torch
    gpuwatch.client.torch.instrument()  # before building DDP models

Only for users who have torch: ``gpuwatch.client`` itself never imports it.

What is timed, and how:

- ``all_reduce``, ``all_gather``, ``all_gather_into_tensor``, ``reduce_scatter``,
  ``reduce_scatter_tensor``, ``broadcast``, ``reduce``, ``all_to_all``, ``all_to_all_single`` and
  ``barrier`` are replaced in both ``torch.distributed`` and ``torch.distributed.distributed_c10d``.
  A blocking call is timed from call to return; with ``async_op=True``, from the call to the
  completion of the Work's future, and the returned Work is wrapped so that the time its
  ``wait()`` blocks is known. Bytes are those of the larger side, as nccl-tests counts them: the
  tensor of all_reduce / broadcast / reduce, the gathered output of all_gather, the scattered input
  of reduce_scatter and all_to_all.
- Every DDP model gets a communication hook that runs the default all-reduce (or the hook the user
  registers later, which replaces it instead of failing with "already registered") and records the
  time from the hook's call to its future's completion as ``ddp_allreduce``. That time overlaps
  the backward pass: the step waits only from the last bucket's readiness to its completion.

Names bound before ``instrument()`` (``from torch.distributed import all_reduce``) keep the
original, so call it early. A collective that runs inside another timed one (the all-reduce inside
a DDP hook, say) is not counted twice.

Clocks (:mod:`gpuwatch.client.timing`): a collective on CPU tensors (gloo) is timed with the host
clock, which is exact there. One on CUDA tensors (NCCL, or any CUDA backend) returns once its
kernels are queued, so it is timed with CUDA events (``enable_timing``) recorded on the tensor's
device's current stream: before the call (the collective's stream waits for that stream), after a
blocking call (which makes that stream wait for the collective), in the Work's future callback
(which runs on a stream synchronized with the collective) and around ``wait()``. The reporter's
thread reads them with ``Event.query()`` once done; nothing synchronizes the device.
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
from gpuwatch.client.timing import ASYNC, BLOCKING, DDP, HOST, Collective, EventSource, bus_factor

log = logging.getLogger("gpuwatch.client")

#: op -> the argument whose tensors are counted as the op's bytes (None: no data moved).
COLLECTIVES: dict[str, str | None] = {
    "all_reduce": "tensor",
    "all_gather": "tensor_list",
    "all_gather_into_tensor": "output_tensor",
    "reduce_scatter": "input_list",
    "reduce_scatter_tensor": "input",
    "broadcast": "tensor",
    "reduce": "tensor",
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


class CudaEvents:
    """Marks as CUDA events recorded on one device's current stream; read without synchronizing."""

    __slots__ = ("device",)

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def mark(self) -> torch.cuda.Event:
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self.device))
        return event

    def ready(self, mark: torch.cuda.Event) -> bool:
        return mark.query()

    def seconds(self, start: torch.cuda.Event, end: torch.cuda.Event) -> float:
        return start.elapsed_time(end) / 1e3


_cuda_sources: dict[torch.device, CudaEvents] = {}


def event_source(value: Any) -> EventSource:
    """CUDA events for a collective on CUDA tensors (whatever the backend), the host clock otherwise
    (also while a CUDA graph is being captured, where a timing event cannot be recorded)."""
    t = value[0] if isinstance(value, list | tuple) and value else value
    if isinstance(t, torch.Tensor) and t.is_cuda and not torch.cuda.is_current_stream_capturing():
        source = _cuda_sources.get(t.device)
        if source is None:
            source = _cuda_sources[t.device] = CudaEvents(t.device)
        return source
    return HOST


def _group_size(group: Any) -> int | None:
    try:
        return dist.get_world_size(group) if group is not None else dist.get_world_size()
    except Exception:
        return None


def _factor(op: str, group: Any) -> float | None:
    n = _group_size(group)
    return bus_factor(op, n) if n else None


class _TimedWork:
    """A Work whose ``wait()`` marks when the caller began and stopped waiting (the exposed part of
    an async collective), and whose ``get_future()`` completes after the collective's end is marked;
    everything else goes to the real Work."""

    __slots__ = ("_collective", "_future", "_work")

    def __init__(self, work: Any, collective: Collective, future: Any) -> None:
        self._work, self._collective, self._future = work, collective, future

    def get_future(self) -> Any:
        # The chained future: whoever waits on it waits for the mark too, so the time recorded ends
        # within what the caller saw.
        return self._future if self._future is not None else self._work.get_future()

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        c = self._collective
        first = c.wait_from is None
        if first:
            with contextlib.suppress(Exception):  # timing must never break the wait
                c.begin_wait()
        try:
            return self._work.wait(*args, **kwargs)
        finally:
            with contextlib.suppress(Exception):
                if c.end is None:  # no future callback (a backend without futures)
                    c.finish()
                if first and c.wait_from is not None:
                    c.end_wait()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)

    def __repr__(self) -> str:
        return f"<gpuwatch timed {self._collective.op} {self._work!r}>"


def _on_completion(work: Any, collective: Collective) -> Any:
    """Mark the collective's end when its Work's future completes (on CUDA: a callback on a stream
    that waits for the collective), and return the chained future (None for a backend without
    futures: its end is marked at ``wait()`` instead)."""

    def finish(fut: Any) -> Any:
        with contextlib.suppress(Exception):  # a failed mark must not fail the caller's future
            collective.finish()
        return fut.value()

    try:
        return work.get_future().then(finish)
    except Exception:
        log.debug("gpuwatch: no future for %s; timed to wait()", collective.op, exc_info=True)
        return None


def _position(params: list[str], name: str | None) -> int | None:
    return params.index(name) if name is not None and name in params else None


def _wrap(op: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    params = list(inspect.signature(fn).parameters)
    data_name = COLLECTIVES[op]
    data_pos = _position(params, data_name)
    async_pos = _position(params, "async_op")
    group_pos = _position(params, "group")

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
        try:
            data = arg(args, kwargs, data_name, data_pos)
            is_async = bool(arg(args, kwargs, "async_op", async_pos))
            c = Collective(op, 0, None, event_source(data), ASYNC if is_async else BLOCKING)
        except Exception:  # pragma: no cover - timing must never break the collective
            log.debug("gpuwatch: could not time %s", op, exc_info=True)
            return fn(*args, **kwargs)
        _local.busy = True
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            _local.busy = False
            # A collective that failed (a timeout, a peer gone) still spent that time communicating.
            with contextlib.suppress(Exception):
                c.finish()
                _client._reporter.record(c)
            raise
        _local.busy = False
        is_async = is_async and result is not None
        try:
            if is_async:
                c.returned = perf_counter()
            else:
                c.finish()
            c.nbytes = _nbytes(data)  # after the call: only the call itself is timed
            c.factor = _factor(op, arg(args, kwargs, "group", group_pos))
            _client._reporter.record(c)
            if is_async:
                return _TimedWork(result, c, _on_completion(result, c))
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
    """What the DDP reducer holds as our hook's state: the hook we time, its own state, and the
    size of the model's process group (for the bus bandwidth)."""

    __slots__ = ("hook", "size", "state")

    def __init__(self, state: Any, hook: Callable[..., Any], size: int | None) -> None:
        self.state, self.hook, self.size = state, hook, size


# ``bucket`` is left unannotated on purpose: DDP rejects any annotation but dist.GradBucket, and
# with postponed annotations it would see a string.
def _timed_comm_hook(state: _HookState, bucket):
    """DDP comm hook: run the inner hook and time it from its call (the bucket's gradients are
    ready) to its future's completion."""
    try:
        buffer = bucket.buffer()
        factor = bus_factor(DDP_OP, state.size) if state.size else None
        c: Collective | None = Collective(DDP_OP, _nbytes(buffer), factor, event_source(buffer), DDP)
    except Exception:
        c = None
    busy = getattr(_local, "busy", False)
    _local.busy = True  # the inner hook's own all_reduce is this same transfer: not counted twice
    try:
        fut = state.hook(state.state, bucket)
    finally:
        _local.busy = busy
    if c is None or not hasattr(fut, "then"):
        return fut
    _client._reporter.record(c)

    def done(f: torch.futures.Future[Any]) -> Any:
        with contextlib.suppress(Exception):  # a failed mark must not fail the gradient's future
            c.finish()
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
            timed = _HookState(state, hook, _group_size(getattr(self, "process_group", None)))
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
