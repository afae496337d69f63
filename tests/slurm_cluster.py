"""A real single-node Slurm cluster (munged, slurmctld, slurmd) in a temporary directory, for tests.

Everything lives under one directory in /tmp (not pytest's tmp_path: munged wants every directory
above its socket to be world-searchable, and pytest's base directory is 0700), on free ports, with
its own munge key, so it neither needs nor disturbs a Slurm or munge already on the machine. It needs
root (slurmd starts job steps as their users) and the Debian packages slurmctld, slurmd,
slurm-client and munge.

Two nodes are configured: ``node1``, served by the one slurmd, and ``ghost``, in state FUTURE: it never
runs anything, but Slurm accepts its name in ExcNodeList (an unknown name is "Invalid node name").
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers import REQUIRE_TOOLS_ENV, free_port, require_tool, wait_until

NODE = "node1"
GHOST = "ghost"

_CONF = """\
ClusterName=gpuwatchtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/run/munge.socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
KillWait=2
SlurmdDebug=debug
NodeName={node} NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=UNKNOWN
NodeName={ghost} NodeAddr=127.0.0.2 CPUs=2 RealMemory=1000 State=FUTURE
PartitionName=debug Nodes={node},{ghost} Default=YES MaxTime=INFINITE State=UP
"""


@dataclass(slots=True)
class SlurmCluster:
    root: Path
    env: dict[str, str]  # the test process's environment plus SLURM_CONF
    node: str = NODE
    ghost: str = GHOST
    _daemons: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)

    @property
    def conf(self) -> str:
        return self.env["SLURM_CONF"]

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A Slurm client command against this cluster."""
        proc = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"{argv} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc

    def sbatch(self, script: str, *options: str) -> str:
        """Submit ``script`` (a shell snippet) as a batch job; its id."""
        out = self.root / "jobs"
        return self.run(
            "sbatch", "--parsable", f"--chdir={out}", f"--output={out}/%j.out", *options, "--wrap", script
        ).stdout.strip()

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job -o` as a dict (good for the simple fields: JobState, Restarts, ExcNodeList)."""
        line = self.run("scontrol", "show", "job", "-o", job_id).stdout.strip()
        return dict(item.split("=", 1) for item in line.split() if "=" in item)

    def describe(self, job_id: str) -> str:
        """A job's state, reason and the tail of its output: what a test prints when the job did not do
        what it waited for."""
        job = self.run("scontrol", "show", "job", "-o", job_id, check=False).stdout.strip()
        out = self.root / "jobs" / f"{job_id}.out"
        tail = out.read_text(errors="replace")[-2000:] if out.exists() else "(no output file)"
        return f"job {job_id}: {job}\n-- output:\n{tail}\n-- node: {self.node_info()}\n{self._log_lines(job_id)}"

    def _log_lines(self, job_id: str, last: int = 20) -> str:
        """The daemons' last log lines about one job: why Slurm did what it did."""
        names = (f"JobId={job_id} ", f"JobId={job_id}:", f"job {job_id}", f"jobid {job_id}", f"JOB {job_id} ")
        out = []
        for daemon in ("slurmctld", "slurmd"):
            path = self.root / "log" / f"{daemon}.log"
            lines = path.read_text(errors="replace").splitlines() if path.exists() else []
            about = [line for line in lines if any(name in line + " " for name in names)]
            out.append(f"-- {daemon}.log about job {job_id}:\n" + "\n".join(about[-last:]))
        return "\n".join(out)

    def node_info(self, name: str = NODE) -> tuple[str, str]:
        """(state, reason) as sinfo tells them, e.g. ("drained", "gpuwatch: xid 79")."""
        line = self.run("sinfo", "--noheader", "--Node", f"--nodes={name}", "--format=%T|%E").stdout.strip()
        state, _, reason = line.partition("|")
        return state, reason

    def reset(self) -> None:
        """Cancel every job and resume the node, so that each test starts on an idle cluster."""
        self.run("scancel", "--quiet", "--user=root", check=False)
        wait_until(lambda: not self.run("squeue", "--noheader").stdout.strip(), timeout=30, what="jobs to end")
        # A node resumed while a cancelled job's kill is still in flight can stay "mixed" with nothing on
        # it: let the controller see the node free first.
        wait_until(lambda: " CPUAlloc=0 " in self._node_text(), timeout=30, what=f"{self.node} to be free")
        if self.node_info()[0] != "idle":
            self.run("scontrol", "update", f"NodeName={self.node}", "State=RESUME", check=False)
            wait_until(lambda: self.node_info()[0] == "idle", timeout=30, what=f"{self.node} to be idle")

    def _node_text(self) -> str:
        return " " + " ".join(self.run("scontrol", "show", "node", self.node).stdout.split()) + " "

    def _start(self, argv: list[str], name: str) -> None:
        log = open(self.root / "log" / f"{name}.out", "ab")  # noqa: SIM115 - the daemon writes it until stop()
        popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        log.close()
        self._daemons.append((name, popen))

    def _check_daemons(self) -> None:
        for name, popen in self._daemons:
            if popen.poll() is not None:
                raise AssertionError(f"{name} exited with {popen.returncode}:\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"== {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in (self.root / "log").iterdir())

    def stop(self) -> None:
        """Stop the daemons newest first (slurmd, slurmctld, munged), each by its own process id."""
        for _name, popen in reversed(self._daemons):
            if popen.poll() is None:
                popen.send_signal(signal.SIGTERM)
                try:
                    popen.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    popen.kill()
                    popen.wait()
        self._daemons.clear()


@contextmanager
def slurm_cluster() -> Iterator[SlurmCluster]:
    """Start the cluster; yield it once its node is idle; cancel its jobs and stop it afterwards."""
    tools = {name: require_tool(name) for name in ("munged", "slurmctld", "slurmd", "scontrol", "sbatch", "sinfo")}
    if os.geteuid() != 0:
        reason = "a real Slurm cluster needs root (slurmd starts job steps as their users)"
        if os.environ.get(REQUIRE_TOOLS_ENV) == "1":
            pytest.fail(f"{reason} [{REQUIRE_TOOLS_ENV}=1]", pytrace=False)
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="gpuwatch-slurm-"))
    root.chmod(0o755)
    for sub in ("munge", "state", "spool", "log", "jobs"):
        (root / sub).mkdir(mode=0o700)
    (root / "run").mkdir(mode=0o755)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(128))
    key.chmod(0o600)
    conf = root / "slurm.conf"
    conf.write_text(
        _CONF.format(
            host=socket.gethostname().split(".")[0],
            ctld_port=free_port(),
            slurmd_port=free_port(),
            root=root,
            node=NODE,
            ghost=GHOST,
        )
    )
    cluster = SlurmCluster(root, {**os.environ, "SLURM_CONF": str(conf)})
    try:
        cluster._start(
            [
                tools["munged"],
                "--foreground",
                f"--socket={root}/run/munge.socket",
                f"--key-file={key}",
                f"--pid-file={root}/munge/munged.pid",
                f"--seed-file={root}/munge/munged.seed",
                f"--log-file={root}/log/munged.log",
            ],
            "munged",
        )
        wait_until(lambda: cluster._check_daemons() or (root / "run" / "munge.socket").exists(), what="munged")
        cluster._start([tools["slurmctld"], "-D", "-f", str(conf)], "slurmctld")
        cluster._start([tools["slurmd"], "-D", "-f", str(conf), "-N", NODE], "slurmd")

        def idle() -> bool:
            cluster._check_daemons()
            return cluster.node_info()[0] == "idle"

        wait_until(idle, timeout=30, what=f"Slurm node {NODE} to be idle")
        yield cluster
        cluster.reset()
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
