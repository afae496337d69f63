"""Recovery through the Slurm executor, end to end on a real single-node Slurm: `gpuwatch run` inside a
batch job reports a restartable failure, the server decides and requeues the job with `scontrol`, and
Slurm runs the batch script again, whose second run succeeds."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import httpx
import pytest

from gpuwatch.protocol import Heartbeat
from tests.helpers import free_port, migrated_sqlite, new_token, start_server, wait_until
from tests.slurm_cluster import SlurmCluster

# Fails the first time (a CUDA error: restartable), succeeds once the marker exists.
SCRIPT = (
    "import pathlib, sys; m = pathlib.Path(sys.argv[1])\n"
    "if m.exists(): print('second run: fine'); sys.exit(0)\n"
    "m.touch(); print('RuntimeError: CUDA error: an illegal memory access was encountered', file=sys.stderr)\n"
    "sys.exit(1)"
)


@pytest.mark.slurm
@pytest.mark.slow
def test_restartable_failure_in_a_slurm_job_is_requeued_by_the_server(slurm: SlurmCluster, tmp_path: Path) -> None:
    url = migrated_sqlite(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(tmp_path, port, tmp_path / "server.log", {"SLURM_CONF": slurm.conf})
    try:
        token = new_token(url, slurm.node)
        script = tmp_path / "fail_once.py"
        script.write_text(SCRIPT)
        run = [sys.executable, "-m", "gpuwatch", "run", "--job", "slurm-job", "--server", base, "--token", token]
        run += ["--node", slurm.node, "--data-dir", str(tmp_path / "sup"), "--"]
        run += [sys.executable, str(script), str(tmp_path / "marker")]
        job_id = slurm.sbatch(shlex.join(run))

        def runs() -> list[dict]:
            (job,) = httpx.get(f"{base}/api/v1/jobs", params={"name": "slurm-job"}).json()
            return sorted(httpx.get(f"{base}/api/v1/jobs/{job['id']}/runs").json(), key=lambda r: r["attempt"])

        try:
            wait_until(lambda: [r["state"] for r in runs()] == ["failed", "succeeded"], timeout=120, what="2 runs")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{slurm.describe(job_id)}") from None
        (incident,) = httpx.get(f"{base}/api/v1/incidents").json()
        assert (incident["diagnosis"]["reason"], incident["state"]) == ("cuda_error", "resolved")
        (restart,) = [a for a in incident["actions"] if a["kind"] == "restart"]
        assert (restart["executor"], restart["status"]) == ("slurm", "done"), restart
        assert f"scontrol requeue {job_id}" in restart["params"]["commands"]
        assert wait_until(lambda: slurm.job(job_id)["JobState"] == "COMPLETED", what="the job to complete")
        assert slurm.job(job_id)["Restarts"] == "1"
        (job,) = httpx.get(f"{base}/api/v1/jobs", params={"name": "slurm-job"}).json()
        assert job["scheduler"] == "slurm" and job["external_id"] == job_id
    finally:
        server.stop()


@pytest.mark.slurm
@pytest.mark.slow
def test_silent_node_fails_its_slurm_run_and_the_server_requeues_it_elsewhere(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    """The node's agent goes silent while a Slurm job runs there: `node_failure` → the node is drained and
    the job requeued with the node excluded (with one node in this cluster, it then waits: as it should)."""
    url = migrated_sqlite(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {"SLURM_CONF": slurm.conf, "GPUWATCH_NODE_TIMEOUT_S": "2", "GPUWATCH_HANG_CHECK_S": "0.25"}
    server = start_server(tmp_path, port, tmp_path / "server.log", env)
    try:
        token = new_token(url, slurm.node)
        run = [sys.executable, "-m", "gpuwatch", "run", "--job", "quiet-job", "--server", base, "--token", token]
        run += ["--node", slurm.node, "--data-dir", str(tmp_path / "sup"), "--", "sleep", "300"]
        job_id = slurm.sbatch(shlex.join(run))
        wait_until(lambda: httpx.get(f"{base}/api/v1/jobs", params={"name": "quiet-job"}).json(), what="the run")
        beat = Heartbeat(ts=time.time()).model_dump_json()
        auth = {"Authorization": f"Bearer {token}"}
        assert httpx.post(f"{base}/api/v1/nodes/heartbeat", content=beat, headers=auth).status_code == 204
        # ... and then nothing more from the node's agent.

        def restarted() -> dict | None:
            for incident in httpx.get(f"{base}/api/v1/incidents").json():
                done = [a for a in incident["actions"] if a["kind"] == "restart" and a["status"] != "pending"]
                if incident["run_id"] and done:
                    return incident
            return None

        incident = wait_until(restarted, timeout=60, what="the requeue of the silent node's run")
        assert (incident["trigger"], incident["diagnosis"]["reason"]) == ("node_silent", "node_failure")
        (restart,) = [a for a in incident["actions"] if a["kind"] == "restart"]
        assert restart["status"] == "done" and f"scontrol requeue {job_id}" in restart["params"]["commands"]
        # The node was excluded (and drained) once, by the node's own incident, which came first.
        incidents = httpx.get(f"{base}/api/v1/incidents").json()
        (drain,) = [a for i in incidents for a in i["actions"] if a["kind"] == "exclude_node"]
        assert (drain["status"], drain["executor"], drain["params"]["node"]) == ("done", "slurm", slurm.node), drain
        job = slurm.job(job_id)
        assert (job["Restarts"], job["ExcNodeList"]) == ("1", slurm.node)
        assert slurm.node_info()[1].startswith("gpuwatch:"), "drained by gpuwatch"
    finally:
        server.stop()
