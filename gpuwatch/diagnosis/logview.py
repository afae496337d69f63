"""How the engine reads one log: the lines the prefilter passes, any line near them by index, the first
line of training progress after a line, and the count of lines once the scan is over.

Two views answer the same questions: `ListView` over lines already in memory (the server's, the
supervisor's, the corpus's), and `stream.StreamView` over a file read as bytes in chunks, which splits
lines only around the prefilter's matches. The engine asks only these questions, so both give the same
diagnosis, evidence lines included.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from gpuwatch.diagnosis.rules import RuleSet

#: How far after a candidate training progress is looked for (lines): progress seen there, before the
#: next root candidate of another reason, means the run went on from it.
PROGRESS_WINDOW = 5000

# Signs that a run went on after an error (so the error was survived, not fatal): training progress.
PROGRESS = re.compile(
    r"(?i)\b(?:step|iter(?:ation)?|epoch|it|global_step)\b\W{0,3}\[?\s*\d+.{0,120}\b(?:loss|lr|learning.rate)\b"
    # tqdm's bar: "12/500 [00:31<...". At "0/20000 [00:00<?" it has only been drawn, no step is done (round 194:
    # s3prl's "overall:   0%|...| 0/20000" under the exception that ended the run, case 6583)
    r"|(?<![\d.])[1-9]\d*/\d+ \[(?:\d+:)?\d+:\d+<"
    # tqdm's bar for an iterable of unknown length: "1it [01:09, 70.00s/it]" (no total, no ETA); "0it" is no step
    r"|(?<![\w.])[1-9]\d*it \[(?:\d+:)?\d+:\d+, "
)


class LogView:
    """The questions the engine asks of a log. Lines are numbered from 0, as `str.splitlines` of the
    log's text numbers them; ``get`` answers None past the end."""

    def __init__(self) -> None:
        # The progress search so far: lines p_from..p_to (1-based) were searched; p_at is the first
        # progress line among them, if any. Candidates come in order, so each line is searched once.
        self._p_from, self._p_to, self._p_at = 1, 0, None

    def candidates(self) -> Iterator[int]:
        """Indices of the lines that pass the prefilter, ascending."""
        raise NotImplementedError

    def get(self, i: int) -> str | None:
        """Line ``i`` (the scanner asks for lines from the one before the line it visits onwards)."""
        raise NotImplementedError

    def count(self) -> int:
        """How many lines the log has (after ``candidates`` is exhausted)."""
        raise NotImplementedError

    def tail(self, n: int) -> tuple[int, list[str]]:
        """The last ``n`` lines at most (after ``candidates`` is exhausted), with the index of the first."""
        raise NotImplementedError

    def first_progress(self, line: int) -> int | None:
        """The first line (1-based) after 1-based ``line`` and within `PROGRESS_WINDOW` of it that shows
        training progress, else None."""
        start, end = line + 1, line + PROGRESS_WINDOW
        if self._p_from <= start <= self._p_to + 1 and (self._p_at is None or self._p_at >= start):
            if self._p_at is not None:
                return self._p_at if self._p_at <= end else None
        else:
            self._p_from, self._p_to, self._p_at = start, start - 1, None
        j = self._p_to + 1
        while j <= end:
            text = self.get(j - 1)
            if text is None:
                break
            self._p_to = j
            if PROGRESS.search(text):
                self._p_at = j
                break
            j += 1
        return self._p_at if self._p_at is not None and self._p_at <= end else None


class ListView(LogView):
    """A log whose lines are in memory."""

    def __init__(self, lines: Sequence[str], rules: RuleSet) -> None:
        super().__init__()
        self._lines = lines
        self._rules = rules

    def candidates(self) -> Iterator[int]:
        return iter(self._rules.candidate_lines(self._lines))

    def get(self, i: int) -> str | None:
        return self._lines[i] if 0 <= i < len(self._lines) else None

    def count(self) -> int:
        return len(self._lines)

    def tail(self, n: int) -> tuple[int, list[str]]:
        start = max(0, len(self._lines) - n)
        return start, list(self._lines[start:])
