"""A simulation's results for people: Markdown tables, a rich table for the terminal, and a PNG plot."""

from __future__ import annotations

import io
import json
from typing import Any

from simulate.results import CHECKPOINTING, SimResult

_CATEGORIES = ("infrastructure", "preemption", "framework", "script", "unknown", CHECKPOINTING)
_LABELS = {
    "manual": "(a) manual",
    "torchrun": "(b) torchrun",
    "gpuwatch": "(c) gpuwatch",
    "gpuwatch-async": "(d) gpuwatch + async ckpt",
}


def label(policy: str) -> str:
    return _LABELS.get(policy, policy)


def summary_rows(result: SimResult) -> tuple[list[str], list[list[str]]]:
    """The main comparison: one row per policy."""
    header = [
        "policy",
        "ETTR",
        "GPU-h lost",
        "to checkpoints",
        "failures",
        "restarts auto/on-call/owner",
        "crash loops (avoided)",
        "on-call restarts",
        "pages",
    ]
    rows = []
    for p in result.policies:
        r = p.restarts
        rows.append(
            [
                label(p.policy),
                f"{p.ettr:.4f}",
                f"{p.lost_gpu_hours:,.0f}",
                f"{p.lost_by_reason.get(CHECKPOINTING, 0.0):,.0f}",
                f"{p.failures:,}",
                f"{r.get('auto', 0)}/{r.get('on_call', 0)}/{r.get('owner', 0)}",
                f"{p.crash_loops} ({p.crash_loops_avoided:+d})",
                f"{p.on_call_actions}",
                f"{p.pages_total}",
            ]
        )
    return header, rows


def category_rows(result: SimResult) -> tuple[list[str], list[list[str]]]:
    """GPU-hours lost by category (the Acme table's grouping), per policy."""
    header = ["lost GPU-h by category", *(label(p.policy) for p in result.policies)]
    by = [p.lost_by_category() for p in result.policies]
    rows = [[c, *(f"{b.get(c, 0.0):,.0f}" for b in by)] for c in _CATEGORIES if any(c in b for b in by)]
    rows.append(
        ["infrastructure share of failure loss", *(f"{p.failure_share('infrastructure'):.0%}" for p in result.policies)]
    )
    return header, rows


def reason_rows(result: SimResult) -> tuple[list[str], list[list[str]]]:
    """GPU-hours lost by reason, most costly first (by the first policy)."""
    header = ["lost GPU-h by reason", *(label(p.policy) for p in result.policies)]
    reasons = list(result.policies[0].lost_by_reason) if result.policies else []
    for p in result.policies[1:]:
        reasons += [r for r in p.lost_by_reason if r not in reasons]
    return header, [[r, *(f"{p.lost_by_reason.get(r, 0.0):,.0f}" for p in result.policies)] for r in reasons]


def page_rows(result: SimResult) -> tuple[list[str], list[list[str]]]:
    header = ["pages by alert", *(label(p.policy) for p in result.policies)]
    alerts = list(result.policies[0].pages) if result.policies else []
    return header, [[a, *(str(p.pages.get(a, 0)) for p in result.policies)] for a in alerts]


_TABLES = (summary_rows, category_rows, reason_rows, page_rows)


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def title(result: SimResult) -> str:
    gpus = result.nodes * result.gpus_per_node
    return (
        f"{result.nodes} nodes x {result.gpus_per_node} GPUs ({gpus:,} GPUs, {result.spares} spare nodes), "
        f"{len(result.jobs)} jobs of {min(result.jobs)}-{max(result.jobs)} GPUs, {result.days:g} days, "
        f"seed {result.seed}"
    )


def to_markdown(result: SimResult) -> str:
    parts = [f"**{title(result)}**", *(_markdown(*rows(result)) for rows in _TABLES)]
    diagnosed = [p for p in result.policies if p.diagnosis]
    if diagnosed:
        d = diagnosed[0].diagnosis
        line = f"Rules engine on the generated evidence: {d['correct']}/{d['total']} failures diagnosed as injected"
        confusion = ", ".join(f"{k}: {n}" for k, n in d["confusion"].items())
        parts.append(line + (f"; confused: {confusion}" if confusion else "") + ".")
    return "\n\n".join(parts) + "\n"


def to_json(result: SimResult) -> str:
    return json.dumps(result.to_json(), indent=1, sort_keys=True)


def print_table(result: SimResult) -> None:
    """The tables on the terminal, with rich."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for i, (header, rows) in enumerate(table(result) for table in _TABLES):
        table = Table(title=title(result) if i == 0 else None, title_justify="left")
        for j, name in enumerate(header):
            table.add_column(name, justify="left" if j == 0 else "right")
        for row in rows:
            table.add_row(*row)
        console.print(table)


def plot_png(result: SimResult) -> bytes:
    """ETTR, GPU-hours lost by category and on-call load, per policy: one PNG, no timestamp in it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = [label(p.policy) for p in result.policies]
    x = list(range(len(names)))
    fig = Figure(figsize=(13, 4.4), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ettr_ax, lost_ax, pages_ax = fig.subplots(1, 3)
    ettrs = [p.ettr for p in result.policies]
    bars = ettr_ax.bar(x, ettrs, color="#4c72b0")
    ettr_ax.bar_label(bars, labels=[f"{e:.3f}" for e in ettrs], padding=2, fontsize=8)
    low = min(ettrs, default=1.0)
    ettr_ax.set_ylim(max(0.0, low - 0.05), 1.0)
    ettr_ax.set_title("ETTR (productive / wall GPU time)")
    bottom = [0.0] * len(names)
    colours = ["#c44e52", "#dd8452", "#8172b3", "#937860", "#8c8c8c", "#55a868"]
    for category, colour in zip(_CATEGORIES, colours, strict=True):
        values = [p.lost_by_category().get(category, 0.0) for p in result.policies]
        if any(values):
            lost_ax.bar(x, values, bottom=bottom, label=category, color=colour)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    lost_ax.set_title("GPU-hours lost, by cause")
    lost_ax.legend(fontsize=7)
    width = 0.4
    pages = [p.pages_total for p in result.policies]
    actions = [p.on_call_actions for p in result.policies]
    pages_ax.bar([i - width / 2 for i in x], pages, width, label="pages (critical alerts)", color="#c44e52")
    pages_ax.bar([i + width / 2 for i in x], actions, width, label="on-call restarts", color="#4c72b0")
    pages_ax.set_title("On-call load")
    pages_ax.legend(fontsize=7)
    for ax in (ettr_ax, lost_ax, pages_ax):
        ax.set_xticks(x, names, rotation=15, fontsize=8)
    fig.suptitle(_plain(title(result)), fontsize=10)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _plain(text: str) -> str:
    return text.replace("$", r"\$")


def report(result: SimResult, fmt: str) -> str | None:
    """The result in ``fmt`` (md or json) as text; None for ``table``, which prints itself."""
    formats: dict[str, Any] = {"md": to_markdown, "json": to_json}
    if fmt == "table":
        print_table(result)
        return None
    if fmt not in formats:
        raise ValueError(f"format must be table, json or md, not {fmt!r}")
    return str(formats[fmt](result))
