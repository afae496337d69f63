"""Stack captures over real HTTP (server/incidents/stack_requests.py): an admin asks, each node's agent
learns of its part from a batch's acknowledgement and answers it, and a node answers only its own part,
only for the job's ranks on it, only once and only while the request is open."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, JobProcess, RankStack, StackAnswer, StackFrame, ThreadStack
from server.store.models import AuditEntry
from tests.helpers import InProcessServer, new_admin_token, new_token, wait_until

C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


@dataclass
class Cluster:
    server: InProcessServer
    a: httpx.Client
    b: httpx.Client
    admin: httpx.Client
    anonymous: httpx.Client
    job_id: int
    batches: int = 0

    def ingest(self, node: httpx.Client, **items: list) -> dict:
        self.batches += 1
        resp = node.post("/api/v1/ingest", content=Batch(batch_id=self.batches, **items).model_dump_json())
        assert resp.is_success, resp.text
        return resp.json()


@pytest.fixture
def cluster(settings: Settings) -> Iterator[Cluster]:
    config = settings.model_copy(update={"hang_check_s": 0.05, "max_body_bytes": 2**20})
    url = config.effective_database_url
    with InProcessServer(config) as srv:
        tokens = (new_token(url, "a"), new_token(url, "b"), new_admin_token(url))
        clients = [httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {t}"}, timeout=60) for t in tokens]
        anonymous = httpx.Client(base_url=srv.url, timeout=60)
        job = clients[2].post("/api/v1/jobs", json={"name": "j", "member_nodes": ["a", "b"]})
        assert job.status_code == 201, job.text
        c = Cluster(srv, *clients, anonymous, job.json()["id"])
        for node, ranks in ((c.a, (0, 1)), (c.b, (2, 3))):
            c.ingest(node, processes=[JobProcess(job="j", pid=1000 + r, rank=r, world_size=4) for r in ranks])
        yield c
        for client in [*clients, anonymous]:
            client.close()


def _stack(rank: int, *frames: StackFrame) -> RankStack:
    return RankStack(
        rank=rank, pid=1000 + rank, threads=[ThreadStack(name="MainThread", main=True, frames=list(frames))]
    )


WAITING = (StackFrame(function="all_reduce", file="distributed_c10d.py", path=C10D, line=2800),)
BUSY = (StackFrame(function="busy_loop", file="train.py", path="/job/train.py", line=42),)


def _body(*ranks: RankStack) -> str:
    return StackAnswer(ranks=list(ranks)).model_dump_json()


def test_only_an_admin_asks_for_stacks_and_each_node_is_told_its_own_part(cluster: Cluster) -> None:
    path = f"/api/v1/jobs/{cluster.job_id}/stacks"
    assert cluster.anonymous.post(path).status_code == 401
    refused = cluster.a.post(path)
    assert refused.status_code == 403 and "admin token" in refused.json()["detail"]
    assert cluster.admin.post("/api/v1/jobs/999999/stacks").status_code == 404
    made = cluster.admin.post(path, json={"wait_s": 30})
    assert made.status_code == 201, made.text
    req = made.json()
    assert (req["state"], req["job"]) == ("pending", "j")
    assert {d["node"]: d["ranks"] for d in req["dumps"]} == {"a": [0, 1], "b": [2, 3]}
    assert cluster.ingest(cluster.a)["stack_tasks"] == 1, "the acknowledgement tells the agent"
    (task,) = cluster.a.get("/api/v1/stacks/tasks").json()["tasks"]
    assert (task["job"], task["ranks"]) == ("j", [0, 1])
    (other,) = cluster.b.get("/api/v1/stacks/tasks").json()["tasks"]
    assert other["ranks"] == [2, 3] and other["dump_id"] != task["dump_id"]
    assert cluster.admin.get("/api/v1/stacks/tasks").status_code == 403, "an admin is not a node"
    with cluster.server.services.sessions() as session:
        (entry,) = session.query(AuditEntry).filter_by(action="job.stacks").all()
        assert entry.target == "j" and entry.params["request"] == req["id"]


def test_a_node_answers_only_its_own_part_for_its_own_ranks_once_and_the_odd_rank_out_is_named(
    cluster: Cluster,
) -> None:
    req = cluster.admin.post(f"/api/v1/jobs/{cluster.job_id}/stacks", json={"wait_s": 30}).json()
    dumps = {d["node"]: d["id"] for d in req["dumps"]}
    answer = "/api/v1/stacks/tasks/{}"

    not_mine = cluster.a.post(answer.format(dumps["b"]), content=_body(_stack(2, *WAITING)))
    assert not_mine.status_code == 403 and "addressed to another node" in not_mine.json()["detail"]
    stray = cluster.a.post(answer.format(dumps["a"]), content=_body(_stack(0, *WAITING), _stack(2, *WAITING)))
    assert stray.status_code == 403
    assert stray.json()["detail"] == "rank(s) 2 of job j do not run on node a (its ranks there: 0, 1)"
    assert cluster.admin.post(answer.format(dumps["a"]), content=_body()).status_code == 403
    assert cluster.a.post(answer.format(999999), content=_body()).status_code == 404

    ok = cluster.a.post(answer.format(dumps["a"]), content=_body(_stack(0, *WAITING), _stack(1, *BUSY)))
    assert ok.status_code == 204, ok.text
    again = cluster.a.post(answer.format(dumps["a"]), content=_body(_stack(0, *WAITING)))
    assert again.status_code == 409 and "answered already" in again.json()["detail"]
    assert cluster.a.get("/api/v1/stacks/tasks").json()["tasks"] == []

    assert cluster.b.post(answer.format(dumps["b"]), content=_body(_stack(2, *WAITING), _stack(3, *WAITING))).is_success
    done = cluster.anonymous.get(f"/api/v1/stacks/{req['id']}").json()
    assert done["state"] == "done"
    analysis = done["analysis"]
    assert (analysis["suspects"], analysis["suspect_nodes"]) == ([1], ["a"])
    assert analysis["evidence"] == ["rank 1 (a): busy_loop (train.py:42)"]
    assert [(g["ranks"], g["suspect"]) for g in analysis["groups"]] == [([0, 2, 3], False), ([1], True)]


def test_an_answer_after_the_deadline_is_refused_and_the_request_is_analysed_with_what_came(
    cluster: Cluster,
) -> None:
    req = cluster.admin.post(f"/api/v1/jobs/{cluster.job_id}/stacks", json={"wait_s": 0.3}).json()
    dumps = {d["node"]: d["id"] for d in req["dumps"]}
    expired = wait_until(
        lambda: (r := cluster.admin.get(f"/api/v1/stacks/{req['id']}").json())["state"] == "expired" and r,
        what="the request's deadline",
    )
    assert {d["state"] for d in expired["dumps"]} == {"expired"}
    assert [f["rank"] for f in expired["analysis"]["failed"]] == [0, 1, 2, 3]
    assert expired["analysis"]["failed"][0]["error"] == "its node's agent did not answer in time"
    late = cluster.a.post(f"/api/v1/stacks/tasks/{dumps['a']}", content=_body(_stack(0, *WAITING)))
    assert late.status_code == 409
    assert cluster.ingest(cluster.a).get("stack_tasks", 0) == 0, "no longer asked of the node"


def test_a_job_without_known_ranks_cannot_be_asked(cluster: Cluster) -> None:
    job = cluster.admin.post("/api/v1/jobs", json={"name": "empty", "member_nodes": ["a"]}).json()
    refused = cluster.admin.post(f"/api/v1/jobs/{job['id']}/stacks")
    assert refused.status_code == 409 and "no rank of job empty is known" in refused.json()["detail"]


def test_the_watchdogs_refresh_landing_between_a_request_and_its_count_does_not_count_it_twice(
    cluster: Cluster,
) -> None:
    """The ingest acknowledgement's `stack_tasks` comes from the board the watchdog refreshes from the database;
    the request's own handler adds its dumps once committed. A refresh that lands between the commit and that add
    (fresh CI, under load: the agent told of 2 tasks for 1) must not count the same dump twice."""
    board, sessions = cluster.server.services.incidents.stacks, cluster.server.services.sessions
    add = board.add

    def refreshed_first(dumps):  # the watchdog's refresh, after the commit and before the handler's own add
        board.refresh(sessions)
        add(dumps)

    board.add = refreshed_first  # type: ignore[method-assign]
    made = cluster.admin.post(f"/api/v1/jobs/{cluster.job_id}/stacks", json={"wait_s": 30})
    assert made.status_code == 201, made.text
    assert cluster.ingest(cluster.a)["stack_tasks"] == 1
    (task,) = cluster.a.get("/api/v1/stacks/tasks").json()["tasks"]
    ok = cluster.a.post(f"/api/v1/stacks/tasks/{task['dump_id']}", content=_body(_stack(0, *WAITING), _stack(1, *BUSY)))
    assert ok.status_code == 204, ok.text
    assert "stack_tasks" not in cluster.ingest(cluster.a) or cluster.ingest(cluster.a)["stack_tasks"] == 0
