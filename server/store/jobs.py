"""Jobs, their ranks, their per-minute rollups and their checkpoints, from the processes, steps,
attributed GPU samples and checkpoint reports of ingest batches."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from gpuwatch.protocol import CheckpointReport, JobProcess, StepReport
from server.store.models import Checkpoint, Job, JobRank, JobRollup, Node, Run, utcnow
from server.store.upsert import insert_for, insert_ignore

IDLE_UTIL = 5.0  # % utilisation under which a GPU counts as idle


def _minute(ts: float) -> datetime:
    return datetime.fromtimestamp(ts - ts % 60, UTC)


def job_ids(session: Session, names: set[str], processes: list[JobProcess]) -> dict[str, int]:
    """Ids of the named jobs, creating (and updating from ``processes``) as needed. A job's scheduler and
    external id come from the telemetry only when the telemetry creates it: never changed by a report
    afterwards (docs/security.md)."""
    if not names:
        return {}
    jobs = {j.name: j for j in session.scalars(select(Job).where(Job.name.in_(names)))}
    created = names - set(jobs)
    for name in created:
        jobs[name] = Job(name=name, state="running")
        session.add(jobs[name])
    for p in processes:
        job = jobs[p.job]
        if p.job in created:
            job.scheduler, job.external_id = p.scheduler, p.external_id or job.external_id
        job.world_size = p.world_size or job.world_size
        job.hang_timeout_s = p.hang_timeout_s or job.hang_timeout_s
        job.state = "running"
    session.flush()
    return {name: job.id for name, job in jobs.items()}


def job_members(session: Session, job_ids: Iterable[int]) -> dict[int, set[int]]:
    """The nodes each job belongs to: those that started its runs. A job without runs belongs to nobody."""
    members: dict[int, set[int]] = defaultdict(set)
    ids = list(job_ids)
    if ids:
        for job_id, node_id in session.execute(
            select(Run.job_id, Run.node_id).where(Run.job_id.in_(ids), Run.node_id.is_not(None)).distinct()
        ):
            members[job_id].add(node_id)
    return dict(members)


def foreign_jobs(session: Session, node: Node, names: Iterable[str]) -> frozenset[str]:
    """Those of the named jobs that belong to other nodes: a node's processes, steps and checkpoints of
    them are not taken (they could set a hang timeout, or fake a stall, of another node's run)."""
    wanted = set(names)
    if not wanted:
        return frozenset()
    owned: dict[str, bool] = {}  # job → whether ``node`` is one of its nodes
    for name, registered in session.execute(
        select(Job.name, Job.member_nodes).where(Job.name.in_(wanted), Job.member_nodes.is_not(None))
    ):
        owned[name] = node.name in (registered or [])
    for name, member in session.execute(
        select(Job.name, Run.node_id).join(Run, Run.job_id == Job.id).where(Job.name.in_(wanted)).distinct()
    ):
        owned[name] = owned.get(name, False) or member == node.id
    return frozenset(name for name, mine in owned.items() if not mine)


def store_job_data(
    session: Session,
    node: Node,
    processes: list[JobProcess],
    steps: list[StepReport],
    checkpoints: list[CheckpointReport],
) -> frozenset[str]:
    """A batch's job processes, steps and checkpoint saves (its samples go through `server.store.rollups`);
    the names of the jobs whose reports were left out as another node's (`foreign_jobs`)."""
    names = {p.job for p in processes} | {s.job for s in steps} | {c.job for c in checkpoints}
    foreign = foreign_jobs(session, node, names)
    if foreign:
        processes = [p for p in processes if p.job not in foreign]
        steps = [s for s in steps if s.job not in foreign]
        checkpoints = [c for c in checkpoints if c.job not in foreign]
    ids = job_ids(session, names - foreign, processes)
    _store_ranks(session, node.id, ids, processes)
    _store_rollups(session, ids, steps)
    _store_checkpoints(session, ids, checkpoints)
    return foreign


def _store_checkpoints(session: Session, ids: dict[str, int], checkpoints: list[CheckpointReport]) -> None:
    """The client's saves into the job's checkpoint registry (a failed one is kept, marked invalid)."""
    rows = [
        {
            "job_id": ids[c.job],
            "path": c.path,
            "step": c.step,
            "valid": c.ok,
            "invalid_reason": c.error,
            "size_bytes": c.size_bytes or None,
            "created_at": datetime.fromtimestamp(c.ts, UTC),
        }
        for c in checkpoints
    ]
    if rows:
        session.execute(insert_ignore(Checkpoint.__table__), rows)


def _store_ranks(session: Session, node_id: int, ids: dict[str, int], processes: list[JobProcess]) -> None:
    rows = [
        {
            "job_id": ids[p.job],
            "rank": p.rank,
            "node_id": node_id,
            "pid": p.pid,
            "local_rank": p.local_rank,
            "gpu_index": p.gpu,
            "first_seen_at": utcnow(),
            "last_seen_at": utcnow(),
        }
        for p in processes
        if p.rank is not None
    ]
    if not rows:
        return
    stmt = insert_for(session, JobRank.__table__)
    ex = stmt.excluded
    session.execute(
        stmt.on_conflict_do_update(
            index_elements=["job_id", "rank"],
            set_={
                "node_id": ex.node_id,
                "pid": ex.pid,
                "local_rank": ex.local_rank,
                "gpu_index": ex.gpu_index,
                "last_seen_at": ex.last_seen_at,
            },
        ),
        rows,
    )


_ROLLUP_SUMS = (
    "steps",
    "step_seconds",
    "comm_seconds",
    "tokens",
    "samples",
    "gpu_seconds",
    "idle_gpu_seconds",
    "util_gpu_seconds",
    "energy_j",
)


def _store_rollups(session: Session, ids: dict[str, int], steps: list[StepReport]) -> None:
    acc: dict[tuple[int, int, datetime], dict[str, float]] = defaultdict(lambda: dict.fromkeys(_ROLLUP_SUMS, 0.0))
    for st in steps:
        a = acc[(ids[st.job], st.rank, _minute(st.ts))]
        a["steps"] += 1
        a["step_seconds"] += st.duration_s
        a["comm_seconds"] += st.comm_s
        a["tokens"] += st.tokens or 0.0
        a["samples"] += st.samples or 0.0
    if not acc:
        return
    table = JobRollup.__table__
    stmt = insert_for(session, table)
    upsert = stmt.on_conflict_do_update(
        index_elements=["job_id", "rank", "minute"],
        set_={k: table.c[k] + stmt.excluded[k] for k in _ROLLUP_SUMS},
    )
    session.execute(upsert, [{"job_id": j, "rank": r, "minute": m, **a} for (j, r, m), a in acc.items()])


def running_job(session: Session, node_id: int) -> int | None:
    """The job with a running run on the node: supervised there, or with a rank there (the latest)."""
    return session.scalar(
        select(Run.job_id)
        .outerjoin(JobRank, JobRank.job_id == Run.job_id)
        .where(Run.state == "running", or_(Run.node_id == node_id, JobRank.node_id == node_id))
        .order_by(Run.id.desc())
        .limit(1)
    )


def latest_checkpoints(session: Session, since: datetime) -> list[tuple[str, int | None, datetime, int | None, str]]:
    """(job, step, saved at, size, path) of each job's newest valid checkpoint, for the jobs still
    running or whose checkpoint is newer than ``since``: what the checkpoint-age gauges are rebuilt from
    at start-up (every path lands here: the client's reports and the supervisor's run exits)."""
    newest = (
        select(Checkpoint.job_id, func.max(Checkpoint.created_at).label("at"))
        .where(Checkpoint.valid.is_(True))
        .group_by(Checkpoint.job_id)
        .subquery()
    )
    running = select(Run.job_id).where(Run.state == "running")
    rows = session.execute(
        select(Job.name, Checkpoint.step, Checkpoint.created_at, Checkpoint.size_bytes, Checkpoint.path)
        .join(newest, (newest.c.job_id == Checkpoint.job_id) & (newest.c.at == Checkpoint.created_at))
        .join(Job, Job.id == Checkpoint.job_id)
        .where(Checkpoint.valid.is_(True), or_(Checkpoint.created_at > since, Checkpoint.job_id.in_(running)))
        .order_by(Job.name, Checkpoint.id)
    ).tuples()
    return [
        (name, step, at if at.tzinfo else at.replace(tzinfo=UTC), size, path) for name, step, at, size, path in rows
    ]


def jobs_on_node(session: Session, node_id: int) -> list[dict[str, object]]:
    """The jobs at work on the node: each with a running run there (supervised there, with a rank the
    agents saw there, or registered to the node in ``member_nodes``), as ``{"job", "run"}`` (the
    job's latest running run), by job name. What a silent node's incident says was lost."""
    node = session.get(Node, node_id)
    on_rank = set(session.scalars(select(JobRank.job_id).where(JobRank.node_id == node_id).distinct()))
    rows = session.execute(
        select(Job.id, Job.name, Job.member_nodes, Run.id, Run.node_id)
        .join(Run, Run.job_id == Job.id)
        .where(Run.state == "running")
        .order_by(Run.id)
    ).tuples()
    found: dict[str, int] = {}
    for job_id, name, members, run_id, run_node in rows:
        if run_node == node_id or job_id in on_rank or (node is not None and node.name in (members or [])):
            found[name] = run_id
    return [{"job": name, "run": run_id} for name, run_id in sorted(found.items())]
