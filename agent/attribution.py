"""Which job and rank each process on this node belongs to, and so which job each GPU sample is for.

Processes are known two ways: the training client registers its own (with rank and GPU), or the
agent reads the environment of a process it sees on a GPU (/proc/<pid>/environ: SLURM_JOB_ID,
RANK, the pod name …) with the same `identity_from_env` the client uses, so both agree on names.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from gpuwatch.client.identity import identity_from_env
from gpuwatch.protocol import GpuSample, JobProcess

log = logging.getLogger("gpuwatch.agent.attribution")


def read_environ(proc_root: Path, pid: int) -> dict[str, str] | None:
    """A process's environment at exec time; None if it is gone or not ours to read."""
    try:
        raw = (proc_root / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


class JobDirectory:
    def __init__(self, hostname: str, proc_root: Path = Path("/proc")) -> None:
        self._hostname = hostname
        self._proc_root = proc_root
        self._lock = threading.Lock()
        self._known: dict[int, JobProcess | None] = {}  # pid -> its job (None: looked, none found)
        self._new: list[JobProcess] = []

    def register(self, proc: JobProcess) -> bool:
        """Record a process the client announced; True if it is new or changed (to be shipped)."""
        with self._lock:
            if self._known.get(proc.pid) == proc:
                return False
            self._known[proc.pid] = proc
            self._new.append(proc)
            return True

    def lookup(self, pid: int) -> JobProcess | None:
        with self._lock:
            if pid in self._known:
                return self._known[pid]
        env = read_environ(self._proc_root, pid)
        found = identity_from_env(env, pid, self._hostname) if env is not None else None
        with self._lock:
            self._known.setdefault(pid, found)
            if found is not None and self._known[pid] is found:
                self._new.append(found)
                log.info("discovered job %s rank %s from the environment of pid %d", found.job, found.rank, pid)
            return self._known[pid]

    def attribute(self, samples: list[GpuSample], period_s: float) -> list[GpuSample]:
        """Stamp each sample with the job and rank of the first known process on its GPU, and the
        time it stands for. A GPU with no process of a known job gets no job: idle capacity."""
        by_gpu = self._declared_gpus()
        out = []
        for s in samples:
            owner = None
            for p in s.processes or ():
                owner = self.lookup(p.pid)
                if owner is not None:
                    break
            if owner is None and s.processes is None:  # the collector cannot list processes
                owner = by_gpu.get(s.gpu)
            update: dict[str, object] = {"period_s": period_s}
            if owner is not None:
                update |= {"job": owner.job, "rank": owner.rank}
            out.append(s.model_copy(update=update))
        return out

    def prune(self, on_gpus: set[int]) -> None:
        """Forget processes that have exited (their PIDs may be reused by anything). A PID a GPU
        still reports is kept: the driver knows better than /proc in another PID namespace."""
        with self._lock:
            gone = [p for p in self._known if p not in on_gpus and not (self._proc_root / str(p)).exists()]
            for pid in gone:
                del self._known[pid]

    def processes_of(self, job: str) -> list[JobProcess]:
        """The live processes known to belong to ``job`` (registered by its client or found by their
        environment): the only ones a stack capture for the job may look at."""
        with self._lock:
            known = [p for p in self._known.values() if p is not None and p.job == job]
        return [p for p in known if (self._proc_root / str(p.pid)).exists()]

    def take_new(self) -> list[JobProcess]:
        with self._lock:
            new, self._new = self._new, []
            return new

    def _declared_gpus(self) -> dict[int, JobProcess]:
        with self._lock:
            return {p.gpu: p for p in self._known.values() if p is not None and p.gpu is not None}
