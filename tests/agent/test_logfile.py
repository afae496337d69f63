"""Tailing real job log files (appends, partial lines, truncation, rotation, resume) and the agent's
saved state."""

from __future__ import annotations

import os
from pathlib import Path

from agent.collectors.logfile import LogTailer, TailPosition
from agent.state import AgentState
from gpuwatch.protocol import MAX_LOG_LINE_CHARS, LogLine


def _append(path: Path, data: bytes | str) -> None:
    with open(path, "ab") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def test_tailer_returns_appended_lines_once(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    _append(log, "step 1\nstep 2\n")
    tailer = LogTailer(log)
    assert tailer.poll() == ["step 1", "step 2"]
    assert tailer.poll() == []
    _append(log, "step 3\r\n")  # CRLF from a Windows-minded tool: the \r is not part of the text
    assert tailer.poll() == ["step 3"]
    assert tailer.poll() == []
    assert tailer.committed_offset == log.stat().st_size


def test_tailer_reads_a_nul_as_a_replacement_character(tmp_path: Path) -> None:
    """A PostgreSQL string cannot hold NUL: shipped as is, it would get the whole batch refused."""
    log = tmp_path / "train.log"
    _append(log, b"loss=\x00nan \xff\n")
    assert LogTailer(log).poll() == ["loss=\ufffdnan \ufffd"]


def test_tailer_of_missing_file_waits_for_it(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    tailer = LogTailer(log)
    assert tailer.poll() == []
    _append(log, "hello\n")
    assert tailer.poll() == ["hello"]


def test_tailer_partial_last_line_waits_for_its_newline(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    _append(log, "done\nloss=0.")
    tailer = LogTailer(log)
    assert tailer.poll() == ["done"]
    assert tailer.committed_offset == len("done\n")  # a restart would re-read the partial line
    _append(log, "25")
    assert tailer.poll() == []
    _append(log, "1\nnext")
    assert tailer.poll() == ["loss=0.251"]
    assert tailer.committed_offset == len("done\nloss=0.251\n")


def test_tailer_truncation_in_place_restarts_at_zero(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    _append(log, "old line one\nold line two\n")
    tailer = LogTailer(log)
    assert tailer.poll() == ["old line one", "old line two"]
    inode = log.stat().st_ino
    with open(log, "wb") as f:  # `> train.log` by a job restart: same inode, shorter file
        f.write(b"fresh\n")
    assert log.stat().st_ino == inode
    assert tailer.poll() == ["fresh"]
    _append(log, "fresh 2\n")
    assert tailer.poll() == ["fresh 2"]


def test_tailer_rotation_reads_the_new_file_from_the_top(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    _append(log, "before rotation\n")
    tailer = LogTailer(log)
    assert tailer.poll() == ["before rotation"]
    os.rename(log, tmp_path / "train.log.1")
    # The new file is longer than the old offset, so only the inode tells that it is a different file.
    _append(log, "new file line 1 is rather longer\nnew file line 2\n")
    assert tailer.poll() == ["new file line 1 is rather longer", "new file line 2"]
    assert tailer.position.inode == log.stat().st_ino
    _append(tmp_path / "train.log.1", "late write to the rotated file\n")
    _append(log, "line 3\n")
    assert tailer.poll() == ["line 3"]


def test_tailer_cuts_overlong_line_with_marker_and_counts_it(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    long_line = "x" * (MAX_LOG_LINE_CHARS + 5000)
    wide_line = "é" * (MAX_LOG_LINE_CHARS + 1)  # 2 bytes per char: the limit is in characters
    _append(log, f"short\n{long_line}\n{wide_line}\nafter\n")
    tailer = LogTailer(log)
    lines = tailer.poll()
    assert len(lines) == 4
    assert lines[0] == "short" and lines[3] == "after"
    for cut, original in ((lines[1], long_line), (lines[2], wide_line)):
        assert len(cut) <= MAX_LOG_LINE_CHARS
        assert cut.startswith(original[:1000])
        assert "truncated" in cut
        LogLine(stream="file:x", seq=0, ts=1.0, text=cut)  # the server's model accepts it
    assert tailer.truncated_lines == 2


def test_tailer_line_exactly_at_the_limit_is_kept_whole(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    exact = "y" * MAX_LOG_LINE_CHARS
    _append(log, exact + "\n")
    tailer = LogTailer(log)
    assert tailer.poll() == [exact]
    assert tailer.truncated_lines == 0


def test_tailer_runaway_line_without_newline_is_shipped_not_held_forever(tmp_path: Path) -> None:
    log = tmp_path / "progress.log"
    _append(log, "\r".join(f"epoch 1: {i}%" for i in range(10_000)).encode())  # a progress bar, no \n
    tailer = LogTailer(log)
    lines = tailer.poll()
    assert len(lines) == 1
    assert len(lines[0]) <= MAX_LOG_LINE_CHARS and "truncated" in lines[0]
    assert tailer.truncated_lines == 1
    assert tailer.committed_offset == log.stat().st_size
    _append(log, "\nafter\n")
    assert tailer.poll()[-1] == "after"


def test_tailer_resumed_from_committed_position_returns_only_new_lines(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    _append(log, "one\ntwo\nthr")
    first = LogTailer(log)
    assert first.poll() == ["one", "two"]
    saved = TailPosition(first.position.inode, first.committed_offset)

    _append(log, "ee\nfour\n")  # written while the agent was down
    resumed = LogTailer(log, saved)
    assert resumed.poll() == ["three", "four"]
    assert resumed.poll() == []


def test_tailer_resumed_after_rotation_while_down_reads_new_file(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    _append(log, "one\ntwo\n")
    first = LogTailer(log)
    first.poll()
    saved = TailPosition(first.position.inode, first.committed_offset)
    os.rename(log, tmp_path / "train.log.1")
    _append(log, "alpha\nbeta\ngamma\n")
    assert LogTailer(log, saved).poll() == ["alpha", "beta", "gamma"]


def test_tailer_invalid_utf8_is_replaced_not_raised(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    _append(log, b"ok \xff\xfe bad\n\xc3\n\xe2\x82\xac euro\n")
    tailer = LogTailer(log)
    lines = tailer.poll()
    assert lines == ["ok \ufffd\ufffd bad", "\ufffd", "\u20ac euro"]


def test_tailer_stream_names_the_file(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    assert LogTailer(log).stream == f"file:{log}"


def test_agent_state_round_trips_seq_and_file_positions(tmp_path: Path) -> None:
    path = tmp_path / "agent" / "node-a" / "state.json"  # parent directories are created
    state = AgentState.load(path)
    assert state.seq == {} and state.files == {}
    assert [state.next_seq("file:/a.log") for _ in range(3)] == [0, 1, 2]
    assert state.next_seq("gpu:nvml") == 0
    state.files["/a.log"] = TailPosition(inode=1234, offset=5678)
    state.save()

    loaded = AgentState.load(path)
    assert loaded.seq == {"file:/a.log": 3, "gpu:nvml": 1}
    assert loaded.files == {"/a.log": TailPosition(inode=1234, offset=5678)}
    assert loaded.next_seq("file:/a.log") == 3  # continues, never reuses a number
    assert loaded.next_seq("new") == 0
    assert not list(path.parent.glob("*.tmp"))


def test_tailer_backlog_larger_than_one_read_comes_over_several_polls_each_line_once(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    expected = [f"line {i:07d} " + "p" * 80 for i in range(40_000)]  # ~3.6 MB, several read chunks
    _append(log, "".join(f"{ln}\n" for ln in expected))
    tailer = LogTailer(log)
    got: list[str] = []
    for _ in range(20):
        batch = tailer.poll()
        if not batch:
            break
        got.extend(batch)
    assert got == expected


def test_tailer_reads_the_rotated_files_last_lines_before_the_new_file(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    _append(log, "one\n")
    tailer = LogTailer(log)
    assert tailer.poll() == ["one"]
    _append(log, "two\nthree")  # written after our last read, just before the rotation
    os.rename(log, tmp_path / "train.log.1")
    _append(log, "four\n")
    assert tailer.poll() == ["two", "three", "four"]
    assert tailer.position.inode == log.stat().st_ino
    _append(log, "five\n")
    assert tailer.poll() == ["five"]
    tailer.close()
