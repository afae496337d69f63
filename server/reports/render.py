"""A `PostMortem` as Markdown or as one self-contained HTML page (inline CSS, plots as data: URLs).

Every text in a post-mortem may have come from a job's logs or a node's agent, so all of it is treated
as hostile. First `_clean` drops ANSI escape sequences, control and bidi-override characters and lone
surrogates, and lines are cut at `MAX_LINE` characters. Then:

- HTML: every text goes through ``html.escape(quote=True)``; the page has no script and a
  Content-Security-Policy that forbids any script, any fetch and any resource but data: images and
  inline style, so even a bug in escaping could not run code or call out.
- Markdown: log text (evidence lines, the timeline with its details, an LLM's explanation) goes only
  into fenced code blocks whose backtick fence is longer than any backtick run in the text, so the text
  cannot close them. Other text (names, reasons, outcome, recommendations) is backslash-escaped wherever
  a character could start a link, an image, emphasis, raw HTML, an entity, a table cell or a heading
  (CommonMark: an escaped ASCII punctuation character is always literal). Links are built only from
  `logs_url` and the caller's plot links, and only for http(s) or relative URLs, percent-encoded.
"""

from __future__ import annotations

import base64
import html
import logging
import math
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from urllib.parse import quote, urlsplit

from server.reports import markdown
from server.reports.document import EvidenceLine, GpuSeries, LostWork, PostMortem, StackGroups, TimelineEntry
from server.reports.numbers import significant

log = logging.getLogger(__name__)

MAX_LINE = 300  # characters of one log line shown
MAX_EVIDENCE = 50  # evidence lines shown; the rest are in the full logs
MAX_TIMELINE = 200
MAX_PROSE = 4000  # characters of an explanation or a decision's reason
MAX_RECOMMENDATIONS = 20
MAX_PLOTS = 16  # GPUs of one node
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
NOT_KNOWN = "not known"
FAILURE_EVENTS = ("exit", "failure", "first error", "incident opened")  # the failure's time, best first
TIMELINE_HEADER = ("Time", "Since previous", "Since run start", "What", "Detail")
LLM_LABEL = "LLM analyser's explanation (not verified by rules)"
SECTIONS = ("Summary", "Timeline", "Root cause", "GPUs around the failure", "Lost work", "Recommendations")

_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor movement
    r"|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks
    r"|\x1b[PX^_][^\x1b\n]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]?"  # any other escape
)
# C0 but tab/newline, DEL and C1, line/paragraph separators, bidi embeddings/overrides/isolates, surrogates
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_MD_LINE_START = re.compile(r"^(\s*)([-+=]|\d+(?=[.)]))")
_BACKTICKS = re.compile(r"`+")


# ---------------------------------------------------------------------------------------------- text


def _clean(text: object, *, multiline: bool = False) -> str:
    """Printable text: no escape sequences or control characters; one line unless ``multiline``."""
    s = _CONTROL.sub("", _ANSI.sub("", ("" if text is None else str(text)).replace("\r\n", "\n")))
    s = s.replace("\t", "    ")
    if not multiline:
        s = s.replace("\n", " ⏎ ")
    return s


def _cut(line: str, limit: int = MAX_LINE) -> str:
    return line if len(line) <= limit else f"{line[:limit]} … [{len(line) - limit:,} more characters cut]"


def _line(text: object, limit: int = MAX_LINE) -> str:
    return _cut(_clean(text), limit)


def _lines(text: object, limit: int = MAX_PROSE) -> list[str]:
    """Multi-line text, each line cut at MAX_LINE, the whole at ``limit`` characters; [] for none."""
    s = _clean(text, multiline=True).strip()
    if not s:
        return []
    cut = len(s) - limit
    lines = [_cut(ln) for ln in s[:limit].split("\n")]
    if cut > 0:
        lines.append(f"… [{cut:,} more characters cut]")
    return lines


def _url(url: str | None) -> str | None:
    """``url`` percent-encoded if it is http(s) or relative, else None (javascript:, data:, …)."""
    if not url:
        return None
    s = _clean(url).strip()
    try:
        scheme = urlsplit(s).scheme.lower()
    except ValueError:
        return None
    if scheme not in ("", "http", "https"):
        return None
    return quote(s, safe="/?#@!$&'*+,;=%~-._:[]")


# ------------------------------------------------------------------------------------------- numbers


def _duration(seconds: float | None) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``, ``2 d 03 h``; a minus sign for negative spans."""
    if seconds is None or not math.isfinite(seconds):
        return NOT_KNOWN
    sign, s = ("-" if seconds < 0 else ""), abs(seconds)
    # the unit is chosen on the rounded value: 3599.7 s is "1 h 00 min", not "60 min 00 s"
    if s < 9.95:
        text = f"{s:.1f} s".replace(".0 s", " s")
    elif (secs := round(s)) < 3600:
        text = f"{secs} s" if secs < 60 else "{} min {:02d} s".format(*divmod(secs, 60))
    elif (mins := round(s / 60)) < 24 * 60:
        text = "{} h {:02d} min".format(*divmod(mins, 60))
    else:
        text = "{} d {:02d} h".format(*divmod(round(s / 3600), 24))
    return sign + text


def _significant(value: float) -> str:
    return significant(value, missing=NOT_KNOWN)


def _gpu_hours(value: float) -> str:
    """``34.57 GPU-hours``; under one, with the GPU-seconds: ``0.0031 GPU-hours (11 GPU-s)``."""
    text = f"{_significant(value)} GPU-hours"
    if math.isfinite(value) and 0 < value < 1:
        seconds = value * 3600
        text += f" ({seconds:.1f} GPU-s)" if seconds < 10 else f" ({seconds:,.0f} GPU-s)"
    return text


def _money(value: float, currency: str) -> str:
    return f"{_significant(value)} {_line(currency, 12)}".strip()


def _percent(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return NOT_KNOWN
    return f"{value * 100:.0f} %" if 0 <= value <= 1 else f"{value:g}"


def _utc(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def _when(at: datetime) -> str:
    """A timestamp with its zone (naive times are shown as they are, without one)."""
    if at.tzinfo is None:
        return at.strftime("%Y-%m-%d %H:%M:%S")
    offset = at.utcoffset()
    return at.strftime("%Y-%m-%d %H:%M:%S") + (" UTC" if not offset else at.strftime(" UTC%z"))


def _since(later: datetime, earlier: datetime) -> float:
    return (_utc(later) - _utc(earlier)).total_seconds()


def _plus(seconds: float) -> str:
    return _duration(seconds) if seconds < 0 else "+" + _duration(seconds)


# ------------------------------------------------------------------------------ what both formats say


def failure_time(pm: PostMortem) -> datetime | None:
    """When the run failed: the timeline's exit, else its first error, else the incident's opening."""
    for what in FAILURE_EVENTS:
        for entry in pm.timeline:
            if _clean(entry.what).strip().lower() == what:
                return entry.at
    return None


def _marker(pm: PostMortem) -> float | None:
    failed = failure_time(pm)
    return None if failed is None else _utc(failed).timestamp()


def _plot(series: GpuSeries, marker: float | None) -> bytes | None:
    from server.reports import plots  # matplotlib takes ~0.5 s to import: only when a plot is drawn

    try:
        return plots.gpu_plot_png(series, marker)
    except Exception:  # one odd series must not cost the whole report
        log.exception("plotting GPU %s of %r failed", series.gpu, series.node)
        return None


def gpu_plot(pm: PostMortem, gpu: int) -> bytes | None:
    """The PNG of one plotted GPU, the failure marked; None when it has no plot (no samples, or it failed)."""
    series = next((s for s in pm.plots[:MAX_PLOTS] if s.gpu == gpu), None)
    return None if series is None else _plot(series, _marker(pm))


def gpu_plots(pm: PostMortem) -> dict[int, bytes]:
    """One PNG per plotted GPU, keyed by GPU index, the failure marked: the files `render_markdown` links.
    A GPU whose plot failed is left out (and logged); `render_markdown` then says its plot is not available."""
    marker = _marker(pm)
    plots = {series.gpu: _plot(series, marker) for series in pm.plots[:MAX_PLOTS]}
    return {gpu: png for gpu, png in plots.items() if png is not None}


def _title(pm: PostMortem) -> str:
    job = f"job {_line(pm.job, 120)}" if pm.job else "no job"
    return f"Incident {pm.incident_id}: {job}, {_line(pm.reason, 80) if pm.reason else 'reason not known'}"


def _known(value: object, limit: int = 200) -> str:
    return NOT_KNOWN if value is None or value == "" else _line(value, limit)


def _gpu_list(gpus: Sequence[int]) -> str:
    return ", ".join(str(g) for g in gpus)


def _job_gpus(pm: PostMortem) -> str:
    if pm.job_gpus:
        return _gpu_list(pm.job_gpus)
    return "none (a node-level incident)" if pm.job is None or pm.attempt is None else "not known (not attributed)"


def _summary(pm: PostMortem) -> list[tuple[str, str]]:
    gpus = _gpu_list(pm.gpus) if pm.gpus else "none recorded"
    node = f"{_known(pm.node, 120)} (GPUs: {gpus})"
    return [
        ("Job", _known(pm.job, 120)),
        ("Attempt", _known(pm.attempt)),
        ("Node and GPUs", node),
        ("The job's GPUs", _job_gpus(pm)),
        ("Trigger", _known(pm.trigger)),
        ("State", _known(pm.state)),
        ("Reason", f"{_known(pm.reason, 80)} (category: {_known(pm.category, 80)})"),
        ("Action", _known(pm.action, 80)),
        ("Outcome", _known(pm.outcome, 500)),
        ("Confidence", f"{_percent(pm.confidence)} (source: {_known(pm.source, 40)})"),
    ]


def _timeline_rows(pm: PostMortem) -> list[tuple[str, str, str, str, str]]:
    """(time, +since previous, +since run start, what, detail), in the order given."""
    entries: Sequence[TimelineEntry] = pm.timeline[:MAX_TIMELINE]
    start = next((e.at for e in entries if _clean(e.what).strip().lower() == "run started"), None)
    if start is None and entries:
        start = entries[0].at
    rows, previous = [], None
    for entry in entries:
        prev = "—" if previous is None else _plus(_since(entry.at, previous))
        from_start = "—" if start is None else _plus(_since(entry.at, start))
        rows.append((_when(entry.at), prev, from_start, _line(entry.what, 80), _line(entry.detail)))
        previous = entry.at
    return rows


def _evidence_line(ev: EvidenceLine) -> tuple[str, str]:
    """(``file:line (rank r, node)``, text)."""
    where = [f"rank {ev.rank}"] if ev.rank is not None else []
    if ev.node:
        where.append(_line(ev.node, 80))
    place = f"{_line(ev.file, 120)}:{ev.line}" + (f" ({', '.join(where)})" if where else "")
    return place, _line(ev.text)


def _evidence(pm: PostMortem) -> tuple[list[tuple[str, str]], int]:
    shown = [_evidence_line(ev) for ev in pm.evidence[:MAX_EVIDENCE]]
    return shown, max(pm.evidence_total, len(pm.evidence)) - len(shown)


def _plots_intro(pm: PostMortem) -> list[str]:
    """What the plots show: which GPUs, and over which window (both stated, not left to guess)."""
    out = []
    if pm.plotted:
        out.append(f"Plotted: {_line(pm.plotted, 400)}.")
    if pm.window is not None:
        start, end = pm.window
        how = f" ({_line(pm.window_text, 300)})" if pm.window_text else ""
        out.append(f"Window: {_when(start)} to {_when(end)}{how}.")
    return out


def _recommendations(pm: PostMortem) -> list[str]:
    recs = (" ".join(_lines(r, 600)) for r in pm.recommendations)
    return [r for r in recs if r][:MAX_RECOMMENDATIONS]


def _jobs_lost(pm: PostMortem) -> str:
    """A node's incident: the jobs at work on the node, whose own incidents (if their runs were failed)
    hold the cost."""
    where = f" on {pm.node}" if pm.node else ""
    return (
        f"Lost work: the work in progress of {', '.join(pm.jobs_on_node)}{where} when the incident opened; "
        "each run failed with it has its own incident with the cost."
    )


def _lost(lost: LostWork) -> list[tuple[str, str]]:
    steps = NOT_KNOWN + " (the job reports no steps)" if lost.steps is None else f"{lost.steps:,} steps"
    downtime = "not restarted" if lost.downtime_s is None else _duration(lost.downtime_s)
    recover = "not restarted" if lost.time_to_recover_s is None else _duration(lost.time_to_recover_s)
    return [
        ("Steps since the last valid checkpoint", steps),
        ("Wall time lost", _duration(lost.wall_s)),
        ("GPUs", f"{lost.gpus:,}"),
        ("GPU time lost", _gpu_hours(lost.gpu_hours)),
        ("Cost", _money(lost.cost, lost.currency)),
        ("Downtime (exit to restart)", downtime),
        ("Time to recover (exit to first step)", recover),
        ("Restarts so far", f"{lost.restarts_so_far:,}"),
    ]


# ------------------------------------------------------------------------------------------ Markdown


def _md(text: str) -> str:
    """Text safe inline in Markdown: each character that could start markup is backslash-escaped."""
    return markdown.escape(text)


def _md_para(line: str) -> str:
    """One line of prose that also cannot start a list, a heading underline or a thematic break."""
    return _md_line_start(_md(line))


def _md_line_start(markdown_line: str) -> str:
    """Markdown made unable to start a list, a heading underline or a thematic break."""

    def escape(m: re.Match[str]) -> str:
        mark = m.group(2)
        return m.group(1) + (mark[:-1] + "\\" + mark[-1] if mark[0].isdigit() else "\\" + mark)

    return _MD_LINE_START.sub(escape, markdown_line.lstrip())


def _md_block(lines: Sequence[str]) -> list[str]:
    """A fenced code block whose fence is longer than any backtick run in ``lines``: nothing closes it."""
    longest = max((len(run) for ln in lines for run in _BACKTICKS.findall(ln)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}text", *lines, fence]


def _text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns padded to width; the last one is not padded."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    return [
        "  ".join([*(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)), r[-1]]).rstrip() for r in [header, *rows]
    ]


def _md_link(label: str, url: str | None, image: bool = False) -> str:
    safe = _url(url)
    if safe is None:
        return f"{_md(label)} (no safe link)"
    return f"{'!' if image else ''}[{_md(label)}]({safe})"


MarkdownSection = Callable[[PostMortem, dict[int, str]], list[str] | None]  # None: no such section here

STACK_HEADER = ("", "ranks", "nodes", "waits in", "innermost frames")
#: Ranks listed in a stack group's row at most.
MAX_GROUP_RANKS = 16


def _stack_rows(groups: StackGroups) -> list[tuple[str, str, str, str, str]]:
    """A hang's stack groups as table rows: suspect mark, ranks, nodes, collective, frames."""
    rows = []
    for g in groups.groups:
        ranks = ", ".join(map(str, g.ranks[:MAX_GROUP_RANKS]))
        if len(g.ranks) > MAX_GROUP_RANKS:
            ranks += f" … ({len(g.ranks)} ranks)"
        frames = " < ".join(_line(f, 120) for f in g.frames) or "(no Python frame)"
        waits = g.collective or "no collective"
        if g.flight:
            waits += f"; flight recorder: {_line(g.flight, 120)}"
        rows.append(("SUSPECT" if g.suspect else "", ranks, _line(", ".join(g.nodes), 120), waits, frames))
    return rows


def _md_summary(pm: PostMortem, links: dict[int, str]) -> list[str]:
    return [f"- **{label}:** {_md(value)}" for label, value in _summary(pm)]


def _md_timeline(pm: PostMortem, links: dict[int, str]) -> list[str]:
    rows = _timeline_rows(pm)
    if not rows:
        return [f"Timeline: {NOT_KNOWN}."]
    out = _md_block(_text_table(TIMELINE_HEADER, rows))
    if len(pm.timeline) > len(rows):
        out += ["", f"{len(pm.timeline) - len(rows):,} more entries not shown."]
    return out


def _md_root_cause(pm: PostMortem, links: dict[int, str]) -> list[str]:
    out: list[str] = []
    explanation = _lines(pm.explanation)
    if not explanation:
        out.append(f"Explanation: {NOT_KNOWN}.")
    elif pm.llm_explanation:
        out += [f"**{LLM_LABEL}:**", "", *_md_block(explanation)]
    else:
        out += ["  \n".join(_md_para(ln) for ln in explanation)]
    why = " ".join(_lines(pm.why))
    out += ["", f"**Why this action:** {_md(why) if why else NOT_KNOWN}", ""]
    shown, more = _evidence(pm)
    if shown:
        out += ["**Evidence:**", "", *_md_block([f"{place}  {text}" for place, text in shown])]
    else:
        out.append("Evidence: none recorded.")
    if more > 0:
        at = f" at {_md_link(_line(pm.logs_url), pm.logs_url)}" if pm.logs_url else ""
        out += ["", f"{more:,} more lines: see the full logs{at}."]
    return out


def _md_stack_groups(pm: PostMortem, links: dict[int, str]) -> list[str] | None:
    """A hang's ranks grouped by stack (server/reports/stack_groups.py); no section for other incidents."""
    groups = pm.stack_groups
    if groups is None:
        return None
    out = [_md_para(f"{groups.why}." if groups.why else "No analysis.")]
    rows = _stack_rows(groups)
    if rows:
        out += ["", *_md_block(_text_table(STACK_HEADER, rows))]
    if groups.more:
        out += ["", f"{groups.more} more groups not shown."]
    if groups.failed:
        out += ["", "**Ranks without a stack:**", "", *_md_block([_line(f) for f in groups.failed])]
    return out


def _md_gpus(pm: PostMortem, links: dict[int, str]) -> list[str]:
    if not pm.plots:
        return ["No GPU samples were recorded around the failure."]
    out = [_md_para(line) + "  " for line in _plots_intro(pm)]
    if out:
        out[-1] = out[-1].rstrip()
        out.append("")
    for series in pm.plots[:MAX_PLOTS]:
        label = f"{_line(series.node, 80)} GPU {series.gpu}"
        link = links.get(series.gpu)
        out += [_md_link(label, link, image=True) if link else f"{_md(label)}: plot not available.", ""]
    if len(pm.plots) > MAX_PLOTS:
        out += [f"{len(pm.plots) - MAX_PLOTS} more GPUs not plotted.", ""]
    return out[:-1] if out and out[-1] == "" else out


def _md_lost(pm: PostMortem, links: dict[int, str]) -> list[str]:
    if pm.lost is None and pm.jobs_on_node:
        return [_md(_jobs_lost(pm))]
    if pm.lost is None:
        return [f"Lost work: {NOT_KNOWN} (no job run was interrupted, or none was recorded)."]
    return [f"- **{label}:** {_md(value)}" for label, value in _lost(pm.lost)]


def _md_recommendations(pm: PostMortem, links: dict[int, str]) -> list[str]:
    return [f"- {_md_line_start(markdown.to_markdown(rec))}" for rec in _recommendations(pm)] or ["None."]


#: The sections, in order: a new one is a function here and one in `HTML_SECTIONS`. A section whose
#: function answers None is left out (Stack groups, but for a hang with a stack capture); `SECTIONS`
#: are the ones every post-mortem has.
MARKDOWN_SECTIONS: tuple[tuple[str, MarkdownSection], ...] = (
    ("Summary", _md_summary),
    ("Timeline", _md_timeline),
    ("Root cause", _md_root_cause),
    ("Stack groups", _md_stack_groups),
    ("GPUs around the failure", _md_gpus),
    ("Lost work", _md_lost),
    ("Recommendations", _md_recommendations),
)


def render_markdown(pm: PostMortem, plot_links: dict[int, str]) -> str:
    """The post-mortem as Markdown; the plot of GPU ``n`` is the image at ``plot_links[n]``."""
    out = [f"# {_md(_title(pm))}"]
    for title, section in MARKDOWN_SECTIONS:
        if (body := section(pm, plot_links)) is not None:
            out += ["", f"## {title}", "", *body]
    logs = _md_link(_line(pm.logs_url), pm.logs_url) if pm.logs_url else NOT_KNOWN
    out += ["", "---", "", f"Full logs: {logs}", "", _md(f"Generated {_when(pm.generated_at)} by gpuwatch.")]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------- HTML

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;background:#fff;
 max-width:1000px;margin:24px auto;padding:0 16px}
h1{font-size:22px;margin:0 0 12px}h2{font-size:17px;border-bottom:1px solid #d8dde6;padding-bottom:4px;margin-top:28px}
table{border-collapse:collapse;width:100%}
th,td{border:1px solid #d8dde6;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f2f4f8;font-weight:600}table.kv th{width:34%}
code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
td code,pre{white-space:pre-wrap;overflow-wrap:anywhere}
pre{background:#f6f8fa;border:1px solid #d8dde6;padding:8px;margin:0}
.llm{border-left:4px solid #d9822b;background:#fff8ef;padding:8px 12px}
.llm strong{color:#a65d00}.muted{color:#5b6475}
figure{margin:12px 0}figure img{max-width:100%;height:auto;border:1px solid #d8dde6}
.scope{color:#3a4252;background:#f6f8fa;border-left:4px solid #8aa1c1;padding:6px 10px}
li code{background:#f2f4f8;padding:0 3px;border-radius:3px}
footer{margin-top:32px;border-top:1px solid #d8dde6;padding-top:8px;font-size:12px}
"""


def _h(text: str) -> str:
    return html.escape(text, quote=True)


def _kv_table(rows: Iterable[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{_h(k)}</th><td>{_h(v)}</td></tr>" for k, v in rows)
    return f'<table class="kv">{body}</table>'


def _img(png: bytes, alt: str) -> str:
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{_h(alt)}" width="{width}" height="{height}" src="data:image/png;base64,{data}">'


def _html_summary(pm: PostMortem) -> str:
    return _kv_table(_summary(pm))


def _html_timeline(pm: PostMortem) -> str:
    rows = _timeline_rows(pm)
    if not rows:
        return f'<p class="muted">Timeline: {NOT_KNOWN}.</p>'
    head = "".join(f"<th>{_h(h)}</th>" for h in TIMELINE_HEADER)
    body = "".join(
        "<tr>" + "".join(f"<td>{_h(c)}</td>" for c in cells[:-1]) + f"<td><code>{_h(cells[-1])}</code></td></tr>"
        for cells in rows
    )
    out = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    if len(pm.timeline) > len(rows):
        out += f'\n<p class="muted">{len(pm.timeline) - len(rows):,} more entries not shown.</p>'
    return out


def _logs_link(pm: PostMortem) -> str:
    logs = _url(pm.logs_url)
    return f'<a href="{_h(logs)}">{_h(_line(pm.logs_url))}</a>' if logs else ""


def _html_root_cause(pm: PostMortem) -> str:
    parts = []
    explanation = "<br>".join(_h(ln) for ln in _lines(pm.explanation))
    if not explanation:
        parts.append(f'<p class="muted">Explanation: {NOT_KNOWN}.</p>')
    elif pm.llm_explanation:
        parts.append(f'<div class="llm"><p><strong>{_h(LLM_LABEL)}:</strong></p><p>{explanation}</p></div>')
    else:
        parts.append(f"<p>{explanation}</p>")
    why = " ".join(_lines(pm.why))
    parts.append(f"<p><strong>Why this action:</strong> {_h(why) if why else NOT_KNOWN}</p>")
    shown, more = _evidence(pm)
    if shown:
        body = "".join(f"<tr><td><code>{_h(p)}</code></td><td><code>{_h(t)}</code></td></tr>" for p, t in shown)
        parts.append(
            f"<h3>Evidence</h3><table><thead><tr><th>Where</th><th>Line</th></tr></thead><tbody>{body}</tbody></table>"
        )
    else:
        parts.append('<p class="muted">Evidence: none recorded.</p>')
    if more > 0:
        at = f" at {_logs_link(pm)}" if pm.logs_url and _url(pm.logs_url) else ""
        parts.append(f'<p class="muted">{more:,} more lines: see the full logs{at}.</p>')
    return "\n".join(parts)


def _html_stack_groups(pm: PostMortem) -> str | None:
    groups = pm.stack_groups
    if groups is None:
        return None
    parts = [f"<p>{_h(groups.why or 'No analysis')}.</p>"]
    rows = _stack_rows(groups)
    if rows:
        head = "".join(f"<th>{_h(h)}</th>" for h in STACK_HEADER)
        body = "".join(
            "<tr>" + "".join(f"<td>{_h(c)}</td>" for c in cells[:-1]) + f"<td><code>{_h(cells[-1])}</code></td></tr>"
            for cells in rows
        )
        parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    if groups.more:
        parts.append(f'<p class="muted">{groups.more} more groups not shown.</p>')
    if groups.failed:
        items = "".join(f"<li><code>{_h(_line(f))}</code></li>" for f in groups.failed)
        parts.append(f"<p>Ranks without a stack:</p><ul>{items}</ul>")
    return "\n".join(parts)


def _html_gpus(pm: PostMortem) -> str:
    if not pm.plots:
        return '<p class="muted">No GPU samples were recorded around the failure.</p>'
    intro = _plots_intro(pm)
    parts = [f'<p class="scope">{"<br>".join(_h(line) for line in intro)}</p>'] if intro else []
    marker = _marker(pm)
    for series in pm.plots[:MAX_PLOTS]:
        label = f"{_line(series.node, 80)} GPU {series.gpu}"
        png = _plot(series, marker)
        if png is None:
            parts.append(f'<p class="muted">{_h(label)}: plot not available.</p>')
            continue
        parts.append(f"<figure>{_img(png, label)}<figcaption>{_h(label)}</figcaption></figure>")
    if len(pm.plots) > MAX_PLOTS:
        parts.append(f'<p class="muted">{len(pm.plots) - MAX_PLOTS} more GPUs not plotted.</p>')
    return "\n".join(parts)


def _html_lost(pm: PostMortem) -> str:
    if pm.lost is None and pm.jobs_on_node:
        return f"<p>{_h(_jobs_lost(pm))}</p>"
    if pm.lost is None:
        return f'<p class="muted">Lost work: {NOT_KNOWN} (no job run was interrupted, or none was recorded).</p>'
    return _kv_table(_lost(pm.lost))


def _html_recommendations(pm: PostMortem) -> str:
    items = "".join(f"<li>{markdown.to_html(rec)}</li>" for rec in _recommendations(pm))
    return f"<ul>{items}</ul>" if items else '<p class="muted">None.</p>'


#: The sections, in order, with their element ids: a new one is a function here and one in
#: `MARKDOWN_SECTIONS`.
HTML_SECTIONS: tuple[tuple[str, str, Callable[[PostMortem], str | None]], ...] = (
    ("summary", "Summary", _html_summary),
    ("timeline", "Timeline", _html_timeline),
    ("root-cause", "Root cause", _html_root_cause),
    ("stack-groups", "Stack groups", _html_stack_groups),
    ("gpus", "GPUs around the failure", _html_gpus),
    ("lost-work", "Lost work", _html_lost),
    ("recommendations", "Recommendations", _html_recommendations),
)


def render_html(pm: PostMortem) -> str:
    """The post-mortem as one page that needs nothing else: no script, no external resource."""
    title = _title(pm)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_h(CSP)}">',
        '<meta name="referrer" content="no-referrer">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_h(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_h(title)}</h1>",
    ]
    for sid, name, section in HTML_SECTIONS:
        if (body := section(pm)) is not None:  # None: no such section for this incident
            parts.append(f'<section id="{sid}"><h2>{_h(name)}</h2>{body}</section>')
    generated = f"Generated {_h(_when(pm.generated_at))} by gpuwatch."
    parts.append(f"<footer>Full logs: {_logs_link(pm) or NOT_KNOWN}<br>{generated}</footer>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
