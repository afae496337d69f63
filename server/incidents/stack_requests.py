"""Stack requests: the server asks the agents of a job's nodes for every rank's stack, and keeps the answers.

A request (`stack_requests`) has one dump per node (`stack_dumps`) naming the job's ranks there (from the
ranks' process registrations, `job_ranks`, else the job tracker's steps). Both are rows, so a server that
dies meanwhile loses nothing: the answers land in the database, and the request is analysed by whichever
server looks at it after its deadline.

How agents learn of them: every batch acknowledgement carries ``stack_tasks``, the number of dumps pending
for the batch's node; an agent that sees one fetches its tasks (`tasks_for`) and answers each (`answer`).
Agents ship a batch every `flush_s` (2 s by default) whatever happens, so this costs no new connection and
no held request per node, and adds at most one flush to the capture. The count comes from `StackBoard`, an
in-memory map refreshed from the database by the watchdog (one grouped query, whatever the node count) and
at once for the requests this server makes: the ingest path never queries for it.

Authorization: a node's token answers only its own node's dumps (403 otherwise), only for the ranks of the
job the dump names on that node (403 for any other rank), and only once, while the request is open (409).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from gpuwatch.protocol import RankStack, StackAnswer, StackTask
from server.incidents.stacks import Capture, Flight, Frame, Localisation, localise, main_frames
from server.store.db import lock, transaction
from server.store.models import Job, JobRank, Node, StackDump, StackRequest, utcnow

if TYPE_CHECKING:
    from server.telemetry.job_tracker import JobTracker


class NoRanks(LookupError):
    """The job has no rank the server knows to run anywhere: there is nobody to ask."""


class Refused(Exception):
    """An answer the node may not give: ``status`` 403 (not its dump, not its ranks) or 409 (answered, closed)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class StackBoard:
    """Dumps pending per node id, as the database had them at the last `refresh` plus this server's own
    requests since: what the ingest acknowledgement tells each agent, without a query per batch.

    It holds each node's pending dump ids, not a count: the watchdog's refresh and a request's own `add` may
    both see the same committed dump (a refresh landing between the request's commit and its handler's add),
    and a set counts it once where a counter counted it twice (fresh CI: an agent told of 2 captures for 1)."""

    def __init__(self) -> None:
        self._pending: dict[int, set[int]] = {}
        self._lock = threading.Lock()

    def pending(self, node_id: int) -> int:
        with self._lock:
            return len(self._pending.get(node_id, ()))

    def add(self, dumps: Iterable[tuple[int, int]]) -> None:
        """The (node id, dump id) of dumps just committed."""
        with self._lock:
            for node_id, dump_id in dumps:
                self._pending.setdefault(node_id, set()).add(dump_id)

    def done(self, node_id: int, dump_id: int) -> None:
        with self._lock:
            left = self._pending.get(node_id)
            if left is not None:
                left.discard(dump_id)
                if not left:
                    del self._pending[node_id]

    def refresh(self, sessions: sessionmaker[Session]) -> None:
        with sessions() as session:
            rows = session.execute(select(StackDump.node_id, StackDump.id).where(StackDump.state == "pending"))
            found: dict[int, set[int]] = {}
            for node_id, dump_id in rows:
                found.setdefault(node_id, set()).add(dump_id)
        with self._lock:
            self._pending = found


def ranks_by_node(session: Session, job: Job, tracker: JobTracker | None = None) -> dict[int, list[int]]:
    """The job's ranks on each node (node id → ranks): where its ranks registered their processes, and
    for a rank not registered (yet), where the job tracker saw its steps come from."""
    found: dict[int, set[int]] = {}
    for rank, node_id in session.execute(select(JobRank.rank, JobRank.node_id).where(JobRank.job_id == job.id)):
        found.setdefault(node_id, set()).add(rank)
    if tracker is not None:
        registered = {r for ranks in found.values() for r in ranks}
        with tracker.locked() as jobs:
            state = jobs.get(job.name)
            named = {r: s.node for r, s in state.ranks.items() if s.node} if state is not None else {}
        named = {r: n for r, n in named.items() if r not in registered}
        ids = dict(session.execute(select(Node.name, Node.id).where(Node.name.in_(sorted(set(named.values()))))).all())
        for rank, name in named.items():
            if name in ids:
                found.setdefault(ids[name], set()).add(rank)
    return {node: sorted(ranks) for node, ranks in found.items()}


def create(
    session: Session,
    job: Job,
    *,
    by: str,
    wait_s: float,
    incident_id: int | None = None,
    tracker: JobTracker | None = None,
) -> tuple[StackRequest, list[tuple[int, int]]]:
    """A request for the stacks of every rank of ``job``, in the caller's transaction; with the (node id, dump
    id) of each dump (for `StackBoard.add` once committed). NoRanks when no rank of the job is known."""
    nodes = ranks_by_node(session, job, tracker)
    if not nodes:
        raise NoRanks(
            f"no rank of job {job.name} is known to run on any node: its training processes register with "
            "their node's agent (gpuwatch.client, or RANK in their environment)"
        )
    now = utcnow()
    req = StackRequest(
        job_id=job.id,
        incident_id=incident_id,
        requested_by=by[:255],
        state="pending",
        created_at=now,
        deadline_at=now + timedelta(seconds=wait_s),
    )
    session.add(req)
    session.flush()
    dumps = [
        StackDump(request_id=req.id, node_id=node_id, ranks=ranks, state="pending")
        for node_id, ranks in sorted(nodes.items())
    ]
    session.add_all(dumps)
    session.flush()
    return req, [(d.node_id, d.id) for d in dumps]


def tasks_for(session: Session, node_id: int) -> list[StackTask]:
    """The dumps pending for a node, as its agent is told them."""
    rows = session.execute(
        select(StackDump.id, StackDump.ranks, Job.name)
        .join(StackRequest, StackRequest.id == StackDump.request_id)
        .join(Job, Job.id == StackRequest.job_id)
        .where(StackDump.node_id == node_id, StackDump.state == "pending", StackRequest.state == "pending")
        .order_by(StackDump.id)
    )
    return [StackTask(dump_id=dump_id, job=name, ranks=list(ranks)) for dump_id, ranks, name in rows]


def answer(sessions: sessionmaker[Session], node: Node, dump_id: int, body: StackAnswer) -> bool:
    """Store a node's answer to its dump; True when it was the request's last (it is analysed now).
    LookupError for no such dump; `Refused` for what the node may not answer."""
    with transaction(sessions) as session:
        dump = session.get(StackDump, dump_id)
        if dump is None:
            raise LookupError(f"no stack dump {dump_id}")
        lock(session, f"stacks:{dump.request_id}")
        session.refresh(dump)
        req = session.get(StackRequest, dump.request_id)
        assert req is not None
        job = session.get(Job, req.job_id)
        job_name = job.name if job is not None else str(req.job_id)
        if dump.node_id != node.id:
            raise Refused(403, f"stack dump {dump_id} is addressed to another node; node {node.name} cannot answer it")
        allowed = set(dump.ranks)
        stray = sorted({r.rank for r in body.ranks} - allowed)
        if stray:
            raise Refused(
                403,
                f"rank(s) {', '.join(map(str, stray))} of job {job_name} do not run on node {node.name} "
                f"(its ranks there: {', '.join(map(str, sorted(allowed))) or 'none'})",
            )
        if dump.state != "pending":
            raise Refused(409, f"stack dump {dump_id} was answered already")
        if req.state != "pending":
            raise Refused(409, f"stack request {req.id} is closed ({req.state}): the answer came too late")
        dump.state, dump.answered_at = "done", utcnow()
        dump.result = [r.model_dump(mode="json", exclude_none=True) for r in body.ranks]
        session.flush()
        last = not session.scalar(
            select(func.count()).where(StackDump.request_id == req.id, StackDump.state == "pending")
        )
        if last:
            finish(session, req)
        return last


def finish(session: Session, req: StackRequest, now: datetime | None = None) -> Localisation:
    """Analyse the request with the answers it has (in the caller's transaction): done when every node
    answered, else expired; the dumps still pending expire with it."""
    now = now or utcnow()
    dumps = list(session.scalars(select(StackDump).where(StackDump.request_id == req.id).order_by(StackDump.id)))
    names = dict(session.execute(select(Node.id, Node.name).where(Node.id.in_([d.node_id for d in dumps]))).all())
    missing = [d for d in dumps if d.state == "pending"]
    for d in missing:
        d.state = "expired"
    result = localise(captures(dumps, names))
    req.state = "expired" if missing else "done"
    req.finished_at = now
    req.analysis = result.to_json()
    return result


def captures(dumps: Iterable[StackDump], names: dict[int, str]) -> list[Capture]:
    """The dumps' ranks as the analysis takes them; a rank whose node did not answer has an error."""
    out = []
    for d in dumps:
        node = names.get(d.node_id, str(d.node_id))
        answered = {int(r["rank"]): r for r in d.result or []}
        for rank in d.ranks:
            raw = answered.get(rank)
            if raw is None:
                why = "its node's agent did not answer in time" if d.state != "done" else "the agent found no process"
                out.append(Capture(rank, node, error=why))
                continue
            out.append(_capture(RankStack.model_validate(raw), node))
    return out


def _capture(r: RankStack, node: str) -> Capture:
    threads = [
        (t.name, t.active, t.main, [Frame(f.function, f.file, f.line, f.path, f.native) for f in t.frames])
        for t in r.threads
    ]
    fr = r.flight_recorder
    flight = Flight(fr.entered, fr.completed, fr.last_op) if fr is not None and fr.error is None else None
    frames = main_frames(threads)
    error = r.error or (None if frames else "py-spy found no Python frame")
    return Capture(r.rank, node, frames, error, flight)


def expire_due(sessions: sessionmaker[Session], board: StackBoard, now: float | None = None) -> list[int]:
    """Close the requests whose deadline passed (analysed with what came), then refresh ``board``: the
    watchdog's check, so a request nobody waits on (an operator's, or one a dead server made) still ends."""
    at = datetime.fromtimestamp(time.time() if now is None else now, UTC)
    closed = []
    with sessions() as session:
        due = list(
            session.scalars(
                select(StackRequest.id).where(StackRequest.state == "pending", StackRequest.deadline_at <= at)
            )
        )
    for request_id in due:
        with transaction(sessions) as session:
            lock(session, f"stacks:{request_id}")
            req = session.get(StackRequest, request_id)
            if req is not None and req.state == "pending":
                finish(session, req, at)
                closed.append(request_id)
    board.refresh(sessions)
    return closed


def describe(session: Session, req: StackRequest) -> dict[str, Any]:
    """A request as the API shows it: its state, the nodes asked and what each answered, the analysis."""
    dumps = list(session.scalars(select(StackDump).where(StackDump.request_id == req.id).order_by(StackDump.id)))
    names = dict(session.execute(select(Node.id, Node.name).where(Node.id.in_([d.node_id for d in dumps]))).all())
    job = session.get(Job, req.job_id)
    return {
        "id": req.id,
        "job": job.name if job is not None else None,
        "job_id": req.job_id,
        "incident_id": req.incident_id,
        "requested_by": req.requested_by,
        "state": req.state,
        "created_at": req.created_at.timestamp(),
        "deadline_at": req.deadline_at.timestamp(),
        "finished_at": req.finished_at.timestamp() if req.finished_at else None,
        "dumps": [
            {
                "id": d.id,
                "node": names.get(d.node_id),
                "ranks": d.ranks,
                "state": d.state,
                "answered_at": d.answered_at.timestamp() if d.answered_at else None,
                "result": d.result,
            }
            for d in dumps
        ],
        "analysis": req.analysis,
    }
