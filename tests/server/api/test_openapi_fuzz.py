"""Schemathesis from the server's own OpenAPI spec against every endpoint, request bodies included (they
are declared: `server.api.body.json_body`), with a node's token and with an admin's: never a 5xx, and no
read answers 5xx after what the fuzzer stored (issue 21, acceptance 2).

tests/server/api/test_fuzz.py starts from hand-written shapes of the payloads; this starts from the spec,
so an endpoint added later is fuzzed without anyone writing a strategy for it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, Event, LogLine
from tests.helpers import InProcessServer, migrated_sqlite, new_admin_token, new_token

pytestmark = pytest.mark.slow

NODE = "fuzz-node"
EXAMPLES = 12  # per operation: about 400 requests in all, well under a minute on a small machine
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessServer, dict[str, dict[str, str]]]]:
    tmp: Path = tmp_path_factory.mktemp("openapi-fuzz")
    url = migrated_sqlite(tmp)
    config = Settings(
        data_dir=tmp,
        database_url=url,
        max_body_bytes=256 * 1024,
        rate_limit_per_s=0,
        incident_settle_s=0,
        hang_check_s=3600,
        read_auth=True,  # the reads' token checks are fuzzed too
    )
    with InProcessServer(config) as srv:
        tokens = {
            "node": {"Authorization": f"Bearer {new_token(url, NODE)}"},
            "admin": {"Authorization": f"Bearer {new_admin_token(url, 'fuzzer')}"},
        }
        yield srv, tokens


def _operations(srv: InProcessServer) -> list[Any]:
    schema = schemathesis.openapi.from_url(f"{srv.url}/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


def _no_5xx(resp: Any, what: str) -> None:
    assert resp.status_code < 500, f"{what}: {resp.status_code} {resp.text[:500]}"


def test_every_operation_with_either_token_never_answers_5xx(
    server: tuple[InProcessServer, dict[str, dict[str, str]]],
) -> None:
    srv, tokens = server
    # Something real to read and to fuzz around: a stored batch with an Xid event, and a run.
    now = time.time()
    seed = Batch(
        batch_id=1,
        logs=[LogLine(stream="file:/t.log", seq=1, ts=now, text="hello")],
        events=[Event(stream="kmsg", seq=1, ts=now, kind="xid", gpu=0, data={"xid": 79})],
    )
    with httpx.Client(base_url=srv.url, headers=tokens["node"], timeout=30) as node:
        assert node.post("/api/v1/ingest", content=seed.model_dump_json()).status_code == 200
        assert node.post("/api/v1/runs", json={"job": "fuzz-job"}).status_code == 201
    operations = _operations(srv)
    paths = {(op.method.upper(), op.path) for op in operations}
    for wanted in (("POST", "/api/v1/ingest"), ("POST", "/api/v1/runs"), ("POST", "/api/v1/exclusions")):
        assert wanted in paths, wanted
    for op in operations:
        assert op.method.upper() in ("GET", "HEAD", "DELETE") or op.body, f"{op.method} {op.path} declares no body"
        _fuzz(op, srv, tokens, ["node", "admin"], EXAMPLES)

    # Whatever the fuzzer stored, every read still answers: the lists, the post-mortems and their plots.
    with httpx.Client(base_url=srv.url, headers=tokens["admin"], timeout=60) as admin:
        reads = ["/api/v1/nodes", "/api/v1/gpus", "/api/v1/jobs", "/api/v1/incidents", "/api/v1/events"]
        reads += [f"/api/v1/logs?node={NODE}", "/api/v1/recovery", "/api/v1/audit", "/metrics"]
        reads += ["/api/v1/reports/period?format=json", "/api/v1/reports/period?format=html"]
        for incident in admin.get("/api/v1/incidents").json():
            reads += [f"/api/v1/incidents/{incident['id']}/report?format={f}" for f in ("md", "html")]
            reads.append(f"/api/v1/incidents/{incident['id']}/plots/0.png")
        for job in admin.get("/api/v1/jobs").json():
            reads += [f"/api/v1/jobs/{job['id']}{tail}" for tail in ("", "/runs", "/checkpoints", "/utilization")]
        for path in reads:
            _no_5xx(admin.get(path), path)
    for op in operations:  # and every GET once more, generated, over what is stored now
        if op.method.upper() == "GET":
            _fuzz(op, srv, tokens, ["admin"], 4)


def _fuzz(op: Any, srv: InProcessServer, tokens: dict[str, dict[str, str]], who: list[str], examples: int) -> None:
    @settings(FUZZ, max_examples=examples)
    @given(case=op.as_strategy(), who=st.sampled_from(who))
    def fuzz(case: Any, who: str) -> None:
        resp = case.call(base_url=srv.url, headers=tokens[who], timeout=30)
        _no_5xx(resp, f"{op.method.upper()} {op.path} as {who}: {case.body!r:.300}")

    fuzz()
