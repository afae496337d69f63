"""What a post-mortem gathers from the database (SQLite and PostgreSQL): the job's GPUs only, over the stated
window from before the failure to the restart's first step, and a node-level incident's decision rule."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.orm import Session

from gpuwatch.config import Settings
from server.reports.plots import gpu_figure
from server.reports.postmortem import build
from server.reports.render import render_html, render_markdown
from server.store.db import make_engine, make_sessionmaker, transaction
from server.store.models import Action, Diagnosis, Exclusion, Gpu, Incident, Job, JobRank, Node, Run

FAILED = datetime(2026, 3, 4, 11, 2, 5, tzinfo=UTC)
RESTARTED = FAILED + timedelta(seconds=40)
FIRST_STEP = FAILED + timedelta(seconds=70)
JOB_GPU = 5
MEMORY_MIB = 81_559.0


@pytest.fixture
def sessions(db_url: str) -> Iterator[Session]:
    engine = make_engine(db_url)
    try:
        yield make_sessionmaker(engine)
    finally:
        engine.dispose()


def _samples(gpu: int) -> list[list[float | None]]:
    """One sample a second from 10 min before the failure to 2 min after it; the job's GPU busy until it
    fails and again from the restart's first step, the others idle; the temperature wobbles by 0.3 °C."""
    t0 = FAILED.timestamp()
    rows: list[list[float | None]] = []
    for i in range(-600, 121):
        busy = gpu == JOB_GPU and (i < 0 or i >= 70)
        rows.append(
            [
                t0 + i,
                97.0 if busy else 0.0,
                60_000.0 if busy else 300.0,
                600.0 if busy else 60.0,
                55.0 + 0.3 * (i % 2),
                None,
            ]
        )
    return rows


def _node_with_gpus(session: Session) -> Node:
    node = Node(name="gpu-node-17")
    session.add(node)
    session.flush()
    for g in range(8):
        session.add(Gpu(node_id=node.id, index=g, uuid=f"GPU-{g}", model="H100", memory_total_mib=MEMORY_MIB))
    return node


def _failed_job(sessions: Session) -> int:
    """A one-rank job on GPU 5 of an 8-GPU node: attempt 1 failed, attempt 2 restarted and stepping."""
    with transaction(sessions) as session:
        node = _node_with_gpus(session)
        job = Job(name="one-gpu-job", state="running")
        session.add(job)
        session.flush()
        failed = Run(
            job_id=job.id,
            attempt=1,
            state="failed",
            started_at=FAILED - timedelta(hours=1),
            ended_at=FAILED,
            exit_code=1,
            node_id=node.id,
        )
        again = Run(
            job_id=job.id, attempt=2, state="running", started_at=RESTARTED, first_step_at=FIRST_STEP, node_id=node.id
        )
        session.add_all([failed, again])
        session.add(JobRank(job_id=job.id, rank=0, node_id=node.id, pid=4242, local_rank=0, gpu_index=JOB_GPU))
        session.flush()
        incident = Incident(
            job_id=job.id,
            run_id=failed.id,
            node_id=node.id,
            trigger="run_failed",
            state="resolved",
            opened_at=FAILED + timedelta(seconds=1),
            snapshot={"gpus": {str(g): _samples(g) for g in range(8)}, "jobs": [], "job_gpus": [JOB_GPU]},
            cost={
                "gpus": 1,
                "steps": 2,
                "wall_s": 11.0,
                "downtime_s": None,
                "gpu_hours": 11 / 3600,
                "cost": 11 / 3600 * 3.0,
                "currency": "USD",
            },
        )
        session.add(incident)
        session.flush()
        session.add(
            Diagnosis(
                incident_id=incident.id,
                reason="gpu_hardware",
                category="infrastructure",
                action="restart_exclude_node",
                confidence=0.95,
                source="rules",
                node_name=node.name,
                explanation="Xid 79 on GPU 5",
            )
        )
        return incident.id


def test_the_report_plots_only_the_jobs_gpu_over_the_stated_window(sessions: Session) -> None:
    incident_id = _failed_job(sessions)
    with sessions() as session:
        pm = build(session, incident_id, Settings())
    assert pm is not None
    assert [s.gpu for s in pm.plots] == [JOB_GPU] and pm.job_gpus == (JOB_GPU,)
    assert pm.gpus == tuple(range(8))  # the node's, in the summary
    start, end = FAILED - timedelta(minutes=5), FIRST_STEP + timedelta(seconds=30)
    assert pm.window == (start, end)
    assert pm.window_text == "from 5 min before the failure to 30 s after the restarted run's first step (attempt 2)"
    (series,) = pm.plots
    stamps = [p.ts for p in series.points]
    assert min(stamps) == start.timestamp() and max(stamps) == FAILED.timestamp() + 100  # the snapshot ends at +120
    assert series.window == (start.timestamp(), end.timestamp()) and series.memory_total_mib == MEMORY_MIB
    assert series.marks == ((RESTARTED.timestamp(), "restart (attempt 2)"), (FIRST_STEP.timestamp(), "first step"))
    assert "7 other GPUs of the node left out (?gpus=all shows them)" in pm.plotted

    md, page = render_markdown(pm, {JOB_GPU: "gpu-5.png"}), render_html(pm)
    assert "- **The job's GPUs:** 5\n" in md and "<th>The job&#x27;s GPUs</th><td>5</td>" in page
    assert "Window: 2026-03-04 10:57:05 UTC to 2026-03-04 11:03:45 UTC (from 5 min before the failure" in md
    assert md.count("![") == 1 and page.count("data:image/png;base64,") == 1
    assert "- **GPU time lost:** 0.0031 GPU-hours (11 GPU-s)\n" in md and "- **Cost:** 0.0092 USD\n" in md
    assert "`dcgmi diag -r 3`" in md and "<code>dcgmi diag -r 3</code>" in page and "`" not in page

    # the figure spans the window, failure at 0, from fixed floors: the 0.3 °C wobble stays flat
    util, memory, power, temp = gpu_figure(series, FAILED.timestamp()).axes
    assert util.get_xlim() == pytest.approx((-300.0, 100.0))
    assert util.get_ylim() == (-3.0, 105.0) and memory.get_ylim() == (0.0, MEMORY_MIB)
    assert power.get_ylim()[0] == 0.0
    low, high = temp.get_ylim()
    assert low == 20.0 and high - low >= 60.0
    labels = [t.get_text() for t in util.texts]
    assert "failure" in labels and "restart (attempt 2)" in labels and "first step" in labels

    with sessions() as session:
        every = build(session, incident_id, Settings(), all_gpus=True)
    assert every is not None and [s.gpu for s in every.plots] == list(range(8))
    assert every.plotted == "all of the node's GPUs, as asked; the job's: 5"


def test_a_job_not_attributed_to_a_gpu_gets_the_nodes_gpus_and_says_so(sessions: Session) -> None:
    incident_id = _failed_job(sessions)
    with transaction(sessions) as session:
        incident = session.get(Incident, incident_id)
        assert incident is not None
        incident.snapshot = {**incident.snapshot, "job_gpus": []}
    with sessions() as session:
        pm = build(session, incident_id, Settings(server={"report_before_s": 60, "report_after_s": 0}))
    assert pm is not None and len(pm.plots) == 8
    assert "not attributed to any GPU" in pm.plotted
    assert pm.window == (FAILED - timedelta(minutes=1), FIRST_STEP)
    assert "- **The job's GPUs:** not known (not attributed)" in render_markdown(pm, {})


def test_a_node_level_incident_says_the_decisions_rule(sessions: Session) -> None:
    with transaction(sessions) as session:
        node = _node_with_gpus(session)
        session.flush()
        silent = {str(g): [r for r in _samples(g) if r[0] <= FAILED.timestamp() - 90] for g in range(8)}
        incident = Incident(
            node_id=node.id,
            trigger="node_silent",
            state="done",
            opened_at=FAILED,
            snapshot={"gpus": silent, "jobs": []},
        )
        session.add(incident)
        session.flush()
        session.add(
            Diagnosis(
                incident_id=incident.id,
                reason="node_failure",
                category="infrastructure",
                action="restart_exclude_node",
                confidence=1.0,
                source="rules",
                node_name=node.name,
                explanation="no word from the node's agent for 90 s",
            )
        )
        session.add(
            Exclusion(
                node_name=node.name,
                reason="node_failure",
                incident_id=incident.id,
                created_at=FAILED,
                expires_at=FAILED + timedelta(hours=1),
            )
        )
        session.add(Action(incident_id=incident.id, kind="exclude_node", params={"node": node.name}, status="done"))
        incident_id = incident.id
    with sessions() as session:
        pm = build(session, incident_id, Settings())
    assert pm is not None
    assert pm.why == (
        "rule taxonomy_default: the reason node_failure (infrastructure) has the default action "
        "restart_exclude_node, and a node-level incident has no run of its own to restart, so gpu-node-17 was "
        "excluded for 60 min; the runs there are decided in their own incidents"
    )
    assert len(pm.plots) == 8 and pm.plotted.startswith("all of the node's GPUs (a node-level incident")
    # its samples end 90 s before it opened (the node fell silent): the window still reaches the opening
    assert pm.window == (FAILED - timedelta(minutes=5), FAILED)
    assert pm.window_text.endswith("after the failure (not restarted), cut to the samples recorded")
    md = render_markdown(pm, {})
    assert "**Why this action:** rule taxonomy\\_default: the reason node\\_failure" in md
    assert "not known" not in md.split("**Why this action:**")[1].split("\n")[0]


def test_the_window_is_cut_to_the_samples_there_are_and_says_so(sessions: Session) -> None:
    """An agent that started 7 s before the failure has no minutes before it to show."""
    incident_id = _failed_job(sessions)
    with transaction(sessions) as session:
        incident = session.get(Incident, incident_id)
        assert incident is not None
        late = {
            g: [r for r in rows if -7 <= r[0] - FAILED.timestamp() <= 60]
            for g, rows in incident.snapshot["gpus"].items()
        }
        incident.snapshot = {**incident.snapshot, "gpus": late}
    with sessions() as session:
        pm = build(session, incident_id, Settings())
    assert pm is not None
    assert pm.window == (FAILED - timedelta(seconds=7), FAILED + timedelta(seconds=60))
    assert pm.window_text.endswith("first step (attempt 2), cut to the samples recorded")
    (series,) = pm.plots
    assert series.window == (FAILED.timestamp() - 7, FAILED.timestamp() + 60)
    assert gpu_figure(series, FAILED.timestamp()).axes[0].get_xlim() == pytest.approx((-7.0, 60.0))
