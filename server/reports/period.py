"""The period report (issue 7): what failed in [since, until), what it cost, and how well the cluster
kept training — aggregated from the stored incidents, diagnoses, actions, runs and job rollups.

Definitions (the post-mortem uses the same numbers):

- *Incidents in the period*: ``incidents.opened_at`` in [since, until) (half-open, so consecutive
  periods never count one incident twice).
- A *failure* is such an incident with a run (``run_id`` set: run_failed, hang, node_silent of a run).
  Incidents without a run (xid, node_silent of a node) are *node incidents*, counted by trigger only;
  their lost work, if any, is the failure of the run they killed.
- *Lost work* is ``incidents.cost`` (written when the failure is decided): ``gpu_hours`` =
  gpus * (wall_s + (downtime_s or 0)) / 3600 and ``cost`` = its price. A null cost (old incidents)
  counts as 0. The money is in ``settings.server.currency``; a cost recorded in another currency is re-priced
  at ``settings.server.gpu_hour_price``.
- *Reason and category* of a failure come from its latest diagnosis row (by ``created_at``, then id);
  a failure without one is ``undiagnosed`` (category ``undiagnosed``). Each reason/category row has
  its count, GPU-hours lost, share of all failures' GPU-hours and share of the failure count: the
  shape of the Acme study's failure table (Hu et al., NSDI 2024).
- *Run time* of a run in the period = min(ended_at or until, until) - max(started_at, since), if
  positive. *MTBF* of a job = its runs' run time / its failures (None without a failure); of a node =
  the run time of the runs on it (``runs.node_id``) / the failures blamed on it (the latest
  diagnosis's ``node_name``).
- *ETTR* of a job = productive / wall time, wall time = its earliest clipped run start to its latest
  clipped run end, productive = run time - Σ ``cost.wall_s`` of its failures (floored at 0: work lost
  before ``since`` is not this period's). Overall ETTR = Σ productive / Σ wall over the jobs. None
  where the wall time is 0.
- *Top failing nodes*: by failures blamed, then GPU-hours lost by those failures, then name (10 at most).
- *Restarts*: actions of kind ``restart`` with status ``done`` of the period's incidents. One
  *succeeded* when the restarted run (the job's next run by attempt after ``params.run_id``, else the
  incident's run) had started before ``until`` and either succeeded or was still running at
  ``until``. Success rate = succeeded / restarts (None without restarts).
- *Idle allocated GPU-hours* = Σ ``job_rollups.idle_gpu_seconds`` / 3600 over minutes in [since, until).
"""

from __future__ import annotations

import base64
import html
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from gpuwatch.config import Settings
from server.reports.numbers import significant
from server.store.models import Action, Diagnosis, Incident, Job, JobRollup, Node, Run

UNDIAGNOSED = "undiagnosed"
TOP_NODES = 10
_ZERO = timedelta(0)


@dataclass(frozen=True, slots=True)
class ReasonRow:
    reason: str
    category: str
    failures: int
    gpu_hours: float
    cost: float
    gpu_hours_share: float  # of all failures' GPU-hours (0 when none were lost)
    count_share: float  # of all failures


@dataclass(frozen=True, slots=True)
class CategoryRow:
    category: str
    failures: int
    gpu_hours: float
    cost: float
    gpu_hours_share: float
    count_share: float


@dataclass(frozen=True, slots=True)
class TriggerCount:
    trigger: str
    incidents: int


@dataclass(frozen=True, slots=True)
class JobStats:
    job: str
    runs: int  # runs with run time in the period
    failures: int
    run_s: float
    wall_s: float
    lost_s: float  # Σ cost.wall_s of its failures
    productive_s: float
    gpu_hours_lost: float
    mtbf_s: float | None
    ettr: float | None


@dataclass(frozen=True, slots=True)
class NodeStats:
    node: str
    failures: int  # blamed on the node
    run_s: float  # run time of the runs placed on it
    gpu_hours_lost: float  # by the failures blamed on it
    mtbf_s: float | None


@dataclass(frozen=True, slots=True)
class Totals:
    failures: int
    node_incidents: int
    gpu_hours_lost: float
    cost: float
    currency: str
    restarts: int
    restarts_succeeded: int
    restart_success_rate: float | None
    idle_gpu_hours: float
    run_s: float
    productive_s: float
    wall_s: float
    ettr: float | None


@dataclass(frozen=True, slots=True)
class PeriodReport:
    since: datetime
    until: datetime
    totals: Totals
    by_reason: tuple[ReasonRow, ...]  # most GPU-hours first
    by_category: tuple[CategoryRow, ...]
    node_incidents: tuple[TriggerCount, ...]
    jobs: tuple[JobStats, ...]  # by name
    nodes: tuple[NodeStats, ...]  # by name
    top_nodes: tuple[NodeStats, ...]
    generated_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def to_json(self) -> dict[str, Any]:
        """Plain JSON types: datetimes as ISO 8601, tuples as lists."""
        out = _jsonable(self)
        assert isinstance(out, dict)
        return out


def _jsonable(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


_SINCE = re.compile(r"(\d+)([dhm])")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def parse_since(text: str, now: datetime) -> datetime:
    """The start of a period from "7d", "24h", "90m" (before ``now``) or an ISO date/datetime (UTC unless
    it names a zone). ValueError for anything else, or for a start after ``now``."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    text = text.strip()
    if m := _SINCE.fullmatch(text):
        amount = int(m.group(1))
        if amount <= 0:
            raise ValueError(f"empty period: {text!r}")
        return now - timedelta(**{_UNITS[m.group(2)]: amount})
    try:
        since = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"expected 7d, 24h, 90m or an ISO date, got {text!r}") from None
    since = since.replace(tzinfo=UTC) if since.tzinfo is None else since.astimezone(UTC)
    if since > now:
        raise ValueError(f"{text!r} is after now")
    return since


@dataclass(frozen=True, slots=True)
class _Failure:
    job_id: int | None
    reason: str
    category: str
    node: str | None
    gpu_hours: float
    cost: float
    wall_s: float


def _lost(cost: Any, settings: Settings) -> tuple[float, float, float]:
    """(GPU-hours, money in settings.server.currency, wall seconds) of an incident's ``cost`` JSON."""
    if not isinstance(cost, dict):
        return 0.0, 0.0, 0.0
    gpu_hours, wall_s = _num(cost.get("gpu_hours")), _num(cost.get("wall_s"))
    if "cost" in cost and cost.get("currency", settings.server.currency) == settings.server.currency:
        return gpu_hours, _num(cost["cost"]), wall_s
    return gpu_hours, gpu_hours * settings.server.gpu_hour_price, wall_s


def _num(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 0.0
    return float(value)


def _clip(start: datetime, end: datetime | None, since: datetime, until: datetime) -> tuple[datetime, datetime]:
    return max(start, since), min(end or until, until)


def _share(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def period_report(session: Session, since: datetime, until: datetime, settings: Settings) -> PeriodReport:
    """Aggregate [since, until) as the module docstring defines it."""
    if since.tzinfo is None or until.tzinfo is None:
        raise ValueError("since and until must be timezone-aware")
    if until < since:
        raise ValueError("until is before since")
    in_period = (Incident.opened_at >= since, Incident.opened_at < until)

    incidents = session.execute(
        select(Incident.id, Incident.job_id, Incident.run_id, Incident.trigger, Incident.cost)
        .where(*in_period)
        .order_by(Incident.id)
    ).all()
    latest: dict[int, tuple[str, str, str | None]] = {}
    for inc_id, reason, category, node in session.execute(
        select(Diagnosis.incident_id, Diagnosis.reason, Diagnosis.category, Diagnosis.node_name)
        .join(Incident, Incident.id == Diagnosis.incident_id)
        .where(*in_period)
        .order_by(Diagnosis.incident_id, Diagnosis.created_at, Diagnosis.id)
    ):
        latest[inc_id] = (reason, category, node)

    run_cols = (Run.id, Run.job_id, Run.attempt, Run.state, Run.started_at, Run.ended_at, Run.node_id)
    runs = {
        r.id: r
        for r in session.execute(
            select(*run_cols).where(Run.started_at < until, or_(Run.ended_at.is_(None), Run.ended_at > since))
        )
    }
    failure_runs = {i.run_id for i in incidents if i.run_id is not None}
    if missing := failure_runs - runs.keys():
        runs.update((r.id, r) for r in session.execute(select(*run_cols).where(Run.id.in_(missing))))

    failures: list[_Failure] = []
    node_incidents: dict[str, int] = defaultdict(int)
    for inc in incidents:
        if inc.run_id is None:
            node_incidents[inc.trigger] += 1
            continue
        reason, category, node = latest.get(inc.id, (UNDIAGNOSED, UNDIAGNOSED, None))
        gpu_hours, money, wall_s = _lost(inc.cost, settings)
        run = runs.get(inc.run_id)
        job_id = run.job_id if run is not None else inc.job_id
        failures.append(_Failure(job_id, reason, category, node, gpu_hours, money, wall_s))

    total_gh = sum(f.gpu_hours for f in failures)
    total_cost = sum(f.cost for f in failures)
    by_reason = _table(failures, lambda f: (f.reason, f.category), total_gh)
    by_category = _table(failures, lambda f: (f.category, f.category), total_gh)

    jobs = _job_stats(session, runs.values(), failures, since, until)
    nodes = _node_stats(session, runs.values(), failures, since, until)
    top = sorted((n for n in nodes if n.failures), key=lambda n: (-n.failures, -n.gpu_hours_lost, n.node))

    restarts, succeeded = _restarts(session, until, in_period)
    idle = session.scalar(
        select(func.coalesce(func.sum(JobRollup.idle_gpu_seconds), 0.0)).where(
            JobRollup.minute >= since, JobRollup.minute < until
        )
    )
    run_total = sum(j.run_s for j in jobs)
    productive = sum(j.productive_s for j in jobs)
    wall = sum(j.wall_s for j in jobs)
    totals = Totals(
        failures=len(failures),
        node_incidents=sum(node_incidents.values()),
        gpu_hours_lost=total_gh,
        cost=total_cost,
        currency=settings.server.currency,
        restarts=restarts,
        restarts_succeeded=succeeded,
        restart_success_rate=succeeded / restarts if restarts else None,
        idle_gpu_hours=float(idle or 0.0) / 3600,
        run_s=run_total,
        productive_s=productive,
        wall_s=wall,
        ettr=productive / wall if wall else None,
    )
    return PeriodReport(
        since=since,
        until=until,
        totals=totals,
        by_reason=tuple(by_reason),
        by_category=tuple(
            CategoryRow(r.category, r.failures, r.gpu_hours, r.cost, r.gpu_hours_share, r.count_share)
            for r in by_category
        ),
        node_incidents=tuple(
            TriggerCount(t, n) for t, n in sorted(node_incidents.items(), key=lambda x: (-x[1], x[0]))
        ),
        jobs=tuple(jobs),
        nodes=tuple(nodes),
        top_nodes=tuple(top[:TOP_NODES]),
    )


def _job_stats(
    session: Session, runs: Iterable[Any], failures: Sequence[_Failure], since: datetime, until: datetime
) -> list[JobStats]:
    """Run time, MTBF and ETTR of every job with run time or a failure in the period, by name."""
    run_time: dict[int, timedelta] = defaultdict(lambda: _ZERO)
    count: dict[int, int] = defaultdict(int)
    span: dict[int, tuple[datetime, datetime]] = {}
    for r in runs:
        lo, hi = _clip(r.started_at, r.ended_at, since, until)
        if hi <= lo:
            continue
        run_time[r.job_id] += hi - lo
        count[r.job_id] += 1
        first, last = span.get(r.job_id, (lo, hi))
        span[r.job_id] = (min(first, lo), max(last, hi))
    by_job: dict[int, list[_Failure]] = defaultdict(list)
    for f in failures:
        if f.job_id is not None:
            by_job[f.job_id].append(f)
    names = _names(session, Job, set(run_time) | set(by_job))
    jobs = []
    for job_id in set(run_time) | set(by_job):
        mine = by_job.get(job_id, [])
        run_s = run_time[job_id].total_seconds()
        first, last = span.get(job_id, (since, since))
        wall_s = (last - first).total_seconds()
        lost_s = sum(f.wall_s for f in mine)
        productive_s = max(0.0, run_s - lost_s)
        jobs.append(
            JobStats(
                job=names.get(job_id, f"job {job_id}"),
                runs=count[job_id],
                failures=len(mine),
                run_s=run_s,
                wall_s=wall_s,
                lost_s=lost_s,
                productive_s=productive_s,
                gpu_hours_lost=sum(f.gpu_hours for f in mine),
                mtbf_s=run_s / len(mine) if mine else None,
                ettr=productive_s / wall_s if wall_s else None,
            )
        )
    return sorted(jobs, key=lambda j: j.job)


def _node_stats(
    session: Session, runs: Iterable[Any], failures: Sequence[_Failure], since: datetime, until: datetime
) -> list[NodeStats]:
    """Run time placed on each node, the failures blamed on it and its MTBF, by name."""
    by_id: dict[int, timedelta] = defaultdict(lambda: _ZERO)
    for r in runs:
        lo, hi = _clip(r.started_at, r.ended_at, since, until)
        if hi > lo and r.node_id is not None:
            by_id[r.node_id] += hi - lo
    names = _names(session, Node, set(by_id))
    run_time: dict[str, float] = defaultdict(float)
    for node_id, spent in by_id.items():
        run_time[names.get(node_id, f"node {node_id}")] += spent.total_seconds()
    blamed: dict[str, list[_Failure]] = defaultdict(list)
    for f in failures:
        if f.node:
            blamed[f.node].append(f)
    nodes = []
    for name in set(run_time) | set(blamed):
        mine, run_s = blamed.get(name, []), run_time.get(name, 0.0)
        gpu_hours = sum(f.gpu_hours for f in mine)
        nodes.append(NodeStats(name, len(mine), run_s, gpu_hours, run_s / len(mine) if mine else None))
    return sorted(nodes, key=lambda n: n.node)


def _names(session: Session, model: type[Job] | type[Node], ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    return dict(session.execute(select(model.id, model.name).where(model.id.in_(ids))).tuples().all())


def _table(
    failures: Sequence[_Failure], key: Callable[[_Failure], tuple[str, str]], total_gh: float
) -> list[ReasonRow]:
    """Failures grouped by ``key`` (name, category), most GPU-hours first."""
    groups: dict[tuple[str, str], list[_Failure]] = defaultdict(list)
    for f in failures:
        groups[key(f)].append(f)
    rows = []
    for (name, category), group in groups.items():
        gh = sum(f.gpu_hours for f in group)
        cost = sum(f.cost for f in group)
        rows.append(ReasonRow(name, category, len(group), gh, cost, _share(gh, total_gh), len(group) / len(failures)))
    return sorted(rows, key=lambda r: (-r.gpu_hours, -r.failures, r.reason))


def _restarts(session: Session, until: datetime, in_period: Iterable[Any]) -> tuple[int, int]:
    """(done restarts of the period's incidents, how many of them brought the job back)."""
    done = session.execute(
        select(Action.params, Incident.run_id)
        .join(Incident, Incident.id == Action.incident_id)
        .where(Action.kind == "restart", Action.status == "done", *in_period)
    ).all()
    if not done:
        return 0, 0
    failed_ids = {rid for params, run_id in done if (rid := _restarted_from(params, run_id)) is not None}
    failed: dict[int, int] = {}
    if failed_ids:
        failed = dict(session.execute(select(Run.id, Run.job_id).where(Run.id.in_(failed_ids))).tuples().all())
    later: dict[int, list[Any]] = defaultdict(list)
    if failed:
        for r in session.execute(
            select(Run.id, Run.job_id, Run.attempt, Run.state, Run.started_at, Run.ended_at)
            .where(Run.job_id.in_(set(failed.values())))
            .order_by(Run.attempt)
        ):
            later[r.job_id].append(r)
    attempt_of = {r.id: r.attempt for rs in later.values() for r in rs}
    succeeded = 0
    for params, run_id in done:
        rid = _restarted_from(params, run_id)
        if rid not in failed:
            continue
        after = [r for r in later[failed[rid]] if r.attempt > attempt_of[rid]]
        if not after:
            continue
        nxt = after[0]
        if nxt.started_at < until and (nxt.state == "succeeded" or nxt.ended_at is None or nxt.ended_at >= until):
            succeeded += 1
    return len(done), succeeded


def _restarted_from(params: Any, incident_run_id: int | None) -> int | None:
    """The run a restart action restarted: its ``params.run_id``, else its incident's run."""
    rid = params.get("run_id") if isinstance(params, dict) else None
    return rid if isinstance(rid, int) and not isinstance(rid, bool) else incident_run_id


# ---------------------------------------------------------------------------------------------- rendering


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _hours(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds / 3600:,.1f} h"


def _ratio(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _summary(r: PeriodReport) -> list[tuple[str, str]]:
    t = r.totals
    rate = "n/a" if t.restart_success_rate is None else _pct(t.restart_success_rate)
    return [
        ("Failures", str(t.failures) if t.failures else "no failures"),
        ("Node incidents (no run)", str(t.node_incidents)),
        ("GPU-hours lost", significant(t.gpu_hours_lost)),
        ("Cost of lost work", f"{significant(t.cost)} {t.currency}"),
        ("Restarts", f"{t.restarts} ({t.restarts_succeeded} succeeded)"),
        ("Restart success rate", rate),
        ("ETTR", _ratio(t.ettr)),
        ("Idle allocated GPU-hours", significant(t.idle_gpu_hours)),
    ]


def _reason_rows(r: PeriodReport) -> list[list[str]]:
    return [
        [x.reason, x.category, str(x.failures), _pct(x.count_share), significant(x.gpu_hours), _pct(x.gpu_hours_share)]
        for x in r.by_reason
    ]


def _category_rows(r: PeriodReport) -> list[list[str]]:
    return [
        [x.category, str(x.failures), _pct(x.count_share), significant(x.gpu_hours), _pct(x.gpu_hours_share)]
        for x in r.by_category
    ]


def _node_rows(r: PeriodReport) -> list[list[str]]:
    return [[n.node, str(n.failures), significant(n.gpu_hours_lost), _hours(n.mtbf_s)] for n in r.top_nodes]


def _job_rows(r: PeriodReport) -> list[list[str]]:
    return [[j.job, str(j.runs), str(j.failures), _hours(j.run_s), _hours(j.mtbf_s), _ratio(j.ettr)] for j in r.jobs]


_REASON_HEAD = ["Reason", "Category", "Failures", "% of failures", "GPU-hours lost", "% of GPU-hours"]
_CATEGORY_HEAD = ["Category", "Failures", "% of failures", "GPU-hours lost", "% of GPU-hours"]
_NODE_HEAD = ["Node", "Failures blamed", "GPU-hours lost", "MTBF"]
_JOB_HEAD = ["Job", "Runs", "Failures", "Run time", "MTBF", "ETTR"]
NO_FAILURES = "No failures in this period."


def _md_cell(text: str) -> str:
    """A table cell that renders literally: a code span (fenced past any backticks inside), pipes escaped."""
    text = " ".join(text.split())
    if not text:
        return ""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}".replace("|", "\\|")


def _md_table(head: list[str], rows: list[list[str]], literal: int = 1) -> list[str]:
    """Markdown table; the first ``literal`` columns are names from the database (rendered as code)."""
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * literal + ["---:"] * (len(head) - literal)) + "|"]
    for row in rows:
        cells = [_md_cell(c) if i < literal else c for i, c in enumerate(row)]
        out.append("| " + " | ".join(cells) + " |")
    return out


def render_period_markdown(r: PeriodReport) -> str:
    """The report as GitHub-flavoured Markdown."""
    lines = [f"# GPU cluster report: {_when(r.since)} → {_when(r.until)}", "", "## Summary", ""]
    lines += [f"- **{k}:** {v}" for k, v in _summary(r)]
    lines += ["", "## Failures by reason", ""]
    if r.by_reason:
        lines += _md_table(_REASON_HEAD, _reason_rows(r), literal=2)
        lines += ["", "## GPU time lost by category", ""]
        lines += _md_table(_CATEGORY_HEAD, _category_rows(r))
    else:
        lines.append(NO_FAILURES)
    if r.node_incidents:
        lines += ["", "## Node incidents without a run", ""]
        lines += _md_table(["Trigger", "Incidents"], [[t.trigger, str(t.incidents)] for t in r.node_incidents])
    if r.top_nodes:
        lines += ["", "## Top failing nodes", ""]
        lines += _md_table(_NODE_HEAD, _node_rows(r))
    if r.jobs:
        lines += ["", "## Jobs", ""]
        lines += _md_table(_JOB_HEAD, _job_rows(r))
    lines += ["", f"_Generated {_when(r.generated_at)}._", ""]
    return "\n".join(lines)


_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:62rem;color:#222;line-height:1.4}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:1.8rem}
table{border-collapse:collapse;margin:.5rem 0}th,td{border:1px solid #ccc;padding:.25rem .6rem}
th{background:#f3f3f3;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%}.muted{color:#666}
"""
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def _html_table(head: list[str], rows: list[list[str]], literal: int = 1) -> str:
    e = html.escape
    out = ["<table><thead><tr>", *(f"<th>{e(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for row in rows:
        cells = (f"<td>{e(c)}</td>" if i < literal else f'<td class="n">{e(c)}</td>' for i, c in enumerate(row))
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _chart(r: PeriodReport) -> str | None:
    """The bar chart of GPU-hours lost by reason as a data: PNG, or None when there is nothing to draw or
    no plotting library (server.reports.plots needs matplotlib)."""
    if not any(x.gpu_hours > 0 for x in r.by_reason):
        return None
    try:
        from server.reports.plots import bar_chart_png
    except ImportError:
        return None
    png = bar_chart_png(
        [x.reason for x in r.by_reason], [x.gpu_hours for x in r.by_reason], "GPU-hours lost by reason", "GPU-hours"
    )
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def render_period_html(r: PeriodReport) -> str:
    """A self-contained page: inline CSS, the chart inline as a data: PNG, a CSP that allows nothing else."""
    e = html.escape
    title = f"GPU cluster report: {_when(r.since)} → {_when(r.until)}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',  # a constant: no quotes to escape
        f"<title>{e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{e(title)}</h1>",
        "<h2>Summary</h2>",
        "<table><tbody>",
        *(f'<tr><th scope="row">{e(k)}</th><td>{e(v)}</td></tr>' for k, v in _summary(r)),
        "</tbody></table>",
        "<h2>Failures by reason</h2>",
    ]
    if r.by_reason:
        parts.append(_html_table(_REASON_HEAD, _reason_rows(r), literal=2))
        if chart := _chart(r):
            parts.append(f'<p><img src="{e(chart)}" alt="GPU-hours lost by reason"></p>')
        parts += ["<h2>GPU time lost by category</h2>", _html_table(_CATEGORY_HEAD, _category_rows(r))]
    else:
        parts.append(f"<p>{e(NO_FAILURES)}</p>")
    if r.node_incidents:
        rows = [[t.trigger, str(t.incidents)] for t in r.node_incidents]
        parts += ["<h2>Node incidents without a run</h2>", _html_table(["Trigger", "Incidents"], rows)]
    if r.top_nodes:
        parts += ["<h2>Top failing nodes</h2>", _html_table(_NODE_HEAD, _node_rows(r))]
    if r.jobs:
        parts += ["<h2>Jobs</h2>", _html_table(_JOB_HEAD, _job_rows(r))]
    parts += [f'<p class="muted">Generated {e(_when(r.generated_at))}.</p>', "</body></html>", ""]
    return "\n".join(parts)
