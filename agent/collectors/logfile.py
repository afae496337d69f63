"""Follows a job log file line by line, surviving truncation and rotation, resumable from an offset."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gpuwatch.protocol import MAX_LOG_LINE_CHARS

_READ_CHUNK = 1 << 20


@dataclass(slots=True)
class TailPosition:
    inode: int = 0
    offset: int = 0


class LogTailer:
    """Yields complete lines appended to ``path`` since the last call; a partial last line waits.

    A line longer than MAX_LOG_LINE_CHARS is cut there and marked, so one runaway line (a progress
    bar without newlines, a dumped tensor) can neither block the stream nor be refused by the server.
    """

    def __init__(self, path: Path, position: TailPosition | None = None) -> None:
        self.path = path
        self.stream = f"file:{path}"
        self.position = position or TailPosition()
        self._partial = b""
        self.truncated_lines = 0

    def poll(self) -> list[str]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return []
        if st.st_ino != self.position.inode or st.st_size < self.position.offset:
            # Rotated (new inode) or truncated in place: start again at the top of the new file.
            self.position = TailPosition(st.st_ino, 0)
            self._partial = b""
        if st.st_size == self.position.offset:
            return []
        with open(self.path, "rb") as f:
            f.seek(self.position.offset)
            data = f.read(_READ_CHUNK)
        self.position.offset += len(data)
        chunks = (self._partial + data).split(b"\n")
        self._partial = chunks.pop()
        if len(self._partial) > MAX_LOG_LINE_CHARS * 4:  # a line with no end in sight: ship what we have
            chunks.append(self._partial)
            self._partial = b""
        return [self._decode(c) for c in chunks]

    @property
    def committed_offset(self) -> int:
        """Offset of the first byte not yet returned as a line (where a restarted agent resumes)."""
        return self.position.offset - len(self._partial)

    def _decode(self, raw: bytes) -> str:
        text = raw.rstrip(b"\r").decode("utf-8", errors="replace")
        if len(text) > MAX_LOG_LINE_CHARS:
            self.truncated_lines += 1
            keep = MAX_LOG_LINE_CHARS - 48  # room for the marker
            text = f"{text[:keep]} …[truncated {len(text) - keep} chars]"
        return text
