"""The prefilter over a file's bytes: where in a block the rules' keywords occur, and whether the block
holds one of the rare line breaks of `str.splitlines` ("\\v", "\\f", "\\x1c"-"\\x1e", NEL, U+2028,
U+2029), which the line count must then look for. Hyperscan (SIMD literal matching, ~1 GB/s here) finds
the keywords when it is installed and every keyword can be said as Hyperscan bytes
(`_hyperscan_expression`); RE2's DFA (~300 MB/s) otherwise. The answer must be the RE2 prefilter's (a
bytes pattern, so UTF-8 with Unicode case folding), so Hyperscan's hits are a superset (ASCII case
folding, plus any long s U+017F or Kelvin sign U+212A, the two non-ASCII letters that fold to ASCII ones)
and a line it flags is confirmed by RE2 on that line's bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import re2

try:  # optional: x86-64 wheels bundle the library; without it RE2 scans alone
    import hyperscan
except ImportError:  # pragma: no cover - depends on the platform
    hyperscan = None

PREFILTER_MAX_MEM = 64 << 20
"""RE2's memory for the prefilter's automata (its default is 8 MB). Past the budget a search that finds a
keyword falls back from the DFA to the NFA over the rest of the text: with the shipped keywords at 16,500
characters of alternation, 200,000 lines took 129 s instead of 0.2 s on the RE2-only path (32 MB: 0.22 s).
The budget is a ceiling the DFA's state cache grows into, not an allocation."""


def compile_prefilter(pattern: str | bytes) -> re2._Regexp:
    """The keywords' alternation (or a pattern built on it) compiled with `PREFILTER_MAX_MEM`."""
    options = re2.Options()
    options.max_mem = PREFILTER_MAX_MEM
    return re2.compile(pattern, options)


_RARE_RE2 = "[\\x0b\\x0c\\x1c-\\x1e\\x{85}\\x{2028}\\x{2029}]"
_RARE_HS = (rb"[\x0b\x0c\x1c-\x1e]", rb"\xc2\x85", rb"\xe2\x80[\xa8\xa9]")
_FOLDS_TO_ASCII = (rb"\xc5\xbf", rb"\xe2\x84\xaa")  # the long s folds to s, the Kelvin sign to k
_KEYWORD, _RARE = 0, 1
CACHED_DATABASES = 8  # compiled keyword sets kept in the cache, the newest


class ByteScanner:
    """Keyword hits in a block of bytes, for one set of keywords (its prefilter's alternation)."""

    def __init__(self, alternation: str, keywords: tuple[str, ...]) -> None:
        self.exact = _exact(alternation)
        self._re2 = _with_breaks(alternation)
        expressions = tuple(_hyperscan_expression(k) for k in keywords)
        expressible = all(e is not None for e in expressions)
        self._hs = _hyperscan(expressions) if hyperscan is not None and expressible else None  # type: ignore[arg-type]

    @property
    def needs_confirming(self) -> bool:
        """Whether a hit's line must be confirmed with ``exact`` (Hyperscan's hits are a superset)."""
        return self._hs is not None

    def hits(self, block: bytes, end: int) -> tuple[list[int], bool]:
        """Offsets in ``block[:end]`` inside keyword matches, ascending; and whether a rare break is there."""
        if self._hs is None:
            offsets, rare = [], False
            for m in self._re2.finditer(block, 0, end):
                if m.end() - m.start() <= 3 and _RARE_BREAK.fullmatch(m.group()):
                    rare = True
                else:
                    offsets.append(m.start())
            return offsets, rare
        found: list[int] = []
        kinds: set[int] = set()

        def on_match(kind: int, _start: int, stop: int, _flags: int, _context: object) -> None:
            if kind == _KEYWORD:
                found.append(stop - 1)
            else:
                kinds.add(kind)

        # A scratch per scan (28 us): one scanner may serve several threads of a server at once.
        self._hs.scan(memoryview(block)[:end], match_event_handler=on_match, scratch=hyperscan.Scratch(self._hs))
        found.sort()
        return found, _RARE in kinds


_RARE_BREAK = re.compile(rb"[\x0b\x0c\x1c-\x1e]|\xc2\x85|\xe2\x80[\xa8\xa9]")


def _hyperscan_expression(keyword: str) -> bytes | None:
    """``keyword`` as a Hyperscan expression over UTF-8 bytes that finds every match RE2's Unicode case
    folding finds (Hyperscan folds ASCII only): a letter outside ASCII with another case is written as
    both (`arrêté`'s ê as ê or Ê); None when that cannot be said simply, or when the keyword holds a
    newline (a hit's line must be its match's). CJK letters have no case: the rules' Chinese shell
    messages had sent every scan to RE2's DFA, half Hyperscan's speed, until this."""
    if "\n" in keyword:
        return None
    if keyword.isascii():
        return re.escape(keyword).encode()
    out = []
    for c in keyword:
        variants = {c, c.lower(), c.upper(), c.casefold()}
        if c.isascii() or len(variants) == 1:
            out.append(re.escape(c).encode())
        elif all(len(v) == 1 and not v.isascii() for v in variants):
            out.append(b"(?:" + b"|".join(re.escape(v).encode() for v in sorted(variants)) + b")")
        else:  # a letter that folds to several letters or to ASCII: RE2 alone says what it matches
            return None
    return b"".join(out)


@lru_cache(maxsize=8)
def _exact(alternation: str) -> re2._Regexp:
    """The prefilter as `RuleSet.candidate_lines` runs it: a bytes pattern (UTF-8, Unicode folding)."""
    return compile_prefilter(alternation.encode())


@lru_cache(maxsize=8)
def _with_breaks(alternation: str) -> re2._Regexp:
    return compile_prefilter(f"{alternation}|(?-i:{_RARE_RE2})".encode())


@lru_cache(maxsize=8)
def _hyperscan(keywords: tuple[bytes, ...]) -> Any:
    """The keywords' Hyperscan database: compiled (0.25 s for the rules' 660 keywords, as long as scanning
    200 MB) once per set of keywords and Hyperscan version, then read back from the user's cache
    (`cache_dir`) in microseconds; compiled each time where nothing can be cached."""
    expressions = [*keywords, *_FOLDS_TO_ASCII, *_RARE_HS]  # the keywords as `_hyperscan_expression` says them
    kinds = [_KEYWORD] * (len(keywords) + len(_FOLDS_TO_ASCII)) + [_RARE] * len(_RARE_HS)
    flags = [hyperscan.HS_FLAG_CASELESS] * len(keywords) + [0] * (len(_FOLDS_TO_ASCII) + len(_RARE_HS))
    key = hashlib.sha256(repr((expressions, kinds, flags, hyperscan.__version__)).encode()).hexdigest()[:32]
    cached = cache_dir() / f"hyperscan-{key}.db"
    with contextlib.suppress(OSError, hyperscan.error):
        return hyperscan.loadb(cached.read_bytes(), hyperscan.HS_MODE_BLOCK)
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=expressions, ids=kinds, elements=len(expressions), flags=flags)
    with contextlib.suppress(OSError):  # read-only home, full disk: compiled again next time
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f"{cached.name}.{os.getpid()}.part")
        partial.write_bytes(hyperscan.dumpb(db))
        os.replace(partial, cached)  # whole or absent, whatever runs beside it
        for old in sorted(cached.parent.glob("hyperscan-*.db"), key=_mtime)[:-CACHED_DATABASES]:
            old.unlink(missing_ok=True)  # a rules directory's earlier keywords, most likely
    return db


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed by another process meanwhile
        return 0.0


def cache_dir() -> Path:
    """Where compiled prefilters are kept: ``$XDG_CACHE_HOME/gpuwatch`` (``~/.cache/gpuwatch``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpuwatch"
