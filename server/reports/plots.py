"""PNG plots for the reports, drawn with matplotlib's object API (``Figure`` + the Agg canvas) and never
pyplot: pyplot keeps global state, so two requests drawing at once in the server would mix figures.

Outputs are small: 900 px wide at dpi 100, and reduced to a 128-colour palette (less than half the bytes
of the RGBA PNG, and no visible change on line plots), so a page with a plot per GPU of a node stays light.
They carry no timestamp or version metadata: the same input gives the same bytes.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image  # matplotlib's own dependency (it writes PNGs with it)

from server.reports.document import GpuPoint, GpuSeries
from server.reports.numbers import significant

WIDTH_IN, HEIGHT_IN, DPI = 9.0, 5.0, 100  # 900 x 500 px
_UTIL, _MEMORY, _POWER, _TEMP = "util %", "FB used MiB", "power W", "temp °C"
_PANELS: tuple[tuple[str, Callable[[GpuPoint], float | None], str], ...] = (
    (_UTIL, lambda p: p.util, "tab:blue"),
    (_MEMORY, lambda p: p.fb_used_mib, "tab:purple"),
    (_POWER, lambda p: p.power_w, "tab:orange"),
    (_TEMP, lambda p: p.temp_c, "tab:red"),
)
TEMP_BASE_C = 20.0  # the temperature axis starts here (room temperature), not at the coldest sample
TEMP_MIN_SPAN_C = 60.0  # … and spans at least this: 20-80 °C, where a 0.3 °C wobble is a flat line
_MINUTES_FROM_S = 1800.0  # spans longer than this are plotted in minutes
_MAX_LABEL = 40


def _plain(text: str, limit: int = _MAX_LABEL) -> str:
    """Text as matplotlib should draw it literally: no mathtext (a stray ``$`` would parse or raise)."""
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("$", r"\$")


def _finite(value: float | None) -> float:
    """NaN for missing or non-finite values: matplotlib leaves a gap there instead of a bogus line."""
    if value is None:
        return math.nan
    try:
        value = float(value)
    except (TypeError, ValueError):
        return math.nan
    return value if math.isfinite(value) else math.nan


def _png(fig: Figure) -> bytes:
    canvas = FigureCanvasAgg(fig)  # attaches itself to the figure: no backend switch, no pyplot
    canvas.draw()
    image = Image.fromarray(np.asarray(canvas.buffer_rgba())).convert("RGB")
    palette = image.quantize(colors=128, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    buf = io.BytesIO()
    palette.save(buf, format="png", optimize=True)
    return buf.getvalue()


def _clock(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M:%S UTC")


def y_range(panel: str, values: list[float], memory_total_mib: float | None) -> tuple[float, float]:
    """Axes from a fixed floor, so a small wobble looks small: utilization 0-100 %, memory 0 to the
    framebuffer's size, power from 0, temperature from `TEMP_BASE_C`; each top grows to fit the data."""
    seen = [v for v in values if not math.isnan(v)]
    high, low = max(seen, default=0.0), min(seen, default=0.0)
    if panel == _UTIL:
        return -3.0, 105.0
    if panel == _MEMORY:
        size = memory_total_mib if memory_total_mib and math.isfinite(memory_total_mib) else 0.0
        return 0.0, max(size, high * 1.1, 1.0)
    if panel == _TEMP:
        return min(TEMP_BASE_C, low - 5), max(TEMP_BASE_C + TEMP_MIN_SPAN_C, high + 5)
    return 0.0, max(high * 1.15, 10.0)  # power


def gpu_plot_png(series: GpuSeries, marker_at: float | None = None) -> bytes:
    """`gpu_figure` as a PNG."""
    return _png(gpu_figure(series, marker_at))


def gpu_figure(series: GpuSeries, marker_at: float | None = None) -> Figure:
    """Four stacked panels (utilization, framebuffer used, power, temperature) over a shared time axis.

    Time is in seconds (minutes for spans over 30 min) relative to ``marker_at`` (the failure, unix
    seconds) when given, else relative to the first sample; the x axis spans the series's window when
    it has one. The y axes start from fixed floors (`y_range`). Xid events are dashed red lines labelled
    with their code; the failure is a solid black line; the series's marks (the restart, its first step)
    are dotted green lines. Missing values leave gaps.
    """
    points = [p for p in series.points if math.isfinite(_finite(p.ts))]
    points.sort(key=lambda p: p.ts)
    xids = [(float(ts), code) for ts, code in series.xids if math.isfinite(_finite(ts))]
    marker = marker_at if marker_at is not None and math.isfinite(marker_at) else None

    if marker is not None:
        origin = marker
        label = f"time relative to the failure at {_clock(marker)}"
    elif points:
        origin = points[0].ts
        label = f"time since the first sample at {_clock(origin)}"
    else:
        origin = xids[0][0] if xids else 0.0
        label = "time"
    window = series.window if series.window and all(math.isfinite(_finite(t)) for t in series.window) else None
    if window is not None:  # the stated window, whatever part of it has samples
        stamps = [float(window[0]), float(window[1])]
    else:
        stamps = [p.ts for p in points] + [ts for ts, _ in xids] + ([marker] if marker is not None else [])
    span = (max(stamps) - min(stamps)) if stamps else 0.0
    scale, unit = (60.0, "min") if span > _MINUTES_FROM_S else (1.0, "s")

    xs = np.array([(p.ts - origin) / scale for p in points], dtype=float)
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    axes: Sequence[Axes] = fig.subplots(len(_PANELS), 1, sharex=True)
    fig.subplots_adjust(left=0.085, right=0.985, top=0.935, bottom=0.095, hspace=0.12)  # fixed: 2x faster than
    # constrained layout, and the labels are of known size
    fig.suptitle(_plain(f"{series.node} · GPU {series.gpu}", 80), fontsize=10)
    for ax, (name, get, colour) in zip(axes, _PANELS, strict=True):
        ys = np.array([_finite(get(p)) for p in points], dtype=float)
        ax.set_ylabel(name, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.ticklabel_format(axis="y", useOffset=False, style="plain")  # 69,160 MiB, not "+6.9e4" and 0..15
        ax.grid(True, linewidth=0.4, alpha=0.5)
        if len(ys) and not np.all(np.isnan(ys)):
            ax.plot(xs, ys, color=colour, linewidth=1.1, marker="." if len(ys) < 60 else None, markersize=3)
        else:
            ax.text(0.5, 0.5, "no samples", transform=ax.transAxes, ha="center", va="center", fontsize=8)
        for ts, _code in xids:
            ax.axvline((ts - origin) / scale, color="red", linestyle="--", linewidth=1)
        if marker is not None:
            ax.axvline(0.0, color="black", linewidth=1.2)
    for ax, (_name, get, _colour) in zip(axes, _PANELS, strict=True):
        ax.set_ylim(*y_range(_name, [_finite(get(p)) for p in points], series.memory_total_mib))
    if window is not None:
        axes[-1].set_xlim((window[0] - origin) / scale, (window[1] - origin) / scale)
    top = axes[0]
    for ts, code in xids:
        top.text(
            (ts - origin) / scale, 0.98, f"Xid {int(code)}", transform=top.get_xaxis_transform(),
            rotation=90, ha="right", va="top", fontsize=7, color="red",
        )  # fmt: skip
    if marker is not None:  # right of its line, the Xids' labels left of theirs: an Xid just before stays legible
        top.text(
            0.0, 0.98, "failure", transform=top.get_xaxis_transform(), rotation=90, ha="left", va="top", fontsize=7
        )
    for ts, what in series.marks:  # the recovery: the restarted run's start and first step
        if not math.isfinite(_finite(ts)):
            continue
        for ax in axes:
            ax.axvline((ts - origin) / scale, color="tab:green", linestyle=":", linewidth=1.2)
        top.annotate(
            _plain(what, 30),
            xy=((ts - origin) / scale, 0.03),
            xycoords=top.get_xaxis_transform(),
            xytext=(2, 0),
            textcoords="offset points",
            rotation=90,
            ha="left",
            va="bottom",
            fontsize=7,
            color="tab:green",
        )  # fmt: skip: right of its line, clear of it
    axes[-1].set_xlabel(f"{label} ({unit})", fontsize=8)
    return fig


def bar_chart_png(labels: list[str], values: list[float], title: str, unit: str) -> bytes:
    """Horizontal bars, largest on top, each labelled with its value (e.g. GPU-hours lost by reason)."""
    if len(labels) != len(values):
        raise ValueError(f"{len(labels)} labels for {len(values)} values")
    pairs = sorted(((_plain(lbl), _finite(v)) for lbl, v in zip(labels, values, strict=True)), key=lambda p: p[1])
    pairs = [(lbl, 0.0 if math.isnan(v) else v) for lbl, v in pairs]
    height = min(max(2.0, 1.0 + 0.32 * len(pairs)), 30.0)
    fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    ax.set_title(_plain(title, 100), fontsize=10)
    ax.tick_params(labelsize=8)
    ax.set_xlabel(_plain(unit, 40), fontsize=8)
    if not pairs:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", fontsize=9)
        ax.set_yticks([])
        return _png(fig)
    positions = np.arange(len(pairs))
    bars = ax.barh(positions, [v for _, v in pairs], color="tab:blue")
    ax.set_yticks(positions, [lbl for lbl, _ in pairs])
    ax.bar_label(bars, labels=[significant(v) for _, v in pairs], padding=3, fontsize=7)
    ax.margins(x=0.12)
    ax.grid(True, axis="x", linewidth=0.4, alpha=0.5)
    return _png(fig)
