"""agent/stacks.py: real py-spy against a real process, flight recorder dumps read safely, and every
failure an error recorded for its rank."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.stacks import answer_task, capture, find_py_spy, flight_recorder, load_dump, parse_dump
from gpuwatch.protocol import JobProcess, StackTask
from tests.helpers import wait_until

SLEEPER = """
import sys, time
def load_batch():
    print("ready", flush=True)
    time.sleep(600)
def main():
    load_batch()
main()
"""


def _spawn(tmp: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    script = tmp / "loader.py"
    script.write_text(SLEEPER)
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    proc = _spawn(tmp_path)
    yield proc
    proc.kill()
    proc.wait()


needs_py_spy = pytest.mark.skipif(find_py_spy() is None, reason="py-spy is an agent dependency: pip install -e .")


@needs_py_spy
def test_py_spy_captures_the_sleeping_function_with_its_native_frames(sleeper: subprocess.Popen[str]) -> None:
    stack = capture(sleeper.pid, 3, find_py_spy())
    assert stack.error is None, stack.error
    (main,) = [t for t in stack.threads if t.main]
    python = [f for f in main.frames if not f.native]
    assert [(f.function, f.file, f.line) for f in python] == [
        ("load_batch", "loader.py", 5),
        ("main", "loader.py", 7),
        ("<module>", "loader.py", 8),
    ]
    if stack.native:  # where py-spy unwinds native code, time.sleep's C frames come first
        assert main.frames[0].native


def test_a_missing_or_failing_py_spy_is_an_error_for_the_rank_not_a_crash(tmp_path: Path) -> None:
    assert capture(os.getpid(), 0, None).error == "py-spy is not installed on this node (pip install py-spy)"
    assert capture(os.getpid(), 0, str(tmp_path / "nope")).error == f"py-spy not found at {tmp_path / 'nope'}"
    failing = tmp_path / "py-spy"
    failing.write_text("#!/bin/sh\necho 'Error: Permission Denied' >&2\nexit 1\n")
    failing.chmod(0o755)
    stack = capture(os.getpid(), 0, str(failing))
    assert stack.error == "py-spy dump failed: Error: Permission Denied" and stack.threads == []


@needs_py_spy
def test_a_process_that_is_gone_is_an_error() -> None:
    done = subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert done.returncode == 0
    stack = capture(2**22 + 12345, 0, find_py_spy())
    assert stack.error is not None and stack.error.startswith("py-spy dump failed")


def test_py_spy_json_is_parsed_and_garbage_is_refused() -> None:
    out = [
        {
            "thread_name": "MainThread",
            "active": True,
            "frames": [
                {"name": "clock_nanosleep", "filename": "/lib/libc.so.6", "module": "/lib/libc.so.6", "line": 0},
                {"name": "busy_loop", "filename": "/j/train.py", "short_filename": "train.py", "line": 42},
            ],
        }
    ]
    (thread,) = parse_dump(json.dumps(out))
    assert thread.frames[0].native and not thread.frames[1].native
    assert (thread.frames[1].file, thread.frames[1].path, thread.frames[1].line) == ("train.py", "/j/train.py", 42)
    with pytest.raises(ValueError):
        parse_dump("Process 1: python\n")


DUMP = {
    "version": "2.5",
    "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
    "pg_status": {"0": {"last_enqueued_collective": 7, "last_started_collective": -1, "last_completed_collective": 6}},
    "entries": [
        {"pg_id": 0, "collective_seq_id": 6, "profiling_name": "nccl:all_reduce", "state": "completed"},
        {"pg_id": 0, "collective_seq_id": 7, "profiling_name": "nccl:all_reduce", "state": "scheduled"},
    ],
}


def test_the_flight_recorder_dump_of_a_rank_that_enabled_it_is_read_as_pickle_or_json(tmp_path: Path) -> None:
    prefix = tmp_path / "fr_rank_"
    (tmp_path / "fr_rank_1").write_bytes(pickle.dumps(DUMP))
    proc = _spawn(tmp_path, {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_FR_DUMP_TEMP_FILE": str(prefix)})
    try:
        fr = flight_recorder(proc.pid, 1)
        assert fr is not None and fr.error is None
        assert (fr.entered, fr.started, fr.completed, fr.last_op) == (7, None, 6, "nccl:all_reduce")
        assert fr.entries[-1] == {"seq": 7, "op": "nccl:all_reduce", "state": "scheduled"}
        assert flight_recorder(proc.pid, 0).error == "no dump yet (PyTorch writes it on a watchdog timeout)"  # type: ignore[union-attr]
        as_json = {**DUMP, "pg_status": {"0": {"last_enqueued_collective": "9", "last_completed_collective": "9"}}}
        (tmp_path / "fr_rank_1").write_text(json.dumps(as_json))
        assert flight_recorder(proc.pid, 1).entered == 9  # type: ignore[union-attr]
    finally:
        proc.kill()
        proc.wait()


def test_the_older_variable_names_work_and_a_job_without_the_recorder_has_none(tmp_path: Path) -> None:
    (tmp_path / "t0").write_bytes(pickle.dumps(DUMP))
    old = _spawn(
        tmp_path, {"TORCH_NCCL_TRACE_BUFFER_SIZE": "100", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(tmp_path / "t")}
    )
    off = _spawn(tmp_path, {"TORCH_FR_BUFFER_SIZE": "0", "TORCH_NCCL_TRACE_BUFFER_SIZE": ""})
    try:
        assert flight_recorder(old.pid, 0).entered == 7  # type: ignore[union-attr]
        assert flight_recorder(off.pid, 0) is None
    finally:
        for p in (old, off):
            p.kill()
            p.wait()


class _Evil:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch /tmp/gpuwatch-pwned",))


def test_a_pickle_naming_any_class_or_function_is_refused_not_run(tmp_path: Path) -> None:
    with pytest.raises(pickle.UnpicklingError, match="not allowed"):
        load_dump(pickle.dumps({"entries": [_Evil()]}))
    (tmp_path / "x0").write_bytes(pickle.dumps({"entries": [_Evil()]}))
    proc = _spawn(tmp_path, {"TORCH_FR_BUFFER_SIZE": "1", "TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "x")})
    try:
        assert flight_recorder(proc.pid, 0).error == "not a flight recorder dump: UnpicklingError"  # type: ignore[union-attr]
    finally:
        proc.kill()
        proc.wait()


@needs_py_spy
def test_a_task_captures_only_the_known_processes_of_its_job_and_ranks(sleeper: subprocess.Popen[str]) -> None:
    mine = JobProcess(job="j", pid=sleeper.pid, rank=1)
    other_job = JobProcess(job="k", pid=os.getpid(), rank=1)
    other_rank = JobProcess(job="j", pid=os.getpid(), rank=5)
    answer = answer_task(StackTask(dump_id=1, job="j", ranks=[0, 1]), [mine, other_job, other_rank], find_py_spy())
    assert [(r.rank, r.pid) for r in answer.ranks] == [(1, sleeper.pid)]
    assert answer.ranks[0].flight_recorder is None
    wait_until(lambda: answer.ranks[0].threads, what="the capture's threads")


def test_a_real_flight_recorder_dump_shows_the_rank_that_never_entered_the_collective(tmp_path: Path) -> None:
    """PyTorch's own dump (gloo keeps the recorder too), read by the agent, analysed by the server."""
    pytest.importorskip("torch")
    from server.incidents.stacks import Capture, Flight, localise

    out, prefix = tmp_path / "out", tmp_path / "fr_"
    out.mkdir()
    env = {**os.environ, "TORCH_FR_BUFFER_SIZE": "2000", "TORCH_FR_DUMP_TEMP_FILE": str(prefix), "OMP_NUM_THREADS": "1"}
    job = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    script = Path(__file__).resolve().parent.parent / "jobs" / "fr_dump.py"
    proc = subprocess.Popen([*job, str(script), str(out)], env=env, start_new_session=True)
    try:
        pids = wait_until(
            lambda: (
                all((out / f"rank{r}.dumped").exists() for r in (0, 1))
                and [int((out / f"rank{r}.dumped").read_text()) for r in (0, 1)]
            ),
            timeout=120,
            what="both ranks' dumps",
        )
        records = [flight_recorder(pid, rank) for rank, pid in enumerate(pids)]
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
    assert all(r is not None and r.error is None for r in records), records
    r0, r1 = records
    # Completion is recorded as the recorder discovers it, asynchronously: at most the collectives both did.
    assert (r0.entered, r0.last_op, r1.entered) == (4, "gloo:all_reduce", 3)  # type: ignore[union-attr]
    assert r0.completed is not None and r0.completed <= 3  # type: ignore[union-attr]
    result = localise(
        [Capture(rank, "n0", flight=Flight(r.entered, r.completed, r.last_op)) for rank, r in enumerate(records) if r]
    )
    assert result.suspects == (1,) and "rank 1 never entered collective 4" in result.why


def test_a_job_with_the_dump_pipe_is_asked_for_a_fresh_dump_which_the_capture_waits_for(tmp_path: Path) -> None:
    """The agent's half of PyTorch's dump pipe: PyTorch (played here by a thread, as its watchdog would)
    opens ``<stem><rank>.pipe`` for reading and dumps when a byte arrives."""
    import threading

    from agent.stacks import request_dump

    pipe = tmp_path / "pipe_1.pipe"
    os.mkfifo(pipe, 0o666)
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    env = {
        "TORCH_FR_BUFFER_SIZE": "2000",
        "TORCH_FR_DEBUG_INFO_PIPE_FILE": str(tmp_path / "pipe_"),
        "TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "fr_"),
    }
    proc = _spawn(tmp_path, env)
    asked = threading.Event()

    def watchdog() -> None:
        def read() -> bytes:
            try:
                return os.read(reader, 128)
            except BlockingIOError:
                return b""

        wait_until(read, timeout=20, what="the agent's byte")
        asked.set()
        (tmp_path / "fr_1").write_bytes(pickle.dumps(DUMP))

    thread = threading.Thread(target=watchdog, daemon=True)
    thread.start()
    try:
        task = StackTask(dump_id=1, job="j", ranks=[1])
        answer = answer_task(task, [JobProcess(job="j", pid=proc.pid, rank=1)], find_py_spy(), dump_wait_s=10)
        assert asked.is_set()
        (rank,) = answer.ranks
        assert rank.flight_recorder is not None and rank.flight_recorder.entered == 7
        os.close(reader)
        assert request_dump(proc.pid, 1) is None, "nobody reads the pipe any more: nothing to ask"
    finally:
        proc.kill()
        proc.wait()
        thread.join(timeout=5)
