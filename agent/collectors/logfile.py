"""Follows job log files line by line, surviving truncation and rotation, resumable from an offset."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from agent.collectors.base import Line, Reading
from gpuwatch.protocol import MAX_LOG_LINE_CHARS, log_text

if TYPE_CHECKING:
    from agent.state import AgentState

_READ_CHUNK = 1 << 20
#: How much of a file's start identifies it (with its inode): a reused inode or a copy is told apart.
_HEAD_BYTES = 1024
#: The wire's and the database's bound on a stream name.
MAX_STREAM_CHARS = 255


@dataclass(slots=True)
class TailPosition:
    inode: int = 0
    offset: int = 0
    head: str = ""  # "<n>:<sha256 of the file's first n bytes>", n = min(offset, _HEAD_BYTES); "" = unknown


def stream_name(prefix: str, path: Path | str) -> str:
    """``prefix + path`` as a stream name; a path too long for one keeps its end and gains a hash of the
    whole, so that two long paths never share a stream."""
    name = f"{prefix}{path}"
    if len(name) <= MAX_STREAM_CHARS:
        return name
    digest = hashlib.sha256(str(path).encode(errors="surrogateescape")).hexdigest()[:16]
    keep = MAX_STREAM_CHARS - len(prefix) - len(digest) - 2
    return f"{prefix}…{str(path)[-keep:]}#{digest}"


def _head(f: BinaryIO, upto: int) -> str:
    n = min(upto, _HEAD_BYTES)
    return f"{n}:{hashlib.sha256(os.pread(f.fileno(), n, 0)).hexdigest()}"


def _same_start(f: BinaryIO, head: str) -> bool:
    """Does the open file begin as the file ``head`` was taken of did (unknown: assume so)?"""
    if not head:
        return True
    n = int(head.split(":", 1)[0])
    return os.fstat(f.fileno()).st_size >= n and _head(f, n) == head


class LogTailer:
    """Yields complete lines appended to ``path`` since the last call; a partial last line waits.

    The file stays open between polls, so when it is rotated (renamed away, a new file created) the
    lines written to the old file before the rename are still read to its end, then the new file is
    followed from its start. A file truncated in place is followed from its start again.

    A line longer than MAX_LOG_LINE_CHARS is cut there and marked, so one runaway line (a progress
    bar without newlines, a dumped tensor) can neither block the stream nor be refused by the server.
    """

    def __init__(self, path: Path, position: TailPosition | None = None, stream: str | None = None) -> None:
        self.path = path
        self.stream = stream or stream_name("file:", path)
        self.position = position or TailPosition()
        self._file: BinaryIO | None = None
        self._partial = b""
        self._skipping = False  # inside a line already cut and returned: its rest is dropped up to its newline
        self.truncated_lines = 0

    def poll(self) -> list[str]:
        if self._file is None and not self._open():
            return []
        assert self._file is not None
        data = self._file.read(_READ_CHUNK)
        self.position.offset += len(data)
        lines = self._split(data)
        if len(data) < _READ_CHUNK:  # at the end of what we have open: has the path moved on?
            lines += self._follow_path()
        return lines

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    @property
    def committed_offset(self) -> int:
        """Offset of the first byte not yet returned as a line (where a restarted agent resumes)."""
        return self.position.offset - len(self._partial)

    def saved_position(self) -> TailPosition:
        """Where a restarted agent resumes: the file (inode and its first bytes) and the first byte not
        yet returned as a line."""
        offset = self.committed_offset
        head = _head(self._file, offset) if self._file is not None and offset else ""
        return TailPosition(self.position.inode, offset, head)

    def _open(self) -> bool:
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - kept open across polls, closed in close()
        except FileNotFoundError:
            return False
        st = os.fstat(f.fileno())
        saved = self.position
        if st.st_ino != saved.inode or st.st_size < saved.offset or not _same_start(f, saved.head):
            # Not the saved position's file. If that one was rotated while we were away (renamed, or
            # copied and truncated), read its rest first; `_follow_path` then moves on to this one.
            rotated = self._rotated(saved) if saved.offset else None
            if rotated is not None:
                f.close()
                f = rotated
            else:
                self.position = TailPosition(st.st_ino, 0)
        f.seek(self.position.offset)
        self._file = f
        return True

    def _rotated(self, saved: TailPosition) -> BinaryIO | None:
        """The saved position's file under a rotated name beside ``path`` (same inode, or a copy with the
        same first bytes, at least as long as the saved offset), opened; None if there is none."""
        try:
            siblings = sorted(p for p in self.path.parent.iterdir() if p.name.startswith(self.path.name + "."))
        except OSError:
            return None
        for candidate in siblings:
            try:
                f = open(candidate, "rb")  # noqa: SIM115 - handed to the caller
            except OSError:
                continue
            st = os.fstat(f.fileno())
            if st.st_size >= saved.offset and (st.st_ino == saved.inode or saved.head) and _same_start(f, saved.head):
                self.position = TailPosition(st.st_ino, saved.offset)
                return f
            f.close()
        return None

    def _follow_path(self) -> list[str]:
        """Switch to a new file at ``path`` (rotation) or rewind (truncation); return its first lines."""
        assert self._file is not None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return []  # renamed away and not yet recreated: keep the old file open
        if st.st_ino != self.position.inode:
            tail = self._flush_partial()  # the old file's last line, even without its newline
            self._skipping = False
            self.close()
            self.position = TailPosition()  # the new file, from its start
            return tail + (self.poll() if self._open() else [])
        if st.st_size < self.position.offset:
            self._partial = b""
            self._skipping = False
            self._file.seek(0)
            self.position.offset = 0
            return self.poll()
        return []

    def _flush_partial(self) -> list[str]:
        if not self._partial:
            return []
        line, self._partial = self._partial, b""
        return [self._decode(line)]

    def _split(self, data: bytes) -> list[str]:
        if not data:
            return []
        if self._skipping:  # the rest of a line already returned cut: up to its newline, it is dropped
            end = data.find(b"\n")
            if end < 0:
                return []
            data, self._skipping = data[end + 1 :], False
        chunks = (self._partial + data).split(b"\n")
        self._partial = chunks.pop()
        if len(self._partial) > MAX_LOG_LINE_CHARS * 4:  # a line with no end in sight: ship what we have,
            chunks.append(self._partial)  # cut and marked; the rest of it is not another line
            self._partial = b""
            self._skipping = True
        return [self._decode(c) for c in chunks]

    def _decode(self, raw: bytes) -> str:
        text = log_text(raw.rstrip(b"\r"))
        if len(text) > MAX_LOG_LINE_CHARS:
            self.truncated_lines += 1
            keep = MAX_LOG_LINE_CHARS - 48  # room for the marker
            text = f"{text[:keep]} …[truncated {len(text) - keep} chars]"
        return text


class LogFileCollector:
    """The job logs ``paths`` as a collector: each file's new lines in its stream ``file:<path>``, read on
    from ``positions`` (where the previous agent stopped)."""

    stream = "logfile"  # it has no events: each line carries its file's stream

    def __init__(self, paths: Iterable[Path], positions: Mapping[str, TailPosition]) -> None:
        self.tailers = [LogTailer(p, positions.get(str(p), TailPosition())) for p in paths]

    def collect(self, now: float) -> Reading:
        return Reading(lines=[Line(t.stream, now, text) for t in self.tailers for text in t.poll()])

    def save(self, state: AgentState) -> None:
        for t in self.tailers:
            state.files[str(t.path)] = t.saved_position()

    def close(self) -> None:
        for t in self.tailers:
            t.close()
