"""Silent nodes: a node whose agent stopped talking.

A node whose agent has not been heard from for one and a half `node_timeout_s` (its `last_seen_at`, which every
server replica updates) opens one `node_silent` incident per silence, diagnosed `node_failure` at
once; the runs of Slurm and Kubernetes jobs on it are failed and get an incident each, so the policy
restarts them through their executor. Each incident is opened exactly once across replicas (see
`open_incident`). A server just started, and many nodes falling quiet at once, are not node
failures (see `SilenceWatch`).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry, Gauge
from sqlalchemy import func, or_, select

from gpuwatch.diagnosis.diagnose import diagnose_silence
from server.incidents.context import IncidentContext
from server.incidents.pipeline import open_incident
from server.store.db import transaction
from server.store.jobs import running_job
from server.store.models import Incident, Job, Node, Run, utcnow

log = logging.getLogger("gpuwatch.server.incidents")


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

    def __init__(
        self, ctx: IncidentContext, registry: CollectorRegistry | None = None, started: float | None = None
    ) -> None:
        self._ctx = ctx
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
        timeout = self._ctx.settings.server.node_timeout_s
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
        with self._ctx.sessions() as session:
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
            with self._ctx.sessions() as session:
                job_id = running_job(session, node_id)
            silent_for = (at - seen).total_seconds()
            result = diagnose_silence(name, silent_for, timeout)
            incident = open_incident(
                self._ctx, node_id=node_id, trigger="node_silent", job_id=job_id, result=result, once_since=seen
            )
            if incident is None:
                continue  # this silence has its incident already
            log.warning("node %s silent for %.0f s", name, silent_for)
            opened.append(incident)
            for run_id in self._fail_scheduled_runs(node_id):
                if (
                    run_incident := open_incident(
                        self._ctx, node_id=node_id, trigger="node_silent", run_id=run_id, result=result
                    )
                ) is not None:
                    opened.append(run_incident)
        return opened

    def _is_disruption(self, unheard: int, nodes: int) -> bool:
        settings = self._ctx.settings
        return unheard >= settings.server.disruption_min_nodes and unheard >= settings.server.disruption_share * nodes

    def _fail_scheduled_runs(self, node_id: int) -> list[int]:
        """The running runs of Slurm/Kubernetes jobs on the node, now failed: their scheduler restarts them
        (through the executor) once the policy decides. A local run is left to its supervisor: if the
        node is alive it reports the exit itself; if the node died, so did the supervisor."""
        with transaction(self._ctx.sessions) as session:
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
