"""Builds gpuwatch's Grafana dashboards: `python dashboards/build.py` rewrites the JSON files next to
it, `python dashboards/build.py --check` exits 1 if a committed file differs from what it builds.

The JSON is generated so that the things that must agree across ~80 panels (the `${datasource}`
variable, unique panel ids, a grid with no overlaps, one idiom per kind of query) are written once.
Every expression is run against a live Prometheus scraping a live gpuwatch server by
tests/system/test_prometheus_live.py; tests/system/test_dashboards.py checks the structure.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCHEMA_VERSION = 39  # Grafana 11.1
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
GRID_WIDTH = 24

Json = dict[str, Any]

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


# --- targets, variables and panels --------------------------------------------------------------


def target(expr: str, legend: str = "", *, instant: bool = False, table: bool = False) -> Json:
    return {
        "datasource": DATASOURCE,
        "expr": expr,
        "format": "table" if table else "time_series",
        "instant": instant or table,
        "legendFormat": legend or "__auto",
        "range": not (instant or table),
    }


def datasource_variable() -> Json:
    return {
        "current": {},
        "hide": 0,
        "includeAll": False,
        "label": "Data source",
        "multi": False,
        "name": "datasource",
        "options": [],
        "query": "prometheus",
        "refresh": 1,
        "regex": "",
        "type": "datasource",
    }


def query_variable(name: str, label: str, query: str, *, multi: bool = False) -> Json:
    """A variable filled by Grafana's `label_values(...)`, re-read when the time range changes."""
    return {
        "current": {},
        "datasource": DATASOURCE,
        "definition": query,
        "hide": 0,
        "includeAll": multi,
        "label": label,
        "multi": multi,
        "name": name,
        "options": [],
        "query": query,
        "refresh": 2,
        "regex": "",
        "sort": 3,
        "type": "query",
    }


def textbox_variable(name: str, label: str, default: str) -> Json:
    return {
        "current": {"text": default, "value": default},
        "hide": 0,
        "label": label,
        "name": name,
        "options": [{"selected": True, "text": default, "value": default}],
        "query": default,
        "type": "textbox",
    }


def annotation(name: str, expr: str, title: str, color: str, tags: str) -> Json:
    """Marks from a Prometheus expression: every step where it returns a series is marked."""
    return {
        "datasource": DATASOURCE,
        "enable": True,
        "expr": expr,
        "iconColor": color,
        "name": name,
        "step": "1m",
        "tagKeys": tags,
        "textFormat": "",
        "titleFormat": title,
        "useValueForTime": False,
    }


@dataclass
class Panel:
    """One panel before layout: its width and height on the 24-column grid, and its JSON."""

    body: Json
    w: int
    h: int


def _defaults(unit: str | None, *, minimum: float | None, maximum: float | None, thresholds: list[Json]) -> Json:
    defaults: Json = {
        "color": {"mode": "palette-classic" if not thresholds else "thresholds"},
        "thresholds": {"mode": "absolute", "steps": [{"color": "green", "value": None}, *thresholds]},
    }
    if unit:
        defaults["unit"] = unit
    if minimum is not None:
        defaults["min"] = minimum
    if maximum is not None:
        defaults["max"] = maximum
    return defaults


def timeseries(
    title: str,
    description: str,
    targets: list[Json],
    *,
    unit: str | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    threshold: float | None = None,
    w: int = 12,
    h: int = 8,
) -> Panel:
    """A time series; ``threshold`` draws a dashed red line where an alert fires."""
    defaults = _defaults(unit, minimum=minimum, maximum=maximum, thresholds=[])
    defaults["custom"] = {"fillOpacity": 10, "lineWidth": 1, "showPoints": "never", "spanNulls": False}
    if threshold is not None:
        defaults["thresholds"]["steps"].append({"color": "red", "value": threshold})
        defaults["custom"]["thresholdsStyle"] = {"mode": "dashed"}
    body = {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": targets,
    }
    return Panel(body, w, h)


def stat(
    title: str,
    description: str,
    targets: list[Json],
    *,
    unit: str | None = None,
    thresholds: list[Json] | None = None,
    mappings: list[Json] | None = None,
    decimals: int | None = None,
    w: int = 4,
    h: int = 4,
) -> Panel:
    defaults = _defaults(unit, minimum=None, maximum=None, thresholds=thresholds or [])
    defaults["mappings"] = mappings or []
    if decimals is not None:
        defaults["decimals"] = decimals
    body = {
        "type": "stat",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "colorMode": "value",
            "graphMode": "area",
            "justifyMode": "auto",
            "orientation": "auto",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "textMode": "value_and_name" if len(targets) > 1 else "auto",
        },
        "targets": targets,
    }
    return Panel(body, w, h)


def bars(
    title: str, description: str, targets: list[Json], *, unit: str | None = None, w: int = 8, h: int = 8
) -> Panel:
    """Horizontal bars of instant values, one per series (e.g. failures by reason over the range)."""
    defaults = _defaults(unit, minimum=0, maximum=None, thresholds=[])
    defaults["color"] = {"mode": "continuous-BlYlRd"}
    body = {
        "type": "bargauge",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "displayMode": "gradient",
            "orientation": "horizontal",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "showUnfilled": True,
        },
        "targets": targets,
    }
    return Panel(body, w, h)


def heatmap(title: str, description: str, targets: list[Json], *, unit: str, w: int = 24, h: int = 9) -> Panel:
    """One row per series (here: per node), coloured by value; the series are the rows, so
    Grafana must not bucket them again (calculate: false)."""
    body = {
        "type": "heatmap",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {
            "calculate": False,
            "cellGap": 1,
            "cellValues": {"unit": unit},
            "color": {"mode": "scheme", "scheme": "RdYlGn", "min": 0, "max": 100, "steps": 64, "reverse": False},
            "legend": {"show": True},
            "rowsFrame": {"layout": "auto"},
            "tooltip": {"mode": "single", "yHistogram": False},
            "yAxis": {"axisPlacement": "left"},
        },
        "targets": targets,
    }
    return Panel(body, w, h)


def table(
    title: str,
    description: str,
    targets: list[Json],
    *,
    rename: dict[str, str],
    links: dict[str, Json] | None = None,
    mappings: dict[str, list[Json]] | None = None,
    numeric: tuple[str, ...] = (),
    sort_by: str | None = None,
    w: int = 12,
    h: int = 8,
) -> Panel:
    """An instant table: label columns in ``rename``'s order and names, everything else hidden;
    ``links`` and ``mappings`` by (original) column name."""
    overrides = [  # matched after the transformations, so by the new names
        {"matcher": {"id": "byName", "options": rename[column]}, "properties": [{"id": "links", "value": [link]}]}
        for column, link in (links or {}).items()
    ] + [
        {"matcher": {"id": "byName", "options": rename[column]}, "properties": [{"id": "mappings", "value": value}]}
        for column, value in (mappings or {}).items()
    ]
    transformations: list[Json] = [
        {"id": "merge", "options": {}},
        {
            "id": "organize",
            "options": {
                "excludeByName": {},
                "includeByName": dict.fromkeys(rename, True),
                "indexByName": {column: i for i, column in enumerate(rename)},
                "renameByName": rename,
            },
        },
    ]
    if numeric:
        conversions = [{"targetField": rename.get(c, c), "destinationType": "number"} for c in numeric]
        transformations.append({"id": "convertFieldType", "options": {"conversions": conversions, "fields": {}}})
    body = {
        "type": "table",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": {"custom": {"align": "auto"}}, "overrides": overrides},
        "options": {
            "cellHeight": "sm",
            "showHeader": True,
            "sortBy": [{"desc": True, "displayName": rename.get(sort_by, sort_by)}] if sort_by else [],
        },
        "targets": targets,
        "transformations": transformations,
    }
    return Panel(body, w, h)


def row(title: str) -> Panel:
    return Panel({"type": "row", "title": title, "collapsed": False, "panels": []}, GRID_WIDTH, 1)


def _mapping(values: dict[int, tuple[str, str | None]]) -> list[Json]:
    return [
        {
            "type": "value",
            "options": {
                str(v): {"index": i, "text": text, **({"color": color} if color else {})}
                for i, (v, (text, color)) in enumerate(values.items())
            },
        }
    ]


XID_MAPPING = _mapping({code: (name, None) for code, name in XID_NAMES.items()})


@dataclass
class Dashboard:
    uid: str
    title: str
    description: str
    variables: list[Json]
    panels: list[Panel]
    annotations: list[Json] = field(default_factory=list)
    links: list[Json] = field(default_factory=list)

    def to_json(self) -> Json:
        return {
            "annotations": {"list": [_builtin_annotation(), *self.annotations]},
            "description": self.description,
            "editable": True,
            "fiscalYearStartMonth": 0,
            "graphTooltip": 1,
            "id": None,
            "links": [
                {
                    "asDropdown": True,
                    "icon": "external link",
                    "includeVars": False,
                    "keepTime": True,
                    "tags": ["gpuwatch"],
                    "title": "gpuwatch",
                    "type": "dashboards",
                },
                *self.links,
            ],
            "panels": _layout(self.panels),
            "refresh": "30s",
            "schemaVersion": SCHEMA_VERSION,
            "tags": ["gpuwatch"],
            "templating": {"list": [datasource_variable(), *self.variables]},
            "time": {"from": "now-6h", "to": "now"},
            "timepicker": {},
            "timezone": "",
            "title": self.title,
            "uid": self.uid,
            "version": 1,
            "weekStart": "",
        }


def _builtin_annotation() -> Json:
    return {
        "builtIn": 1,
        "datasource": {"type": "grafana", "uid": "-- Grafana --"},
        "enable": True,
        "hide": True,
        "iconColor": "rgba(0, 211, 255, 1)",
        "name": "Annotations & Alerts",
        "type": "dashboard",
    }


def _layout(panels: list[Panel]) -> list[Json]:
    """Place panels left to right, wrapping at 24 columns; a row header takes a line of its own.
    Ids are 1, 2, … in reading order, and targets get refIds A, B, …"""
    out: list[Json] = []
    x = y = line_height = 0
    for number, panel in enumerate(panels, start=1):
        if x + panel.w > GRID_WIDTH or panel.body["type"] == "row":
            x, y, line_height = 0, y + line_height, 0
        body = {**panel.body, "id": number, "gridPos": {"h": panel.h, "w": panel.w, "x": x, "y": y}}
        if "targets" in body:
            body["targets"] = [{**t, "refId": chr(ord("A") + i)} for i, t in enumerate(body["targets"])]
        out.append(body)
        x, line_height = x + panel.w, max(line_height, panel.h)
        if panel.body["type"] == "row":
            x, y, line_height = 0, y + panel.h, 0
    return out


def _incident_table(selector: str, title: str, description: str, *, w: int, h: int) -> Panel:
    return table(
        title,
        description,
        [target(selector, table=True)],
        rename={
            "incident": "Incident",
            "job": "Job",
            "node": "Node",
            "reason": "Reason",
            "category": "Category",
            "action": "Action",
            "state": "State",
        },
        links={
            "incident": {
                "targetBlank": True,
                "title": "Post-mortem of incident ${__value.raw}",
                "url": "${server_url}/api/v1/incidents/${__value.raw}/report",
            }
        },
        numeric=("incident",),
        sort_by="incident",
        w=w,
        h=h,
    )


# --- the dashboards -----------------------------------------------------------------------------

RESTART_LATENCY = "sum by (le) (rate(gpuwatch_restart_seconds_bucket[$__rate_interval]))"
PERCENT = {"unit": "percent", "minimum": 0, "maximum": 100}
HOT = [{"color": "orange", "value": 85}, {"color": "red", "value": 90}]


def cluster() -> Dashboard:
    return Dashboard(
        uid="gpuwatch-cluster",
        title="gpuwatch / Cluster",
        description="The whole fleet: GPUs up, utilization by node, idle allocations, power, heat, "
        "hardware errors, failures, restarts and GPU-hours lost.",
        variables=[],
        panels=[
            row("Fleet"),
            stat(
                "GPUs reporting / known",
                "GPUs whose samples are current, and all GPUs the server has heard of.",
                [
                    target("count(DCGM_FI_DEV_GPU_UTIL)", "reporting"),
                    target("count(gpuwatch_gpu_last_sample_seconds)", "known"),
                ],
            ),
            stat(
                "Nodes up / known",
                "Nodes whose agent was heard within node_timeout_s, and all nodes known.",
                [target("sum(gpuwatch_node_up)", "up"), target("count(gpuwatch_node_up)", "known")],
            ),
            stat(
                "Mean GPU utilization",
                "Mean utilization of every reporting GPU.",
                [target("avg(DCGM_FI_DEV_GPU_UTIL)")],
                unit="percent",
                decimals=0,
            ),
            stat(
                "Unallocated GPUs",
                "Reporting GPUs with no job on them: capacity to schedule.",
                [target("sum(gpuwatch_gpus_unallocated)")],
            ),
            stat(
                "Allocated GPUs idle",
                "GPUs that jobs hold but leave under 5% utilization, on average (idle GPU-hours accrued per hour).",
                [target("sum(rate(gpuwatch_job_idle_gpu_hours_total[$__rate_interval])) * 3600")],
                thresholds=[{"color": "orange", "value": 1}],
                decimals=1,
            ),
            stat(
                "Power draw",
                "Power of all reporting GPUs.",
                [target("sum(DCGM_FI_DEV_POWER_USAGE)")],
                unit="watt",
            ),
            row("Utilization"),
            heatmap(
                "GPU utilization by node",
                "Mean utilization of each node's GPUs; a red row in a busy cluster is a node to look at.",
                [target("avg by (instance) (DCGM_FI_DEV_GPU_UTIL)", "{{instance}}")],
                unit="percent",
                w=16,
            ),
            timeseries(
                "Idle allocated GPUs by job",
                "GPUs each job holds under 5% utilization, on average.",
                [target("sum by (job) (rate(gpuwatch_job_idle_gpu_hours_total[$__rate_interval])) * 3600", "{{job}}")],
                minimum=0,
                w=8,
                h=9,
            ),
            row("Power and temperature"),
            timeseries(
                "Power by node",
                "Power draw of each node's GPUs.",
                [target("sum by (instance) (DCGM_FI_DEV_POWER_USAGE)", "{{instance}}")],
                unit="watt",
                minimum=0,
            ),
            timeseries(
                "Hottest GPU by node",
                "Temperature of each node's hottest GPU; thermal slowdown typically starts near 87 C.",
                [target("max by (instance) (DCGM_FI_DEV_GPU_TEMP)", "{{instance}}")],
                unit="celsius",
                threshold=85,
            ),
            row("Hardware errors"),
            table(
                "GPUs with an Xid",
                "Each GPU's last Xid in the time range (dcgm-exporter's gauge: a later Xid hides an "
                "earlier one). Application Xids (13, 31, 43, 45) are the job's doing; the others are "
                "hardware (see GpuFatalXid).",
                [target("last_over_time(DCGM_FI_DEV_XID_ERRORS[$__range]) > 0", table=True)],
                rename={"instance": "Node", "gpu": "GPU", "UUID": "UUID", "Value": "Xid"},
                mappings={"Value": XID_MAPPING},
                w=8,
            ),
            table(
                "Xid events",
                "Every Xid in the time range, counted by node, GPU and code (a GPU the driver could "
                "not name has no index).",
                [target(xid_events("instance, gpu, xid", "gpuwatch_xid_events_total"), table=True)],
                rename={"instance": "Node", "gpu": "GPU", "xid": "Xid", "Value": "Events"},
                mappings={"xid": XID_MAPPING},
                w=8,
            ),
            table(
                "GPUs with uncorrectable ECC errors",
                "Double-bit ECC errors since each GPU's last reset (volatile counters).",
                [target("max_over_time(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[$__range]) > 0", table=True)],
                rename={"instance": "Node", "gpu": "GPU", "UUID": "UUID", "Value": "Errors"},
                w=8,
            ),
            timeseries(
                "Thermally throttled GPUs",
                "GPUs slowing their clocks for heat (clock-event reasons 0x20 or 0x40), by node.",
                [
                    target(
                        f"sum by (instance) ({thermal_throttled('DCGM_FI_DEV_CLOCK_THROTTLE_REASONS')})", "{{instance}}"
                    )
                ],
                minimum=0,
                w=24,
                h=7,
            ),
            row("Failures and recovery"),
            bars(
                "Failures by reason",
                "Failed runs diagnosed in the time range, by reason of the failure taxonomy.",
                [
                    target(
                        events_by("reason", "gpuwatch_failures_total", "$__range"),
                        "{{reason}}",
                        instant=True,
                    )
                ],
            ),
            bars(
                "Restarts by job",
                "Restarts the recovery policy ordered in the time range.",
                [
                    target(
                        f"sum by (job) ({new_events('gpuwatch_restarts_total', '$__range')}) > 0",
                        "{{job}}",
                        instant=True,
                    )
                ],
            ),
            bars(
                "GPU-hours lost by category",
                "Work lost since the last checkpoint plus downtime, in the time range.",
                [
                    target(
                        events_by("category", "gpuwatch_lost_gpu_hours_total", "$__range"),
                        "{{category}}",
                        instant=True,
                    )
                ],
                unit="h",
            ),
            row("gpuwatch itself"),
            stat(
                "Server scrape",
                "Whether Prometheus can scrape the gpuwatch server.",
                [target('up{job="gpuwatch"}')],
                mappings=_mapping({1: ("up", "green"), 0: ("down", "red")}),
            ),
            timeseries(
                "Ingest batches",
                "Agent batches per second, by outcome (stored, duplicate, rejected).",
                [target("sum by (outcome) (rate(gpuwatch_ingest_batches_total[$__rate_interval]))", "{{outcome}}")],
                unit="reqps",
                w=7,
            ),
            timeseries(
                "Refused API requests",
                "Requests under /api/v1/ answered with an error, by HTTP status.",
                [
                    target(
                        "sum by (status) (rate(gpuwatch_ingest_rejected_requests_total[$__rate_interval]))",
                        "{{status}}",
                    )
                ],
                unit="reqps",
                w=7,
            ),
            timeseries(
                "Items dropped by agents",
                "Items agents dropped because their spool was full: data lost for good.",
                [
                    target(
                        "sum by (node, kind) (increase(gpuwatch_agent_dropped_total[$__rate_interval]))",
                        "{{node}} {{kind}}",
                    )
                ],
                w=6,
            ),
        ],
    )


def node() -> Dashboard:
    gpus = 'instance="$node", gpu=~"$gpu"'
    return Dashboard(
        uid="gpuwatch-node",
        title="gpuwatch / Node and GPU",
        description="One node and its GPUs: utilization, memory, power, heat, clocks, links and errors.",
        variables=[
            query_variable("node", "Node", "label_values(gpuwatch_node_up, node)"),
            query_variable(
                "gpu", "GPU", 'label_values(gpuwatch_gpu_last_sample_seconds{instance="$node"}, gpu)', multi=True
            ),
        ],
        panels=[
            row("Node $node"),
            stat(
                "Agent",
                "Whether the node's agent was heard from within node_timeout_s.",
                [target('gpuwatch_node_up{node="$node"}')],
                mappings=_mapping({1: ("up", "green"), 0: ("down", "red")}),
            ),
            stat(
                "Last heard",
                "Seconds since the node's agent was last heard.",
                [target('gpuwatch_node_last_seen_seconds{node="$node"}')],
                unit="s",
                thresholds=[{"color": "red", "value": 30}],
            ),
            stat(
                "GPUs reporting",
                "GPUs of the node whose samples are current.",
                [target('count(DCGM_FI_DEV_GPU_UTIL{instance="$node"})')],
            ),
            stat(
                "Unallocated GPUs",
                "GPUs of the node with no job on them.",
                [target('gpuwatch_gpus_unallocated{node="$node"}')],
            ),
            stat(
                "Power draw",
                "Power of the node's GPUs.",
                [target('sum(DCGM_FI_DEV_POWER_USAGE{instance="$node"})')],
                unit="watt",
            ),
            stat(
                "Hottest GPU",
                "Temperature of the node's hottest GPU.",
                [target('max(DCGM_FI_DEV_GPU_TEMP{instance="$node"})')],
                unit="celsius",
                thresholds=HOT,
            ),
            row("GPUs"),
            timeseries(
                "GPU utilization",
                "Percent of time a kernel ran.",
                [target(f"DCGM_FI_DEV_GPU_UTIL{{{gpus}}}", "GPU {{gpu}}")],
                **PERCENT,
            ),
            timeseries(
                "Memory copy utilization",
                "Percent of time device memory was read or written.",
                [target(f"DCGM_FI_DEV_MEM_COPY_UTIL{{{gpus}}}", "GPU {{gpu}}")],
                **PERCENT,
            ),
            timeseries(
                "Framebuffer memory used",
                "Device memory in use.",
                [target(f"DCGM_FI_DEV_FB_USED{{{gpus}}}", "GPU {{gpu}}")],
                unit="mbytes",
                minimum=0,
            ),
            timeseries(
                "Framebuffer memory free",
                "Device memory free.",
                [target(f"DCGM_FI_DEV_FB_FREE{{{gpus}}}", "GPU {{gpu}}")],
                unit="mbytes",
                minimum=0,
            ),
            timeseries(
                "Power",
                "Power draw per GPU.",
                [target(f"DCGM_FI_DEV_POWER_USAGE{{{gpus}}}", "GPU {{gpu}}")],
                unit="watt",
                minimum=0,
            ),
            timeseries(
                "Temperature",
                "GPU temperature.",
                [target(f"DCGM_FI_DEV_GPU_TEMP{{{gpus}}}", "GPU {{gpu}}")],
                unit="celsius",
                threshold=85,
            ),
            timeseries(
                "Clocks",
                "SM and memory clocks; an SM clock far under its peak on a busy GPU is throttling.",
                [
                    target(f"DCGM_FI_DEV_SM_CLOCK{{{gpus}}}", "GPU {{gpu}} SM"),
                    target(f"DCGM_FI_DEV_MEM_CLOCK{{{gpus}}}", "GPU {{gpu}} memory"),
                ],
                unit="rotmhz",
            ),
            timeseries(
                "Thermal throttling",
                "1 while the GPU slows its clocks for heat (clock-event reasons 0x20 or 0x40).",
                [target(thermal_throttled(f"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{{{gpus}}}"), "GPU {{gpu}}")],
                minimum=0,
                maximum=1,
            ),
            timeseries(
                "PCIe throughput",
                "Host to device (rx) and device to host (tx).",
                [
                    target(f"DCGM_FI_PROF_PCIE_TX_BYTES{{{gpus}}}", "GPU {{gpu}} tx"),
                    target(f"DCGM_FI_PROF_PCIE_RX_BYTES{{{gpus}}}", "GPU {{gpu}} rx"),
                ],
                unit="Bps",
                minimum=0,
            ),
            timeseries(
                "NVLink throughput",
                "tx + rx over all links, from the NVLink byte counter (MiB).",
                [
                    target(
                        f"rate(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{{{gpus}}}[$__rate_interval]) * 1048576",
                        "GPU {{gpu}}",
                    )
                ],
                unit="Bps",
                minimum=0,
            ),
            row("Errors"),
            stat(
                "Last Xid",
                "Each GPU's last Xid in the time range (0: none).",
                [target(f"last_over_time(DCGM_FI_DEV_XID_ERRORS{{{gpus}}}[$__range])", "GPU {{gpu}}")],
                mappings=XID_MAPPING,
                thresholds=[{"color": "red", "value": 1}],
                w=6,
                h=6,
            ),
            table(
                "Xid events",
                "Every Xid in the time range, counted by GPU and code, including those the last-Xid "
                "gauge hides and those of a GPU the driver could not name (no index).",
                [
                    target(
                        xid_events("gpu, xid", 'gpuwatch_xid_events_total{instance="$node", gpu=~"$gpu|"}'), table=True
                    )
                ],
                rename={"gpu": "GPU", "xid": "Xid", "Value": "Events"},
                mappings={"xid": XID_MAPPING},
                w=6,
                h=6,
            ),
            timeseries(
                "ECC errors since reset",
                "Single-bit (corrected) and double-bit (uncorrectable) volatile ECC error counts.",
                [
                    target(f"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{{{gpus}}}", "GPU {{gpu}} single-bit"),
                    target(f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{gpus}}}", "GPU {{gpu}} double-bit"),
                ],
                minimum=0,
                w=6,
                h=6,
            ),
            timeseries(
                "Retired pages and row remapping",
                "Pages retired for single- and double-bit errors; a row remap failure means the GPU "
                "has run out of spare rows (RMA).",
                [
                    target(f"DCGM_FI_DEV_RETIRED_SBE{{{gpus}}}", "GPU {{gpu}} retired (SBE)"),
                    target(f"DCGM_FI_DEV_RETIRED_DBE{{{gpus}}}", "GPU {{gpu}} retired (DBE)"),
                    target(f"DCGM_FI_DEV_ROW_REMAP_FAILURE{{{gpus}}}", "GPU {{gpu}} remap failure"),
                ],
                minimum=0,
                w=6,
                h=6,
            ),
            timeseries(
                "Seconds since each GPU's last sample",
                "Grows when a GPU stops reporting (fallen off the bus, NVML stuck) or the node goes silent.",
                [target(f"gpuwatch_gpu_last_sample_seconds{{{gpus}}}", "GPU {{gpu}}")],
                unit="s",
                threshold=60,
                w=24,
                h=6,
            ),
            row("InfiniBand"),
            timeseries(
                "InfiniBand throughput",
                "Per port, transmit and receive.",
                [
                    target('gpuwatch_ib_port_transmit_bytes_per_second{node="$node"}', "{{device}}/{{port}} tx"),
                    target('gpuwatch_ib_port_receive_bytes_per_second{node="$node"}', "{{device}}/{{port}} rx"),
                ],
                unit="Bps",
                minimum=0,
            ),
            timeseries(
                "InfiniBand port errors",
                "Error counters that moved, per port and counter: symbol errors and link recoveries "
                "are a cable or transceiver going bad.",
                [
                    target(
                        'sum by (device, port, counter) (increase(gpuwatch_ib_port_errors_total{node="$node"}'
                        "[$__rate_interval]))",
                        "{{device}}/{{port}} {{counter}}",
                    )
                ],
                minimum=0,
            ),
        ],
    )


def job() -> Dashboard:
    this = 'job="$job"'
    ranks = 'job="$job", rank!="all"'
    whole = 'job="$job", rank="all"'
    return Dashboard(
        uid="gpuwatch-job",
        title="gpuwatch / Job",
        description="One training job: utilization per rank, step time, throughput, communication "
        "overhead, stragglers; restarts, hangs, stragglers and incidents as annotations.",
        variables=[
            query_variable("job", "Job", "label_values(gpuwatch_job_gpu_hours_total, job)"),
            textbox_variable("server_url", "gpuwatch server URL", "http://localhost:8600"),
        ],
        annotations=[
            annotation(
                "Restarts",
                f"sum by (reason) ({new_events(f'gpuwatch_restarts_total{{{this}}}', '1m')}) > 0",
                "restart: {{reason}}",
                "orange",
                "reason",
            ),
            annotation(
                "Incidents",
                f"gpuwatch_incident_info{{{this}}} unless gpuwatch_incident_info{{{this}}} offset 1m",
                "incident {{incident}}: {{reason}} on {{node}}, {{action}}",
                "red",
                "reason,node,action",
            ),
            annotation(
                "Hangs",
                f"{new_events(f'gpuwatch_hang_events_total{{{this}}}', '1m')} > 0",
                "hang",
                "purple",
                "job",
            ),
            annotation(
                "Stragglers",
                f"{new_events(f'gpuwatch_straggler_events_total{{{this}}}', '1m')} > 0",
                "straggler",
                "yellow",
                "job",
            ),
        ],
        panels=[
            row("Job $job"),
            stat(
                "GPU utilization",
                "Mean utilization of the job's GPUs over the server's job window.",
                [target(f"gpuwatch_job_gpu_utilization{{{whole}}}")],
                unit="percent",
                decimals=0,
            ),
            stat(
                "Step time",
                "Median step time over the job window.",
                [target(f"gpuwatch_job_step_seconds{{{whole}}}")],
                unit="s",
            ),
            stat(
                "Throughput",
                "Tokens or samples per second, as the training client reports them.",
                [target(f"gpuwatch_job_throughput{{{this}}}", "{{unit}}/s")],
                unit="short",
            ),
            stat(
                "Communication overhead",
                "Time in collectives / step time. Over 20% for 15 minutes alerts.",
                [target(f"gpuwatch_job_comm_overhead_ratio{{{whole}}}")],
                unit="percentunit",
                thresholds=[{"color": "red", "value": 0.2}],
            ),
            stat(
                "GPU-hours",
                "GPU-hours allocated to the job, as seen by this server.",
                [target(f"gpuwatch_job_gpu_hours_total{{{this}}}")],
                decimals=2,
            ),
            stat(
                "Checkpoint age",
                "Time since the job's last complete checkpoint (as its client reported it). Over 2 h, or over "
                "twice the Young/Daly optimal interval, for 10 minutes alerts.",
                [target(f"gpuwatch_job_checkpoint_age_seconds{{{this}}}")],
                unit="s",
                thresholds=[{"color": "red", "value": 7200}],
            ),
            stat(
                "GPU-hours at risk",
                "What a failure now would lose: the job's GPUs x time since its last complete checkpoint.",
                [target(f"gpuwatch_job_gpu_hours_at_risk{{{this}}}")],
                decimals=2,
            ),
            stat(
                "Idle GPU-hours",
                "GPU-hours the job's GPUs spent under 5% utilization.",
                [target(f"gpuwatch_job_idle_gpu_hours_total{{{this}}}")],
                decimals=2,
                thresholds=[{"color": "orange", "value": 1}],
            ),
            row("Ranks"),
            timeseries(
                "GPU utilization by rank",
                "Mean utilization of each rank's GPU over the job window.",
                [target(f"gpuwatch_job_gpu_utilization{{{ranks}}}", "rank {{rank}} ({{node}})")],
                **PERCENT,
            ),
            timeseries(
                "Step time by rank",
                "Median wall time of a step. Collectives make every rank wait for the slowest, so "
                "these lines move together: see compute time for the straggler.",
                [target(f"gpuwatch_job_step_seconds{{{ranks}}}", "rank {{rank}} ({{node}})")],
                unit="s",
                minimum=0,
            ),
            timeseries(
                "Compute time per step by rank",
                "Step time outside collectives: what the straggler rule compares. The rank far "
                "above the others is the straggler.",
                [
                    target(
                        f"gpuwatch_job_step_seconds{{{ranks}}} * (1 - gpuwatch_job_comm_overhead_ratio{{{ranks}}})",
                        "rank {{rank}} ({{node}})",
                    )
                ],
                unit="s",
                minimum=0,
            ),
            timeseries(
                "Communication overhead by rank",
                "Time in collectives / step time; the job's alert threshold (20%) dashed. Ranks "
                "waiting for a straggler show a high overhead.",
                [
                    target(f"gpuwatch_job_comm_overhead_ratio{{{ranks}}}", "rank {{rank}} ({{node}})"),
                    target(f"gpuwatch_job_comm_overhead_ratio{{{whole}}}", "job"),
                ],
                unit="percentunit",
                minimum=0,
                threshold=0.2,
            ),
            timeseries(
                "Throughput",
                "Tokens or samples per second over the job window.",
                [target(f"gpuwatch_job_throughput{{{this}}}", "{{unit}}/s")],
                minimum=0,
            ),
            timeseries(
                "Idle fraction of the job's GPU time",
                "Share of the job's GPU time spent under 5% utilization.",
                [
                    target(
                        f"rate(gpuwatch_job_idle_gpu_hours_total{{{this}}}[$__rate_interval])"
                        f" / rate(gpuwatch_job_gpu_hours_total{{{this}}}[$__rate_interval])",
                        "idle",
                    )
                ],
                unit="percentunit",
                minimum=0,
                maximum=1,
            ),
            row("Stragglers, hangs and restarts"),
            stat(
                "Straggler events",
                "Straggler events raised for the job (GET /api/v1/events?kind=straggler names the rank).",
                [target(f"gpuwatch_straggler_events_total{{{this}}}")],
                thresholds=[{"color": "orange", "value": 1}],
                h=6,
            ),
            stat(
                "Hang events",
                "Hang events raised for the job.",
                [target(f"gpuwatch_hang_events_total{{{this}}}")],
                thresholds=[{"color": "red", "value": 1}],
                h=6,
            ),
            stat(
                "Restarts",
                "Restarts the recovery policy ordered for the job, by reason.",
                [target(f"sum by (reason) (gpuwatch_restarts_total{{{this}}})", "{{reason}}")],
                thresholds=[{"color": "orange", "value": 1}, {"color": "red", "value": 3}],
                h=6,
            ),
            _incident_table(
                f"gpuwatch_incident_info{{{this}}}",
                "Incidents of this job",
                "The job's recent incidents; the incident number opens its post-mortem on the gpuwatch server.",
                w=12,
                h=6,
            ),
        ],
    )


def incidents() -> Dashboard:
    return Dashboard(
        uid="gpuwatch-incidents",
        title="gpuwatch / Incidents",
        description="Recent incidents with their reason, node and action, and links to their post-mortems; "
        "failures, recovery decisions and GPU-hours lost.",
        variables=[textbox_variable("server_url", "gpuwatch server URL", "http://localhost:8600")],
        panels=[
            row("Recent incidents"),
            _incident_table(
                "gpuwatch_incident_info",
                "Recent incidents",
                "The 50 most recent incidents. The incident number opens its post-mortem on the gpuwatch "
                "server at $server_url (set it above to the address your browser reaches).",
                w=24,
                h=10,
            ),
            row("Failures and recovery in the time range"),
            bars(
                "Failures by reason",
                "Failed runs diagnosed, by reason of the failure taxonomy.",
                [
                    target(
                        events_by("reason", "gpuwatch_failures_total", "$__range"),
                        "{{reason}}",
                        instant=True,
                    )
                ],
            ),
            bars(
                "Failures by category",
                "Failed runs diagnosed, by category (infrastructure, user, …).",
                [
                    target(
                        events_by("category", "gpuwatch_failures_total", "$__range"),
                        "{{category}}",
                        instant=True,
                    )
                ],
            ),
            bars(
                "Incidents by trigger",
                "Incidents opened: a failed run, a silent node, a hang, a fatal Xid.",
                [
                    target(
                        events_by("trigger", "gpuwatch_incidents_total", "$__range"),
                        "{{trigger}}",
                        instant=True,
                    )
                ],
            ),
            bars(
                "Recovery decisions by action",
                "What the recovery policy decided: restart, restart_exclude_node, notify, stop, dry_run.",
                [
                    target(
                        events_by("action", "gpuwatch_recovery_decisions_total", "$__range"),
                        "{{action}}",
                        instant=True,
                    )
                ],
            ),
            bars(
                "GPU-hours lost by reason",
                "Work since the last checkpoint plus downtime.",
                [
                    target(
                        events_by("reason", "gpuwatch_lost_gpu_hours_total", "$__range"),
                        "{{reason}}",
                        instant=True,
                    )
                ],
                unit="h",
            ),
            bars(
                "Stragglers and hangs found",
                "Detections by kind.",
                [
                    target(
                        events_by("kind", "gpuwatch_detections_total", "$__range"),
                        "{{kind}}",
                        instant=True,
                    )
                ],
            ),
            timeseries(
                "Time from exit to restart decision",
                "Median and 90th percentile of the seconds between a run's exit and the recovery decision.",
                [
                    target(
                        f"histogram_quantile(0.5, {RESTART_LATENCY})",
                        "p50",
                    ),
                    target(
                        f"histogram_quantile(0.9, {RESTART_LATENCY})",
                        "p90",
                    ),
                ],
                unit="s",
                minimum=0,
                w=8,
            ),
            table(
                "Nodes excluded by recovery",
                "Nodes the recovery policy keeps new runs away from.",
                [target("gpuwatch_excluded_nodes > 0", table=True)],
                rename={"node": "Node"},
                w=24,
                h=6,
            ),
        ],
    )


DASHBOARDS = {
    "gpuwatch-cluster.json": cluster,
    "gpuwatch-node.json": node,
    "gpuwatch-job.json": job,
    "gpuwatch-incidents.json": incidents,
}


def render() -> dict[str, str]:
    """File name → the exact text of each dashboard file."""
    return {name: json.dumps(make().to_json(), indent=2) + "\n" for name, make in DASHBOARDS.items()}


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
