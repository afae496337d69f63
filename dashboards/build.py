"""Builds gpuwatch's Grafana dashboards with Grafana's typed Python builder (grafana-foundation-sdk):
`python dashboards/build.py` rewrites the JSON files next to it, `python dashboards/build.py --check`
exits 1 if a committed file differs from what it builds.

The SDK checks the shape of every panel, query, variable and link; this file says what is on them.
Each dashboard is a list of panel groups (a row and its panels), one small function per group; the
helpers below write once what must agree across ~80 panels (the `${datasource}` variable, refIds,
one idiom per kind of query). The SDK places panels left to right on the 24-column grid and wraps
when a line is full, so each line's widths add up to 24. Every expression is run against a live
Prometheus scraping a live gpuwatch server by tests/system/test_prometheus_live.py;
tests/system/test_dashboards.py checks the structure.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from grafana_foundation_sdk.builders import bargauge, heatmap, prometheus, stat, table, timeseries
from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models import heatmap as heatmap_model
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

HERE = Path(__file__).resolve().parent
SCHEMA_VERSION = 39  # Grafana 11.1 (docker-compose.yml's image), the SDK release pinned in pyproject.toml
DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
SERVER_URL_DEFAULT = "http://localhost:8600"

Panel = Builder[model.Panel]
Group = tuple[dash.Row, list[Panel]]
Steps = Sequence[tuple[float, str]]  # threshold steps above the green base: (value, color)
#: The SDK's panel builders this file uses; they share the methods of `_panel` and `_range` (no base class).
P = TypeVar("P", stat.Panel, timeseries.Panel, table.Panel, bargauge.Panel, heatmap.Panel)

# Xid codes worth a name on a panel (gpuwatch/diagnosis/xid.py has the full table).
XID_NAMES = {
    13: "13 graphics engine exception (application)",
    31: "31 GPU memory page fault (application)",
    43: "43 GPU stopped processing (application)",
    45: "45 preemptive cleanup (application)",
    48: "48 double-bit ECC error",
    63: "63 ECC page retirement / row remap",
    64: "64 row remapper failure",
    74: "74 NVLink error",
    79: "79 fallen off the bus",
    92: "92 high single-bit ECC rate",
    94: "94 contained ECC error",
    95: "95 uncontained ECC error",
    119: "119 GSP RPC timeout",
    120: "120 GSP error",
}


# --- PromQL idioms -------------------------------------------------------------------------------


def events_by(label: str, selector: str, window: str) -> str:
    """What a counter counted within ``window``, by ``label``, only where it counted anything: for
    the counters the server exports at 0 from its start (failures by reason, incidents by trigger,
    recovery decisions, detections, GPU-hours lost), which plain increase() reads from their first
    event on. The `> 0` keeps a bar chart to what happened rather than every known reason."""
    return f"sum by ({label}) (increase({selector}[{window}])) > 0"


def new_events(selector: str, window: str) -> str:
    """Events a labelled counter counted within ``window``, for the counters whose label values only
    an event names, so that their series appear with their first event, already at 1: restarts by
    job, Xids by GPU and code, and a job's hangs and stragglers (its series are born with the job,
    which can be within one scrape of its first hang or straggler). increase() cannot see a step
    from "no series" to 1: a series born within the window counts all it holds (it started at 0);
    older series count their increase."""
    return f"(({selector} unless {selector} offset {window}) or increase({selector}[{window}]))"


def xid_events(by: str, selector: str) -> str:
    """Xids counted in the time range by ``by``, in whole events, only where there were any."""
    return f"round(sum by ({by}) ({new_events(selector, '$__range')} > 0))"


def thermal_throttled(selector: str) -> str:
    """1 where the clock-event reasons have 0x20 (SW thermal) or 0x40 (HW thermal) set, else 0:
    PromQL has no bitwise operators, so bits 5 and 6 are read as floor(x / 32) % 4."""
    return f"floor({selector} / 32) % 4 > bool 0"


RESTART_LATENCY = "sum by (le) (rate(gpuwatch_restart_seconds_bucket[$__rate_interval]))"


# --- queries, variables, annotations -------------------------------------------------------------


def target(expr: str, legend: str = "", *, instant: bool = False, table: bool = False) -> prometheus.Dataquery:
    """A Prometheus query on the `${datasource}` variable: a range query unless ``instant`` or ``table``."""
    query = prometheus.Dataquery().expr(expr).legend_format(legend or "__auto").datasource(DATASOURCE)
    query = query.format(PromQueryFormat.TABLE if table else PromQueryFormat.TIME_SERIES)
    return query.instant() if instant or table else query.range()


def datasource_variable() -> dash.DatasourceVariable:
    return dash.DatasourceVariable("datasource").label("Data source").type("prometheus")


def query_variable(name: str, label: str, query: str, *, multi: bool = False) -> dash.QueryVariable:
    """A variable filled by Grafana's `label_values(...)`, re-read when the time range changes."""
    return (
        dash.QueryVariable(name)
        .label(label)
        .query(query)
        .datasource(DATASOURCE)
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.NUMERICAL_ASC)
        .multi(multi)
        .include_all(multi)
    )


def server_url_variable() -> dash.TextBoxVariable:
    """Where the browser reaches the gpuwatch server, for the links to post-mortems."""
    default = model.VariableOption(selected=True, text=SERVER_URL_DEFAULT, value=SERVER_URL_DEFAULT)
    return (
        dash.TextBoxVariable("server_url")
        .label("gpuwatch server URL")
        .default_value(SERVER_URL_DEFAULT)
        .current(default)
    )


class _PrometheusAnnotationQuery(model.AnnotationQuery):
    """Grafana's Prometheus annotation. The SDK's AnnotationQuery (11.1) carries the expression but
    not the Prometheus datasource's own fields (title and tags from labels, the step), so they are
    added here."""

    def __init__(self, name: str, expr: str, title: str, color: str, tags: str) -> None:
        super().__init__(name=name, datasource=DATASOURCE, enable=True, icon_color=color, expr=expr)
        self.title_format, self.tag_keys = title, tags

    def to_json(self) -> dict[str, object]:
        return {
            **super().to_json(),
            "step": "1m",
            "tagKeys": self.tag_keys,
            "textFormat": "",
            "titleFormat": self.title_format,
            "useValueForTime": False,
        }


class PrometheusAnnotation(Builder[model.AnnotationQuery]):
    """Marks from a Prometheus expression: every step where it returns a series is marked."""

    def __init__(self, name: str, expr: str, title: str, color: str, tags: str) -> None:
        self._internal = _PrometheusAnnotationQuery(name, expr, title, color, tags)

    def build(self) -> model.AnnotationQuery:
        return self._internal


def builtin_annotation() -> dash.AnnotationQuery:
    """Grafana's own annotations and alerts, as every dashboard has them."""
    return (
        dash.AnnotationQuery()
        .name("Annotations & Alerts")
        .built_in(1)
        .datasource(model.DataSourceRef(type_val="grafana", uid="-- Grafana --"))
        .enable(True)
        .hide(True)
        .icon_color("rgba(0, 211, 255, 1)")
        .type("dashboard")
    )


# --- panels --------------------------------------------------------------------------------------


def _thresholds(steps: Steps) -> dash.ThresholdsConfig:
    base = model.Threshold(value=None, color="green")
    rest = [model.Threshold(value=value, color=color) for value, color in steps]
    return dash.ThresholdsConfig().mode(model.ThresholdsMode.ABSOLUTE).steps([base, *rest])


def _colors(mode: model.FieldColorModeId) -> dash.FieldColor:
    return dash.FieldColor().mode(mode)


def _last_value() -> common_builders.ReduceDataOptions:
    return common_builders.ReduceDataOptions().calcs(["lastNotNull"]).fields("").values(False)


def _panel(panel: P, title: str, description: str, targets: list[prometheus.Dataquery], w: int, h: int) -> P:
    """What every panel has: title, description, the datasource, its queries (refIds A, B, …) and size."""
    panel.title(title).description(description).datasource(DATASOURCE).span(w).height(h)
    for i, query in enumerate(targets):
        panel.with_target(query.ref_id(chr(ord("A") + i)))
    return panel


def _range(panel: P, unit: str | None, minimum: float | None, maximum: float | None) -> P:
    if unit:
        panel.unit(unit)
    if minimum is not None:
        panel.min(minimum)
    if maximum is not None:
        panel.max(maximum)
    return panel


def series_panel(
    title: str,
    description: str,
    targets: list[prometheus.Dataquery],
    *,
    unit: str | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    threshold: float | None = None,
    w: int = 12,
    h: int = 8,
) -> timeseries.Panel:
    """A time series; ``threshold`` draws a dashed red line where an alert fires."""
    panel = _panel(timeseries.Panel(), title, description, targets, w, h)
    panel.color_scheme(_colors(model.FieldColorModeId.PALETTE_CLASSIC))
    panel.thresholds(_thresholds([] if threshold is None else [(threshold, "red")]))
    panel.fill_opacity(10).line_width(1).show_points(common.VisibilityMode.NEVER).span_nulls(False)
    if threshold is not None:
        panel.thresholds_style(
            common_builders.GraphThresholdsStyleConfig().mode(common.GraphThresholdsStyleMode.DASHED)
        )
    panel.legend(
        common_builders.VizLegendOptions()
        .display_mode(common.LegendDisplayMode.LIST)
        .placement(common.LegendPlacement.BOTTOM)
        .show_legend(True)
    )
    panel.tooltip(
        common_builders.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI).sort(common.SortOrder.DESCENDING)
    )
    return _range(panel, unit, minimum, maximum)


def stat_panel(
    title: str,
    description: str,
    targets: list[prometheus.Dataquery],
    *,
    unit: str | None = None,
    thresholds: Steps = (),
    mappings: list[model.ValueMapping] | None = None,
    decimals: int | None = None,
    w: int = 4,
    h: int = 4,
) -> stat.Panel:
    """The last value of each query, coloured by ``thresholds`` when there are any."""
    panel = _panel(stat.Panel(), title, description, targets, w, h)
    colors = model.FieldColorModeId.THRESHOLDS if thresholds else model.FieldColorModeId.PALETTE_CLASSIC
    panel.color_scheme(_colors(colors)).thresholds(_thresholds(thresholds)).mappings(mappings or [])
    if decimals is not None:
        panel.decimals(decimals)
    text = common.BigValueTextMode.VALUE_AND_NAME if len(targets) > 1 else common.BigValueTextMode.AUTO
    panel.color_mode(common.BigValueColorMode.VALUE).graph_mode(common.BigValueGraphMode.AREA)
    panel.justify_mode(common.BigValueJustifyMode.AUTO).orientation(common.VizOrientation.AUTO)
    panel.reduce_options(_last_value()).text_mode(text)
    return _range(panel, unit, None, None)


def bar_panel(
    title: str,
    description: str,
    targets: list[prometheus.Dataquery],
    *,
    unit: str | None = None,
    w: int = 8,
    h: int = 8,
) -> bargauge.Panel:
    """Horizontal bars of instant values, one per series (e.g. failures by reason over the range)."""
    panel = _panel(bargauge.Panel(), title, description, targets, w, h)
    panel.color_scheme(_colors(model.FieldColorModeId.CONTINUOUS_BL_YL_RD)).thresholds(_thresholds([]))
    panel.display_mode(common.BarGaugeDisplayMode.GRADIENT).orientation(common.VizOrientation.HORIZONTAL)
    panel.reduce_options(_last_value()).show_unfilled(True)
    return _range(panel, unit, 0, None)


def heatmap_panel(
    title: str, description: str, targets: list[prometheus.Dataquery], *, unit: str, w: int = 24, h: int = 9
) -> heatmap.Panel:
    """One row per series (here: per node), coloured by value; the series are the rows, so
    Grafana must not bucket them again (calculate: false)."""
    colors = (
        heatmap.HeatmapColorOptions()
        .mode(heatmap_model.HeatmapColorMode.SCHEME)
        .scheme("RdYlGn")
        .min(0)
        .max(100)
        .steps(64)
        .reverse(False)
    )
    panel = _panel(heatmap.Panel(), title, description, targets, w, h).unit(unit)
    panel.calculate(False).cell_gap(1).cell_values(heatmap.CellValues().unit(unit)).color(colors).show_legend()
    panel.rows_frame(heatmap.RowsHeatmapOptions().layout(common.HeatmapCellLayout.AUTO))
    panel.mode(common.TooltipDisplayMode.SINGLE).hide_y_histogram()
    return panel.y_axis(heatmap.YAxisConfig().axis_placement(common.AxisPlacement.LEFT))


def _organize(rename: dict[str, str]) -> model.DataTransformerConfig:
    """Label columns in ``rename``'s order and names, everything else hidden."""
    options = {
        "excludeByName": {},
        "includeByName": dict.fromkeys(rename, True),
        "indexByName": {column: i for i, column in enumerate(rename)},
        "renameByName": rename,
    }
    return model.DataTransformerConfig(id_val="organize", options=options)


def table_panel(
    title: str,
    description: str,
    targets: list[prometheus.Dataquery],
    *,
    rename: dict[str, str],
    links: dict[str, dict[str, object]] | None = None,
    mappings: dict[str, list[model.ValueMapping]] | None = None,
    numeric: tuple[str, ...] = (),
    sort_by: str | None = None,
    w: int = 12,
    h: int = 8,
) -> table.Panel:
    """An instant table of ``rename``'s columns; ``links`` (data links) and ``mappings`` by (original)
    column name, matched after the transformations, so by the new names."""
    panel = _panel(table.Panel(), title, description, targets, w, h).align(common.FieldTextAlignment.AUTO)
    for column, link in (links or {}).items():
        panel.override_by_name(rename[column], [model.DynamicConfigValue(id_val="links", value=[link])])
    for column, value in (mappings or {}).items():
        panel.override_by_name(rename[column], [model.DynamicConfigValue(id_val="mappings", value=value)])
    panel.with_transformation(model.DataTransformerConfig(id_val="merge", options={}))
    panel.with_transformation(_organize(rename))
    if numeric:
        conversions = [{"targetField": rename.get(c, c), "destinationType": "number"} for c in numeric]
        options = {"conversions": conversions, "fields": {}}
        panel.with_transformation(model.DataTransformerConfig(id_val="convertFieldType", options=options))
    panel.cell_height(common.TableCellHeight.SM).show_header(True)
    if sort_by:
        panel.sort_by([common_builders.TableSortByFieldState().display_name(rename.get(sort_by, sort_by)).desc(True)])
    return panel


def row(title: str) -> dash.Row:
    return dash.Row(title).collapsed(False)


def value_names(values: dict[float, tuple[str, str | None]]) -> list[model.ValueMapping]:
    """Values shown as words (and colours): {value: (text, color)}."""
    options = {
        str(v): model.ValueMappingResult(text=text, color=color, index=i)
        for i, (v, (text, color)) in enumerate(values.items())
    }
    return [model.ValueMap(options=options)]


XID_MAPPING = value_names({code: (name, None) for code, name in XID_NAMES.items()})
UP_DOWN = value_names({1: ("up", "green"), 0: ("down", "red")})
HOT = [(85.0, "orange"), (90.0, "red")]
#: 0-100 %: `**PERCENT` in a panel's arguments.
PERCENT: dict[str, Any] = {"unit": "percent", "minimum": 0, "maximum": 100}


def _incident_table(selector: str, title: str, description: str, *, w: int, h: int) -> table.Panel:
    """Incidents with their reason, node and action; the number opens the HTML post-mortem (the
    report's default answer is Markdown, which a browser shows raw)."""
    link = {
        "targetBlank": True,
        "title": "Post-mortem of incident ${__value.raw}",
        "url": "${server_url}/api/v1/incidents/${__value.raw}/report?format=html",
    }
    rename = {
        "incident": "Incident",
        "job": "Job",
        "node": "Node",
        "reason": "Reason",
        "category": "Category",
        "action": "Action",
        "state": "State",
    }
    return table_panel(
        title,
        description,
        [target(selector, table=True)],
        rename=rename,
        links={"incident": link},
        numeric=("incident",),
        sort_by="incident",
        w=w,
        h=h,
    )


# --- a dashboard from its groups -----------------------------------------------------------------


def dashboard(
    uid: str,
    title: str,
    description: str,
    groups: list[Group],
    *,
    variables: Sequence[Builder[model.VariableModel]] = (),
    annotations: Sequence[Builder[model.AnnotationQuery]] = (),
) -> dash.Dashboard:
    """A gpuwatch dashboard: the `${datasource}` variable, a menu of the other gpuwatch dashboards,
    and ``groups`` (a row and its panels each) laid out in order."""
    board = (
        dash.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(["gpuwatch"])
        .editable()
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .time("now-6h", "now")
        .timezone("")
        .refresh("30s")
        .fiscal_year_start_month(0)
        .week_start("")
        .version(1)
        .variables([datasource_variable(), *variables])
        .annotations([builtin_annotation(), *annotations])
        .link(
            dash.DashboardLink("gpuwatch")
            .type(model.DashboardLinkType.DASHBOARDS)
            .tags(["gpuwatch"])
            .as_dropdown(True)
            .icon("external link")
            .include_vars(False)
            .keep_time(True)
        )
    )
    for header, panels in groups:
        board.with_row(header)
        for panel in panels:
            board.with_panel(panel)
    return board


def to_json(board: dash.Dashboard) -> str:
    """The dashboard's file: panel ids 1, 2, … in reading order; keys sorted, so the text is stable."""
    built = board.build()
    built.schema_version = SCHEMA_VERSION
    for number, panel in enumerate(built.panels or [], start=1):
        panel.id_val = number
    return json.dumps(built, cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


# --- the Cluster dashboard -----------------------------------------------------------------------


def _cluster_fleet() -> Group:
    return row("Fleet"), [
        stat_panel(
            "GPUs reporting / known",
            "GPUs whose samples are current, and all GPUs the server has heard of.",
            [
                target("count(DCGM_FI_DEV_GPU_UTIL)", "reporting"),
                target("count(gpuwatch_gpu_last_sample_seconds)", "known"),
            ],
        ),
        stat_panel(
            "Nodes up / known",
            "Nodes whose agent was heard within node_timeout_s, and all nodes known.",
            [target("sum(gpuwatch_node_up)", "up"), target("count(gpuwatch_node_up)", "known")],
        ),
        stat_panel(
            "Mean GPU utilization",
            "Mean utilization of every reporting GPU.",
            [target("avg(DCGM_FI_DEV_GPU_UTIL)")],
            unit="percent",
            decimals=0,
        ),
        stat_panel(
            "Unallocated GPUs",
            "Reporting GPUs with no job on them: capacity to schedule.",
            [target("sum(gpuwatch_gpus_unallocated)")],
        ),
        stat_panel(
            "Allocated GPUs idle",
            "GPUs that jobs hold but leave under 5% utilization, on average (idle GPU-hours accrued per hour).",
            [target("sum(rate(gpuwatch_job_idle_gpu_hours_total[$__rate_interval])) * 3600")],
            thresholds=[(1, "orange")],
            decimals=1,
        ),
        stat_panel("Power draw", "Power of all reporting GPUs.", [target("sum(DCGM_FI_DEV_POWER_USAGE)")], unit="watt"),
    ]


def _cluster_utilization() -> Group:
    idle_by_job = "sum by (job) (rate(gpuwatch_job_idle_gpu_hours_total[$__rate_interval])) * 3600"
    return row("Utilization"), [
        heatmap_panel(
            "GPU utilization by node",
            "Mean utilization of each node's GPUs; a red row in a busy cluster is a node to look at.",
            [target("avg by (instance) (DCGM_FI_DEV_GPU_UTIL)", "{{instance}}")],
            unit="percent",
            w=16,
        ),
        series_panel(
            "Idle allocated GPUs by job",
            "GPUs each job holds under 5% utilization, on average.",
            [target(idle_by_job, "{{job}}")],
            minimum=0,
            w=8,
            h=9,
        ),
    ]


def _cluster_power() -> Group:
    return row("Power and temperature"), [
        series_panel(
            "Power by node",
            "Power draw of each node's GPUs.",
            [target("sum by (instance) (DCGM_FI_DEV_POWER_USAGE)", "{{instance}}")],
            unit="watt",
            minimum=0,
        ),
        series_panel(
            "Hottest GPU by node",
            "Temperature of each node's hottest GPU; thermal slowdown typically starts near 87 C.",
            [target("max by (instance) (DCGM_FI_DEV_GPU_TEMP)", "{{instance}}")],
            unit="celsius",
            threshold=85,
        ),
    ]


def _cluster_hardware() -> Group:
    throttled = f"sum by (instance) ({thermal_throttled('DCGM_FI_DEV_CLOCK_THROTTLE_REASONS')})"
    return row("Hardware errors"), [
        table_panel(
            "GPUs with an Xid",
            "Each GPU's last Xid in the time range (dcgm-exporter's gauge: a later Xid hides an "
            "earlier one). Application Xids (13, 31, 43, 45) are the job's doing; the others are "
            "hardware (see GpuFatalXid).",
            [target("last_over_time(DCGM_FI_DEV_XID_ERRORS[$__range]) > 0", table=True)],
            rename={"instance": "Node", "gpu": "GPU", "UUID": "UUID", "Value": "Xid"},
            mappings={"Value": XID_MAPPING},
            w=8,
        ),
        table_panel(
            "Xid events",
            "Every Xid in the time range, counted by node, GPU and code (a GPU the driver could "
            "not name has no index).",
            [target(xid_events("instance, gpu, xid", "gpuwatch_xid_events_total"), table=True)],
            rename={"instance": "Node", "gpu": "GPU", "xid": "Xid", "Value": "Events"},
            mappings={"xid": XID_MAPPING},
            w=8,
        ),
        table_panel(
            "GPUs with uncorrectable ECC errors",
            "Double-bit ECC errors since each GPU's last reset (volatile counters).",
            [target("max_over_time(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[$__range]) > 0", table=True)],
            rename={"instance": "Node", "gpu": "GPU", "UUID": "UUID", "Value": "Errors"},
            w=8,
        ),
        series_panel(
            "Thermally throttled GPUs",
            "GPUs slowing their clocks for heat (clock-event reasons 0x20 or 0x40), by node.",
            [target(throttled, "{{instance}}")],
            minimum=0,
            w=24,
            h=7,
        ),
    ]


def _cluster_failures() -> Group:
    restarts = f"sum by (job) ({new_events('gpuwatch_restarts_total', '$__range')}) > 0"
    return row("Failures and recovery"), [
        bar_panel(
            "Failures by reason",
            "Failed runs diagnosed in the time range, by reason of the failure taxonomy.",
            [target(events_by("reason", "gpuwatch_failures_total", "$__range"), "{{reason}}", instant=True)],
        ),
        bar_panel(
            "Restarts by job",
            "Restarts the recovery policy ordered in the time range.",
            [target(restarts, "{{job}}", instant=True)],
        ),
        bar_panel(
            "GPU-hours lost by category",
            "Work lost since the last checkpoint plus downtime, in the time range.",
            [target(events_by("category", "gpuwatch_lost_gpu_hours_total", "$__range"), "{{category}}", instant=True)],
            unit="h",
        ),
    ]


def _cluster_self() -> Group:
    ingest = "sum by (outcome) (rate(gpuwatch_ingest_batches_total[$__rate_interval]))"
    refused = "sum by (status) (rate(gpuwatch_ingest_rejected_requests_total[$__rate_interval]))"
    dropped = "sum by (node, kind) (increase(gpuwatch_agent_dropped_total[$__rate_interval]))"
    return row("gpuwatch itself"), [
        stat_panel(
            "Server scrape",
            "Whether Prometheus can scrape the gpuwatch server.",
            [target('up{job="gpuwatch"}')],
            mappings=UP_DOWN,
        ),
        series_panel(
            "Ingest batches",
            "Agent batches per second, by outcome (stored, duplicate, rejected).",
            [target(ingest, "{{outcome}}")],
            unit="reqps",
            w=7,
        ),
        series_panel(
            "Refused API requests",
            "Requests under /api/v1/ answered with an error, by HTTP status.",
            [target(refused, "{{status}}")],
            unit="reqps",
            w=7,
        ),
        series_panel(
            "Items dropped by agents",
            "Items agents dropped because their spool was full: data lost for good.",
            [target(dropped, "{{node}} {{kind}}")],
            w=6,
        ),
    ]


def cluster() -> dash.Dashboard:
    return dashboard(
        "gpuwatch-cluster",
        "gpuwatch / Cluster",
        "The whole fleet: GPUs up, utilization by node, idle allocations, power, heat, "
        "hardware errors, failures, restarts and GPU-hours lost.",
        [
            _cluster_fleet(),
            _cluster_utilization(),
            _cluster_power(),
            _cluster_hardware(),
            _cluster_failures(),
            _cluster_self(),
        ],
    )


# --- the Node and GPU dashboard ------------------------------------------------------------------

GPUS = 'instance="$node", gpu=~"$gpu"'


def _node_summary() -> Group:
    return row("Node $node"), [
        stat_panel(
            "Agent",
            "Whether the node's agent was heard from within node_timeout_s.",
            [target('gpuwatch_node_up{node="$node"}')],
            mappings=UP_DOWN,
        ),
        stat_panel(
            "Last heard",
            "Seconds since the node's agent was last heard.",
            [target('gpuwatch_node_last_seen_seconds{node="$node"}')],
            unit="s",
            thresholds=[(30, "red")],
        ),
        stat_panel(
            "GPUs reporting",
            "GPUs of the node whose samples are current.",
            [target('count(DCGM_FI_DEV_GPU_UTIL{instance="$node"})')],
        ),
        stat_panel(
            "Unallocated GPUs",
            "GPUs of the node with no job on them.",
            [target('gpuwatch_gpus_unallocated{node="$node"}')],
        ),
        stat_panel(
            "Power draw",
            "Power of the node's GPUs.",
            [target('sum(DCGM_FI_DEV_POWER_USAGE{instance="$node"})')],
            unit="watt",
        ),
        stat_panel(
            "Hottest GPU",
            "Temperature of the node's hottest GPU.",
            [target('max(DCGM_FI_DEV_GPU_TEMP{instance="$node"})')],
            unit="celsius",
            thresholds=HOT,
        ),
    ]


def _per_gpu(
    title: str,
    description: str,
    metric: str,
    *,
    unit: str | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    threshold: float | None = None,
) -> timeseries.Panel:
    """One line per GPU of the node (and of the `$gpu` choice) for a DCGM field."""
    query = target(f"{metric}{{{GPUS}}}", "GPU {{gpu}}")
    return series_panel(title, description, [query], unit=unit, minimum=minimum, maximum=maximum, threshold=threshold)


def _node_gpus() -> Group:
    return row("GPUs"), [
        _per_gpu("GPU utilization", "Percent of time a kernel ran.", "DCGM_FI_DEV_GPU_UTIL", **PERCENT),
        _per_gpu(
            "Memory copy utilization",
            "Percent of time device memory was read or written.",
            "DCGM_FI_DEV_MEM_COPY_UTIL",
            **PERCENT,
        ),
        _per_gpu("Framebuffer memory used", "Device memory in use.", "DCGM_FI_DEV_FB_USED", unit="mbytes", minimum=0),
        _per_gpu("Framebuffer memory free", "Device memory free.", "DCGM_FI_DEV_FB_FREE", unit="mbytes", minimum=0),
        _per_gpu("Power", "Power draw per GPU.", "DCGM_FI_DEV_POWER_USAGE", unit="watt", minimum=0),
        _per_gpu("Temperature", "GPU temperature.", "DCGM_FI_DEV_GPU_TEMP", unit="celsius", threshold=85),
        *_node_clocks_and_links(),
    ]


def _node_clocks_and_links() -> list[Panel]:
    nvlink = f"rate(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{{{GPUS}}}[$__rate_interval]) * 1048576"
    return [
        series_panel(
            "Clocks",
            "SM and memory clocks; an SM clock far under its peak on a busy GPU is throttling.",
            [
                target(f"DCGM_FI_DEV_SM_CLOCK{{{GPUS}}}", "GPU {{gpu}} SM"),
                target(f"DCGM_FI_DEV_MEM_CLOCK{{{GPUS}}}", "GPU {{gpu}} memory"),
            ],
            unit="rotmhz",
        ),
        series_panel(
            "Thermal throttling",
            "1 while the GPU slows its clocks for heat (clock-event reasons 0x20 or 0x40).",
            [target(thermal_throttled(f"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{{{GPUS}}}"), "GPU {{gpu}}")],
            minimum=0,
            maximum=1,
        ),
        series_panel(
            "PCIe throughput",
            "Host to device (rx) and device to host (tx).",
            [
                target(f"DCGM_FI_PROF_PCIE_TX_BYTES{{{GPUS}}}", "GPU {{gpu}} tx"),
                target(f"DCGM_FI_PROF_PCIE_RX_BYTES{{{GPUS}}}", "GPU {{gpu}} rx"),
            ],
            unit="Bps",
            minimum=0,
        ),
        series_panel(
            "NVLink throughput",
            "tx + rx over all links, from the NVLink byte counter (MiB).",
            [target(nvlink, "GPU {{gpu}}")],
            unit="Bps",
            minimum=0,
        ),
    ]


def _node_errors() -> Group:
    xids = xid_events("gpu, xid", 'gpuwatch_xid_events_total{instance="$node", gpu=~"$gpu|"}')
    return row("Errors"), [
        stat_panel(
            "Last Xid",
            "Each GPU's last Xid in the time range (0: none).",
            [target(f"last_over_time(DCGM_FI_DEV_XID_ERRORS{{{GPUS}}}[$__range])", "GPU {{gpu}}")],
            mappings=XID_MAPPING,
            thresholds=[(1, "red")],
            w=6,
            h=6,
        ),
        table_panel(
            "Xid events",
            "Every Xid in the time range, counted by GPU and code, including those the last-Xid "
            "gauge hides and those of a GPU the driver could not name (no index).",
            [target(xids, table=True)],
            rename={"gpu": "GPU", "xid": "Xid", "Value": "Events"},
            mappings={"xid": XID_MAPPING},
            w=6,
            h=6,
        ),
        *_node_memory_faults(),
    ]


def _node_memory_faults() -> list[Panel]:
    return [
        series_panel(
            "ECC errors since reset",
            "Single-bit (corrected) and double-bit (uncorrectable) volatile ECC error counts.",
            [
                target(f"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{{{GPUS}}}", "GPU {{gpu}} single-bit"),
                target(f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{GPUS}}}", "GPU {{gpu}} double-bit"),
            ],
            minimum=0,
            w=6,
            h=6,
        ),
        series_panel(
            "Retired pages and row remapping",
            "Pages retired for single- and double-bit errors; a row remap failure means the GPU "
            "has run out of spare rows (RMA).",
            [
                target(f"DCGM_FI_DEV_RETIRED_SBE{{{GPUS}}}", "GPU {{gpu}} retired (SBE)"),
                target(f"DCGM_FI_DEV_RETIRED_DBE{{{GPUS}}}", "GPU {{gpu}} retired (DBE)"),
                target(f"DCGM_FI_DEV_ROW_REMAP_FAILURE{{{GPUS}}}", "GPU {{gpu}} remap failure"),
            ],
            minimum=0,
            w=6,
            h=6,
        ),
        series_panel(
            "Seconds since each GPU's last sample",
            "Grows when a GPU stops reporting (fallen off the bus, NVML stuck) or the node goes silent.",
            [target(f"gpuwatch_gpu_last_sample_seconds{{{GPUS}}}", "GPU {{gpu}}")],
            unit="s",
            threshold=60,
            w=24,
            h=6,
        ),
    ]


def _node_infiniband() -> Group:
    errors = 'sum by (device, port, counter) (increase(gpuwatch_ib_port_errors_total{node="$node"}[$__rate_interval]))'
    return row("InfiniBand"), [
        series_panel(
            "InfiniBand throughput",
            "Per port, transmit and receive.",
            [
                target('gpuwatch_ib_port_transmit_bytes_per_second{node="$node"}', "{{device}}/{{port}} tx"),
                target('gpuwatch_ib_port_receive_bytes_per_second{node="$node"}', "{{device}}/{{port}} rx"),
            ],
            unit="Bps",
            minimum=0,
        ),
        series_panel(
            "InfiniBand port errors",
            "Error counters that moved, per port and counter: symbol errors and link recoveries "
            "are a cable or transceiver going bad.",
            [target(errors, "{{device}}/{{port}} {{counter}}")],
            minimum=0,
        ),
    ]


def node() -> dash.Dashboard:
    return dashboard(
        "gpuwatch-node",
        "gpuwatch / Node and GPU",
        "One node and its GPUs: utilization, memory, power, heat, clocks, links and errors.",
        [_node_summary(), _node_gpus(), _node_errors(), _node_infiniband()],
        variables=[
            query_variable("node", "Node", "label_values(gpuwatch_node_up, node)"),
            query_variable(
                "gpu", "GPU", 'label_values(gpuwatch_gpu_last_sample_seconds{instance="$node"}, gpu)', multi=True
            ),
        ],
    )


# --- the Job dashboard ---------------------------------------------------------------------------

THIS_JOB = 'job="$job"'
RANKS = 'job="$job", rank!="all"'
WHOLE_JOB = 'job="$job", rank="all"'
BY_RANK = "rank {{rank}} ({{node}})"
#: gpuwatch_job_gpu_attributed: 1 every rank with steps has GPU samples, 0.5 some do, 0 none do.
ATTRIBUTION = value_names(
    {1: ("full", "green"), 0.5: ("partial: some ranks untied", "orange"), 0: ("none: no GPU samples", "red")}
)


def _job_annotations() -> list[PrometheusAnnotation]:
    restarts = new_events(f"gpuwatch_restarts_total{{{THIS_JOB}}}", "1m")
    incident = f"gpuwatch_incident_info{{{THIS_JOB}}}"
    return [
        PrometheusAnnotation(
            "Restarts", f"sum by (reason) ({restarts}) > 0", "restart: {{reason}}", "orange", "reason"
        ),
        PrometheusAnnotation(
            "Incidents",
            f"{incident} unless {incident} offset 1m",
            "incident {{incident}}: {{reason}} on {{node}}, {{action}}",
            "red",
            "reason,node,action",
        ),
        PrometheusAnnotation(
            "Hangs", f"{new_events(f'gpuwatch_hang_events_total{{{THIS_JOB}}}', '1m')} > 0", "hang", "purple", "job"
        ),
        PrometheusAnnotation(
            "Stragglers",
            f"{new_events(f'gpuwatch_straggler_events_total{{{THIS_JOB}}}', '1m')} > 0",
            "straggler",
            "yellow",
            "job",
        ),
    ]


def _job_summary() -> Group:
    return row("Job $job"), [
        stat_panel(
            "GPU utilization",
            "Mean utilization of the job's GPUs over the server's job window.",
            [target(f"gpuwatch_job_gpu_utilization{{{WHOLE_JOB}}}")],
            unit="percent",
            decimals=0,
        ),
        stat_panel(
            "Step time",
            "Median step time over the job window.",
            [target(f"gpuwatch_job_step_seconds{{{WHOLE_JOB}}}")],
            unit="s",
        ),
        stat_panel(
            "Throughput",
            "Tokens or samples per second, as the training client reports them.",
            [target(f"gpuwatch_job_throughput{{{THIS_JOB}}}", "{{unit}}/s")],
            unit="short",
        ),
        stat_panel(
            "Communication overhead",
            "Time in collectives / step time. Over 20% for 15 minutes alerts.",
            [target(f"gpuwatch_job_comm_overhead_ratio{{{WHOLE_JOB}}}")],
            unit="percentunit",
            thresholds=[(0.2, "red")],
        ),
        stat_panel(
            "Exposed communication",
            "The part of the step spent waiting for collectives (not overlapped by compute) / step "
            "time: what faster communication would give back. On GPUs timed by CUDA events.",
            [target(f"gpuwatch_job_comm_exposed_ratio{{{WHOLE_JOB}}}")],
            unit="percentunit",
            thresholds=[(0.2, "red")],
        ),
        *_job_costs(),
    ]


def _job_costs() -> list[Panel]:
    return [
        stat_panel(
            "GPU-hours",
            "GPU-hours allocated to the job, as seen by this server.",
            [target(f"gpuwatch_job_gpu_hours_total{{{THIS_JOB}}}")],
            decimals=2,
        ),
        stat_panel(
            "Checkpoint age",
            "Time since the job's last complete checkpoint (as its client reported it). Over 2 h, or over "
            "twice the Young/Daly optimal interval, for 10 minutes alerts.",
            [target(f"gpuwatch_job_checkpoint_age_seconds{{{THIS_JOB}}}")],
            unit="s",
            thresholds=[(7200, "red")],
        ),
        stat_panel(
            "GPU-hours at risk",
            "What a failure now would lose: the job's GPUs x time since its last complete checkpoint.",
            [target(f"gpuwatch_job_gpu_hours_at_risk{{{THIS_JOB}}}")],
            decimals=2,
        ),
        stat_panel(
            "Idle GPU-hours",
            "GPU-hours the job's GPUs spent under 5% utilization.",
            [target(f"gpuwatch_job_idle_gpu_hours_total{{{THIS_JOB}}}")],
            decimals=2,
            thresholds=[(1, "orange")],
        ),
        stat_panel(
            "GPU attribution",
            "Whether the job's GPU samples are tied to its ranks. 'none': the job reports steps but no GPU "
            "sample is attributed to it (its processes set no LOCAL_RANK / CUDA_VISIBLE_DEVICES and the "
            "driver's process list names none of them), so its GPU utilization above is missing, not zero. "
            "'partial': some ranks with steps have no GPU. GET /api/v1/jobs/N/utilization says which.",
            [target(f"gpuwatch_job_gpu_attributed{{{THIS_JOB}}}")],
            mappings=ATTRIBUTION,
            w=12,
        ),
    ]


def _job_ranks() -> Group:
    # The straggler rule's compute time: the step less its exposed communication (the total where a client
    # reports no exposed time).
    waited = f"(gpuwatch_job_comm_exposed_ratio{{{RANKS}}} or gpuwatch_job_comm_overhead_ratio{{{RANKS}}})"
    compute = f"gpuwatch_job_step_seconds{{{RANKS}}} * (1 - {waited})"
    return row("Ranks"), [
        series_panel(
            "GPU utilization by rank",
            "Mean utilization of each rank's GPU over the job window.",
            [target(f"gpuwatch_job_gpu_utilization{{{RANKS}}}", BY_RANK)],
            **PERCENT,
        ),
        series_panel(
            "Step time by rank",
            "Median wall time of a step. Collectives make every rank wait for the slowest, so "
            "these lines move together: see compute time for the straggler.",
            [target(f"gpuwatch_job_step_seconds{{{RANKS}}}", BY_RANK)],
            unit="s",
            minimum=0,
        ),
        series_panel(
            "Compute time per step by rank",
            "Step time outside collectives: what the straggler rule compares. The rank far "
            "above the others is the straggler.",
            [target(compute, BY_RANK)],
            unit="s",
            minimum=0,
        ),
        *_job_throughput(),
    ]


def _job_throughput() -> list[Panel]:
    idle = (
        f"rate(gpuwatch_job_idle_gpu_hours_total{{{THIS_JOB}}}[$__rate_interval])"
        f" / rate(gpuwatch_job_gpu_hours_total{{{THIS_JOB}}}[$__rate_interval])"
    )
    return [
        series_panel(
            "Communication overhead by rank",
            "Time in collectives / step time; the job's alert threshold (20%) dashed. Ranks "
            "waiting for a straggler show a high overhead.",
            [
                target(f"gpuwatch_job_comm_overhead_ratio{{{RANKS}}}", BY_RANK),
                target(f"gpuwatch_job_comm_overhead_ratio{{{WHOLE_JOB}}}", "job"),
            ],
            unit="percentunit",
            minimum=0,
            threshold=0.2,
        ),
        series_panel(
            "Total and exposed communication",
            "Total: time in collectives / step time. Exposed: the part of it the step waited for, not "
            "hidden behind compute (DDP overlaps most of its all-reduce with the backward pass). The gap "
            "between the two is overlap; the exposed line is what costs the step.",
            [
                target(f"gpuwatch_job_comm_overhead_ratio{{{WHOLE_JOB}}}", "total"),
                target(f"gpuwatch_job_comm_exposed_ratio{{{WHOLE_JOB}}}", "exposed"),
                target(f"gpuwatch_job_comm_exposed_ratio{{{RANKS}}}", "exposed, " + BY_RANK),
            ],
            unit="percentunit",
            minimum=0,
        ),
        series_panel(
            "Bus bandwidth by collective",
            "nccl-tests' bus bandwidth of the job's collectives (bytes moved per second, scaled by the "
            "collective's factor so that it compares with the link's peak), from GPU time on CUDA backends.",
            [target(f"gpuwatch_job_comm_busbw_bytes_per_second{{{THIS_JOB}}}", "{{op}}")],
            unit="Bps",
            minimum=0,
        ),
        series_panel(
            "Throughput",
            "Tokens or samples per second over the job window.",
            [target(f"gpuwatch_job_throughput{{{THIS_JOB}}}", "{{unit}}/s")],
            minimum=0,
        ),
        series_panel(
            "Idle fraction of the job's GPU time",
            "Share of the job's GPU time spent under 5% utilization.",
            [target(idle, "idle")],
            unit="percentunit",
            minimum=0,
            maximum=1,
        ),
    ]


def _job_events() -> Group:
    return row("Stragglers, hangs and restarts"), [
        stat_panel(
            "Straggler events",
            "Straggler events raised for the job (GET /api/v1/events?kind=straggler names the rank).",
            [target(f"gpuwatch_straggler_events_total{{{THIS_JOB}}}")],
            thresholds=[(1, "orange")],
            h=6,
        ),
        stat_panel(
            "Hang events",
            "Hang events raised for the job.",
            [target(f"gpuwatch_hang_events_total{{{THIS_JOB}}}")],
            thresholds=[(1, "red")],
            h=6,
        ),
        stat_panel(
            "Restarts",
            "Restarts the recovery policy ordered for the job, by reason.",
            [target(f"sum by (reason) (gpuwatch_restarts_total{{{THIS_JOB}}})", "{{reason}}")],
            thresholds=[(1, "orange"), (3, "red")],
            h=6,
        ),
        _incident_table(
            f"gpuwatch_incident_info{{{THIS_JOB}}}",
            "Incidents of this job",
            "The job's recent incidents; the incident number opens its post-mortem on the gpuwatch server.",
            w=12,
            h=6,
        ),
    ]


def job() -> dash.Dashboard:
    return dashboard(
        "gpuwatch-job",
        "gpuwatch / Job",
        "One training job: utilization per rank, step time, throughput, communication "
        "overhead, stragglers; restarts, hangs, stragglers and incidents as annotations.",
        [_job_summary(), _job_ranks(), _job_events()],
        variables=[
            query_variable("job", "Job", "label_values(gpuwatch_job_gpu_hours_total, job)"),
            server_url_variable(),
        ],
        annotations=_job_annotations(),
    )


# --- the Incidents dashboard ---------------------------------------------------------------------


def _incidents_recent() -> Group:
    return row("Recent incidents"), [
        _incident_table(
            "gpuwatch_incident_info",
            "Recent incidents",
            "The 50 most recent incidents. The incident number opens its post-mortem on the gpuwatch "
            "server at $server_url (set it above to the address your browser reaches).",
            w=24,
            h=10,
        )
    ]


def _counted(title: str, description: str, label: str, counter: str, unit: str | None = None) -> bargauge.Panel:
    """Bars of what ``counter`` counted in the time range, by ``label``."""
    return bar_panel(
        title, description, [target(events_by(label, counter, "$__range"), f"{{{{{label}}}}}", instant=True)], unit=unit
    )


def _incidents_counts() -> Group:
    return row("Failures and recovery in the time range"), [
        _counted(
            "Failures by reason",
            "Failed runs diagnosed, by reason of the failure taxonomy.",
            "reason",
            "gpuwatch_failures_total",
        ),
        _counted(
            "Failures by category",
            "Failed runs diagnosed, by category (infrastructure, user, …).",
            "category",
            "gpuwatch_failures_total",
        ),
        _counted(
            "Incidents by trigger",
            "Incidents opened: a failed run, a silent node, a hang, a fatal Xid.",
            "trigger",
            "gpuwatch_incidents_total",
        ),
        _counted(
            "Recovery decisions by action",
            "What the recovery policy decided: restart, restart_exclude_node, notify, stop, dry_run.",
            "action",
            "gpuwatch_recovery_decisions_total",
        ),
        _counted(
            "GPU-hours lost by reason",
            "Work since the last checkpoint plus downtime.",
            "reason",
            "gpuwatch_lost_gpu_hours_total",
            unit="h",
        ),
        _counted("Stragglers and hangs found", "Detections by kind.", "kind", "gpuwatch_detections_total"),
        *_incidents_recovery(),
    ]


def _incidents_recovery() -> list[Panel]:
    return [
        series_panel(
            "Time from exit to restart decision",
            "Median and 90th percentile of the seconds between a run's exit and the recovery decision.",
            [
                target(f"histogram_quantile(0.5, {RESTART_LATENCY})", "p50"),
                target(f"histogram_quantile(0.9, {RESTART_LATENCY})", "p90"),
            ],
            unit="s",
            minimum=0,
            w=8,
        ),
        table_panel(
            "Nodes excluded by recovery",
            "Nodes the recovery policy keeps new runs away from.",
            [target("gpuwatch_excluded_nodes > 0", table=True)],
            rename={"node": "Node"},
            w=16,
            h=8,
        ),
    ]


def incidents() -> dash.Dashboard:
    return dashboard(
        "gpuwatch-incidents",
        "gpuwatch / Incidents",
        "Recent incidents with their reason, node and action, and links to their post-mortems; "
        "failures, recovery decisions and GPU-hours lost.",
        [_incidents_recent(), _incidents_counts()],
        variables=[server_url_variable()],
    )


DASHBOARDS = {
    "gpuwatch-cluster.json": cluster,
    "gpuwatch-node.json": node,
    "gpuwatch-job.json": job,
    "gpuwatch-incidents.json": incidents,
}


def render() -> dict[str, str]:
    """File name → the exact text of each dashboard file."""
    return {name: to_json(make()) for name, make in DASHBOARDS.items()}


def main(argv: list[str]) -> int:
    stale = []
    for name, text in render().items():
        path = HERE / name
        if "--check" in argv:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print(f"out of date (run python dashboards/build.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
