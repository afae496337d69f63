"""Incidents that no run reports: a fatal Xid arriving from a node, and a node that goes silent.

A fatal Xid (one that `gpuwatch.diagnosis.xid` maps to a hardware or link failure) in a stored batch,
as an NVML event or an NVRM line of the node's kernel stream, opens an `xid` incident for that node,
unless one was opened for it within `incident_dedupe_s`: an Xid storm is one incident. Lines older
than the look-back (a kernel buffer replayed by a freshly started agent) open nothing.

A node whose agent has not been heard from for one and a half `node_timeout_s` (its `last_seen_at`, which every
server replica updates) opens one `node_silent` incident per silence, diagnosed `node_failure` at
once; the runs of Slurm and Kubernetes jobs on it are failed and get an incident each, so the policy
restarts them through their executor. Each incident is opened exactly once across replicas (see
`open_incident`). A server just started, and many nodes falling quiet at once, are not node
failures (see `SilenceWatch`).

A hung job (the job tracker's detection) opens a `hang` incident on its running run, decided at once.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry, Gauge
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from gpuwatch.diagnosis.diagnose import diagnose_hang, diagnose_silence
from gpuwatch.diagnosis.xid import fatal_xid_in_line, xid_reason
from gpuwatch.protocol import Batch
from server.api.deps import Services
from server.incidents.diagnose import KERNEL_STREAM, LOOKBACK, open_incident
from server.store.db import transaction
from server.store.models import Incident, Job, JobRank, Node, Run, utcnow

log = logging.getLogger("gpuwatch.server.incidents")


def fatal_xids(batch: Batch, now: float) -> list[int]:
    """The fatal Xid codes in ``batch`` that are recent enough to act on."""
    oldest = now - LOOKBACK.total_seconds()
    codes = [
        int(e.data["xid"])
        for e in batch.events
        if e.kind == "xid" and e.ts >= oldest and xid_reason(int(e.data.get("xid") or 0))
    ]
    for line in batch.logs:
        if line.stream == KERNEL_STREAM and line.ts >= oldest and (code := fatal_xid_in_line(line.text)):
            codes.append(code)
    return codes


def open_xid_incident(svc: Services, node_id: int, node_name: str, codes: list[int]) -> int | None:
    """Open an `xid` incident for the fatal Xid ``codes`` from a node (see `fatal_xids`), unless one was
    opened within `incident_dedupe_s` (by any server replica); the new incident's id, or None."""
    with svc.sessions() as session:
        job_id = running_job(session, node_id)
    window = datetime.now(UTC) - timedelta(seconds=svc.settings.incident_dedupe_s)
    opened = open_incident(svc, node_id=node_id, trigger="xid", job_id=job_id, once_since=window)
    if opened is not None:
        log.warning("fatal Xid %s from %s", ", ".join(map(str, sorted(set(codes)))), node_name)
    return opened


def running_job(session: Session, node_id: int) -> int | None:
    """The job with a running run on the node: supervised there, or with a rank there (the latest)."""
    return session.scalar(
        select(Run.job_id)
        .outerjoin(JobRank, JobRank.job_id == Run.job_id)
        .where(Run.state == "running", or_(Run.node_id == node_id, JobRank.node_id == node_id))
        .order_by(Run.id.desc())
        .limit(1)
    )


def open_hang_incident(svc: Services, job_name: str, node_name: str | None, message: str) -> int | None:
    """A hung job: a `hang` incident on its running run, decided at once (restart kills the hung run:
    its supervisor stops it when it sees the decision, a scheduler's executor requeues it)."""
    with svc.sessions() as session:
        run = session.scalar(
            select(Run)
            .join(Job, Job.id == Run.job_id)
            .where(Job.name == job_name, Run.state == "running")
            .order_by(Run.id.desc())
            .limit(1)
        )
        if run is None or session.scalar(select(Incident.id).where(Incident.run_id == run.id)) is not None:
            return None  # not a run gpuwatch knows of, or already being dealt with
        node_id = session.scalar(select(Node.id).where(Node.name == node_name)) if node_name else None
        node_id = node_id or run.node_id
        run_id = run.id
    if node_id is None:
        return None
    log.warning("job %s hung: %s", job_name, message)
    return open_incident(svc, node_id=node_id, trigger="hang", run_id=run_id, result=diagnose_hang(message, node_name))


class SilenceWatch:
    """Opens a `node_silent` incident once per silence: for a node last heard from (by any server
    replica: `nodes.last_seen_at`) more than `node_timeout_s` ago, unless one was opened since it was
    last heard from. Nodes silent for more than a day are history, not news.

    Silence is counted from when this replica could hear a node at the earliest: a server that was
    down longer than `node_timeout_s` finds every node stale when it starts, while their agents are
    still waiting out their retry backoff. So no node is judged silent before the replica has listened
    for `node_timeout_s`.

    Many nodes falling quiet at once is a disruption (the network, the server's host, the database),
    not that many node failures; acting on it would fail and exclude a whole cluster's nodes. When at
    least `disruption_min_nodes` nodes, and `disruption_share` of the nodes not already known to be
    down, are unheard for `node_timeout_s`, no incident is opened: the disruption is logged and
    exported (`gpuwatch_silence_disruption_nodes`, alert GpuwatchSilenceDisruption) for a person to
    judge. When it ends the replica listens afresh, as after a start; nodes still silent then get
    their incidents. (Kubernetes' node lifecycle controller stops evicting in a zone for the same
    reason.) The nodes of a disruption do not fall quiet in the same second: their last words are
    spread by their agents' flush period and by how often the server writes `last_seen_at`. So a node
    is judged silent only half a `node_timeout_s` after it counts as unheard (`SETTLE`), by when the
    rest of a disruption has shown."""

    #: How much longer than node_timeout_s a node is unheard before it is judged silent.
    SETTLE = 0.5
    HISTORY = timedelta(days=1)

    def __init__(self, svc: Services, registry: CollectorRegistry | None = None, started: float | None = None) -> None:
        self._svc = svc
        self._listening_since = time.time() if started is None else started
        self._disrupted = 0  # nodes unheard in the disruption under way; 0: none
        self._gauge = Gauge(
            "gpuwatch_silence_disruption_nodes",
            "Nodes unheard at once in a disruption (too many to be node failures), whose silence incidents "
            "wait for it to end; 0 when there is none.",
            registry=registry,
        )

    @property
    def disrupted(self) -> int:
        """How many nodes the disruption under way holds back; 0 when there is none."""
        return self._disrupted

    def check(self, now: float | None = None) -> list[int]:
        now = time.time() if now is None else now
        timeout = self._svc.settings.node_timeout_s
        at = datetime.fromtimestamp(now, UTC)
        unheard_before = at - timedelta(seconds=timeout)
        silent_before = at - timedelta(seconds=timeout * (1 + self.SETTLE))
        # Nodes heard in the last day whose silence, if any, has no incident yet: a node already known
        # to be down is not part of what falls quiet now.
        latest = (
            select(Incident.node_id, func.max(Incident.opened_at).label("opened"))
            .where(
                Incident.trigger == "node_silent",
                Incident.run_id.is_(None),
                Incident.opened_at > at - self.HISTORY,
            )
            .group_by(Incident.node_id)
            .subquery()
        )
        up = (
            select(Node.id, Node.name, Node.last_seen_at)
            .outerjoin(latest, latest.c.node_id == Node.id)
            .where(
                Node.last_seen_at > at - self.HISTORY,
                or_(latest.c.opened.is_(None), latest.c.opened < Node.last_seen_at),
            )
            .subquery()
        )
        with self._svc.sessions() as session:
            nodes = unheard = 0
            quiet = (
                select(Node.id)
                .where(Node.last_seen_at > at - self.HISTORY, Node.last_seen_at < unheard_before)
                .limit(1)
            )
            if session.scalar(quiet) is not None:  # usually none is: cheaper to learn than the counts
                nodes, unheard = session.execute(
                    select(func.count(), func.count().filter(up.c.last_seen_at < unheard_before)).select_from(up)
                ).one()
            disruption = self._is_disruption(unheard, nodes)
            silent = []
            if unheard and not disruption:
                silent = list(session.execute(select(up).where(up.c.last_seen_at < silent_before)))
        if disruption:
            if not self._disrupted:
                log.error(
                    "%d of %d nodes unheard at once: a disruption (network, server, database), not node "
                    "failures; their silence incidents wait until it ends",
                    unheard,
                    nodes,
                )
            self._disrupted = unheard
            self._gauge.set(unheard)
            return []
        if self._disrupted:
            log.warning("disruption over (%d nodes unheard): listening afresh", unheard)
            self._disrupted, self._listening_since = 0, now
            self._gauge.set(0)
        if now - self._listening_since < timeout:
            return []
        opened = []
        for node_id, name, seen in silent:
            with self._svc.sessions() as session:
                job_id = running_job(session, node_id)
            silent_for = (at - seen).total_seconds()
            result = diagnose_silence(name, silent_for, timeout)
            incident = open_incident(
                self._svc, node_id=node_id, trigger="node_silent", job_id=job_id, result=result, once_since=seen
            )
            if incident is None:
                continue  # this silence has its incident already
            log.warning("node %s silent for %.0f s", name, silent_for)
            opened.append(incident)
            for run_id in self._fail_scheduled_runs(node_id):
                if (
                    run_incident := open_incident(
                        self._svc, node_id=node_id, trigger="node_silent", run_id=run_id, result=result
                    )
                ) is not None:
                    opened.append(run_incident)
        return opened

    def _is_disruption(self, unheard: int, nodes: int) -> bool:
        settings = self._svc.settings
        return unheard >= settings.disruption_min_nodes and unheard >= settings.disruption_share * nodes

    def _fail_scheduled_runs(self, node_id: int) -> list[int]:
        """The running runs of Slurm/Kubernetes jobs on the node, now failed: their scheduler restarts them
        (through the executor) once the policy decides. A local run is left to its supervisor: if the
        node is alive it reports the exit itself; if the node died, so did the supervisor."""
        with transaction(self._svc.sessions) as session:
            runs = list(
                session.scalars(
                    select(Run)
                    .join(Job, Job.id == Run.job_id)
                    .where(Run.node_id == node_id, Run.state == "running", Job.scheduler != "local")
                )
            )
            for run in runs:
                run.state, run.ended_at = "failed", utcnow()
            return [run.id for run in runs]
