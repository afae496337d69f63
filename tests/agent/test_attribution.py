"""Attribution of GPU samples to jobs and ranks: through the agent's local API with the simulated
collector's processes, and by reading /proc/<pid>/environ of processes the agent finds on GPUs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import pytest

from agent.attribution import JobDirectory
from gpuwatch.protocol import ClientReport, GpuProcess, GpuSample, JobProcess
from tests.helpers import Proc, free_port, migrated_sqlite, new_token, start_server, wait_until


def _environ(root: Path, pid: int, env: dict[str, str]) -> None:
    (root / str(pid)).mkdir(parents=True)
    (root / str(pid) / "environ").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))


def test_job_is_discovered_from_the_process_environment(tmp_path: Path) -> None:
    _environ(
        tmp_path,
        4242,
        {"SLURM_JOB_ID": "981", "SLURM_PROCID": "3", "SLURM_LOCALID": "1", "SLURM_NTASKS": "8", "PATH": "/usr/bin"},
    )
    _environ(tmp_path, 4343, {"PATH": "/usr/bin", "HOME": "/root"})  # a process of no job
    jobs = JobDirectory("node-a", proc_root=tmp_path)
    samples = [
        GpuSample(ts=1.0, gpu=0, uuid="GPU-0", util_gpu=90.0, processes=[GpuProcess(pid=4242)]),
        GpuSample(ts=1.0, gpu=1, uuid="GPU-1", util_gpu=0.0, processes=[GpuProcess(pid=4343)]),
        GpuSample(ts=1.0, gpu=2, uuid="GPU-2", util_gpu=0.0, processes=[]),
    ]
    out = jobs.attribute(samples, period_s=1.0)
    assert [(s.job, s.rank, s.period_s) for s in out] == [("slurm-981", 3, 1.0), (None, None, 1.0), (None, None, 1.0)]
    [found] = jobs.take_new()
    assert (found.scheduler, found.external_id, found.world_size, found.pid) == ("slurm", "981", 8, 4242)
    assert jobs.take_new() == [], "a process is shipped once"
    (tmp_path / "4242" / "environ").unlink()
    (tmp_path / "4242").rmdir()
    jobs.prune(on_gpus={4343})
    assert jobs.attribute(samples[:1], 1.0)[0].job is None, "an exited PID no GPU reports is forgotten"


def test_registered_process_wins_over_its_environment(tmp_path: Path) -> None:
    _environ(tmp_path, 77, {"SLURM_JOB_ID": "5"})
    jobs = JobDirectory("node-a", proc_root=tmp_path)
    jobs.register(JobProcess(job="named", pid=77, rank=2))
    s = jobs.attribute([GpuSample(ts=1.0, gpu=0, uuid="GPU-0", processes=[GpuProcess(pid=77)])], 1.0)[0]
    assert (s.job, s.rank) == ("named", 2)


@pytest.mark.slow
def test_simulated_gpu_samples_are_attributed_and_free_gpus_counted_idle_capacity(tmp_path: Path) -> None:
    url = migrated_sqlite(tmp_path)
    port, client_port = free_port(), free_port()
    server = start_server(tmp_path, port, tmp_path / "server.log", {"GPUWATCH_ROLLUP_FLUSH_S": "0"})
    agent = Proc(
        [
            "agent",
            "--server",
            f"http://127.0.0.1:{port}",
            "--token",
            new_token(url, "n1"),
            "--node",
            "n1",
            "--simulate",
            "4",
            "--client-port",
            str(client_port),
            "--interval",
            "0.25",
            "--flush",
            "0.25",
            "--data-dir",
            str(tmp_path),
        ],
        tmp_path / "agent.log",
    )
    try:
        local = f"http://127.0.0.1:{client_port}"
        wait_until(lambda: httpx.get(f"{local}/v1/health").status_code == 200, what="the agent's local API")
        # Simulated GPU i runs process 10000 + i; ranks 0 and 1 of "attr-job" are those of GPUs 1 and 2.
        for rank, pid in ((0, 10001), (1, 10002)):
            report = ClientReport(process=JobProcess(job="attr-job", pid=pid, rank=rank, world_size=2))
            assert httpx.post(f"{local}/v1/report", content=report.model_dump_json()).status_code == 204
        bad = httpx.post(f"{local}/v1/report", content=b'{"process": {"job": "x"}}')
        assert bad.status_code == 422 and "pid" in bad.text

        def attributed() -> list[dict] | None:
            gpus = httpx.get(f"http://127.0.0.1:{port}/api/v1/gpus").json()
            ok = len(gpus) == 4 and all(g["sample"] for g in gpus) and gpus[1]["sample"].get("job") == "attr-job"
            return gpus if ok else None

        wait_until(attributed, what="attributed samples")
        before = _batches_with_samples(tmp_path)
        wait_until(lambda: _batches_with_samples(tmp_path) >= before + 8, what="8 more batches of samples")
        with sqlite3.connect(tmp_path / "gpuwatch.db") as db:
            per_gpu = dict(
                (index, (seconds, free))
                for index, seconds, free in db.execute(
                    'SELECT g."index", sum(r.gpu_seconds), sum(r.unallocated_seconds) FROM gpu_rollups r '
                    'JOIN gpus g ON g.id = r.gpu_id GROUP BY g."index"'
                )
            )
            per_rank = dict(db.execute("SELECT rank, sum(gpu_seconds) FROM job_rollups GROUP BY rank"))
            ranks = db.execute(
                "SELECT jr.rank, jr.pid FROM job_ranks jr JOIN jobs j ON j.id = jr.job_id WHERE j.name = 'attr-job'"
            ).fetchall()
        assert sorted(ranks) == [(0, 10001), (1, 10002)]
        # GPUs 0 and 3 never had a job: all their time is unallocated (idle capacity).
        for free_gpu in (0, 3):
            assert per_gpu[free_gpu][1] == pytest.approx(per_gpu[free_gpu][0])
        # Every allocated second of GPUs 1 and 2 went to the right rank, and only there.
        assert set(per_rank) == {0, 1}
        assert per_rank[0] == pytest.approx(per_gpu[1][0] - per_gpu[1][1])
        assert per_rank[1] == pytest.approx(per_gpu[2][0] - per_gpu[2][1])
        assert per_rank[0] > 0 and per_rank[1] > 0
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        assert 'gpuwatch_gpus_unallocated{instance="n1",node="n1"} 2.0' in metrics
        gpus = httpx.get(f"http://127.0.0.1:{port}/api/v1/gpus").json()
        assert [(g["sample"].get("job"), g["sample"].get("rank")) for g in gpus] == [
            (None, None),
            ("attr-job", 0),
            ("attr-job", 1),
            (None, None),
        ]
    finally:
        agent.stop()
        server.stop()


def _batches_with_samples(tmp: Path) -> int:
    with sqlite3.connect(tmp / "gpuwatch.db") as db:
        return db.execute("SELECT count(*) FROM ingest_batches WHERE samples > 0").fetchone()[0]
