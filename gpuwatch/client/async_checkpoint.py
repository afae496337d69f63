"""Cheap, frequent, crash-safe checkpoints from inside the training loop.

    ckpt = gw.AsyncCheckpointer("/ckpt/run1", keep=3)
    for step in range(start, total):
        train_one_step()
        if step % 100 == 0:
            try:
                ckpt.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": step}, step)
            except gw.CheckpointError as e:  # an EARLIER save failed (disk full, permissions)
                log.error("%s", e)  # this call saved nothing; training goes on, the next save retries

The training loop waits only while the tensors are copied into host buffers (allocated once and
reused while shapes stay the same; pinned where CUDA exists). A background thread then writes
``step_<NNNNNN>/state.pt`` with ``torch.save``, fsyncs it and writes gpuwatch's manifest *last*
(:func:`gpuwatch.recovery.checkpoints.write_manifest`), so a save killed half-way leaves a directory
that :func:`gpuwatch.recovery.latest_valid` skips. Only then does it tell the supervisor
(:func:`gpuwatch.client.checkpoint_saved`), queue a :class:`~gpuwatch.protocol.CheckpointReport` for
the agent, and prune to the ``keep`` newest complete checkpoints.

At most one save is in flight: ``policy="wait"`` makes the next ``save`` wait for it, ``"skip"``
returns False instead (counted in ``stats()["skipped"]``). A failure in the background is never
silent: the next ``save``/``wait``/``close`` raises :class:`CheckpointError` naming the path and the
OS error, once; the failed save is reported (``ok=False``) and counted.

Emergency save on preemption, complete on disk before the process exits::

    gw.install_preemption_handler(lambda: ckpt.save_and_wait(state(), step))

(``ckpt.save(state, step) and ckpt.wait()`` does the same under ``policy="wait"``; under "skip" it may
skip, so prefer :meth:`AsyncCheckpointer.save_and_wait`.) One checkpointer per directory: with
several ranks, give each its own directory or let one rank save.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import errno as errno_mod
import logging
import os
import re
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any, Literal

from gpuwatch.client.checkpoint import checkpoint_saved, report_checkpoint
from gpuwatch.recovery.checkpoints import Checkpoint, validate, write_manifest

log = logging.getLogger("gpuwatch.client")

STATE_FILE = "state.pt"
_NAME = re.compile(r"step_(\d+)")

Policy = Literal["wait", "skip"]


class CheckpointError(RuntimeError):
    """A background save failed; ``path``, ``step`` and ``errno`` (None when not an OS error) say how."""

    def __init__(self, message: str, path: Path, step: int, errno: int | None) -> None:
        super().__init__(message)
        self.path, self.step, self.errno = path, step, errno


def _os_error(exc: BaseException) -> OSError | None:
    """The OSError behind ``exc``: torch.save wraps a failed write in a RuntimeError."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, OSError):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


def _describe(exc: BaseException, path: Path, step: int) -> CheckpointError:
    os_err = _os_error(exc)
    if os_err is not None and os_err.errno is not None:
        code = errno_mod.errorcode.get(os_err.errno, str(os_err.errno))
        what = f"{code}: {os_err.strerror or os_err}"
        if os_err.filename:
            what += f" ({os_err.filename})"
        return CheckpointError(f"checkpoint of step {step} to {path} failed: {what}", path, step, os_err.errno)
    return CheckpointError(f"checkpoint of step {step} to {path} failed: {type(exc).__name__}: {exc}", path, step, None)


class _HostCopier:
    """Copies a nested state into host memory, reusing one buffer per tensor position and shape."""

    def __init__(self) -> None:
        self._buffers: dict[tuple[Any, ...], Any] = {}
        self.nbytes = 0

    def copy(self, state: Any) -> Any:
        import torch

        self.nbytes = 0
        used: set[tuple[Any, ...]] = set()
        devices: set[Any] = set()
        out = self._copy(state, (), used, devices, torch)
        for device in devices:  # the training thread may change the tensors once we return
            torch.cuda.current_stream(device).synchronize()
        for key in [k for k in self._buffers if k not in used]:  # a changed structure frees old buffers
            del self._buffers[key]
        return out

    def _copy(self, obj: Any, key: tuple[Any, ...], used: set[tuple[Any, ...]], devices: set[Any], torch: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            return self._tensor(obj, key, used, devices, torch)
        if isinstance(obj, dict):
            items = {k: self._copy(v, (*key, k), used, devices, torch) for k, v in obj.items()}
            if type(obj) is dict:
                return items
            try:  # OrderedDict and friends keep their type (state_dict() returns an OrderedDict)
                rebuilt = type(obj)()
                rebuilt.update(items)
                return rebuilt
            except Exception:
                return items
        if isinstance(obj, list):
            return [self._copy(v, (*key, i), used, devices, torch) for i, v in enumerate(obj)]
        if isinstance(obj, tuple):
            values = [self._copy(v, (*key, i), used, devices, torch) for i, v in enumerate(obj)]
            if type(obj) is tuple:
                return tuple(values)
            return type(obj)(*values) if hasattr(obj, "_fields") else type(obj)(values)
        return copy.deepcopy(obj)  # plain values, numpy arrays, RNG state: the training loop may mutate them

    def _tensor(self, t: Any, key: tuple[Any, ...], used: set[tuple[Any, ...]], devices: set[Any], torch: Any) -> Any:
        t = t.detach()
        if t.layout != torch.strided or t.is_quantized or t.device.type not in ("cpu", "cuda"):
            self.nbytes += t.element_size() * t.numel()
            return t.to("cpu", copy=True)  # rare layouts: a fresh copy, no buffer reuse
        buf = self._buffers.get(key)
        if buf is None or buf.shape != t.shape or buf.dtype != t.dtype:
            pin = t.device.type == "cuda" or torch.cuda.is_available()
            buf = torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=pin)
            self._buffers[key] = buf
        used.add(key)
        if t.device.type == "cuda":
            buf.copy_(t, non_blocking=True)
            devices.add(t.device)
        else:
            buf.copy_(t)
        self.nbytes += buf.element_size() * buf.numel()
        return buf


class AsyncCheckpointer:
    """Saves nested state dicts to ``directory/step_<NNNNNN>/`` with the training loop blocked only
    for the copy to host memory; see the module docstring for the guarantees.

    ``reporter`` receives a CheckpointReport per save (default: the process's ``gpuwatch.client``
    reporter); ``manifest=False`` leaves out gpuwatch's manifest (then nothing marks a directory
    complete for :mod:`gpuwatch.recovery`, and pruning keeps every checkpoint).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        keep: int = 3,
        policy: Policy = "wait",
        manifest: bool = True,
        reporter: Any = None,
    ) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, not {keep}")
        if policy not in ("wait", "skip"):
            raise ValueError(f"policy must be 'wait' or 'skip', not {policy!r}")
        self.directory = Path(directory)
        self.keep, self.policy, self.manifest = keep, policy, manifest
        self._reporter = reporter
        self._copier = _HostCopier()
        self._lock = threading.Lock()  # one save() at a time (training thread vs. signal-handler save)
        self._thread: threading.Thread | None = None
        self._error: CheckpointError | None = None
        self._last_path: Path | None = None
        self._stats: dict[str, float] = {
            "saves": 0,
            "skipped": 0,
            "failed": 0,
            "blocking_s": 0.0,
            "write_s": 0.0,
            "size_bytes": 0,
        }
        atexit.register(self._close_at_exit)

    # -- training thread ------------------------------------------------------------------------

    def save(self, state_dict: Any, step: int) -> bool:
        """Copy ``state_dict`` to host memory and write it in the background; False when skipped.

        Raises :class:`CheckpointError` (and saves nothing) when the previous save failed.
        """
        return self._save(state_dict, step, self.policy)

    def save_and_wait(self, state_dict: Any, step: int) -> Path:
        """Save now whatever the policy (after the save in flight) and return once it is complete:
        the emergency save for :func:`gpuwatch.client.install_preemption_handler`."""
        self._save(state_dict, step, "wait")
        path = self.wait()
        assert path is not None
        return path

    def _save(self, state_dict: Any, step: int, policy: Policy) -> bool:
        if step < 0:
            raise ValueError(f"step must be >= 0, not {step}")
        with self._lock:
            self._raise_pending()
            if self.in_flight():
                if policy == "skip":
                    self._stats["skipped"] += 1
                    return False
                self._join()
                self._raise_pending()
            t0 = time.perf_counter()
            host = self._copier.copy(state_dict)
            blocking_s = time.perf_counter() - t0
            self._stats["blocking_s"] = blocking_s
            path = self.directory / f"step_{step:06d}"
            thread = threading.Thread(
                target=self._write, args=(host, step, path, blocking_s), name="gpuwatch-checkpoint", daemon=True
            )
            self._thread = thread
            thread.start()
            return True

    def wait(self) -> Path | None:
        """Block until the save in flight is complete; the newest checkpoint written, if any.

        Raises :class:`CheckpointError` when a background save failed (once per failure)."""
        self._join()
        self._raise_pending()
        return self._last_path

    def close(self) -> None:
        """Wait for the save in flight (also run at interpreter exit); raises like :meth:`wait`."""
        atexit.unregister(self._close_at_exit)
        self.wait()

    def in_flight(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def stats(self) -> dict[str, float]:
        """``saves`` completed, ``skipped``, ``failed``; the last save's ``blocking_s``, ``write_s``,
        ``size_bytes``."""
        return dict(self._stats)

    def __enter__(self) -> AsyncCheckpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _join(self) -> None:
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _raise_pending(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _close_at_exit(self) -> None:
        try:
            self.wait()
        except CheckpointError as e:
            print(f"gpuwatch: {e}", file=sys.stderr)

    # -- background thread ----------------------------------------------------------------------

    def _write(self, host: Any, step: int, path: Path, blocking_s: float) -> None:
        t0 = time.perf_counter()
        aside: Path | None = None
        size = 0
        try:
            import torch

            self.directory.mkdir(parents=True, exist_ok=True)
            if path.exists():  # the same step again (e.g. an emergency save): replace it
                aside = self.directory / f".{path.name}.replaced-{os.getpid()}"
                os.replace(path, aside)
            path.mkdir()
            with open(path / STATE_FILE, "wb") as f:
                torch.save(host, f)
                f.flush()
                if not self.manifest:
                    os.fsync(f.fileno())
            if self.manifest:
                write_manifest(path, step)  # fsyncs the state file first; the manifest comes last
            else:
                _fsync_dir(path)
            _fsync_dir(self.directory)
            size = sum(p.stat().st_size for p in path.iterdir() if p.is_file())
        except BaseException as exc:
            error = _describe(exc, path, step)
            with contextlib.suppress(OSError):  # free the space a half-written save holds
                shutil.rmtree(path)
            if aside is not None:
                with contextlib.suppress(OSError):
                    os.replace(aside, path)
            write_s = time.perf_counter() - t0
            self._stats["failed"] += 1
            self._stats["write_s"] = write_s
            self._error = error
            log.error("gpuwatch: %s", error)
            report_checkpoint(
                self._reporter, path, step, time.time(), False, blocking_s=blocking_s, write_s=write_s,
                error=str(error)[:2000],
            )  # fmt: skip
            return
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
        write_s = time.perf_counter() - t0
        self._last_path = path
        self._stats.update(saves=self._stats["saves"] + 1, write_s=write_s, size_bytes=size)
        checkpoint_saved(path, step, reporter=self._reporter, blocking_s=blocking_s, write_s=write_s, size_bytes=size)
        try:
            self._prune()
        except Exception:
            log.warning("gpuwatch: could not prune old checkpoints in %s", self.directory, exc_info=True)

    def _prune(self) -> None:
        """Delete checkpoints older than the ``keep`` newest complete ones (never the only one)."""
        if not self.manifest:
            return
        entries: list[tuple[int, Path]] = []
        with os.scandir(self.directory) as it:
            for entry in it:
                m = _NAME.fullmatch(entry.name)
                if m and entry.is_dir(follow_symlinks=False):
                    entries.append((int(m.group(1)), Path(entry.path)))
        entries.sort(reverse=True)
        complete = 0
        for i, (step, path) in enumerate(entries):
            if isinstance(validate(path, step), Checkpoint):
                complete += 1
                if complete == self.keep:
                    for _, old in entries[i + 1 :]:
                        doomed = old.with_name(f".{old.name}.deleting-{os.getpid()}")
                        os.replace(old, doomed)  # gone from the candidates at once, then removed
                        shutil.rmtree(doomed, ignore_errors=True)
                    return


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # some file systems cannot fsync a directory
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


__all__ = ["AsyncCheckpointer", "CheckpointError", "Policy"]
