"""A log file diagnosed as bytes (gpuwatch/diagnosis/stream.py) gives the answer its lines in memory give:
the same reason, node, rank and evidence file:line, wherever the chunks happen to end."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import re2

from gpuwatch.diagnosis import bytescan, stream
from gpuwatch.diagnosis.corpus import case_dirs, load_case
from gpuwatch.diagnosis.diagnose import read_sources
from gpuwatch.diagnosis.engine import _compiled, _ruleset, diagnose_rules
from gpuwatch.diagnosis.model import LogSource
from gpuwatch.diagnosis.stream import FileLines, StreamView
from tests.helpers import TESTS

CORPUS = TESTS / "data" / "failures"


@pytest.fixture(params=["hyperscan", "re2"])
def matcher(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Both ways of finding the keywords: Hyperscan (where installed) and RE2 alone."""
    if request.param == "re2":
        monkeypatch.setattr(bytescan, "hyperscan", None)
    elif bytescan.hyperscan is None:
        pytest.skip("hyperscan is not installed on this platform")
    _compiled.cache_clear()  # the rules' byte scanner is made with the rules
    # the scanner is the one named: a keyword Hyperscan could not take had sent every scan to RE2 unseen
    assert _ruleset(None).byte_scanner.needs_confirming == (request.param == "hyperscan")
    yield request.param
    _compiled.cache_clear()


def test_hyperscan_finds_keywords_outside_ascii_in_either_case() -> None:
    """CJK letters have no case; a Latin letter outside ASCII is matched in both of its cases, as RE2's
    Unicode folding matches it; a letter that folds to several (ß) or to ASCII (the long s) leaves it to RE2."""
    if bytescan.hyperscan is None:
        pytest.skip("hyperscan is not installed on this platform")
    keywords = ("processus arrêté", "getötet", "段错误", "nccl")
    scanner = bytescan.ByteScanner("(?i)" + "|".join(re2.escape(k) for k in keywords), keywords)
    assert scanner.needs_confirming  # Hyperscan's
    lines = ["ok", "PROCESSUS ARRÊTÉ (core dumped)", "Getötet", "zsh: 段错误 (核心已转储) python train.py", "fine"]
    data = "\n".join(lines).encode()
    hits, _ = scanner.hits(data, len(data))
    assert sorted({data.count(b"\n", 0, at) for at in hits}) == [1, 2, 3]
    for folding in ("straße", "\u017ftep"):  # the long s folds to s
        assert bytescan._hyperscan_expression(folding) is None


def _in_memory(path: Path) -> list[str]:
    """The lines as `gpuwatch diagnose` read them before it streamed."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


@pytest.mark.parametrize("chunk", [None, 7])
def test_streamed_files_agree_with_lines_in_memory_on_every_corpus_case(
    matcher: str, chunk: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if chunk is not None:  # 7 bytes: chunks end inside nearly every line, traceback and tqdm bar
        monkeypatch.setattr(stream, "CHUNK", chunk)
    cases = case_dirs(CORPUS)
    assert len(cases) >= 400
    differ = []
    for case in cases:
        _, sources = load_case(case)
        streamed = [replace(s, lines=FileLines(case / s.file)) for s in sources]
        want, got = diagnose_rules(sources).to_json(), diagnose_rules(streamed).to_json()
        if got != want:
            differ.append((case.name, want["reason"], got["reason"], want["evidence"][:1], got["evidence"][:1]))
    assert not differ, differ


# Pieces of text that exercise the byte-level line splitting: every line break of str.splitlines,
# "\r\n" and "\r" side by side, undecodable and truncated UTF-8, characters that fold to ASCII keyword
# letters (long s, Kelvin sign), keywords, tracebacks and progress lines.
_PIECES = [
    b"step 12 loss 0.5",
    b"Traceback (most recent call last):",
    b'  File "/x/train.py", line 3, in f',
    b"RuntimeError: CUDA error: an illegal memory access was encountered",
    b"\r\n",
    b"\n",
    b"\r",
    b"\x0b",
    b"\x0c",
    b"\x1c",
    b"\x1d",
    b"\x1e",
    b"\xc2\x85",
    b"\xe2\x80\xa8",
    b"\xe2\x80\xa9",
    b"\xff",
    b"\xe2\x80",
    b"\xc2",
    b"NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus",
    b"CUDA out of memory.",
    b"abc ",
    b"SIGKILL",
    "\u017figkill".encode(),
    "\u212ailled".encode(),
    b"Root Cause (first observed failure):",
    b"  rank      : 3 (local_rank: 3)",
    b"Exception ignored in: <function f>",
]


def _prefiltered(lines: list[str], alternation: str) -> list[int]:
    """The lines the prefilter passed before Hyperscan: RE2's bytes pattern over the joined lines."""
    data = "\n".join(lines).encode("utf-8", errors="surrogatepass")
    return sorted({data.count(b"\n", 0, m.start()) for m in re2.compile(alternation.encode()).finditer(data)})


def test_lines_split_from_the_bytes_are_the_lines_of_the_decoded_text(matcher: str, tmp_path: Path) -> None:
    rules = _ruleset(None)
    rng = random.Random(25)
    path = tmp_path / "log"
    for _ in range(300):
        path.write_bytes(b"".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 40))))
        lines = _in_memory(path)
        assert rules.candidate_lines(lines) == _prefiltered(lines, rules.alternation), path.read_bytes()
        for chunk in (1, 2, 3, 5, 64):
            view = StreamView(str(path), rules, chunk)
            seen = []
            for i in view.candidates():
                seen.append(i)
                for j in (i - 1, *range(i, i + 12)):
                    assert view.get(j) == (lines[j] if 0 <= j < len(lines) else None), (path.read_bytes(), chunk, j)
            assert seen == rules.candidate_lines(lines), (path.read_bytes(), chunk)
            assert view.count() == len(lines)


_TQDM = "".join(
    f"\rEpoch 1: {p:3d}%|{'█' * (p // 10)}{' ' * (10 - p // 10)}| {p * 49}/4900 [01:{p:02d}<08:00, 8.1it/s, loss=0.6]"
    for p in (10, 11, 12)
)
_LOG = (
    "".join(f"[rank1]: iteration {i:>6}/ 100000 | learning rate: 3.0E-04 | lm loss: 2.1E+00 |\n" for i in range(30))
    + _TQDM
    + "\r[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 79.11 GiB total)\n"
    + "".join(
        f"[rank1]: iteration {i:>6}/ 100000 | learning rate: 3.0E-04 | lm loss: 2.1E+00 |\n" for i in range(30, 40)
    )
    + "[rank1]: Traceback (most recent call last):\n"
    + '[rank1]:   File "/work/train.py", line 10, in <module>\n'
    + "[rank1]:     loss.backward()\n"
    + '[rank1]:   File "/usr/lib/python3/dist-packages/torch/_tensor.py", line 522, in backward\n'
    + "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    + "[rank1]: CUDA kernel errors might be asynchronously reported at some other API call\n"
    + "[rank0]: [E ProcessGroupNCCL.cpp:563] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9)\n"
)


def test_chunks_ending_inside_a_line_a_traceback_and_a_tqdm_bar_change_nothing(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    data = _LOG.encode()
    path.write_bytes(data)
    lines = _in_memory(path)
    want = diagnose_rules([LogSource(str(path), lines)])
    # The OOM glued after the bar was survived (training went on), the illegal memory access was not.
    assert (want.reason, want.rank) == ("cuda_error", 1)
    assert (
        want.evidence[0].line
        == lines.index("[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered") + 1
    )
    assert "gpu_oom" in want.explanation
    tqdm = (data.index(b"\rEpoch"), data.index(b"\n", data.index(b"\rEpoch")))
    traceback = (data.index(b"[rank1]: Traceback"), data.index(b"[rank1]: CUDA kernel"))
    inside = {"tqdm": 0, "traceback": 0, "line": 0}
    for chunk in range(1, 400):
        for name, (a, b) in (("tqdm", tqdm), ("traceback", traceback), ("line", (0, len(data)))):
            inside[name] += any(a < k * chunk < b and data[k * chunk - 1 : k * chunk] != b"\n" for k in range(1, 300))
        stream.CHUNK, saved = chunk, stream.CHUNK
        try:
            got = diagnose_rules(read_sources([path]))
        finally:
            stream.CHUNK = saved
        assert got == want, chunk
    assert min(inside.values()) > 100, inside


def test_memory_is_bounded_by_the_chunk_whatever_the_size(tmp_path: Path) -> None:
    """The buffer holds a region and what the rules look at around a match, never the file."""
    path = tmp_path / "big.log"
    step = "".join(f"iteration {i:>8}/ 900000 | learning rate: 3.0E-04 | lm loss: 2.1E+00 |\n" for i in range(1000))
    with open(path, "w") as f:
        for k in range(80):  # ~5.8 MB, a failure near the end and a warning on the way
            f.write(step)
            if k == 3:
                f.write("UserWarning: torch/utils/checkpoint.py: None of the inputs have requires_grad=True\n")
        f.write("Traceback (most recent call last):\n" + "RuntimeError: CUDA error: misaligned address\n")
        f.write(step[:2000])
    chunk, biggest = 64 << 10, 0

    class Watched(StreamView):
        def _fill(self) -> None:
            super()._fill()
            nonlocal biggest
            biggest = max(biggest, len(self._buf))

        def _read_region(self, pos: int) -> None:
            super()._read_region(pos)
            nonlocal biggest
            biggest = max(biggest, len(self._buf))

    rules = _ruleset(None)
    view = Watched(str(path), rules, chunk)
    found = list(view.candidates())
    lines = _in_memory(path)
    assert found == rules.candidate_lines(lines) and len(found) == 3 and view.count() == len(lines)
    assert path.stat().st_size > 5_000_000 and biggest <= 2 * chunk, biggest


def test_a_file_that_cannot_be_read_is_refused_before_any_diagnosis(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_sources([tmp_path / "missing.log"])


def test_the_compiled_hyperscan_database_is_cached_and_a_bad_cache_is_compiled_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compiling the rules' keywords costs a quarter of a second: the database is written to the user's
    cache once and read back after; a cache that is corrupt or cannot be written is compiled again."""
    if bytescan.hyperscan is None:
        pytest.skip("hyperscan is not installed on this platform")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    keywords = ("nccl", "段错误", "out of memory")
    alternation = "(?i)" + "|".join(re2.escape(k) for k in keywords)
    data = b"ok\nNCCL WARN boom\nfine\nCUDA Out Of Memory\n"

    def scanned() -> list[int]:
        bytescan._hyperscan.cache_clear()  # a new process, as far as the cache is concerned
        scanner = bytescan.ByteScanner(alternation, keywords)
        assert scanner.needs_confirming
        return sorted({data.count(b"\n", 0, at) for at in scanner.hits(data, len(data))[0]})

    for n in range(bytescan.CACHED_DATABASES + 2):  # other keyword sets' databases, older
        stale = tmp_path / "gpuwatch" / f"hyperscan-old{n}.db"
        stale.parent.mkdir(exist_ok=True)
        stale.write_bytes(b"an older rules directory's")
        os.utime(stale, (1_000_000 + n, 1_000_000 + n))
    assert scanned() == [1, 3]
    kept = sorted(p.name for p in (tmp_path / "gpuwatch").glob("hyperscan-*.db"))
    assert len(kept) == bytescan.CACHED_DATABASES and "hyperscan-old0.db" not in kept  # the oldest went
    (cached,) = [p for p in (tmp_path / "gpuwatch").glob("hyperscan-*.db") if "old" not in p.name]
    real = bytescan.hyperscan.Database

    def no_compiling(*args: object, **kwargs: object) -> object:
        raise AssertionError("compiled although cached")

    monkeypatch.setattr(bytescan.hyperscan, "Database", no_compiling)
    assert scanned() == [1, 3]  # read back, not compiled
    monkeypatch.setattr(bytescan.hyperscan, "Database", real)
    cached.write_bytes(b"not a database")
    assert scanned() == [1, 3]
    assert cached.read_bytes() != b"not a database"  # compiled again and written whole
    blocker = tmp_path / "a-file"
    blocker.write_text("the cache's parent is a file: nothing can be written under it")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert scanned() == [1, 3]
    bytescan._hyperscan.cache_clear()


def test_the_prefilter_keeps_re2_s_dfa_as_the_keywords_grow() -> None:
    # RE2 gives a DFA 8 MB by default; past it (the shipped keywords reached it at 16,500 characters of
    # alternation) a search that finds a keyword falls back to the NFA over the rest of the text: 200,000
    # lines took 129 s instead of 0.2 s on the RE2-only path (no Hyperscan, or a keyword it cannot say).
    # RE2 says so on stderr, from C++, so the check runs in a child process: every prefilter pattern, the
    # shipped keywords and 400 more, searched in a text that holds a keyword (the search that needs the
    # reverse DFA for the match's start).
    code = (
        "import random, string\n"
        "from gpuwatch.diagnosis import bytescan\n"
        "from gpuwatch.diagnosis.rules import RuleSet, load_rules\n"
        "rnd = random.Random(5)\n"
        "extra = tuple(''.join(rnd.choice(string.ascii_lowercase + ' ') for _ in range(30)) for _ in range(400))\n"
        "rs = RuleSet(load_rules(), extra)\n"
        "text = 'step 1 loss 2.5\\n' * 50 + 'torch.OutOfMemoryError: CUDA out of memory.\\n' + 'step 2\\n' * 50\n"
        "assert rs.prefilter('torch.OutOfMemoryError: CUDA out of memory.')\n"
        "for rx in (bytescan._exact(rs.alternation), bytescan._with_breaks(rs.alternation)):\n"
        "    assert len(list(rx.finditer(text.encode()))) >= 1\n"
        "assert rs.candidate_lines(text.splitlines()) == [50]\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=TESTS.parent)
    assert done.returncode == 0, done.stderr
    assert "DFA out of memory" not in done.stderr
