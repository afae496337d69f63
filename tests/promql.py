"""What the dashboard and alert tests need to know about PromQL and Grafana's JSON: the queries a
dashboard runs, Grafana's variables substituted, and the metric names an expression reads."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD_FILES = sorted((ROOT / "dashboards").glob("*.json"))
ALERTS_FILE = ROOT / "deploy" / "prometheus" / "alerts.yml"
DCGM_DASHBOARD = ROOT.parent / "shared" / "data" / "dcgm-exporter-dashboard.json"

# Words in a PromQL expression that are neither metric names nor functions.
_KEYWORDS = {
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "offset",
    "bool",
    "inf",
    "nan",
    "atan2",
}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?")
_GRAFANA_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?:(?P<metric>.+),\s*)?(?P<label>\w+)\s*\)\s*$")


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (by name or by `{__name__="..."}`)."""
    names = set(re.findall(r'__name__\s*=\s*"([^"]+)"', expr))
    text = _STRING.sub('""', expr)
    text = re.sub(r"\{[^}]*\}", "{}", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "[]", text)  # ranges and subqueries
    text = _GRAFANA_VARIABLE.sub("0", text)  # offset $__range
    text = _GROUPING.sub(" ", text)
    for word, call in _IDENTIFIER.findall(text):
        if not call and word.lower() not in _KEYWORDS:
            names.add(word)
    return names


def variables_in(text: str) -> set[str]:
    return {next(g for g in m if g) for m in _GRAFANA_VARIABLE.findall(text)}


def substitute(expr: str, values: dict[str, str]) -> str:
    """``expr`` with Grafana's variables replaced: ``$x``, ``${x}``, ``${x:fmt}`` and ``[[x]]``."""

    def one(match: re.Match[str]) -> str:
        name = next(g for g in match.groups() if g)
        if name not in values:
            raise KeyError(f"no value for ${name} in {expr!r}")
        return values[name]

    return _GRAFANA_VARIABLE.sub(one, expr)


@dataclass(frozen=True)
class Query:
    """One PromQL expression a dashboard runs, with where it comes from."""

    source: str  # "<dashboard uid>: <panel title> [refId]", "…: annotation …" or "…: variable …"
    expr: str
    kind: str  # "panel" | "annotation" | "variable"


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, including those inside collapsed rows."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def queries(dashboard: dict[str, Any]) -> Iterator[Query]:
    """The PromQL of every target, Prometheus annotation and `label_values` variable (as the
    series selector whose label values it lists)."""
    uid = dashboard.get("uid") or dashboard.get("title")
    for panel in panels(dashboard):
        for t in panel.get("targets", []):
            if t.get("expr"):
                yield Query(f"{uid}: {panel.get('title')} [{t.get('refId')}]", t["expr"], "panel")
    for a in dashboard.get("annotations", {}).get("list", []):
        if a.get("expr"):
            yield Query(f"{uid}: annotation {a['name']}", a["expr"], "annotation")
    for v in dashboard.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        query = v["query"]["query"] if isinstance(v.get("query"), dict) else v.get("query", "")
        found = _LABEL_VALUES.match(query)
        assert found, f"{uid}: variable {v['name']} is not a label_values(...) query: {query!r}"
        yield Query(f"{uid}: variable {v['name']} ({found['label']})", found["metric"] or "up", "variable")


def label_of_variable(query: Query) -> str:
    """The label a `variable` query lists."""
    return query.source.rsplit("(", 1)[1].rstrip(")")


@dataclass(frozen=True)
class AlertRule:
    name: str
    expr: str
    rule: dict[str, Any]


def alert_rules(path: Path = ALERTS_FILE) -> list[AlertRule]:
    groups = yaml.safe_load(path.read_text())["groups"]
    return [AlertRule(r["alert"], r["expr"], r) for g in groups for r in g["rules"] if "alert" in r]
