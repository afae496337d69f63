"""Fault injection at every transition of the incident pipeline (issue 22, acceptance 1 and 2).

A real server, a real agent and a real `gpuwatch run` of a 2-rank torch.distributed job (gloo, CPU; its
ranks forked by the job, `tests/jobs/ckpt_train.py --fork-ranks`) whose rank 0 dies of a CUDA error. The
server holds at one of the pipeline's fault points (server/incidents/faults.py) and the test kills the
server, the agent or both right there (SIGKILL), then starts again what it killed. Whichever it was, the
job is restarted exactly once, the incident ends done (then resolved, when the restarted run succeeds)
with one diagnosis, one decision and one restart, and the times recorded are those of the events, not of
the recovery: exit ≤ decision ≤ restart, all within the test's window, the exit before the kill and the
restart no later than the restarted attempt was seen.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from server.incidents.faults import HOLD_AT_ENV, HOLD_DIR_ENV, POINTS
from server.store.db import make_engine, make_sessionmaker
from server.store.migrate import upgrade
from server.store.models import Action, Diagnosis, Incident, Job, Run
from tests.helpers import TESTS, Proc, free_port, migrated_sqlite, new_token, start_server, wait_until

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

TRAIN = str(TESTS / "jobs" / "ckpt_train.py")
NODE = "node-f"
JOB = "fault-job"
SERVER_ENV = {
    "GPUWATCH_INCIDENT_SETTLE_S": "0.3",
    "GPUWATCH_INCIDENT_RESUME_AFTER_S": "0.5",
    "GPUWATCH_HANG_CHECK_S": "0.2",
}
# Steps of 0.05 s; a checkpoint every 3; rank 0 raises a CUDA error at step 6 of the first attempt.
JOB_ARGS = ["--steps", "12", "--every", "3", "--fail-at", "6", "--fail", "cuda", "--step-s", "0.05"]


@dataclass
class Rig:
    """The server, the agent and the supervised job of one test, and how to kill and restart each."""

    tmp: Path
    url: str
    port: int
    token: str
    server: Proc
    agent: Proc
    job: Proc | None = None
    servers: int = 0
    agents: int = 0

    @property
    def node(self) -> Path:
        """The node's data directory, the agent's and the supervisor's: the agent delivers the outbox an
        ended supervisor left there."""
        return self.tmp / "node"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start_server(self, hold_at: str | None = None) -> None:
        env = {**SERVER_ENV, "GPUWATCH_DATABASE_URL": self.url}
        if hold_at is not None:
            env |= {HOLD_AT_ENV: hold_at, HOLD_DIR_ENV: str(self.tmp)}
        self.servers += 1
        self.server = start_server(self.tmp, self.port, self.tmp / f"server{self.servers}.log", env)

    def start_agent(self) -> None:
        self.agents += 1
        args = ["--server", self.base, "--token", self.token, "--node", NODE, "--simulate", "1", "--flush", "0.5"]
        args += ["--client-port", "0", "--data-dir", str(self.node)]
        self.agent = Proc(["agent", *args], self.tmp / f"agent{self.agents}.log")

    def supervise(self, decision_timeout_s: float = 30) -> Path:
        out, ckpt = self.tmp / "out", self.tmp / "ckpt"
        # The two ranks forked by the job itself after torch is imported, not by torchrun: the same process
        # group at a lower start-up cost, which this file pays about forty times.
        launcher = [sys.executable, TRAIN, "--fork-ranks", "2"]
        args = ["run", "--job", JOB, "--checkpoint-dir", str(ckpt), "--server", self.base, "--token", self.token]
        args += ["--node", NODE, "--data-dir", str(self.node), "--decision-timeout", str(decision_timeout_s)]
        command = [*launcher, *JOB_ARGS, "--ckpt-dir", str(ckpt), "--out", str(out)]
        self.job = Proc([*args, "--", *command], self.tmp / "job.log", {"OMP_NUM_THREADS": "1"})
        return out


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    if request.param == "sqlite":
        url = migrated_sqlite(tmp_path)
    else:
        url = request.getfixturevalue("postgres_url")
        upgrade(url)
    r = Rig(tmp_path, url, free_port(), new_token(url, NODE), None, None)  # type: ignore[arg-type]
    yield r
    for proc in (r.job, r.agent, r.server):
        if proc is not None:
            proc.stop(signal.SIGKILL)


def _attempts(out: Path) -> list[str]:
    path = out / "attempts.log"
    return path.read_text().splitlines() if path.exists() else []


@dataclass(frozen=True)
class Record:
    """What the database says about the job and its one incident."""

    runs: list[Run]
    incident: Incident
    diagnoses: int
    decisions: list[Action]
    restarts: list[Action]
    others: list[Action]


def _record(url: str) -> Record:
    engine = make_engine(url)
    try:
        with make_sessionmaker(engine)() as session:
            job = session.scalar(select(Job).where(Job.name == JOB))
            assert job is not None
            runs = list(session.scalars(select(Run).where(Run.job_id == job.id).order_by(Run.attempt)))
            (incident,) = session.scalars(select(Incident).where(Incident.job_id == job.id)).all()
            actions = list(session.scalars(select(Action).where(Action.incident_id == incident.id)))
            diagnoses = len(session.scalars(select(Diagnosis).where(Diagnosis.incident_id == incident.id)).all())
            return Record(
                runs,
                incident,
                diagnoses,
                [a for a in actions if a.kind == "decision"],
                [a for a in actions if a.kind == "restart"],
                [a for a in actions if a.kind not in ("decision", "restart")],
            )
    finally:
        engine.dispose()


def _state(url: str) -> str | None:
    try:
        return _record(url).incident.state
    except (AssertionError, ValueError):  # no job or no incident yet
        return None


def _check(rig: Rig, out: Path, began: float, exit_by: float, restart_seen: float, actor: str = "server") -> None:
    """Restarted once; one diagnosis, decision and restart; the times those of the events, in order: the
    exit after the test began and before ``exit_by``, the restart no later than it was seen."""
    assert rig.job is not None
    assert rig.job.popen.wait(120) == 0, rig.job.output()[-3000:]
    ended = time.time()
    assert len(_attempts(out)) == 2, "restarted exactly once"
    rec = wait_until(lambda: (r := _record(rig.url)).incident.state == "resolved" and r, what="the incident resolved")
    assert [r.state for r in rec.runs] == ["failed", "succeeded"]
    assert (rec.diagnoses, len(rec.decisions), len(rec.restarts), rec.others) == (1, 1, 1, [])
    (decision,), (restart,) = rec.decisions, rec.restarts
    assert (decision.actor, decision.params["outcome"], decision.params["reason"]) == (actor, "restart", "cuda_error")
    assert (restart.status, restart.params["new_run_id"]) == ("done", rec.runs[1].id)
    exit_at, decided_at, restarted_at = (_ts(rec.runs[0].ended_at), _ts(decision.created_at), _ts(restart.finished_at))
    assert began < exit_at < exit_by, "the exit's own time"
    assert exit_at <= decided_at <= restarted_at < ended, (exit_at, decided_at, restarted_at)
    assert restarted_at == _ts(rec.runs[1].started_at) <= restart_seen, "the restart's own time, not its replay's"


def _ts(at: datetime | None) -> float:
    assert at is not None
    return at.timestamp()


@pytest.mark.parametrize("killed", ["server", "agent", "both"])
@pytest.mark.parametrize("point", POINTS)
def test_a_process_killed_at_any_transition_leaves_one_restart_one_decision_and_true_times(
    rig: Rig, request: pytest.FixtureRequest, point: str, killed: str
) -> None:
    if request.node.callspec.params["rig"] == "postgresql" and killed != "server":
        pytest.skip("the agent's death touches no database: SQLite covers it")
    began = time.time()
    rig.start_server(hold_at=point)
    rig.start_agent()
    out = rig.supervise()
    marker = rig.tmp / point
    wait_until(marker.exists, timeout=120, what=f"the server at its {point!r} fault point")
    killed_at = time.time()
    if killed in ("agent", "both"):
        rig.agent.stop(signal.SIGKILL)
    if killed in ("server", "both"):
        rig.server.stop(signal.SIGKILL)
        rig.start_server()
    else:
        marker.unlink()  # the held server goes on
    if killed in ("agent", "both"):
        rig.start_agent()
    wait_until(lambda: len(_attempts(out)) == 2, timeout=120, what="the restarted attempt")
    restart_seen = time.time()
    state = wait_until(lambda: (s := _state(rig.url)) in ("done", "resolved") and s, timeout=30, what="the end")
    if state == "resolved":  # the restarted run (a second of steps) ended before the state was first read
        assert [r.state for r in _record(rig.url).runs] == ["failed", "succeeded"], "resolved only once it succeeds"
    else:
        assert state == "done", "done while the restarted run runs (resolved once it succeeds)"
    _check(rig, out, began, killed_at, restart_seen)


def test_a_server_down_for_the_whole_failure_records_the_supervisors_decision_with_its_times(
    rig: Rig, request: pytest.FixtureRequest
) -> None:
    if request.node.callspec.params["rig"] == "postgresql":
        pytest.skip("the replay path is the same on both: SQLite covers it")
    began = time.time()
    rig.start_server()
    rig.start_agent()
    out = rig.supervise(decision_timeout_s=3)
    wait_until(lambda: (out / "rank0.progress").exists(), timeout=120, what="the job's first step")
    rig.server.stop(signal.SIGKILL)
    wait_until(lambda: len(_attempts(out)) == 2, timeout=120, what="the supervisor's own restart")
    restart_seen = time.time()
    assert rig.job is not None and rig.job.popen.wait(120) == 0, rig.job.output()[-3000:]
    outbox = rig.node / "supervisor" / JOB / "outbox.jsonl"
    assert len(outbox.read_text().splitlines()) == 2, "both runs left for the agent: the supervisor has ended"
    rig.start_server()
    wait_until(lambda: outbox.read_text() == "", timeout=60, what="the agent delivering the ended supervisor's outbox")
    _check(rig, out, began, restart_seen, restart_seen, actor="supervisor")
