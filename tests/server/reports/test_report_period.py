"""The period report against a seeded week whose totals are known (tests/report_week.py), on SQLite and
PostgreSQL, and its Markdown and HTML renderings."""

from __future__ import annotations

import base64
import json
import re
import sys
import types
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from gpuwatch.config import Settings
from server.reports.numbers import significant
from server.reports.period import (
    CSP,
    NO_FAILURES,
    JobStats,
    NodeStats,
    PeriodReport,
    ReasonRow,
    Totals,
    TriggerCount,
    parse_since,
    period_report,
    render_period_html,
    render_period_markdown,
)
from server.store.db import make_engine, make_sessionmaker, transaction
from server.store.migrate import upgrade
from server.store.models import Incident, Job, Run
from tests.report_week import WEEK, Expected, generate_week

START = datetime(2024, 5, 6, tzinfo=UTC)
SEEDS = [6, 2024]  # between them: successful and failed restarts, every category, several failing nodes
approx = pytest.approx


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path, currency="USD", gpu_hour_price=3.0)


@pytest.fixture
def sessions(empty_db_url: str) -> Iterator[sessionmaker[Session]]:
    """A migrated database on each backend (SQLite, then PostgreSQL)."""
    upgrade(empty_db_url)
    engine = make_engine(empty_db_url)
    yield make_sessionmaker(engine)
    engine.dispose()


def _week(sessions: sessionmaker[Session], seed: int) -> Expected:
    with transaction(sessions) as session:
        return generate_week(session, seed, START)


def _report(sessions: sessionmaker[Session], since: datetime, until: datetime, settings: Settings) -> PeriodReport:
    with sessions() as session:
        return period_report(session, since, until, settings)


@pytest.mark.parametrize("seed", SEEDS)
def test_report_reproduces_the_generated_week(sessions: sessionmaker[Session], settings: Settings, seed: int) -> None:
    exp = _week(sessions, seed)
    r = _report(sessions, exp.since, exp.until, settings)
    t = r.totals

    assert (t.failures, t.node_incidents) == (exp.failures, sum(exp.node_incidents.values()))
    assert t.gpu_hours_lost == exp.gpu_hours_lost  # multiples of 1/16: exact
    assert t.cost == exp.cost
    assert t.currency == "USD"
    assert (t.restarts, t.restarts_succeeded) == (exp.restarts, exp.restarts_succeeded)
    assert 0 < exp.restarts_succeeded < exp.restarts  # the seeds cover both outcomes
    assert t.restart_success_rate == approx(exp.restarts_succeeded / exp.restarts, rel=1e-12)
    assert t.idle_gpu_hours == approx(exp.idle_gpu_seconds / 3600, rel=1e-12)
    assert exp.ettr is not None and t.ettr == approx(exp.ettr, rel=1e-12)
    assert {x.trigger: x.incidents for x in r.node_incidents} == exp.node_incidents

    assert {x.reason: (x.category, x.failures, x.gpu_hours) for x in r.by_reason} == exp.by_reason
    for row in r.by_reason:
        assert row.count_share == approx(row.failures / exp.failures, rel=1e-12)
        assert row.gpu_hours_share == approx(row.gpu_hours / exp.gpu_hours_lost, rel=1e-12)
        assert row.cost == row.gpu_hours * 3.0
    assert [x.gpu_hours for x in r.by_reason] == sorted((x.gpu_hours for x in r.by_reason), reverse=True)
    assert {x.category: (x.failures, x.gpu_hours) for x in r.by_category} == exp.by_category
    assert sum(x.count_share for x in r.by_category) == approx(1.0, rel=1e-12)
    assert sum(x.gpu_hours_share for x in r.by_category) == approx(1.0, rel=1e-12)
    assert "undiagnosed" in exp.by_reason  # the failure with no diagnosis row
    infra = next(x for x in r.by_category if x.category == "infrastructure")
    assert infra.gpu_hours_share > infra.count_share  # the Acme shape: few, but costly

    assert [j.job for j in r.jobs] == sorted(exp.jobs)
    for j in r.jobs:
        e = exp.jobs[j.job]
        assert (j.runs, j.failures, j.run_s, j.wall_s, j.lost_s) == (e.runs, e.failures, e.run_s, e.wall_s, e.lost_s)
        assert (j.productive_s, j.gpu_hours_lost) == (e.productive_s, e.gpu_hours)
        assert j.mtbf_s == (None if e.mtbf_s is None else approx(e.mtbf_s, rel=1e-12))
        assert j.ettr == (None if e.ettr is None else approx(e.ettr, rel=1e-12))
    edge = next(j for j in r.jobs if j.job.endswith("-edge"))
    assert (edge.failures, edge.mtbf_s, edge.ettr) == (0, None, 1.0)  # its failures are all just outside

    assert [n.node for n in r.nodes] == sorted(exp.nodes)
    for n in r.nodes:
        e = exp.nodes[n.node]
        assert (n.run_s, n.failures, n.gpu_hours_lost) == (e.run_s, e.failures, e.gpu_hours)
        assert n.mtbf_s == (None if e.mtbf_s is None else approx(e.mtbf_s, rel=1e-12))
    assert [n.node for n in r.top_nodes] == exp.top_nodes
    assert exp.top_nodes

    doc = json.loads(json.dumps(r.to_json()))
    assert doc["since"] == START.isoformat()
    assert doc["totals"]["failures"] == exp.failures
    assert [x["reason"] for x in doc["by_reason"]] == [x.reason for x in r.by_reason]


def test_the_period_is_half_open(sessions: sessionmaker[Session], settings: Settings) -> None:
    exp = _week(sessions, SEEDS[0])
    second = timedelta(seconds=1)
    edges = [o for o in exp.outside if o.offset_s in (-1, WEEK)]
    assert {(o.offset_s, o.failure) for o in edges} == {(-1, True), (WEEK, True), (-1, False), (WEEK, False)}

    # one second wider on each side: exactly the outside incidents opened at since - 1 s and at until
    wide = _report(sessions, exp.since - second, exp.until + second, settings).totals
    assert [o for o in exp.outside if -1 <= o.offset_s <= WEEK] == edges
    assert wide.failures == exp.failures + 2
    assert wide.node_incidents == sum(exp.node_incidents.values()) + 2
    assert wide.restarts == exp.restarts + 2  # both edge failures were restarted

    # [until, until + 1 s) holds the incidents opened exactly at until and nothing of the week
    after = _report(sessions, exp.until, exp.until + second, settings)
    assert (after.totals.failures, after.totals.node_incidents) == (1, 1)
    assert [x.reason for x in after.by_reason] == ["cuda_error"]
    assert after.totals.gpu_hours_lost == 8 * (4 + 4) / 16


def test_an_empty_period_gives_zeros(sessions: sessionmaker[Session], settings: Settings) -> None:
    _week(sessions, SEEDS[0])
    for since, until in [(START - timedelta(days=365), START - timedelta(days=300)), (START, START)]:
        r = _report(sessions, since, until, settings)
        t = r.totals
        assert (t.failures, t.node_incidents, t.restarts, t.restarts_succeeded) == (0, 0, 0, 0)
        assert (t.gpu_hours_lost, t.cost, t.idle_gpu_hours, t.run_s, t.wall_s) == (0, 0, 0, 0, 0)
        assert (t.restart_success_rate, t.ettr) == (None, None)
        assert r.by_reason == r.by_category == r.jobs == r.nodes == r.top_nodes == r.node_incidents == ()
        md, page = render_period_markdown(r), render_period_html(r)
        assert NO_FAILURES in md and "**Failures:** no failures" in md
        assert NO_FAILURES in page and "<img" not in page


def test_null_and_foreign_currency_costs(sqlite_url: str, settings: Settings) -> None:
    engine = make_engine(sqlite_url)
    sessions = make_sessionmaker(engine)
    with transaction(sessions) as s:
        job = Job(name="j")
        s.add(job)
        s.flush()
        for attempt, cost in enumerate([None, {"gpu_hours": 2.0, "cost": 100.0, "currency": "EUR", "wall_s": 60}]):
            begin = START + timedelta(hours=attempt)
            run = Run(job_id=job.id, attempt=attempt, started_at=begin, ended_at=begin + timedelta(hours=1))
            s.add(run)
            s.flush()
            s.add(Incident(job_id=job.id, run_id=run.id, trigger="run_failed", opened_at=START, cost=cost))
    r = _report(sessions, START, START + timedelta(days=1), settings)
    engine.dispose()
    assert (r.totals.failures, r.totals.gpu_hours_lost, r.totals.cost) == (2, 2.0, 6.0)  # re-priced in USD
    (job_stats,) = r.jobs
    assert (job_stats.run_s, job_stats.lost_s, job_stats.wall_s) == (7200, 60, 7200)
    assert job_stats.ettr == approx((7200 - 60) / 7200, rel=1e-12)


def _stub_plots(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], list[float], str, str]]:
    calls: list[tuple[list[str], list[float], str, str]] = []

    def bar_chart_png(labels: list[str], values: list[float], title: str, unit: str) -> bytes:
        calls.append((labels, values, title, unit))
        return b"\x89PNG\r\n\x1a\nstub"

    module = types.ModuleType("server.reports.plots")
    module.bar_chart_png = bar_chart_png  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "server.reports.plots", module)
    return calls


def _week_report(sqlite_url: str, settings: Settings) -> PeriodReport:
    engine = make_engine(sqlite_url)
    sessions = make_sessionmaker(engine)
    exp = _week(sessions, SEEDS[1])
    r = _report(sessions, exp.since, exp.until, settings)
    engine.dispose()
    return r


def test_markdown_and_html_show_the_tables(
    sqlite_url: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = _week_report(sqlite_url, settings)
    calls = _stub_plots(monkeypatch)
    md, page = render_period_markdown(r), render_period_html(r)

    assert "| Reason | Category | Failures | % of failures | GPU-hours lost | % of GPU-hours |" in md
    for x in r.by_reason:
        share = f"{100 * x.count_share:.1f} %"
        row = f"| `{x.reason}` | `{x.category}` | {x.failures} | {share} | {significant(x.gpu_hours)} |"
        assert row in md
        assert f'<tr><td>{x.reason}</td><td>{x.category}</td><td class="n">{x.failures}</td>' in page
    for j in r.jobs:
        assert f"| `{j.job}` | {j.runs} | {j.failures} |" in md
    assert f"**GPU-hours lost:** {significant(r.totals.gpu_hours_lost)}" in md
    assert f'<tr><th scope="row">Failures</th><td>{r.totals.failures}</td></tr>' in page
    assert "## Top failing nodes" in md and f"`{r.top_nodes[0].node}`" in md

    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in page
    assert not re.search(r"""(src|href)=["'](?!data:)""", page)  # nothing outside the page
    assert calls == [
        ([x.reason for x in r.by_reason], [x.gpu_hours for x in r.by_reason], "GPU-hours lost by reason", "GPU-hours")
    ]
    (data,) = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert base64.b64decode(data) == b"\x89PNG\r\n\x1a\nstub"


def test_html_embeds_the_real_bar_chart(sqlite_url: str, settings: Settings) -> None:
    pytest.importorskip("matplotlib")
    plots = pytest.importorskip("server.reports.plots")
    if not hasattr(plots, "bar_chart_png"):
        pytest.skip("server.reports.plots has no bar_chart_png yet")
    page = render_period_html(_week_report(sqlite_url, settings))
    (data,) = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    png = base64.b64decode(data)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000


def test_names_from_the_database_are_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    _stub_plots(monkeypatch)
    bad_job, bad_node = "<script>alert(1)</script>|x", "n`|`1 & <b>"
    node = NodeStats(bad_node, 1, 3600.0, 2.0, 3600.0)
    r = PeriodReport(
        since=START,
        until=START + timedelta(days=1),
        totals=Totals(1, 1, 2.0, 6.0, "<€>", 0, 0, None, 0.0, 3600.0, 3600.0, 3600.0, 1.0),
        by_reason=(ReasonRow("<i>odd</i>", "unknown", 1, 2.0, 6.0, 1.0, 1.0),),
        by_category=(),
        node_incidents=(TriggerCount("xid<", 1),),
        jobs=(JobStats(bad_job, 1, 1, 3600.0, 3600.0, 0.0, 3600.0, 2.0, 3600.0, 1.0),),
        nodes=(node,),
        top_nodes=(node,),
    )
    page = render_period_html(r)
    for raw in (bad_job, bad_node, "<i>odd</i>", "xid<", "<€>"):
        assert raw not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;|x" in page and "n`|`1 &amp; &lt;b&gt;" in page

    md = render_period_markdown(r)
    assert "| `<script>alert(1)</script>\\|x` |" in md  # a code span: shown literally, the pipe escaped
    assert "| ``n`\\|`1 & <b>`` |" in md


def test_parse_since() -> None:
    now = datetime(2024, 5, 13, 12, 30, tzinfo=UTC)
    assert parse_since("7d", now) == now - timedelta(days=7)
    assert parse_since("24h", now) == now - timedelta(hours=24)
    assert parse_since(" 90m ", now) == now - timedelta(minutes=90)
    assert parse_since("2024-05-01", now) == datetime(2024, 5, 1, tzinfo=UTC)
    assert parse_since("2024-05-01T12:00:00+02:00", now) == datetime(2024, 5, 1, 10, tzinfo=UTC)
    for bad in ["7", "7w", "0d", "-1d", "tomorrow", "", "2024-05-14"]:
        with pytest.raises(ValueError):
            parse_since(bad, now)
    with pytest.raises(ValueError):
        parse_since("7d", datetime(2024, 5, 13))
