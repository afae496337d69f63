"""Capturing the stacks of a job's rank processes on this node, when the server asks (hang localisation).

The server says in a batch's acknowledgement (``stack_tasks``) that it wants captures of this node; the
`StackResponder` thread then fetches them, and for each rank of the named job that this agent knows runs
here (the training client registered it, or its environment said so: `agent.attribution`) it runs
``py-spy dump --pid PID --json --native`` (without ``--native`` where py-spy cannot unwind native frames),
reads the rank's NCCL flight recorder dump when the job enabled the recorder, and posts the result.
py-spy missing, refused or slow is an error recorded for that rank, never a crash of the agent.

The flight recorder: PyTorch keeps it when TORCH_FR_BUFFER_SIZE (older releases: TORCH_NCCL_TRACE_BUFFER_SIZE)
is above 0, and writes rank R's dump to ``<TORCH_FR_DUMP_TEMP_FILE>R`` (older: TORCH_NCCL_DEBUG_INFO_TEMP_FILE;
default /tmp/nccl_trace_rank_) on a watchdog timeout, or when asked through the named pipe it opens where
the job sets TORCH_FR_DEBUG_INFO_PIPE_FILE: the agent asks there first. The dump is a pickle of plain
containers (or JSON): the agent, root, unpickles it with no class allowed, and reads only files (and writes
only pipes) owned by the rank's own user.
"""

from __future__ import annotations

import io
import json
import logging
import os
import pickle
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent.api_client import Unanswered
from agent.attribution import read_environ
from gpuwatch.protocol import FlightRecord, JobProcess, RankStack, StackAnswer, StackFrame, StackTask, ThreadStack

log = logging.getLogger("gpuwatch.agent.stacks")

#: The longest one py-spy run may take (it pauses the process while it reads it).
PY_SPY_TIMEOUT_S = 10.0
#: Largest flight recorder dump read (its ring buffer holds TORCH_FR_BUFFER_SIZE entries, 2000 by default).
MAX_DUMP_BYTES = 64 * 2**20
#: Flight recorder entries kept in the answer, the latest.
FLIGHT_ENTRIES = 16
BUFFER_VARS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
DUMP_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
DEFAULT_DUMP_PREFIX = "/tmp/nccl_trace_rank_"
PIPE_VARS = ("TORCH_FR_DEBUG_INFO_PIPE_FILE", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE")
#: How long a capture waits for a dump it asked for through the pipe.
DUMP_WAIT_S = 3.0


def find_py_spy(configured: Path | None = None) -> str | None:
    """The py-spy binary: the configured one, else the one installed beside the agent's Python (the
    pinned dependency), else PATH's."""
    if configured is not None:
        return str(configured)
    beside = Path(sys.executable).parent / "py-spy"
    if beside.exists():
        return str(beside)
    return shutil.which("py-spy")


def capture(pid: int, rank: int, py_spy: str | None, *, timeout_s: float = PY_SPY_TIMEOUT_S) -> RankStack:
    """One rank's stacks by py-spy, native frames included where it can; the error instead when it fails."""
    if py_spy is None:
        return RankStack(rank=rank, pid=pid, error="py-spy is not installed on this node (pip install py-spy)")
    error = ""
    # Native frames where py-spy can unwind them, else without; twice, for py-spy's occasional "Failed to
    # find python version" on a process it reads fine a moment later.
    for native in (True, False, True, False):
        args = [py_spy, "dump", "--pid", str(pid), "--json", *(["--native"] if native else [])]
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s, check=False)
        except FileNotFoundError:
            return RankStack(rank=rank, pid=pid, error=f"py-spy not found at {py_spy}")
        except subprocess.TimeoutExpired:
            return RankStack(rank=rank, pid=pid, error=f"py-spy took longer than {timeout_s:g} s")
        except OSError as exc:
            return RankStack(rank=rank, pid=pid, error=f"py-spy could not run: {exc}")
        if done.returncode == 0:
            try:
                return RankStack(rank=rank, pid=pid, threads=parse_dump(done.stdout, pid), native=native)
            except ValueError as exc:
                return RankStack(rank=rank, pid=pid, error=f"py-spy's output was not understood: {exc}")
        said = (done.stderr or done.stdout).strip().splitlines()
        error = said[0] if said else f"exit status {done.returncode}"
        if not Path(f"/proc/{pid}").exists():
            break  # the process is gone
    return RankStack(rank=rank, pid=pid, error=f"py-spy dump failed: {error}"[:2000])


def parse_dump(text: str, pid: int | None = None) -> list[ThreadStack]:
    """py-spy's ``dump --json`` output as threads (frames innermost first); ValueError when it is not that."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(raw, list):
        raise ValueError("expected a list of threads")
    threads = []
    for t in raw[:1024]:
        frames = [
            StackFrame(
                function=str(f.get("name") or "?")[:512],
                file=str(f.get("short_filename") or f.get("filename") or "")[:1024],
                path=str(f.get("filename") or "")[:4096],
                line=max(0, int(f.get("line") or 0)),
                native=f.get("module") is not None,
            )
            for f in (t.get("frames") or [])[:1024]
        ]
        threads.append(
            ThreadStack(
                name=str(t.get("thread_name") or "")[:255],
                active=bool(t.get("active")),
                main=pid is not None and t.get("os_thread_id") == pid,
                frames=frames,
            )
        )
    return threads


def _recorder_on(env: dict[str, str]) -> bool:
    size = next((env[v] for v in BUFFER_VARS if env.get(v)), "0")
    try:
        return int(size) > 0
    except ValueError:
        return False


def flight_recorder(pid: int, rank: int, proc_root: Path = Path("/proc")) -> FlightRecord | None:
    """The rank's flight recorder dump, summarised; None when the job did not enable the recorder."""
    env = read_environ(proc_root, pid) or {}
    if not _recorder_on(env):
        return None
    prefix = next((env[v] for v in DUMP_VARS if env.get(v)), DEFAULT_DUMP_PREFIX)
    path = f"{prefix}{rank}"
    try:
        owner = (proc_root / str(pid)).stat().st_uid
        st = os.stat(path)
        if st.st_uid != owner:
            return FlightRecord(path=path, error="the dump is not owned by the rank's user: not read")
        if st.st_size > MAX_DUMP_BYTES:
            return FlightRecord(path=path, error=f"the dump is larger than {MAX_DUMP_BYTES} bytes: not read")
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return FlightRecord(path=path, error="no dump yet (PyTorch writes it on a watchdog timeout)")
    except OSError as exc:
        return FlightRecord(path=path, error=f"unreadable: {exc.strerror or exc}")
    try:
        return summarise(path, load_dump(raw))
    except (ValueError, TypeError, KeyError, pickle.UnpicklingError, EOFError) as exc:
        return FlightRecord(path=path, error=f"not a flight recorder dump: {type(exc).__name__}")


class _PlainUnpickler(pickle.Unpickler):
    """Builtin containers and scalars only: a pickle naming any class or function is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a flight recorder dump")


def load_dump(raw: bytes) -> dict[str, Any]:
    """A dump's content: JSON, or a pickle of plain containers."""
    data = json.loads(raw) if raw.lstrip()[:1] == b"{" else _PlainUnpickler(io.BytesIO(raw)).load()
    if not isinstance(data, dict):
        raise ValueError("not a mapping")
    return data


def summarise(path: str, dump: dict[str, Any]) -> FlightRecord:
    """The default process group's last collectives entered, started and completed, and the latest entries."""
    status = (dump.get("pg_status") or {}).get("0") or {}
    entries = [e for e in dump.get("entries") or [] if isinstance(e, dict)]
    default = [e for e in entries if str(e.get("pg_id", "0")) == "0"] or entries
    latest = [
        {
            "seq": _seq(e.get("collective_seq_id")),
            "op": str(e.get("profiling_name") or "")[:255],
            "state": e.get("state"),
        }
        for e in default[-FLIGHT_ENTRIES:]
    ]
    return FlightRecord(
        path=path,
        entered=_seq(status.get("last_enqueued_collective")),
        started=_seq(status.get("last_started_collective")),
        completed=_seq(status.get("last_completed_collective")),
        last_op=latest[-1]["op"] if latest else None,
        entries=latest,
    )


def _seq(value: object) -> int | None:
    """A sequence number as the dump writes it (an int, or a string in JSON dumps); -1 is none."""
    try:
        n = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None
    return n if n >= 0 else None


def answer_task(
    task: StackTask,
    processes: Sequence[JobProcess],
    py_spy: str | None,
    *,
    dump_wait_s: float = DUMP_WAIT_S,
    proc_root: Path = Path("/proc"),
) -> StackAnswer:
    """The captures of the task's ranks among ``processes`` (this node's known processes of its job). A
    rank whose job opened PyTorch's dump pipe is asked for a fresh flight recorder dump first; its py-spy
    capture runs meanwhile, and the dump is waited for up to ``dump_wait_s``."""
    wanted = set(task.ranks)
    mine = [
        p
        for p in sorted(processes, key=lambda p: (p.rank or 0, p.pid))
        if p.job == task.job and p.rank is not None and (not wanted or p.rank in wanted)
    ]
    asked = {p.pid: t for p in mine if (t := request_dump(p.pid, p.rank or 0, proc_root)) is not None}
    stacks = [capture(p.pid, p.rank or 0, py_spy) for p in mine]
    deadline = time.monotonic() + dump_wait_s
    ranks = []
    for p, stack in zip(mine, stacks, strict=True):
        record = flight_recorder(p.pid, p.rank or 0, proc_root)
        while p.pid in asked and time.monotonic() < deadline and not _fresh(record, asked[p.pid]):
            time.sleep(0.1)  # PyTorch's watchdog reads the pipe on its own schedule
            record = flight_recorder(p.pid, p.rank or 0, proc_root)
        ranks.append(stack.model_copy(update={"flight_recorder": record}))
    return StackAnswer(ranks=ranks)


def request_dump(pid: int, rank: int, proc_root: Path = Path("/proc")) -> float | None:
    """Ask PyTorch for a flight recorder dump now, through the named pipe it opens when the job sets
    TORCH_FR_DEBUG_INFO_PIPE_FILE (older: TORCH_NCCL_DEBUG_INFO_PIPE_FILE): ``<stem><rank>.pipe``, any byte
    written triggers a dump. Only a pipe owned by the rank's user. The time asked, or None (no pipe)."""
    env = read_environ(proc_root, pid) or {}
    stem = next((env[v] for v in PIPE_VARS if env.get(v)), None)
    if stem is None or not _recorder_on(env):
        return None
    path = f"{stem}{rank}.pipe"
    try:
        owner = (proc_root / str(pid)).stat().st_uid
        st = os.stat(path)
        if not stat.S_ISFIFO(st.st_mode) or st.st_uid != owner:
            return None
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO when nobody reads it: no dump to ask for
    except OSError:
        return None
    try:
        os.write(fd, b"1")
    except OSError:
        return None
    finally:
        os.close(fd)
    return time.time()


def _fresh(record: FlightRecord | None, since: float) -> bool:
    """Whether the dump read was written after ``since``."""
    if record is None or record.error is not None:
        return False
    try:
        return os.stat(record.path).st_mtime >= since - 1.0  # mtime's granularity on some filesystems
    except OSError:
        return False


class StackResponder:
    """The agent's thread that answers the server's stack captures; `wake` it when an acknowledgement
    says some wait. ``fetch`` and ``send`` are the server client's calls; ``processes(job)`` the live
    processes this agent knows of a job."""

    def __init__(
        self,
        fetch: Callable[[], list[StackTask] | None],
        send: Callable[[int, StackAnswer], Unanswered | None],
        processes: Callable[[str], list[JobProcess]],
        py_spy: str | None,
    ) -> None:
        self._fetch, self._send, self._processes, self._py_spy = fetch, send, processes, py_spy
        self._wake = threading.Event()
        self._answered: set[int] = set()

    def wake(self) -> None:
        self._wake.set()

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            if not self._wake.wait(0.5):
                continue
            self._wake.clear()
            try:
                self.answer_pending()
            except Exception:  # never the end of the thread: the next acknowledgement wakes it again
                log.exception("answering the server's stack captures failed")

    def answer_pending(self) -> list[int]:
        """Answer every capture pending for this node once; the dump ids answered."""
        tasks = self._fetch() or []
        done = []
        for task in tasks:
            if task.dump_id in self._answered:
                continue
            body = answer_task(task, self._processes(task.job), self._py_spy)
            failed = self._send(task.dump_id, body)
            if failed is None:
                self._answered.add(task.dump_id)
                done.append(task.dump_id)
                log.info("stack capture %d for job %s: %d rank(s) sent", task.dump_id, task.job, len(body.ranks))
            elif failed.permanent:  # sending it again would be refused again
                self._answered.add(task.dump_id)
                log.warning("stack capture %d for job %s refused: %s", task.dump_id, task.job, failed.detail)
        return done
