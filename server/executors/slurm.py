"""Recovery on Slurm through its command-line tools: requeue a job away from bad nodes, drain a node.

Only `scontrol` and `squeue` are used, so this works on any cluster, with or without accounting
(no `sacct`) and without slurmrestd. Each command has a timeout; the environment, SLURM_CONF
included, is passed on as it is unless ``slurm_conf`` names another file.

Two Slurm behaviours shape `restart` (seen on Slurm 22.05):
- ExcNodeList cannot change while the job runs ("Job is no longer pending execution"), so the job is
  requeued first and its exclusions changed after (allowed while it is still COMPLETING).
- A requeued job becomes eligible only ~2 minutes later, and `StartTime=now` given while the job is
  still COMPLETING is overwritten when the requeue completes; so the executor waits for PENDING first.
- slurmd refuses a launch whose credential is no newer, in whole seconds, than the kill of the job's
  previous run ("Job credential revoked"), and slurmctld then ends the job FAILED instead of running
  it. Slurm's delay avoids that; the executor gives `StartTime=now` only once the requeue's second has
  passed. (`StartTime=now+1` would be just as safe, but nothing wakes the scheduler when that second
  comes: the job then waits for its next periodic pass, up to half a minute.)
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

from server.executors.base import UNKNOWN, ActionResult, JobTarget, render

REASON_PREFIX = "gpuwatch:"  # how gpuwatch's drains are told apart from an administrator's
MAX_REASON = 200
_JOB_ID = re.compile(r"\d+(?:_\d+)?")  # a job, or one task of an array job
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # one node name, no hostlist expressions
_SETTLING = {"COMPLETING", "REQUEUED", "REQUEUE_FED"}  # on the way from a requeue to PENDING
_CLOCK_MARGIN_S = 0.05  # for the skew between this host's clock and slurmctld's


@dataclass(frozen=True, slots=True)
class _Output:
    ok: bool
    out: str
    error: str


class SlurmExecutor:
    """Restarts Slurm jobs with `scontrol requeue` and keeps nodes out with `State=DRAIN`."""

    name = "slurm"

    def __init__(
        self,
        *,
        scontrol: str = "scontrol",
        squeue: str = "squeue",
        slurm_conf: str | None = None,
        timeout_s: float = 15.0,
        settle_timeout_s: float = 30.0,
        poll_interval_s: float = 0.2,
    ) -> None:
        """``scontrol``/``squeue`` are looked up on PATH unless given as paths; ``settle_timeout_s`` bounds
        the wait for a requeued job to finish COMPLETING (its processes being killed)."""
        self.scontrol, self.squeue = scontrol, squeue
        self.slurm_conf = slurm_conf
        self.timeout_s = timeout_s
        self.settle_timeout_s = settle_timeout_s
        self.poll_interval_s = poll_interval_s

    # -- the Executor interface -------------------------------------------------------------------

    def restart(self, target: JobTarget, *, exclude_nodes: Sequence[str], reason: str) -> ActionResult:
        log: list[str] = []
        job = target.ref or ""
        if not _JOB_ID.fullmatch(job):
            return ActionResult(False, f"not a Slurm job id: {target.ref!r}")
        if bad := [n for n in exclude_nodes if not _NODE.fullmatch(n)]:
            return ActionResult(False, f"not Slurm node names: {bad}")
        got = self._job(job, log)
        if isinstance(got, _Output):
            return ActionResult(False, f"job {job}: {got.error}", tuple(log))
        state, excluded = got
        done: list[str] = []
        requeued = state != "PENDING"  # a pending job has nothing to requeue ("Job is pending execution")
        if requeued:
            run = self._run(self.scontrol, ["requeue", job], log)
            requeued_at = time.time()  # the previous run's kill is no later than this
            if not run.ok:
                return ActionResult(False, f"requeue of job {job} ({state}) failed: {run.error}", tuple(log))
            done.append(f"requeued (was {state})")
        current = _hostlist_items(excluded)
        new = [n for n in dict.fromkeys(exclude_nodes) if n not in current]
        if new:
            merged = ",".join([*current, *new])
            run = self._run(self.scontrol, ["update", f"JobId={job}", f"ExcNodeList={merged}"], log)
            if not run.ok:
                # StartTime stays where the requeue put it: ~2 minutes for someone to look before it runs again
                done.append(f"excluding {','.join(new)} failed: {run.error}")
                return ActionResult(False, f"job {job}: " + "; ".join(done), tuple(log))
            done.append(f"ExcNodeList={merged}")
        if requeued:
            settled = self._settle(job, log)
            if isinstance(settled, _Output):
                done.append(f"state after the requeue unknown: {settled.error}")
                return ActionResult(False, f"job {job}: " + "; ".join(done), tuple(log))
            if settled == "PENDING":
                time.sleep(max(0.0, int(requeued_at) + 1 + _CLOCK_MARGIN_S - time.time()))
                run = self._run(self.scontrol, ["update", f"JobId={job}", "StartTime=now"], log)
                if not run.ok:
                    done.append(f"StartTime=now failed ({run.error}): it starts ~2 minutes after the requeue")
                    return ActionResult(False, f"job {job}: " + "; ".join(done), tuple(log))
                done.append("eligible now")
            elif settled in _SETTLING:
                done.append(f"still {settled} after {self.settle_timeout_s:g}s: it starts after Slurm's requeue delay")
            else:
                done.append(f"{settled} after the requeue")
        return ActionResult(True, f"job {job}: " + "; ".join(done or ["pending already, nothing to do"]), tuple(log))

    def exclude_node(self, node: str, *, reason: str) -> ActionResult:
        log: list[str] = []
        if not _NODE.fullmatch(node):
            return ActionResult(False, f"not a Slurm node name: {node!r}")
        got = self._node(node, log)
        if isinstance(got, _Output):
            return ActionResult(False, f"node {node}: {got.error}", tuple(log))
        state, current = got
        if _drained(state) and not current.startswith(REASON_PREFIX):
            return ActionResult(
                True, f"node {node} already {state} by someone else ({current}): left as it is", tuple(log)
            )
        text = f"{REASON_PREFIX} {' '.join(reason.split())}"
        run = self._run(
            self.scontrol, ["update", f"NodeName={node}", "State=DRAIN", f"Reason={text[:MAX_REASON]}"], log
        )
        if not run.ok:
            return ActionResult(False, f"drain of node {node} failed: {run.error}", tuple(log))
        return ActionResult(True, f"node {node} draining: {text[:MAX_REASON]}", tuple(log))

    def release_node(self, node: str) -> ActionResult:
        log: list[str] = []
        if not _NODE.fullmatch(node):
            return ActionResult(False, f"not a Slurm node name: {node!r}")
        got = self._node(node, log)
        if isinstance(got, _Output):
            return ActionResult(False, f"node {node}: {got.error}", tuple(log))
        state, current = got
        if not _drained(state):
            return ActionResult(True, f"node {node} is {state}, not drained: nothing to resume", tuple(log))
        if not current.startswith(REASON_PREFIX):
            return ActionResult(True, f"node {node} drained by someone else ({current}): left drained", tuple(log))
        run = self._run(self.scontrol, ["update", f"NodeName={node}", "State=RESUME"], log)
        if not run.ok:
            return ActionResult(False, f"resume of node {node} failed: {run.error}", tuple(log))
        return ActionResult(True, f"node {node} resumed (was {state}: {current})", tuple(log))

    def job_state(self, target: JobTarget) -> str:
        if not _JOB_ID.fullmatch(target.ref or ""):
            return UNKNOWN
        got = self._job(target.ref or "", [])
        return UNKNOWN if isinstance(got, _Output) else got[0]

    def job_nodes(self, target: JobTarget) -> set[str] | None:
        if not _JOB_ID.fullmatch(target.ref or ""):
            return None
        log: list[str] = []
        run = self._run(self.squeue, ["--noheader", "--states=all", f"--jobs={target.ref}", "--format=%i|%N"], log)
        if not run.ok:
            return None
        for line in run.out.splitlines():
            job_id, _, hostlist = line.strip().partition("|")
            if job_id != target.ref:
                continue
            if not _hostlist_items(hostlist):
                return set()
            hosts = self._run(self.scontrol, ["show", "hostnames", hostlist.strip()], log)  # expands n[1-3]
            return set(hosts.out.split()) if hosts.ok else None
        return None

    # -- commands ---------------------------------------------------------------------------------

    def _run(self, binary: str, args: list[str], log: list[str]) -> _Output:
        argv = [binary, *args]
        line = render(argv)
        if not log or log[-1] != line:  # a poll repeated is audited once
            log.append(line)
        env = None if self.slurm_conf is None else {**os.environ, "SLURM_CONF": self.slurm_conf}
        try:
            # its own process group, so that a timeout also ends whatever a wrapper script started
            proc = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
            )
        except FileNotFoundError:
            return _Output(False, "", f"{binary}: command not found")
        except OSError as exc:
            return _Output(False, "", f"{binary}: {exc}")
        try:
            out, err = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return _Output(False, "", f"`{line}` timed out after {self.timeout_s:g}s")
        if proc.returncode != 0:
            message = " ".join((err.strip() or out.strip()).split()) or "no output"
            return _Output(False, out, f"{message} (exit {proc.returncode})")
        return _Output(True, out, "")

    def _job(self, job: str, log: list[str]) -> tuple[str, str] | _Output:
        """(state, ExcNodeList) of a job still known to slurmctld (finished ones stay MinJobAge, 300 s).

        `squeue -o` rather than `scontrol show job -o`: its fields cannot be confused by a job name
        with spaces or "Key=" in it, and the format has not changed across Slurm versions."""
        run = self._run(self.squeue, ["--noheader", "--states=all", f"--jobs={job}", "--format=%i|%T|%x"], log)
        if not run.ok:
            return run
        for line in run.out.splitlines():
            job_id, _, rest = line.strip().partition("|")
            if job_id == job:
                state, _, excluded = rest.partition("|")
                return state, excluded
        return _Output(False, run.out, "Invalid job id specified (not in squeue)")

    def _settle(self, job: str, log: list[str]) -> str | _Output:
        """The job's state once the requeue has finished, or its state when ``settle_timeout_s`` ran out."""
        deadline = time.monotonic() + self.settle_timeout_s
        while True:
            got = self._job(job, log)
            if isinstance(got, _Output):
                return got
            if got[0] not in _SETTLING or time.monotonic() >= deadline:
                return got[0]
            time.sleep(self.poll_interval_s)

    def _node(self, node: str, log: list[str]) -> tuple[str, str] | _Output:
        """(State, Reason) of a node; Reason has its "[user@time]" suffix removed, "" when none."""
        run = self._run(self.scontrol, ["show", "node", node], log)
        if not run.ok:
            return run
        state = re.search(r"(?:^|\s)State=(\S+)", run.out)
        reason = re.search(r"^\s*Reason=(.*?)(?:\s+\[[^\]]*\])?\s*$", run.out, re.MULTILINE)
        if state is None:
            return _Output(False, run.out, f"no State in `scontrol show node {node}`")
        return state.group(1), reason.group(1) if reason else ""


def _drained(state: str) -> bool:
    """True for IDLE+DRAIN, MIXED+DRAIN, DOWN+DRAIN and the like (DRAIN is a flag on the base state)."""
    return any(part.startswith("DRAIN") for part in state.split("+"))


def _hostlist_items(hostlist: str) -> list[str]:
    """The comma-separated items of a Slurm hostlist, commas inside brackets kept ("n[1,3],m" → 2 items)."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(hostlist):
        depth += char == "["
        depth -= char == "]"
        if char == "," and depth == 0:
            items.append(hostlist[start:i])
            start = i + 1
    items.append(hostlist[start:])
    return [item for item in (i.strip() for i in items) if item and item != "(null)"]
