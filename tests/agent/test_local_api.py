"""The agent's loopback port takes a job's reports only from the user who runs it (docs/security.md):
real processes of real users, over a real loopback connection; the agent learns who is calling from
/proc/net/tcp."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from agent.local_api import LocalApi, peer_uid
from gpuwatch.protocol import ClientReport, JobProcess

POST = """
import os, sys, urllib.error, urllib.request
body = sys.argv[2].replace("__PID__", str(os.getpid())).encode()
request = urllib.request.Request(sys.argv[1], data=body, headers={"Content-Type": "application/json"})
try:
    print(urllib.request.urlopen(request, timeout=10).status)
except urllib.error.HTTPError as exc:
    print(exc.code, exc.read().decode())
"""


# Another user cannot run this test's interpreter (under /root): the system's, with the stdlib only.
SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.fixture
def api() -> Iterator[tuple[LocalApi, list[ClientReport]]]:
    if os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"needs root, to run reports as other users, and {SYSTEM_PYTHON}")
    received: list[ClientReport] = []
    local = LocalApi(received.append, port=0).start()
    yield local, received
    local.close()


def _report(api: LocalApi, job: str, uid: int, pid: str = "__PID__") -> str:
    """POST a report for ``job`` from a process of ``uid``; its status (and detail)."""
    process = JobProcess(job=job, pid=1, rank=0, hang_timeout_s=0.1).model_dump()
    body = ClientReport(process=JobProcess(**process)).model_dump_json().replace('"pid":1', f'"pid":{pid}')
    url = f"http://127.0.0.1:{api.port}/v1/report"
    out = subprocess.run(
        [SYSTEM_PYTHON, "-c", POST, url, body],
        user=uid,
        capture_output=True,
        text=True,
        timeout=30,
        cwd="/",
        env={"PATH": os.environ.get("PATH", "")},
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_job_takes_reports_only_from_the_user_who_runs_it(api: tuple[LocalApi, list[ClientReport]]) -> None:
    local, received = api
    assert _report(local, "train", uid=65534) == "204"  # nobody's job now
    refused = _report(local, "train", uid=65533)
    assert refused.startswith("403") and "another user's" in refused
    claims_root = _report(local, "other", uid=65533, pid=str(os.getpid()))  # names a process not its own
    assert claims_root.startswith("403") and "not the reporting user's" in claims_root
    assert _report(local, "train", uid=0) == "204"  # root may report for any job
    assert [r.process.job for r in received] == ["train", "train"]


def test_the_peer_of_a_loopback_connection_is_found_in_proc(api: tuple[LocalApi, list[ClientReport]]) -> None:
    import socket

    local, _ = api
    with socket.create_connection(("127.0.0.1", local.port)) as sock:
        assert peer_uid(sock.getsockname()[1], local.port) == os.geteuid()
    assert peer_uid(1, local.port) is None
