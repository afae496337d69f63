"""A failed run's lines that reach the server after its exit are still its evidence: the exit counts
each stream's lines and the diagnosis waits for them (a persisted `due_at`, resumed by a restarted
server) up to `incident_lines_wait_s`, then says which never came. A count can only make the server wait
for the reporting node's own streams that the exit names, never for anyone else's."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from gpuwatch.config import Settings
from server.store.models import Incident
from tests.helpers import InProcessServer, free_port, migrated_sqlite, new_token, start_server, stored_one, wait_until

STREAM = "run/train-1/stderr"
TRACEBACK = ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>', "KeyError: 'labels'"]
WAIT_S = 2.0


def _lines(first: int, texts: list[str]) -> list[dict]:
    return [{"stream": STREAM, "seq": first + i, "ts": time.time(), "text": t} for i, t in enumerate(texts)]


def _incident(url: str) -> Incident:
    return stored_one(url, select(Incident))


def _diagnosis(api: httpx.Client, incident_id: int) -> dict:
    return wait_until(
        lambda: api.get(f"/api/v1/incidents/{incident_id}").json()["diagnosis"], what="the diagnosis", timeout=30
    )


@pytest.fixture
def node(settings: Settings) -> Iterator[tuple[InProcessServer, httpx.Client]]:
    fast = settings.replace(incident_settle_s=0.05, incident_lines_wait_s=WAIT_S, hang_check_s=3600)
    token = new_token(fast.effective_database_url, "n1")
    with (
        InProcessServer(fast) as srv,
        httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as api,
    ):
        yield srv, api


def _exit(api: httpx.Client, counts: dict[str, int], first: list[str]) -> tuple[int, int]:
    """A run that logged ``first`` (stored before the exit) and exits 1 counting ``counts``: (run, incident)."""
    run = api.post("/api/v1/runs", json={"job": "train", "key": "train-1"}).json()["id"]
    if first:
        assert api.post("/api/v1/ingest", json={"batch_id": 0, "logs": _lines(0, first)}).is_success
    ended = api.post(f"/api/v1/runs/{run}/exit", json={"exit_code": 1, "streams": [STREAM], "lines": counts})
    assert ended.status_code == 202, ended.text
    return run, ended.json()["incident_id"]


def test_lines_stored_after_the_exit_are_waited_for(node: tuple) -> None:
    _, api = node
    _, incident_id = _exit(api, {STREAM: 4}, ["step 7 loss 2.1"])
    late = threading.Timer(  # half a second after the exit, as a slow shipper would
        0.5, lambda: api.post("/api/v1/ingest", json={"batch_id": 1, "logs": _lines(1, TRACEBACK)})
    )
    late.start()
    d = _diagnosis(api, incident_id)
    late.join()
    assert d["reason"] == "script_error", d
    assert "not arrived" not in (d["explanation"] or "")


def test_lines_that_never_come_are_named_after_the_wait(node: tuple) -> None:
    _, api = node
    exited = time.monotonic()
    _, incident_id = _exit(api, {STREAM: 3}, ["step 7 loss 2.1"])
    d = _diagnosis(api, incident_id)
    assert time.monotonic() - exited >= WAIT_S, "diagnosed before the wait for the missing lines ended"
    assert f"{STREAM} (2 lines)" in d["explanation"], d["explanation"]


@pytest.mark.parametrize(
    "counts",
    [
        {"run/someone-elses/stdout": 10**9},  # a stream the exit does not name: not the run's
        {STREAM: 1},  # what is stored already
        {STREAM: 0},
        {},
    ],
)
def test_a_count_waits_only_for_the_exits_own_streams_still_missing(node: tuple, counts: dict[str, int]) -> None:
    srv, api = node
    exited = time.monotonic()
    _, incident_id = _exit(api, counts, [TRACEBACK[-1]])
    d = _diagnosis(api, incident_id)
    assert time.monotonic() - exited < WAIT_S, "waited for lines it had, or that were not the run's"
    assert d["reason"] == "script_error"
    assert _incident(srv.services.settings.effective_database_url).inputs.get("lines", {}).get("missing") in (None, {})


def test_a_count_out_of_bounds_is_refused(node: tuple) -> None:
    _, api = node
    run = api.post("/api/v1/runs", json={"job": "train", "key": "train-1"}).json()["id"]
    for bad in ({STREAM: -1}, {STREAM: "many"}, {"x" * 300: 1}, {f"s{i}": 1 for i in range(1025)}):
        got = api.post(f"/api/v1/runs/{run}/exit", json={"exit_code": 1, "streams": [STREAM], "lines": bad})
        assert got.status_code == 422, (bad if len(bad) < 3 else len(bad), got.text)
    assert api.get(f"/api/v1/runs/{run}").json()["state"] == "running"  # nothing recorded


@pytest.mark.slow
def test_a_server_killed_during_the_wait_resumes_it_after_a_restart(tmp_path: Path) -> None:
    url = migrated_sqlite(tmp_path)
    port = free_port()
    token = new_token(url, "n1")
    env = {
        "GPUWATCH_INCIDENT_SETTLE_S": "0.05",
        "GPUWATCH_INCIDENT_LINES_WAIT_S": "30",
        "GPUWATCH_INCIDENT_RESUME_AFTER_S": "0.5",
        "GPUWATCH_HANG_CHECK_S": "0.2",
    }
    api = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    server = start_server(tmp_path, port, tmp_path / "server.log", env)
    try:
        _, incident_id = _exit(api, {STREAM: 4}, ["step 7 loss 2.1"])
        wait_until(lambda: _incident(url).inputs["lines"].get("until"), what="the wait for the lines")
    finally:
        server.stop(signal.SIGKILL)  # within the wait: its timer dies with it
    assert (_incident(url).state, _incident(url).due_at is not None) == ("open", True)
    server = start_server(tmp_path, port, tmp_path / "server2.log", env)
    try:
        assert api.post("/api/v1/ingest", json={"batch_id": 1, "logs": _lines(1, TRACEBACK)}).is_success
        d = _diagnosis(api, incident_id)
    finally:
        server.stop()
        api.close()
    assert d["reason"] == "script_error", d
    assert _incident(url).inputs["lines"]["missing"] == {}
