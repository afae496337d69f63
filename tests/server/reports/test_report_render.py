"""Post-mortem rendering: sections, numbers, the timeline, plots, and log text that tries to escape.

The Markdown is checked by rendering it with markdown-it-py (CommonMark, raw HTML allowed, as a lax
viewer would), so "harmless" means what a real renderer makes of it, not what a regex sees.
"""

from __future__ import annotations

import base64
import re
import struct
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser

import numpy as np
import pytest
from markdown_it import MarkdownIt
from matplotlib.image import imread

from server.reports.document import EvidenceLine, GpuPoint, GpuSeries, LostWork, PostMortem, TimelineEntry
from server.reports.plots import bar_chart_png, gpu_plot_png
from server.reports.postmortem import ADVICE, SCRIPT_ADVICE
from server.reports.render import CSP, MAX_RECOMMENDATIONS, gpu_plot, gpu_plots, render_html, render_markdown

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
START = datetime(2025, 3, 4, 10, 0, 0, tzinfo=UTC)
FAILURE = START + timedelta(hours=1, minutes=2, seconds=5)
SECTIONS = ("Summary", "Timeline", "Root cause", "GPUs around the failure", "Lost work", "Recommendations")
LOGS_URL = "/api/v1/incidents/42/logs"
OUR_TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "section", "table", "thead", "tbody", "tr",
    "th", "td", "code", "p", "strong", "em", "div", "br", "figure", "img", "figcaption", "ul", "li", "a", "footer",
}  # fmt: skip
MD_TAGS = {"h1", "h2", "p", "ul", "li", "strong", "pre", "code", "img", "a", "hr", "br"}

# Log text that tries to become markup, each with a marker that must never appear as markup.
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
MD_LINK = "[click](javascript:alert(1)) ![i](javascript:alert(2))"
FENCE_BREAK = "start\n``````````\n<b>after the fence</b> [escaped](javascript:alert(3))\n``````````\nend"
ANSI = "\x1b[31mred\x1b[0m \x1b]0;title\x07 \x1b[2J bell\x07 nul\x00 bidi\u202e"
LONG = "x" * 100_000
TEXT_ONLY: tuple[GpuSeries, ...] = ()  # for tests of text alone: a plot costs ~0.2 s to draw


def _png_size(png: bytes) -> tuple[int, int]:
    """(width, height) from the IHDR chunk, after checking the signature and the chunk's CRC."""
    assert png[:8] == PNG_SIGNATURE
    length, kind = struct.unpack(">I4s", png[8:16])
    assert (length, kind) == (13, b"IHDR")
    (crc,) = struct.unpack(">I", png[29:33])
    assert zlib.crc32(png[12:29]) == crc
    return struct.unpack(">II", png[16:24])


def _series(gpu: int, points: int = 360, xid: bool = False, node: str = "gpu-node-17") -> GpuSeries:
    t = FAILURE.timestamp()
    pts = tuple(
        GpuPoint(
            ts=t - 300 + i,
            util=95.0 - (i % 9) if i < 295 else 0.0,
            fb_used_mib=None if i % 50 == 7 else 70_000.0 + 40 * gpu + (i % 13),
            power_w=650.0 - (i % 23) if i < 295 else 90.0,
            temp_c=70.0 + (i % 5) / 2,
        )
        for i in range(points)
    )
    return GpuSeries(node=node, gpu=gpu, points=pts, xids=((t - 3, 79),) if xid else ())


def full_postmortem(**changes: object) -> PostMortem:
    """An incident with everything known: a job, lost work, four GPUs plotted, an Xid on GPU 3."""
    pm = PostMortem(
        incident_id=42,
        trigger="run_exit",
        state="resolved",
        job="llama-70b-pretrain",
        attempt=2,
        node="gpu-node-17",
        gpus=(0, 1, 2, 3),
        reason="xid_79_fell_off_bus",
        category="hardware",
        action="restart_exclude_node",
        outcome="restarted as attempt 3, which succeeded",
        confidence=0.95,
        source="rules",
        explanation="GPU 3 fell off the bus (Xid 79).\nThe driver lost the device.",
        llm_explanation=False,
        why="a hardware fault: restart without the node",
        evidence=(
            EvidenceLine("kern.log", 1201, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", None, "n17"),
            EvidenceLine("rank3.log", 88, "RuntimeError: CUDA error: unspecified launch failure", 3, "gpu-node-17"),
        ),
        evidence_total=2,
        timeline=(
            TimelineEntry(START, "run started", "attempt 2"),
            TimelineEntry(START + timedelta(minutes=50), "last valid checkpoint", "step 12000"),
            TimelineEntry(FAILURE - timedelta(seconds=3), "first error", "NVRM: Xid 79"),
            TimelineEntry(FAILURE, "exit", "exit code 1"),
            TimelineEntry(FAILURE + timedelta(seconds=2), "incident opened"),
        ),
        lost=LostWork(
            steps=1234,
            wall_s=3725.0,
            gpus=32,
            gpu_hours=34.5678,
            cost=69.1356,
            currency="USD",
            downtime_s=95.0,
            time_to_recover_s=180.0,
            restarts_so_far=2,
        ),
        plots=tuple(_series(g, xid=g == 3) for g in range(4)),
        recommendations=(
            ADVICE["gpu_hardware"].format(node="gpu-node-17"),
            "Young/Daly's optimal checkpoint interval `sqrt(2 * save time * MTBF)` is **8 min** for a 10 s save.",
        ),
        logs_url=LOGS_URL,
        generated_at=datetime(2025, 3, 4, 12, 0, tzinfo=UTC),
        job_gpus=(0, 1, 2, 3),
        plotted="the job's GPUs 0, 1, 2, 3; 4 other GPUs of the node left out (?gpus=all shows them)",
        window=(FAILURE - timedelta(minutes=5), FAILURE + timedelta(minutes=1)),
        window_text="from 5 min before the failure to 30 s after the restarted run's first step (attempt 3)",
    )
    return replace(pm, **changes)


def node_postmortem() -> PostMortem:
    """A node went silent: no job, no lost work, no plots, no reason, nothing much known."""
    return PostMortem(
        incident_id=7,
        trigger="node_silent",
        state="open",
        job=None,
        attempt=None,
        node="gpu-node-03",
        gpus=(),
        reason=None,
        category=None,
        action=None,
        outcome="",
        confidence=None,
        source=None,
        explanation="",
        llm_explanation=False,
        why="",
        evidence=(),
        evidence_total=0,
        timeline=(),
        lost=None,
        plots=(),
        recommendations=(),
        logs_url="",
    )


class _Tags(HTMLParser):
    """Every start tag of a document, with its attributes, and the text outside <style>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if not self._in_style:
            self.text.append(data)


def _tags(doc: str) -> _Tags:
    parser = _Tags()
    parser.feed(doc)
    parser.close()
    return parser


def _assert_only_our_markup(doc: str, allowed: set[str], images: set[str], links: set[str]) -> _Tags:
    """No tag but ours, no event handler, images only from ``images`` (or, with no ``images``, embedded
    PNGs), links only to ``links``."""
    parsed = _tags(doc)
    for tag, attrs in parsed.tags:
        assert tag in allowed, f"unexpected <{tag} {attrs}>"
        assert not [a for a in attrs if a.startswith("on")], f"event handler on <{tag} {attrs}>"
        if tag == "img":
            src = attrs.get("src") or ""
            assert src in images if images else src.startswith("data:image/png;base64,"), src
        if tag == "a":
            assert attrs.get("href") in links, attrs
    return parsed


def _markdown_it() -> MarkdownIt:
    """CommonMark with raw HTML on and without markdown-it's own link filter, which drops javascript:
    links: the renderer under test must not rely on the viewer's sanitising."""
    md = MarkdownIt("commonmark")
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    return md


def _md_html(md: str) -> str:
    return _markdown_it().render(md)


def _md_split(md: str) -> tuple[str, list[str]]:
    """(what a Markdown viewer shows as prose, the contents of its fenced code blocks)."""
    prose: list[str] = []
    fences: list[str] = []
    for token in _markdown_it().parse(md):
        if token.type == "fence":
            fences.append(token.content)
        elif token.type in ("html_block", "code_block"):
            prose.append(token.content)
        for child in token.children or ():
            prose.append(child.content)
    return "\n".join(prose), fences


def _data_pngs(doc: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', doc)]


# ------------------------------------------------------------------------------------ structure


@pytest.mark.parametrize("pm", [full_postmortem(), node_postmortem()], ids=["full", "node-level"])
def test_every_section_appears_in_order_in_both_formats(pm: PostMortem) -> None:
    md = render_markdown(pm, {g: f"gpu-{g}.png" for g in range(8)})
    positions = [md.index(f"\n## {name}\n") for name in SECTIONS]
    assert md.startswith(f"# Incident {pm.incident_id}: ")
    assert positions == sorted(positions)
    assert md.rindex("Full logs:") > positions[-1] and md.rindex("Generated ") > positions[-1]

    page = render_html(pm)
    parsed = _assert_only_our_markup(page, OUR_TAGS, set(), {LOGS_URL})
    headings = re.findall(r"<h2>(.*?)</h2>", page)
    assert headings == list(SECTIONS)
    assert page.index("<h1>") < page.index("<h2>") and page.rindex("<footer>") > page.rindex("<h2>")
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP.replace(chr(39), "&#x27;")}">' in page
    assert "default-src 'none'; img-src data:; style-src 'unsafe-inline'" in CSP
    assert [t for t, _ in parsed.tags].count("img") == len(pm.plots)


def test_a_node_level_incident_says_what_is_not_known() -> None:
    pm = node_postmortem()
    md, page = render_markdown(pm, {}), render_html(pm)
    for doc in (md, page):
        assert "Incident 7: no job, reason not known" in doc
        assert "Lost work: not known" in doc
        assert "No GPU samples were recorded" in doc
        assert "Evidence: none recorded." in doc
        assert "Timeline: not known." in doc
        assert "Full logs: not known" in doc
    assert "- **Job:** not known" in md and "- **Attempt:** not known" in md
    assert "- **Confidence:** not known (source: not known)" in md
    assert "<th>Job</th><td>not known</td>" in page and "<th>Reason</th><td>not known (category: not known)" in page
    assert "<img" not in page and "](" not in md


def test_the_html_renders_the_markdown_of_every_recommendation() -> None:
    advice = (*(a.format(node="gpu-node-17") for a in ADVICE.values()), SCRIPT_ADVICE)
    pm = full_postmortem(recommendations=advice[:MAX_RECOMMENDATIONS], plots=TEXT_ONLY)
    page = render_html(pm)
    for raw in ("`", "**", "]("):
        assert raw not in page, raw
    assert "<li>Keep gpu-node-17 drained and run the vendor's diagnostics (<code>dcgmi diag -r 3</code>)" in page
    assert "<code>PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True</code>" in page
    # the Markdown keeps the same code spans for a Markdown viewer
    md = _md_html(render_markdown(pm, {}))
    assert "<code>dcgmi diag -r 3</code>" in md and "<code>nvidia-smi nvlink -e</code>" in md


def test_the_markdown_of_a_recommendation_cannot_make_links_images_or_html() -> None:
    rec = "Run `x <script>` then [click](https://evil.example) ![i](https://evil.example/i.png) <b>bold</b> &amp;"
    pm = full_postmortem(recommendations=(rec,), plots=TEXT_ONLY)
    page = render_html(pm)
    _assert_only_our_markup(page, OUR_TAGS, set(), {LOGS_URL})
    assert "<li>Run <code>x &lt;script&gt;</code> then [click](https://evil.example)" in page
    assert "&lt;b&gt;bold&lt;/b&gt; &amp;amp;</li>" in page
    md = render_markdown(pm, {})
    _assert_only_our_markup(_md_html(md), MD_TAGS, set(), {LOGS_URL})
    assert "<code>x &lt;script&gt;</code>" in _md_html(md)


def test_what_the_plots_show_is_stated() -> None:
    pm = full_postmortem(plots=(_series(0, 30),))
    md, page = render_markdown(pm, {0: "gpu-0.png"}), render_html(pm)
    plotted = "Plotted: the job's GPUs 0, 1, 2, 3; 4 other GPUs of the node left out (?gpus=all shows them)."
    window = (
        "Window: 2025-03-04 10:57:05 UTC to 2025-03-04 11:03:05 UTC (from 5 min before the failure to 30 s after "
        "the restarted run's first step (attempt 3))."
    )
    assert f"{plotted}  \n{window}\n" in md
    assert f'<p class="scope">{plotted.replace(chr(39), "&#x27;")}<br>{window.replace(chr(39), "&#x27;")}</p>' in page
    assert "- **The job's GPUs:** 0, 1, 2, 3\n" in md


@pytest.mark.parametrize(
    ("hours", "price", "gpu_time", "cost"),
    [
        (11 / 3600, 3.0, "0.0031 GPU-hours (11 GPU-s)", "0.0092 USD"),
        (0.4 / 3600, 3.0, "0.00011 GPU-hours (0.4 GPU-s)", "0.00033 USD"),
        (0.5, 3.0, "0.50 GPU-hours (1,800 GPU-s)", "1.50 USD"),
        (1234.5678, 2.0, "1,234.57 GPU-hours", "2,469.14 USD"),
        (0.0, 3.0, "0 GPU-hours", "0 USD"),
    ],
)
def test_small_losses_keep_significant_digits(hours: float, price: float, gpu_time: str, cost: str) -> None:
    lost = replace(full_postmortem().lost, gpu_hours=hours, cost=hours * price)
    md = render_markdown(full_postmortem(lost=lost, plots=TEXT_ONLY), {})
    assert f"- **GPU time lost:** {gpu_time}\n" in md and f"- **Cost:** {cost}\n" in md
    page = render_html(full_postmortem(lost=lost, plots=TEXT_ONLY))
    assert f"<th>GPU time lost</th><td>{gpu_time}</td>" in page


def test_numbers_are_human_readable() -> None:
    pm = full_postmortem(plots=TEXT_ONLY)
    md, page = render_markdown(pm, {}), render_html(pm)
    expected = {
        "Steps since the last valid checkpoint": "1,234 steps",
        "Wall time lost": "1 h 02 min",
        "GPUs": "32",
        "GPU time lost": "34.57 GPU-hours",
        "Cost": "69.14 USD",
        "Downtime (exit to restart)": "1 min 35 s",
        "Time to recover (exit to first step)": "3 min 00 s",
        "Restarts so far": "2",
        "Confidence": "95 % (source: rules)",
    }
    for label, value in expected.items():
        assert f"- **{label}:** {value}\n" in md
        assert f"<th>{label}</th><td>{value}</td>" in page

    lost = replace(pm.lost, wall_s=2 * 86400 + 3 * 3600, downtime_s=None, time_to_recover_s=None, steps=None)
    md = render_markdown(replace(pm, lost=lost), {})
    assert "- **Wall time lost:** 2 d 03 h" in md
    assert "- **Downtime (exit to restart):** not restarted" in md
    assert "- **Steps since the last valid checkpoint:** not known (the job reports no steps)" in md


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0.25, "0.2 s"),
        (9.96, "10 s"),
        (59.6, "1 min 00 s"),
        (3599.7, "1 h 00 min"),
        (86_399.0, "1 d 00 h"),
        (float("nan"), "not known"),
    ],
)
def test_durations_change_unit_at_the_rounded_value(seconds: float, shown: str) -> None:
    pm = full_postmortem(plots=TEXT_ONLY, lost=replace(full_postmortem().lost, wall_s=seconds))
    assert f"- **Wall time lost:** {shown}\n" in render_markdown(pm, {})


def test_missing_text_and_a_failing_plot_do_not_break_the_report(monkeypatch: pytest.MonkeyPatch) -> None:
    import server.reports.plots as plots
    import server.reports.render as render

    def broken(series: GpuSeries, marker_at: float | None = None) -> bytes:
        if series.gpu == 1:
            raise ValueError("odd data")
        return gpu_plot_png(series, marker_at)

    monkeypatch.setattr(plots, "gpu_plot_png", broken)
    pm = full_postmortem(
        plots=(_series(0, 30), _series(1, 30)),
        explanation=None,
        why=None,
        outcome=None,
        recommendations=("", "  "),
        timeline=(TimelineEntry(START, "run started", None),),
    )
    md, page = render_markdown(pm, {0: "gpu-0.png"}), render_html(pm)
    assert sorted(render.gpu_plots(pm)) == [0]
    assert "gpu-node-17 GPU 1: plot not available." in md and "gpu-node-17 GPU 1: plot not available." in page
    assert len(_data_pngs(page)) == 1
    for doc in (md, page):
        assert "Explanation: not known." in doc and "None" not in doc.replace("None.", "")
    assert "**Why this action:** not known" in md and "- **Outcome:** not known" in md


def test_the_timeline_keeps_the_given_order_with_deltas() -> None:
    pm = full_postmortem(plots=TEXT_ONLY)
    # given out of time order on purpose: the renderer shows what it was given, deltas and all
    late = TimelineEntry(FAILURE + timedelta(minutes=5), "restarted", "attempt 3")
    early = TimelineEntry(START - timedelta(seconds=30), "queued")
    pm = replace(pm, timeline=(*pm.timeline, late, early))
    rows = re.findall(
        r"<tr><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td><td><code>", render_html(pm)
    )
    assert rows == [
        ("2025-03-04 10:00:00 UTC", "—", "+0 s", "run started"),
        ("2025-03-04 10:50:00 UTC", "+50 min 00 s", "+50 min 00 s", "last valid checkpoint"),
        ("2025-03-04 11:02:02 UTC", "+12 min 02 s", "+1 h 02 min", "first error"),
        ("2025-03-04 11:02:05 UTC", "+3 s", "+1 h 02 min", "exit"),
        ("2025-03-04 11:02:07 UTC", "+2 s", "+1 h 02 min", "incident opened"),
        ("2025-03-04 11:07:05 UTC", "+4 min 58 s", "+1 h 07 min", "restarted"),
        ("2025-03-04 09:59:30 UTC", "-1 h 08 min", "-30 s", "queued"),
    ]
    md = render_markdown(pm, {})
    table = md[md.index("## Timeline") : md.index("## Root cause")]
    lines = [ln for ln in table.splitlines() if ln.startswith("2025-")]
    assert [ln.split("  ")[0] for ln in lines] == [r[0] for r in rows]
    assert lines[2].split() == ["2025-03-04", "11:02:02", "UTC", "+12", "min", "02", "s", "+1", "h", "02", "min",
                                "first", "error", "NVRM:", "Xid", "79"]  # fmt: skip


def test_an_llm_explanation_is_marked_as_unverified() -> None:
    pm = full_postmortem(llm_explanation=True, source="llm", explanation="Probably a flaky NVLink.", plots=TEXT_ONLY)
    md, page = render_markdown(pm, {}), render_html(pm)
    label = "LLM analyser's explanation (not verified by rules)"
    assert f"**{label}:**" in md and "Probably a flaky NVLink." in md
    assert f"<strong>{label.replace(chr(39), '&#x27;')}:</strong>" in page
    assert label not in render_markdown(full_postmortem(), {})


def test_evidence_shows_file_line_rank_and_node() -> None:
    pm = full_postmortem(plots=TEXT_ONLY)
    md, page = render_markdown(pm, {}), render_html(pm)
    assert "kern.log:1201 (n17)  NVRM: Xid (PCI:0000:3b:00): 79" in md
    assert "rank3.log:88 (rank 3, gpu-node-17)  RuntimeError" in md
    assert "<td><code>rank3.log:88 (rank 3, gpu-node-17)</code></td>" in page


def test_markdown_links_each_gpu_plot_and_refuses_unsafe_links() -> None:
    links = {0: "gpu-0.png", 1: "plots/gpu 1 (copy).png", 2: "javascript:alert(1)"}
    md = render_markdown(full_postmortem(logs_url="javascript:alert(2)"), links)
    html = _md_html(md)
    srcs = [a["src"] for t, a in _tags(html).tags if t == "img"]
    assert srcs == ["gpu-0.png", "plots/gpu%201%20%28copy%29.png"]
    assert "gpu-node-17 GPU 2 (no safe link)" in md and "gpu-node-17 GPU 3: plot not available." in md
    assert "javascript" not in "".join(str(a) for _, a in _tags(html).tags)
    assert "<a" not in html and 'href="javascript' not in render_html(
        full_postmortem(logs_url="javascript:x", plots=TEXT_ONLY)
    )


# ----------------------------------------------------------------------------------- hostile text


def _hostile(payload: str) -> PostMortem:
    """``payload`` in every text field that can come from a log or an agent."""
    return full_postmortem(
        job=f"job {payload}",
        node=f"node {payload}",
        reason=f"reason {payload}",
        outcome=f"outcome {payload}",
        explanation=f"explained {payload}",
        llm_explanation=True,
        why=f"why {payload}",
        evidence=(
            EvidenceLine(f"file {payload}", 1, f"text {payload}", 0, f"node {payload}"),
            EvidenceLine("rank0.log", 2, payload, 0, "n1"),
        ),
        timeline=(
            TimelineEntry(START, f"what {payload}", f"detail {payload}"),
            TimelineEntry(FAILURE, "exit", payload),
        ),
        lost=replace(full_postmortem().lost, currency=payload[:8]),
        plots=(_series(0, 60, node=f"node {payload}"),),
        recommendations=(f"recommend {payload}",),
    )


@pytest.mark.parametrize("payload", [SCRIPT, IMG, MD_LINK, FENCE_BREAK], ids=["script", "img", "md-link", "fence"])
def test_log_text_cannot_become_markup(payload: str) -> None:
    pm = _hostile(payload)
    page = render_html(pm)
    parsed = _assert_only_our_markup(page, OUR_TAGS, set(), {LOGS_URL})
    assert re.search(r"<script|<img src=x|<b>", page, re.I) is None  # as markup; escaped it is text
    assert "&lt;script&gt;" in page or "&lt;img" in page or payload in (MD_LINK, FENCE_BREAK)
    shown = "".join(parsed.text)
    assert "text " + payload.split("\n")[0] in shown  # the text itself is shown, as text

    md = render_markdown(pm, {0: "gpu-0.png"})
    # a viewer that renders raw HTML makes no tag, link or image of it (escaped prose stays literal text)
    _assert_only_our_markup(_md_html(md), MD_TAGS, {"gpu-0.png"}, {LOGS_URL})
    assert md.count("\n## ") == len(SECTIONS)
    # log text (evidence, timeline details, the LLM's explanation) is only ever in code blocks, whole
    prose, fences = _md_split(md)
    first = payload.split("\n")[0]
    for log_text in (f"text {first}", f"detail {first}", f"explained {first}", f"rank0.log:2 (rank 0, n1)  {first}"):
        assert log_text not in prose
        assert any(log_text in block for block in fences), log_text


def test_fence_breaking_backticks_stay_inside_the_evidence_block() -> None:
    lines = ("`" * 12, "``` closing? [x](javascript:alert(1))", "~~~", "```" + "`" * 40 + " <script>x</script>")
    pm = full_postmortem(evidence=tuple(EvidenceLine("rank0.log", i + 1, t) for i, t in enumerate(lines)))
    md = render_markdown(pm, {})
    evidence = [t for t in _markdown_it().parse(md) if t.type == "fence" and "rank0.log" in t.content]
    assert len(evidence) == 1
    assert evidence[0].content.splitlines() == [f"rank0.log:{i + 1}  {t}" for i, t in enumerate(lines)]
    assert len(evidence[0].markup) == 44  # one longer than the longest backtick run in the text


def test_ansi_and_control_characters_are_stripped() -> None:
    pm = _hostile(ANSI)
    for doc in (render_markdown(pm, {}), render_html(pm)):
        assert re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", doc) is None
        assert "red bell nul" in re.sub(r"\s+", " ", doc.replace("  ", " "))
        assert "[31m" not in doc and "]0;title" not in doc


def test_long_lines_are_cut_and_evidence_is_capped() -> None:
    many = tuple(EvidenceLine("rank1.log", i + 1, f"error {i} <b>") for i in range(10_000))
    pm = full_postmortem(
        evidence=(EvidenceLine("rank0.log", 1, LONG), *many),
        evidence_total=10_001,
        explanation=LONG,
        timeline=(TimelineEntry(START, "first error", LONG),),
        recommendations=(LONG,),
        plots=TEXT_ONLY,
    )
    md, page = render_markdown(pm, {}), render_html(pm)
    for doc in (md, page):
        assert "x" * 301 not in doc
        assert "99,700 more characters cut" in doc
        assert "9,951 more lines: see the full logs at " in doc
        assert "error 48 " in doc and "error 49 " not in doc
    assert f"[{LOGS_URL}]({LOGS_URL})" in md and f'at <a href="{LOGS_URL}">' in page
    assert max(len(ln) for ln in md.splitlines()) < 450
    assert len(md) < 50_000
    assert len(page) - sum(len(m) for m in re.findall(r"data:image/png;base64,[^\"]+", page)) < 60_000


def test_a_page_with_eight_gpus_and_huge_logs_stays_small() -> None:
    pm = full_postmortem(
        plots=tuple(_series(g, points=900, xid=g in (3, 5)) for g in range(8)),
        evidence=tuple(EvidenceLine("rank0.log", i + 1, f"{SCRIPT} {i} " + "y" * 400) for i in range(10_000)),
        evidence_total=10_000,
    )
    page = render_html(pm)
    assert len(page.encode()) < 2_000_000
    pngs = _data_pngs(page)
    assert len(pngs) == 8 and [_png_size(p) for p in pngs] == [(900, 500)] * 8
    assert len(set(pngs)) == 8  # one plot per GPU, each its own
    alts = [a["alt"] for t, a in _tags(page).tags if t == "img"]
    assert alts == [f"gpu-node-17 GPU {g}" for g in range(8)]


# ------------------------------------------------------------------------------------------ plots


def test_a_gpu_plot_is_a_small_deterministic_png() -> None:
    series = _series(3, xid=True)
    png = gpu_plot_png(series, marker_at=FAILURE.timestamp())
    assert _png_size(png) == (900, 500)
    assert 5_000 < len(png) < 200_000
    assert gpu_plot_png(series, marker_at=FAILURE.timestamp()) == png
    assert b"tEXt" not in png and b"tIME" not in png  # no version or time metadata to vary


def test_plots_drawn_in_parallel_threads_match_serial_ones() -> None:
    series = [_series(g, points=120, xid=g % 2 == 0) for g in range(4)]
    serial = [gpu_plot_png(s, FAILURE.timestamp()) for s in series]
    with ThreadPoolExecutor(max_workers=3) as pool:
        parallel = list(pool.map(lambda s: gpu_plot_png(s, FAILURE.timestamp()), series))
    assert parallel == serial


def _pure_red_pixels(png: bytes, tmp_path) -> int:  # type: ignore[no-untyped-def]
    path = tmp_path / "plot.png"
    path.write_bytes(png)
    rgb = imread(path)[..., :3]
    return int(np.count_nonzero((rgb[..., 0] > 0.9) & (rgb[..., 1] < 0.1) & (rgb[..., 2] < 0.1)))


def test_xids_are_marked_in_red(tmp_path) -> None:  # type: ignore[no-untyped-def]
    without = gpu_plot_png(_series(0), FAILURE.timestamp())
    with_xid = gpu_plot_png(_series(0, xid=True), FAILURE.timestamp())
    assert _pure_red_pixels(without, tmp_path) == 0
    assert _pure_red_pixels(with_xid, tmp_path) > 150  # a dashed line across four panels, and its label


@pytest.mark.parametrize(
    "points",
    [
        (),
        (GpuPoint(ts=1.0e9),),
        (GpuPoint(ts=1.0e9, util=None, power_w=float("nan")), GpuPoint(ts=1.0e9 + 1, temp_c=float("inf"))),
        tuple(GpuPoint(ts=1.0e9 + 10 * i, util=50.0) for i in range(1000)),  # 2 h 47 min: plotted in minutes
    ],
    ids=["empty", "all-none", "non-finite", "long-span"],
)
def test_sparse_or_odd_series_still_plot(points: tuple[GpuPoint, ...]) -> None:
    series = GpuSeries(node="n$1$ {bad} \\mathtext", gpu=0, points=points, xids=((1.0e9 + 5, 48),))
    assert _png_size(gpu_plot_png(series)) == (900, 500)
    assert _png_size(gpu_plot_png(series, marker_at=1.0e9 + 3)) == (900, 500)


def test_gpu_plots_gives_one_png_per_gpu_for_the_markdown_files() -> None:
    plots = gpu_plots(full_postmortem())
    assert sorted(plots) == [0, 1, 2, 3]
    assert all(_png_size(p) == (900, 500) for p in plots.values())
    assert gpu_plots(node_postmortem()) == {}
    assert gpu_plot(full_postmortem(), 3) == plots[3]  # one GPU's alone, as the plot endpoint draws it
    assert gpu_plot(full_postmortem(), 7) is None


def test_bar_chart() -> None:
    labels = ["xid_79_fell_off_bus", "cuda_oom", "nccl_timeout $x$", "r" * 200]
    png = bar_chart_png(labels, [12.5, 3.25, 0.5, float("nan")], "GPU-hours lost by reason", "GPU-hours")
    width, height = _png_size(png)
    assert width == 900 and 150 <= height <= 400
    assert _png_size(bar_chart_png([], [], "nothing", "GPU-hours"))[0] == 900
    with pytest.raises(ValueError):
        bar_chart_png(["a"], [], "mismatch", "x")
