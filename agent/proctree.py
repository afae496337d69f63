"""A job's process tree, from /proc: launchers such as torchrun start each worker in a session of its
own, so signalling the job's process group does not reach them, and a worker whose launcher died
lives on under init. The supervisor keeps a record of every process it has seen under the job (with
its start time, so a reused pid is never signalled) and signals them all."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

PROC = Path("/proc")


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of ``pid``, or None when it is gone."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses
    return int(fields[1]), int(fields[19])


def descendants(root: int) -> dict[int, int]:
    """Every process under ``root`` now: pid → start time."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
            children.setdefault(st[0], []).append(int(entry.name))
            starts[int(entry.name)] = st[1]
    found: dict[int, int] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in found and pid in starts:
            found[pid] = starts[pid]
            todo.extend(children.get(pid, []))
    return found


def signal_all(processes: dict[int, int], sig: signal.Signals) -> int:
    """Signal the recorded processes that are still the same processes; how many were signalled."""
    sent = 0
    for pid, start in processes.items():
        st = _stat(pid)
        if st is not None and st[1] == start:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
                sent += 1
    return sent
