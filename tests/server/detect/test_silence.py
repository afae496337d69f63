"""When silence is a node failure and when it is not: after a server outage, and when many nodes fall
quiet at once (a disruption of the network, the server's host or the database).

The checks are driven with an explicit clock against a real database (SQLite, then PostgreSQL): nodes'
last words are written where the ingest path writes them (`nodes.last_seen_at`). The last test runs
the server's own watchdog over real HTTP heartbeats and reads the exported gauge.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import select, update

from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, GpuSample, Heartbeat
from server.detect.silence import SilenceWatch
from server.services import Services
from server.store.db import make_engine, make_sessionmaker, transaction
from server.store.models import Incident, Job, JobRank, Node, Run
from server.store.nodes import LastSeen, get_or_create_node
from tests.helpers import InProcessServer, migrated_sqlite, new_token, wait_until
from tests.webhook_receiver import Receiver

TIMEOUT_S = 30.0
JUDGED_S = TIMEOUT_S * (1 + SilenceWatch.SETTLE)  # unheard this long, a node is judged silent
# The clock of these checks: an hour ago, so that incidents, stamped with the real time, come after
# every last word the tests write.
T = time.time() - 3600


@dataclass
class Cluster:
    server: InProcessServer
    registry: CollectorRegistry

    @property
    def svc(self) -> Services:
        return self.server.services

    def nodes(self, count: int) -> list[str]:
        names = [f"n{i}" for i in range(count)]
        for name in names:
            new_token(self.svc.settings.effective_database_url, name)
        self.heard(T, *names)
        return names

    def heard(self, at: float, *names: str) -> None:
        seen = datetime.fromtimestamp(at, UTC)
        with transaction(self.svc.sessions) as session:
            session.execute(update(Node).where(Node.name.in_(names)).values(last_seen_at=seen))

    def watch(self, started: float = T) -> SilenceWatch:
        return SilenceWatch(self.svc.incidents, self.registry, started=started)

    def silent_nodes(self) -> list[str]:
        with self.svc.sessions() as session:
            rows = session.scalars(
                select(Node.name)
                .join(Incident, Incident.node_id == Node.id)
                .where(Incident.trigger == "node_silent", Incident.run_id.is_(None))
            )
            return sorted(rows)

    def held(self) -> float | None:
        return self.registry.get_sample_value("gpuwatch_silence_disruption_nodes")


@pytest.fixture
def cluster(tmp_path: Path, db_url: str) -> Iterator[Cluster]:
    """On SQLite and on PostgreSQL: the check is one query of counts, compared by each database."""
    # The app's own watchdog checks hourly: only the checks the tests make run.
    settings = Settings(data_dir=tmp_path, database_url=db_url, node_timeout_s=TIMEOUT_S, hang_check_s=3600)
    with InProcessServer(settings) as srv:
        yield Cluster(srv, CollectorRegistry())


def test_a_restarted_server_judges_no_node_silent_before_it_has_listened_node_timeout_s(cluster: Cluster) -> None:
    cluster.nodes(1)
    # The server was down for 100 s: at its start the node is 100 s stale, its agent still backing off.
    watch = cluster.watch(started=T + 100)
    assert watch.check(T + 100 + TIMEOUT_S - 1) == []
    assert cluster.silent_nodes() == []
    # Listening for node_timeout_s and still nothing from it: now it is silent.
    assert len(watch.check(T + 100 + TIMEOUT_S)) == 1
    assert cluster.silent_nodes() == ["n0"]


@pytest.mark.parametrize(("count", "quiet"), [(5, 2), (10, 3)])
def test_a_few_nodes_falling_silent_are_node_failures(cluster: Cluster, count: int, quiet: int) -> None:
    """Below disruption_min_nodes (3), or below disruption_share (0.55) of the nodes: one incident each,
    once they have been unheard for half a node_timeout_s longer than it takes to count as down."""
    names = cluster.nodes(count)
    watch = cluster.watch()
    now = T + TIMEOUT_S + 5
    cluster.heard(now - 1, *names[quiet:])
    assert watch.check(now) == []
    now = T + JUDGED_S + 1
    cluster.heard(now - 1, *names[quiet:])
    assert len(watch.check(now)) == quiet
    assert cluster.silent_nodes() == names[:quiet]
    assert watch.disrupted == 0 and cluster.held() == 0


def test_a_disruption_whose_nodes_fell_quiet_seconds_apart_judges_none_of_them(cluster: Cluster) -> None:
    """A partition's nodes' last words are spread by their flush period and the server's write cadence:
    the first of them is not judged before the last counts as unheard."""
    names = cluster.nodes(5)
    cluster.heard(T + 8, "n1")
    cluster.heard(T + 12, "n2")
    watch = cluster.watch()
    for now in (T + TIMEOUT_S + 1, T + TIMEOUT_S + 8, T + TIMEOUT_S + 13, T + JUDGED_S + 1):
        cluster.heard(now - 1, *names[3:])
        assert watch.check(now) == []
    assert cluster.silent_nodes() == [] and watch.disrupted == 3


def test_many_nodes_falling_silent_at_once_are_a_disruption_and_open_nothing(cluster: Cluster) -> None:
    names = cluster.nodes(5)
    with transaction(cluster.svc.sessions) as session:  # a Slurm job's run on n0, which silence would fail
        node_id = session.scalar(select(Node.id).where(Node.name == "n0"))
        job = Job(name="train", scheduler="slurm", state="running")
        session.add(job)
        session.flush()
        session.add(Run(job_id=job.id, attempt=0, node_id=node_id, state="running"))
    watch = cluster.watch()
    now = T + TIMEOUT_S + 10
    cluster.heard(now - 1, "n3", "n4")
    # n0..n2 unheard since T: 3 of 5 (0.6 >= 0.55) at once is not three node failures.
    assert watch.check(now) == []
    assert watch.disrupted == 3 and cluster.held() == 3
    assert cluster.silent_nodes() == []
    with cluster.svc.sessions() as session:
        assert session.scalar(select(Run.state)) == "running", "a disruption fails no run"

    # n0 and n1 come back; n2 does not. The disruption is over, and the server listens afresh before
    # it judges n2: its agent may still be waiting out its retry backoff.
    now += 20
    back = [*names[:2], "n3", "n4"]
    cluster.heard(now - 1, *back)
    assert watch.check(now) == []
    assert watch.disrupted == 0 and cluster.held() == 0
    cluster.heard(now + TIMEOUT_S - 2, *back)
    assert watch.check(now + TIMEOUT_S - 1) == []
    now += TIMEOUT_S
    cluster.heard(now - 1, *back)
    assert len(watch.check(now)) == 1
    assert cluster.silent_nodes() == ["n2"]


def test_nodes_already_known_silent_do_not_make_a_new_failure_a_disruption(cluster: Cluster) -> None:
    """Two dead nodes with their incidents, then a third of six dies: that is one node failure, not
    three of six nodes unheard at once."""
    names = cluster.nodes(6)
    watch = cluster.watch()
    now = T + JUDGED_S + 1
    cluster.heard(now - 1, *names[2:])
    assert len(watch.check(now)) == 2  # n0, n1: two node failures
    now += 60
    cluster.heard(now - 1, *names[3:])
    assert len(watch.check(now)) == 1
    assert cluster.silent_nodes() == ["n0", "n1", "n2"]
    assert watch.disrupted == 0


def test_the_server_holds_a_disruption_and_exports_it(tmp_path: Path) -> None:
    """The running server's watchdog, heartbeats over real HTTP, the gauge on /metrics."""
    url = migrated_sqlite(tmp_path)
    settings = Settings(
        data_dir=tmp_path, database_url=url, node_timeout_s=2.0, hang_check_s=0.05, incident_settle_s=0.05
    )
    with InProcessServer(settings) as srv:
        tokens = {name: new_token(url, name) for name in ("a", "b", "c")}

        def beat(name: str) -> None:
            headers = {"Authorization": f"Bearer {tokens[name]}"}
            body = Heartbeat(ts=time.time()).model_dump_json()
            assert httpx.post(f"{srv.url}/api/v1/nodes/heartbeat", content=body, headers=headers).status_code == 204

        def held() -> float:
            found = re.search(r"^gpuwatch_silence_disruption_nodes (\S+)$", httpx.get(f"{srv.url}/metrics").text, re.M)
            assert found, "the gauge is exported"
            return float(found.group(1))

        def silent() -> list[str]:
            with srv.services.sessions() as session:
                query = select(Node.name).join(Incident, Incident.node_id == Node.id).where(Incident.run_id.is_(None))
                return sorted(session.scalars(query))

        for name in tokens:
            beat(name)
        wait_until(lambda: held() == 3, timeout=10, what="all three nodes held as a disruption")
        assert silent() == []
        beat("a")  # a is back: two unheard is under disruption_min_nodes; b and c are judged afresh
        wait_until(lambda: held() == 0, timeout=10, what="the disruption over")

        def a_beats_until_b_and_c_are_silent() -> bool:
            beat("a")
            return silent() == ["b", "c"]

        wait_until(a_beats_until_b_and_c_are_silent, timeout=15, what="b and c silent, a not")


def test_a_nodes_last_seen_is_written_with_its_batch_not_with_the_rollups(tmp_path: Path) -> None:
    """The ack of a batch means the node's last_seen_at is stored, even with rollups held an hour."""
    url = migrated_sqlite(tmp_path)
    settings = Settings(data_dir=tmp_path, database_url=url, rollup_flush_s=3600, hang_check_s=3600)
    with InProcessServer(settings) as srv:
        token = new_token(url, "n")
        before = datetime.now(UTC)
        body = Batch(batch_id=1, samples=[GpuSample(ts=time.time(), gpu=0, uuid="GPU-0", util_gpu=50.0)])
        resp = httpx.post(
            f"{srv.url}/api/v1/ingest",
            content=body.model_dump_json(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        assert resp.status_code == 200, resp.text
        with srv.services.sessions() as session:  # compared in SQL, as the silence check compares it
            assert session.scalars(select(Node.name).where(Node.last_seen_at >= before)).all() == ["n"]


def test_last_seen_is_written_at_most_every_so_often(db_url: str) -> None:
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    try:
        with transaction(sessions) as session:
            ids = [get_or_create_node(session, name).id for name in ("a", "b")]
        seen = LastSeen(every_s=0.5)
        t = time.time()
        for now, nodes, written in [(t, ids, 2), (t + 0.4, ids, 0), (t + 0.5, ids[:1], 1), (t + 0.7, ids, 1)]:
            with transaction(sessions) as session:
                assert seen.write(session, nodes, now=now) == written, now - t
        with sessions() as session:
            rows = dict(session.execute(select(Node.id, Node.last_seen_at)).all())
        assert [rows[i].timestamp() for i in ids] == pytest.approx([t + 0.5, t + 0.7], abs=1e-5)
    finally:
        engine.dispose()


def test_a_silent_nodes_incident_names_the_jobs_at_work_on_it(tmp_path: Path, db_url: str) -> None:
    """The jobs with a running run on the node when it fell silent (supervised there, a rank there, or
    registered to it) are named in the incident, its notice and its post-mortem's lost work; a job
    elsewhere, or whose run had ended, is not."""
    receiver = Receiver()
    settings = Settings(
        data_dir=tmp_path,
        database_url=db_url,
        node_timeout_s=TIMEOUT_S,
        hang_check_s=3600,
        notify_webhook_urls=[receiver.url("/hook")],
    )
    try:
        with InProcessServer(settings) as srv:
            cluster = Cluster(srv, CollectorRegistry())
            n0, n1 = cluster.nodes(2)
            with transaction(cluster.svc.sessions) as s:
                node0, node1 = (s.scalar(select(Node).where(Node.name == name)) for name in (n0, n1))
                assert node0 is not None and node1 is not None
                llama, bert, other, done = Job(name="llama"), Job(name="bert"), Job(name="other"), Job(name="done")
                gpt = Job(name="gpt", scheduler="slurm", member_nodes=[n1, n0])
                s.add_all([llama, bert, other, done, gpt])
                s.flush()
                s.add(Run(job_id=llama.id, attempt=1, node_id=node0.id))  # supervised on n0
                s.add(Run(job_id=bert.id, attempt=1, node_id=node1.id))  # supervised on n1, a rank on n0
                s.add(JobRank(job_id=bert.id, rank=1, node_id=node0.id, pid=4242))
                s.add(Run(job_id=gpt.id, attempt=1, node_id=node1.id))  # registered to n0
                s.add(Run(job_id=other.id, attempt=1, node_id=node1.id))
                s.add(Run(job_id=done.id, attempt=1, node_id=node0.id, state="succeeded"))
                s.flush()
                runs = {job.name: job.id for job in (llama, bert, gpt)}
                run_ids = {name: s.scalar(select(Run.id).where(Run.job_id == job_id)) for name, job_id in runs.items()}
            now = T + JUDGED_S + 1
            cluster.heard(now - 1, n1)
            [incident_id, *_] = cluster.watch().check(now)
            with cluster.svc.sessions() as s:
                incident = s.get(Incident, incident_id)
                assert incident is not None and incident.run_id is None
                jobs = (incident.snapshot or {})["jobs"]
            assert jobs == [{"job": name, "run": run_ids[name]} for name in ("bert", "gpt", "llama")]
            notice = wait_until(
                lambda: next((r.body for r in receiver.requests if r.body["incident_id"] == incident_id), None),
                what="the incident's notice",
            )
            assert notice["job"] == "bert, gpt, llama"
            report = httpx.get(f"{srv.url}/api/v1/incidents/{incident_id}/report").text
            html = httpx.get(f"{srv.url}/api/v1/incidents/{incident_id}/report?format=html").text
    finally:
        receiver.stop()
    lost = report.split("## Lost work", 1)[1].split("##", 1)[0]
    named = ", ".join(f"{name} (run {run_ids[name]})" for name in ("bert", "gpt", "llama"))
    assert "not known" not in lost and named in lost and n0 in lost
    assert named in html.split('id="lost-work"', 1)[1].split("</section>", 1)[0]
