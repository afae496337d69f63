"""The compressed view of a run's logs that the LLM analyser reads.

A 50k-line log does not fit in a prompt, and most of it is the same few lines with other numbers. So
every line is reduced to a template (Drain3 over lines whose numbers, hex, UUIDs, timestamps and
directories are masked) and the templates are listed once with their counts; only the lines around
something that looks like an error are kept verbatim, each under an id (`L17`) that maps back to its
file and line, so that what the model cites can be checked against the log.

The fingerprint hashes what stays the same when the same failure happens again in another run (the
template set and the error windows' templates, never numbers, timestamps or file names), so the
analyser can reuse an answer instead of asking again.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from drain3 import TemplateMiner
from drain3.template_miner_config import TemplateMinerConfig

from gpuwatch.diagnosis.model import Evidence, LogSource

#: Verbatim lines kept before and after each error line.
RADIUS = 5
#: Radii a window can shrink to when the budget is short.
_RADII = (RADIUS, 2, 0)
#: Error lines used as window anchors per file: the first and last occurrence of each error template,
#: and at most this many in all (half from the start of the file, half from the end).
_MAX_ANCHORS_PER_FILE = 40
#: A traceback's body (its frames up to the final exception) is kept whole up to this many lines.
_MAX_TRACEBACK_BODY = 30
_MAX_TRACEBACK_SCAN = 400
_MAX_VERBATIM_CHARS = 400
_MAX_TEMPLATE_CHARS = 240
_MAX_MINED_CHARS = 1000  # longer lines are cut before mining: Drain's cost grows with the token count
_ID_WIDTH = len("L99999 | ")  # the cost of an id prefix, counted before the ids are known

# "Looks like an error": substrings of the lowercased line (a keyword alternation regex costs ten times
# more per line); the short words must also stand alone ("info" is not "inf").
_ERROR_WORDS = (
    "error", "exception", "traceback", "fatal", "killed", "timeout", "timed out", "xid", "nccl warn",
    "out of memory", "oom", "segmentation fault", "sigsegv", "sigkill", "sigterm", "sigbus", "sigabrt",
    "core dumped", "abort", "panic", "fallen off the bus", "fell off the bus", "ecc", "uncorrectable",
    "denied", "no such file", "no space left", "cancelled", "preempt", "failed", "failure", "unreachable",
    "refused", "reset by peer", "received signal", "exit code", "exitcode", "nan", "inf", "heartbeat",
)  # fmt: skip
_SHORT_WORDS = re.compile(r"\b(?:xid|oom|ecc|nan|inf)\b")
_LONG_WORDS = tuple(w for w in _ERROR_WORDS if w not in ("xid", "oom", "ecc", "nan", "inf"))
_TRACEBACK = re.compile(r"Traceback \(most recent calls? (?:last|WITHOUT Sacred internals)\)")
# Launcher prefixes ([rank3]:, [default3]:, [1,3]<stderr>:, "3: ") stripped to see a traceback's indentation.
_LAUNCHER_PREFIX = re.compile(r"^(?:\[[^\]]*\](?:<std(?:out|err)>)?:\s?|\d{1,5}: )+")
_TRACEBACK_BODY = re.compile(r"^(?:\s|Traceback|During handling|The above exception|$)")
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f]")
# One pass over the line, alternatives in order of precedence. Directories are masked and the file name
# kept: run directories change between runs, `train.py` versus `distributed_c10d.py` tells something.
_MASK = re.compile(
    r"(?=[0-9a-fA-F/~.])(?:"  # most positions fail this one test instead of every alternative
    r"(?P<uuid>\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)"
    r"|(?P<ts>\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?)"
    r"|(?P<ip>\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b)"
    r"|(?P<hex>\b0[xX][0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{8,}\b)"
    r"|(?P<path>(?<![\w.:/~-])(?:~|\.{1,2})?(?:/[\w.+@%=,-]+)*/(?=[\w.+@%=,-]))"
    r"|(?P<num>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?))"
)
# Every pattern above sees digits only as a class, so a line with each digit turned into 0 masks the same:
# that is the cache key, and a log's lines that differ only in their numbers are masked once.
_DIGITS = str.maketrans("123456789", "000000000")
_PARAM = "<*>"


@dataclass(frozen=True, slots=True)
class Excerpt:
    """What goes in the prompt (`text`), what its ids point at (`lines`), and a key for the failure."""

    text: str
    lines: dict[str, Evidence] = field(default_factory=dict)
    fingerprint: str = ""


@dataclass(slots=True)
class _Window:
    source: int
    anchors: list[int]  # error lines (0-based) the window is around
    core: set[int]  # lines kept at any radius: a traceback's body
    also_in: list[str] = field(default_factory=list)  # other files with the same window, numbers aside
    priority: int = 1

    def lines(self, radius: int, n_lines: int) -> list[int]:
        keep = set(self.core)
        for a in self.anchors:
            keep.update(range(max(0, a - radius), min(n_lines, a + radius + 1)))
        return sorted(keep)


def mask(line: str) -> str:
    """The line with what varies between runs replaced by `<*>` (directories: `<*>/name.py`)."""
    return _mask(line.translate(_DIGITS))


def _mask(line: str) -> str:
    text = _CONTROL.sub("", line).strip()
    return _MASK.sub(lambda m: _PARAM + "/" if m.lastgroup == "path" else _PARAM, text)


def looks_like_error(line: str) -> bool:
    lower = line.lower()
    if any(w in lower for w in _LONG_WORDS):
        return True
    return ("xid" in lower or "oom" in lower or "ecc" in lower or "nan" in lower or "inf" in lower) and bool(
        _SHORT_WORDS.search(lower)
    )


def _clean(text: str, limit: int) -> str:
    text = _CONTROL.sub("", text)
    return text if len(text) <= limit else f"{text[:limit]}…[+{len(text) - limit} chars]"


class _Templates:
    """Drain3 in memory, fed each distinct masked line once (which is also what makes it fast)."""

    def __init__(self) -> None:
        config = TemplateMinerConfig()
        config.drain_sim_th = 0.5
        config.profiling_enabled = False
        self._miner = TemplateMiner(persistence_handler=None, config=config)
        self._cluster_of: dict[str, int] = {}
        self._seen: dict[str, tuple[int | None, bool]] = {}

    def line(self, line: str) -> tuple[int | None, bool]:
        """The line's cluster (None for a blank line) and whether it looks like an error."""
        key = line.translate(_DIGITS)
        got = self._seen.get(key)
        if got is None:
            masked = _mask(key)[:_MAX_MINED_CHARS]
            cid = None
            if masked:
                cid = self._cluster_of.get(masked)
                if cid is None:
                    cid = self._miner.add_log_message(masked)["cluster_id"]
                    self._cluster_of[masked] = cid
            got = self._seen[key] = (cid, looks_like_error(key))
        return got

    def template(self, cid: int | None) -> str:
        # Read at the end: a cluster's template generalises as later lines join it.
        return "" if cid is None else self._miner.drain.id_to_cluster[cid].get_template()


def _traceback_end(lines: Sequence[str], start: int) -> int:
    """The line of the final exception of the traceback that starts at ``start``."""
    stop = min(len(lines), start + _MAX_TRACEBACK_SCAN)
    for k in range(start + 1, stop):
        if not _TRACEBACK_BODY.match(_LAUNCHER_PREFIX.sub("", _CONTROL.sub("", lines[k]), count=1)):
            return k
    return stop - 1


def _anchors(error_lines: list[int], templates: list[str]) -> list[int]:
    """First and last occurrence of each error template: a thousand identical warnings make one window."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i in error_lines:
        first.setdefault(templates[i], i)
        last[templates[i]] = i
    chosen = sorted(set(first.values()) | set(last.values()))
    if len(chosen) > _MAX_ANCHORS_PER_FILE:
        half = _MAX_ANCHORS_PER_FILE // 2
        chosen = chosen[:half] + chosen[-half:]
    return chosen


def _windows_of(index: int, lines: Sequence[str], anchors: list[int], must: set[int]) -> list[_Window]:
    """Anchors whose ±RADIUS ranges touch make one window; a traceback brings its body along."""
    anchor_set = set(anchors) | must
    core: set[int] = set()
    for a in sorted(anchor_set):
        if _TRACEBACK.search(lines[a]):
            end = _traceback_end(lines, a)
            anchor_set.add(end)
            core.update(range(max(a, end - _MAX_TRACEBACK_BODY), end + 1))
    covered = set(core)
    for a in anchor_set:
        covered.update(range(max(0, a - RADIUS), min(len(lines), a + RADIUS + 1)))
    runs: list[list[int]] = []
    for i in sorted(covered):
        if not runs or i > runs[-1][-1] + 1:
            runs.append([])
        runs[-1].append(i)
    windows = []
    for run in runs:
        members = set(run)
        w = _Window(index, sorted(anchor_set & members), core & members)
        w.priority = -1 if must & members else 1
        windows.append(w)
    return windows


def _render_window(w: _Window, radius: int, source: LogSource, first_id: int) -> tuple[list[str], dict[str, int]]:
    idx = w.lines(radius, len(source.lines))
    where = ", ".join(
        x
        for x in (
            f"node {source.node}" if source.node else "",
            f"rank {source.rank}" if source.rank is not None else "",
        )
        if x
    )
    header = f"### {source.file}{f' ({where})' if where else ''}, lines {idx[0] + 1}-{idx[-1] + 1}"
    if w.also_in:
        others = sorted(set(w.also_in) - {source.file})
        named = ", ".join(others[:3]) + (f" and {len(others) - 3} more files" if len(others) > 3 else "")
        header += f"; {len(w.also_in)} more like it, numbers aside" + (f", in {named}" if others else "")
    out = [header]
    ids: dict[str, int] = {}
    prev = None
    for i in idx:
        if prev is not None and i > prev + 1:
            out.append("…")
        lid = f"L{first_id + len(ids)}"
        ids[lid] = i
        out.append(f"{lid} | {_clean(source.lines[i], _MAX_VERBATIM_CHARS)}")
        prev = i
    return out, ids


def _cost(lines: Iterable[str]) -> int:
    return sum(len(s) + 1 for s in lines)


def build_excerpt(sources: list[LogSource], budget_tokens: int = 3000, focus: Iterable[Evidence] = ()) -> Excerpt:
    """Templates with counts, then the verbatim error windows (each file's newest last), in at most
    ``budget_tokens`` (estimated as characters / 4). The windows are served first: each one's error
    lines alone, in priority order (the rules' evidence, then each file's first and last window, then
    the rest), then widened to ±2 and ±5 lines as room allows; templates get what is left.
    ``focus``: lines that must be anchors even if they do not look like errors (the rules' evidence)."""
    budget = max(0, budget_tokens) * 4
    miner = _Templates()
    mined = [[miner.line(line) for line in s.lines] for s in sources]
    templates = [[miner.template(cid) for cid, _ in m] for m in mined]

    counts: dict[str, int] = {}
    first_seen: dict[str, tuple[int, int]] = {}
    last_seen: dict[str, tuple[int, int]] = {}
    for si, ts in enumerate(templates):
        for i, t in enumerate(ts):
            if t:
                counts[t] = counts.get(t, 0) + 1
                first_seen.setdefault(t, (si, i))
                last_seen[t] = (si, i)

    focus_by_file: dict[str, set[int]] = {}
    for e in focus:
        focus_by_file.setdefault(e.file, set()).add(e.line - 1)
    windows: list[_Window] = []
    for si, s in enumerate(sources):
        errors = [i for i, (_, is_error) in enumerate(mined[si]) if is_error]
        # The end of each file too: a hang or a silent SIGKILL leaves no error line, only where it stopped.
        tail = next((i for i in range(len(s.lines) - 1, -1, -1) if templates[si][i]), None)
        anchors = _anchors(errors, templates[si]) + ([tail] if tail is not None else [])
        must = {i for i in focus_by_file.get(s.file, ()) if 0 <= i < len(s.lines)}
        ws = _windows_of(si, s.lines, anchors, must)
        if ws:
            ws[0].priority = min(ws[0].priority, 0)
            ws[-1].priority = min(ws[-1].priority, 0)
        windows.extend(ws)

    # The same window in several files (every rank's NCCL watchdog) is shown once.
    unique: list[_Window] = []
    by_signature: dict[tuple[str, ...], _Window] = {}
    for w in windows:
        sig = tuple(templates[w.source][i] for i in w.lines(RADIUS, len(sources[w.source].lines)))
        seen = by_signature.get(sig)
        if seen is None:
            by_signature[sig] = w
            unique.append(w)
        else:
            seen.also_in.append(sources[w.source].file)
            seen.priority = min(seen.priority, w.priority)

    fingerprint = hashlib.sha256(
        json.dumps({"templates": sorted(counts), "windows": sorted(by_signature)}, ensure_ascii=False).encode()
    ).hexdigest()

    # Windows first: the budget goes to the evidence before the overview. Every window at ±0 lines first,
    # in priority order, so one long window cannot crowd out another error; then they widen.
    win_head = "## Error windows (verbatim lines; cite them by id)"
    left = budget - len(win_head) - 1

    def cost(w: _Window, radius: int) -> int:
        body, _ = _render_window(w, radius, sources[w.source], 0)
        return _cost(body) + len(body) * (_ID_WIDTH - len("L0 | "))

    order = sorted(unique, key=lambda w: (w.priority, w.source, w.lines(0, len(sources[w.source].lines))[0]))
    radius_of: dict[int, int] = {}
    for r in reversed(_RADII):
        for k, w in enumerate(order):
            if k not in radius_of and r != _RADII[-1]:
                continue
            more = cost(w, r) - (cost(w, radius_of[k]) if k in radius_of else 0)
            if more <= left:
                radius_of[k] = r
                left -= more
    chosen = sorted(
        ((order[k], r) for k, r in radius_of.items()),
        key=lambda c: (c[0].source, c[0].lines(c[1], len(sources[c[0].source].lines))[0]),
    )

    window_text: list[str] = []
    ids: dict[str, Evidence] = {}
    shown: dict[str, int] = {}
    for w, radius in chosen:
        body, got = _render_window(w, radius, sources[w.source], len(ids) + 1)
        window_text.extend(body)
        s = sources[w.source]
        for lid, i in got.items():
            ids[lid] = Evidence(s.file, i + 1, s.lines[i])
            shown[templates[w.source][i]] = shown.get(templates[w.source][i], 0) + 1 + len(w.also_in)
    if window_text:
        window_text.insert(0, win_head)

    # Templates with what is left, the latest-seen first (nearer the failure); listed in log order.
    tpl_head = "## Line templates of the whole run (deduplicated; [xN]: N lines; <*>: a varying part)"
    left = budget - _cost(window_text) - len(tpl_head) - 1 - len("(99999 more templates left out)") - 1
    candidates = [t for t in counts if shown.get(t, 0) < counts[t]]
    kept: set[str] = set()
    for t in sorted(candidates, key=lambda t: last_seen[t], reverse=True):
        line = f"[x{counts[t]}] {_clean(t, _MAX_TEMPLATE_CHARS)}"
        if len(line) + 1 <= left:
            kept.add(t)
            left -= len(line) + 1
    template_text: list[str] = []
    if kept:
        template_text = [tpl_head]
        template_text += [
            f"[x{counts[t]}] {_clean(t, _MAX_TEMPLATE_CHARS)}" for t in sorted(kept, key=lambda t: first_seen[t])
        ]
        if len(kept) < len(candidates):
            template_text.append(f"({len(candidates) - len(kept)} more templates left out)")

    text = "\n".join(template_text + window_text)
    return Excerpt(text=text, lines=ids, fingerprint=fingerprint)
