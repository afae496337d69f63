"""A log file diagnosed as bytes: read in chunks, the prefilter (RE2) run over each chunk, lines split
and decoded only around its matches; memory bounded by the chunk and the context the rules look at,
whatever the file's size.

The lines are those `open(path, encoding="utf-8", errors="replace").read().splitlines()` gives (what
`gpuwatch diagnose` read before): a line ends at "\\r\\n", "\\n", "\\r", "\\v", "\\f", "\\x1c"-"\\x1e",
NEL, U+2028 or U+2029. Each of these is whole in the bytes and never part of another character, so
lines are counted and split on the bytes, and a line decoded alone is the line the whole text decoded
would give. The prefilter's keywords contain no line break, so none of its matches crosses a line:
a chunk is scanned up to its last "\\n" and the rest carried to the next.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import BinaryIO, overload

from gpuwatch.diagnosis.logview import LogView
from gpuwatch.diagnosis.rules import RuleSet

CHUNK = 8 << 20
TAIL_BYTES = 256 << 10  # what `StreamView.tail` reads from the end of the file
_RARE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # the line breaks of str.splitlines besides \n, \r
_SEP = re.compile(rb"\r\n|[\n\r\x0b\x0c\x1c-\x1e]|\xc2\x85|\xe2\x80[\xa8\xa9]")
_RARE = re.compile(rb"[\x0b\x0c\x1c-\x1e]|\xc2\x85|\xe2\x80[\xa8\xa9]")
_LONE_CR = re.compile(rb"\r(?!\n)")  # one pass, where bytes.count would take two (b"\r", then b"\r\n")


class FileLines(Sequence[str]):
    """A log file as a sequence of lines, for the engine a file to stream; anyone else who indexes it
    (the LLM excerpt) gets the lines read into memory."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)

    @cached_property
    def _lines(self) -> list[str]:
        with open(self.path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()

    def __len__(self) -> int:
        return len(self._lines)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...
    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        return self._lines[i]


def streamable(rules: RuleSet) -> bool:
    """Whether the rules' keywords allow the byte scan: none may hold a line break."""
    return not any(c in k for k in rules.keywords for c in "\n\r" + _RARE_BREAKS)


class StreamView(LogView):
    """A log file read forward in chunks (see the module's docstring)."""

    def __init__(self, path: str, rules: RuleSet, chunk: int | None = None) -> None:
        super().__init__()
        self._path = path
        self._scanner = rules.byte_scanner
        self._chunk = chunk or CHUNK
        self._f: BinaryIO | None = None
        self._buf = b""
        self._base = 0  # the file offset of _buf[0]
        self._eof = False  # whether _buf reaches the end of the file
        # The counting cursor: the line that starts at file offset _coff is line _cline.
        self._cline, self._coff = 0, 0
        # Lines split so far, consecutive: line _wfirst + k spans _wstart[k].._wend[k] (content, no
        # line break); the next line starts at _wnext.
        self._wfirst, self._wstart, self._wend, self._wnext = 0, [], [], 0
        self._total: int | None = None

    # ---------------------------------------------------------------- the questions

    def candidates(self) -> Iterator[int]:
        with open(self._path, "rb") as self._f:
            yield from self._scan()
        self._f = None

    def get(self, i: int) -> str | None:
        if i < 0:
            return None
        k = i - self._wfirst
        if k == -1:
            return self._before_window()
        if k < 0:
            raise IndexError(f"line {i} is behind the stream (at line {self._wfirst})")
        while k >= len(self._wstart):
            if not self._split_next():
                return None
        return self._text(self._wstart[k], self._wend[k])

    def count(self) -> int:
        if self._total is None:
            raise RuntimeError("the count is known once the candidates are read")
        return self._total

    def tail(self, n: int) -> tuple[int, list[str]]:
        """The file's last bytes (`TAIL_BYTES`), split as the whole text would be; a first line that may have
        begun before them is left out."""
        total = self.count()
        with open(self._path, "rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - TAIL_BYTES))
            data = f.read()
        lines = data.decode("utf-8", errors="replace").splitlines()
        if size > TAIL_BYTES:
            lines = lines[1:]
        lines = lines[-n:]
        return total - len(lines), lines

    # ---------------------------------------------------------------- the scan

    def _scan(self) -> Iterator[int]:
        """Regions of whole lines, each one read (no copy but the kernel's); the keyword hits in each,
        as line numbers."""
        pos = 0
        confirm = self._scanner.needs_confirming
        while True:
            self._read_region(pos)
            cut = self._base + self._region_end
            has_cr = self._buf.find(b"\r", 0, self._region_end) >= 0
            hits, rare = self._scanner.hits(self._buf, self._region_end)
            checked = -1
            for off in hits:
                line = self._line_of(off + pos, has_cr, rare)
                if line == checked:
                    continue
                checked = line
                if not confirm or self._confirmed(line):
                    yield line
            self._move_cursor(cut, has_cr, rare)
            if self._eof and cut >= self._base + len(self._buf):
                self._total = self._cline + (1 if self._coff < cut else 0)
                return
            pos = cut

    def _read_region(self, pos: int) -> None:
        """Read from ``pos`` a chunk, and more until it holds a line break; the region ends after its
        last "\\n" (or a "\\r" that is not its last byte), or at the end of the file."""
        assert self._f is not None
        self._f.seek(pos)
        self._buf, self._base = self._f.read(self._chunk), pos
        self._eof = len(self._buf) < self._chunk
        while True:
            if self._eof:
                self._region_end = len(self._buf)
                return
            nl = self._buf.rfind(b"\n")
            if nl < 0:  # no "\n", so a "\r" before the last byte is no "\r\n" cut in two
                nl = self._buf.rfind(b"\r", 0, len(self._buf) - 1)
            if nl >= 0:
                self._region_end = nl + 1
                return
            self._fill()

    def _fill(self) -> None:
        """Read the next chunk onto the buffer (a look ahead, or a line longer than a chunk)."""
        assert self._f is not None
        self._f.seek(self._base + len(self._buf))
        more = self._f.read(self._chunk)
        self._eof = len(more) < self._chunk
        self._buf += more

    def _ensure_from(self, offset: int) -> None:
        """Read back to file offset ``offset`` (the line before a region's first, say)."""
        if offset < self._base:
            assert self._f is not None
            self._f.seek(offset)
            self._buf = self._f.read(self._base - offset) + self._buf
            self._base = offset

    def _confirmed(self, line: int) -> bool:
        """Whether the exact prefilter passes the line (a Hyperscan hit's line)."""
        k = line - self._wfirst
        while k >= len(self._wstart):
            if not self._split_next():
                return False
        start, end = self._wstart[k] - self._base, self._wend[k] - self._base
        return self._scanner.exact.search(self._buf, start, end) is not None

    # ---------------------------------------------------------------- counting and splitting

    def _count(self, a: int, b: int, has_cr: bool, rare: bool) -> int:
        """Line breaks in file offsets a..b (a at a line's start, b not inside a break)."""
        buf, a, b = self._buf, a - self._base, b - self._base
        n = buf.count(b"\n", a, b)
        if has_cr:
            n += len(_LONE_CR.findall(buf, a, b))
        if rare:
            n += len(_RARE.findall(buf, a, b))
        return n

    def _break_end(self, a: int, b: int, has_cr: bool, rare: bool) -> int:
        """The file offset after the last line break in a..b, else a."""
        buf, ra, rb = self._buf, a - self._base, b - self._base
        p = buf.rfind(b"\n", ra, rb)
        if has_cr:
            p = max(p, buf.rfind(b"\r", max(ra, p), rb))
        start = ra if p < 0 else p + 1
        if rare:
            for m in _RARE.finditer(buf, start, rb):
                start = m.end()
        return start + self._base

    def _line_of(self, pos: int, has_cr: bool, rare: bool) -> int:
        """The number of the line holding file offset ``pos``; the split lines start there."""
        if self._wstart and self._wstart[0] <= pos < self._wnext:
            k = bisect_right(self._wstart, pos) - 1
            self._trim(k)
            return self._wfirst
        if self._wstart and self._wnext <= pos and self._wnext >= self._coff:
            self._cline, self._coff = self._wfirst + len(self._wstart), self._wnext
        line = self._cline + self._count(self._coff, pos, has_cr, rare)
        start = self._break_end(self._coff, pos, has_cr, rare)
        self._cline, self._coff = line, start
        self._wfirst, self._wstart, self._wend, self._wnext = line, [], [], start
        return line

    def _trim(self, k: int) -> None:
        """Forget the split lines before the k-th (the scan has moved on to it)."""
        if k > 0:
            del self._wstart[:k], self._wend[:k]
            self._wfirst += k

    def _move_cursor(self, cut: int, has_cr: bool, rare: bool) -> None:
        """Count the lines up to ``cut``, the end of a region (a line's start, or the file's end)."""
        if self._wstart and self._wstart[0] <= cut < self._wnext:  # split ahead already
            self._trim(bisect_right(self._wstart, cut) - 1)
            self._cline, self._coff = self._wfirst, self._wstart[0]
            return
        if self._wstart and self._coff <= self._wnext <= cut:
            self._cline, self._coff = self._wfirst + len(self._wstart), self._wnext
        if cut > self._coff:
            n = self._count(self._coff, cut, has_cr, rare)
            self._cline, self._coff = self._cline + n, self._break_end(self._coff, cut, has_cr, rare)
        self._wfirst, self._wstart, self._wend, self._wnext = self._cline, [], [], self._coff

    def _split_next(self) -> bool:
        """Split one more line after the split ones; False at the end of the file."""
        start = self._wnext
        while True:
            m = _SEP.search(self._buf, start - self._base)
            if m is not None and not (m.end() == len(self._buf) and m.group() == b"\r" and not self._eof):
                end, nxt = m.start() + self._base, m.end() + self._base
                break
            if not self._eof:
                self._fill()
                continue
            end = nxt = self._base + len(self._buf)
            if end == start:
                return False
            break
        self._wstart.append(start)
        self._wend.append(end)
        self._wnext = nxt
        return True

    def _break_start(self, start: int) -> int:
        """Where the line break that ends at file offset ``start`` (a line's start) begins."""
        self._ensure_from(max(0, start - 3))
        buf, rel = self._buf, start - self._base
        if buf[rel - 1] == 0x0A:
            return start - 2 if rel > 1 and buf[rel - 2] == 0x0D else start - 1
        if buf[rel - 1] in (0x85, 0xA8, 0xA9):
            for m in _RARE.finditer(buf, max(0, rel - 3), rel):
                if m.end() == rel:
                    return m.start() + self._base
        return start - 1

    def _line_start_before(self, start: int) -> int:
        """Where the line before the one that starts at ``start`` (> 0) starts."""
        sep, span = self._break_start(start), 4096
        while True:
            self._ensure_from(max(0, sep - span))
            found = self._break_end(self._base, sep, True, True)
            if found > self._base or self._base == 0:
                return found
            span *= 8

    def _before_window(self) -> str | None:
        """The line before the first split one (the scan looks one line back, before a traceback)."""
        first = self._wstart[0] if self._wstart else self._wnext
        if first == 0:
            return None
        return self._text(self._line_start_before(first), self._break_start(first))

    def _text(self, start: int, end: int) -> str:
        while self._base + len(self._buf) < end and not self._eof:
            self._fill()
        return self._buf[start - self._base : end - self._base].decode("utf-8", "replace")
