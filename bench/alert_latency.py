"""Time from an event to its alert in a real Alertmanager (issue 25, acceptance 3): a fatal Xid and a
failed run, N injections each, the server posting to Alertmanager itself (server/notify/alertmanager.py).

All real processes on loopback: Alertmanager, a `gpuwatch server` (SQLite, default settings but
`notify_alertmanager_url`), a simulated agent with its default sampling and flush intervals (1 s, 2 s),
and a `gpuwatch run` supervisor. The clock each latency is measured on:

- fatal Xid: from the Xid's agent-side timestamp (when the agent read it; the alert's startsAt, which is
  the stored event's time) to the first poll (every 20 ms) of ``GET /api/v2/alerts`` that lists it. Each
  injection is a fresh (GPU, code) pair, so each is a new alert;
- failed run: from the process's exit (the command writes time.time() just before exit 1) to the first
  poll that lists its GpuwatchJobFailed alert. The supervisor restarts the job after each failure
  (`--policy` opens the limits up), so the N failures are N runs of one job, N open incidents.

With ``--via-prometheus K`` it also times K fatal Xids through the shipped Prometheus path instead
(deploy/prometheus/prometheus.yml's 15 s scrape and evaluation, default resend delay; the server not
posting): the comparison.

    .venv/bin/python bench/alert_latency.py [--injections 20] [--via-prometheus 0]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere: the tests' helpers
from agent.collectors.simulated import write_fault
from gpuwatch.config import Settings
from server.notify.alert_rules import FATAL_XIDS
from tests.helpers import Proc, free_port, migrated_sqlite, new_token, start_server, wait_until
from tests.prometheus_stack import Alertmanager, Prometheus, prometheus_config
from tests.promql import ALERTS_FILE

NODE, GPUS = "bench-node", 8
AM_CONFIG: dict[str, Any] = {
    "route": {"receiver": "null", "group_by": ["alertname"]},
    "receivers": [{"name": "null"}],
}
FAIL = (
    "import sys, time; open(sys.argv[1], 'a').write(f'{time.time()}\\n');"
    "print('RuntimeError: CUDA error: unspecified launch failure', file=sys.stderr); sys.exit(1)"
)


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _key(alert: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(alert["labels"].items()))


def _poll_new(am: Alertmanager, name: str, known: set[Any], timeout: float) -> tuple[dict[str, Any], float]:
    """The first alert of ``name`` not in ``known``, and when a poll first saw it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for alert in am.alerts(name):
            if _key(alert) not in known:
                seen = time.time()
                known.add(_key(alert))
                return alert, seen
        time.sleep(0.02)  # the poll interval: part of the measurement's resolution
    raise TimeoutError(f"no new {name} alert within {timeout:.0f} s")


def _xids(am: Alertmanager, fault_dir: Path, n: int, timeout: float) -> list[float]:
    """Seconds from each injected fatal Xid (agent-side time) to its alert in Alertmanager."""
    pairs = [(gpu, code) for code in sorted(FATAL_XIDS) for gpu in range(GPUS)][:n]
    known: set[Any] = set()
    out = []
    for gpu, code in pairs:
        write_fault(fault_dir, gpu, "xid", code=code)
        alert, seen = _poll_new(am, "GpuFatalXid", known, timeout)
        assert alert["labels"]["xid"] == str(code) and alert["labels"]["gpu"] == str(gpu), alert
        out.append(seen - _ts(alert["startsAt"]))
    return out


def _xids_via_prometheus(am: Alertmanager, fault_dir: Path, n: int) -> list[float]:
    """As `_xids`, timed from the injection (the agent's own time is not in the rule's alert)."""
    pairs = [(gpu, code) for code in sorted(FATAL_XIDS, reverse=True) for gpu in range(GPUS)][:n]
    known = {_key(a) for a in am.alerts("GpuFatalXid")}
    out = []
    for gpu, code in pairs:
        injected = time.time()
        write_fault(fault_dir, gpu, "xid", code=code)
        _, seen = _poll_new(am, "GpuFatalXid", known, 180)
        out.append(seen - injected)
    return out


def _failures(am: Alertmanager, base: str, token: str, tmp: Path, n: int) -> list[float]:
    """Seconds from each failed run's exit to its GpuwatchJobFailed alert."""
    exits = tmp / "exits.txt"
    cmd = ["run", "--job", "bench-fail", "--server", base, "--token", token, "--node", NODE]
    cmd += ["--data-dir", str(tmp / "sup")]
    for policy in (f"max_restarts={n - 1}", f"max_in_window={n}", "crash_loop_n=0"):
        cmd += ["--policy", policy]
    sup = Proc([*cmd, "--", sys.executable, "-c", FAIL, str(exits)], tmp / "sup.log")
    seen: dict[str, float] = {}
    known: set[Any] = set()
    try:
        while len(seen) < n:
            alert, at = _poll_new(am, "GpuwatchJobFailed", known, 120)
            seen[alert["labels"]["incident"]] = at
        sup.popen.wait(60)
    finally:
        sup.stop()
    exit_times = [float(line) for line in exits.read_text().split()]
    assert len(exit_times) == n, f"{len(exit_times)} exits for {n} alerts"
    firsts = [seen[k] for k in sorted(seen, key=int)]
    return [at - ended for at, ended in zip(firsts, exit_times, strict=True)]


def _report(what: str, times: list[float]) -> None:
    times = sorted(times)
    p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
    print(
        f"{what}: n={len(times)}  p50 {statistics.median(times) * 1000:.0f} ms  p99 {p99 * 1000:.0f} ms  "
        f"min {times[0] * 1000:.0f} ms  max {times[-1] * 1000:.0f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--injections", type=int, default=20)
    ap.add_argument("--via-prometheus", type=int, default=0, help="fatal Xids timed through Prometheus too")
    args = ap.parse_args()
    binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    assert binary, "needs Alertmanager (apt-get install prometheus-alertmanager)"
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "am").mkdir()
        am = Alertmanager(binary, AM_CONFIG, tmp / "am")
        url = migrated_sqlite(tmp)
        token = new_token(url, NODE)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        procs: list[Proc] = []
        try:
            am.wait_ready()
            env = {"GPUWATCH_NOTIFY_ALERTMANAGER_URL": am.url}
            procs.append(start_server(tmp, port, tmp / "server.log", env))
            agent = ["agent", "--server", base, "--token", token, "--node", NODE, "--simulate", str(GPUS)]
            procs.append(Proc([*agent, "--client-port", "0", "--data-dir", str(tmp)], tmp / "agent.log"))
            wait_until(lambda: len(httpx.get(f"{base}/api/v1/gpus").json()) == GPUS, 60, "the agent's GPUs")
            fault_dir = Settings(data_dir=tmp, node=NODE).agent_dir / "faults"
            _report("fatal Xid -> Alertmanager (server's post)", _xids(am, fault_dir, args.injections, 30))
            _report("run exit -> Alertmanager (server's post)", _failures(am, base, token, tmp, args.injections))
            if args.via_prometheus:
                prom_binary = shutil.which("prometheus")
                assert prom_binary, "needs Prometheus for --via-prometheus"
                procs[0].stop()  # the server again, not posting: only the rule's alert reaches Alertmanager
                procs[0] = start_server(tmp, port, tmp / "server-2.log")
                config = prometheus_config(f"127.0.0.1:{port}", [ALERTS_FILE], f"127.0.0.1:{am.port}")
                config["global"] = {"scrape_interval": "15s", "evaluation_interval": "15s"}  # as shipped
                (tmp / "prom").mkdir()
                prom = Prometheus(prom_binary, config, tmp / "prom")
                try:
                    prom.wait_ready()
                    times = _xids_via_prometheus(am, fault_dir, args.via_prometheus)
                    _report("fatal Xid injected -> Alertmanager (Prometheus rule, shipped intervals)", times)
                finally:
                    prom.stop()
        finally:
            for proc in reversed(procs):
                proc.stop()
            am.stop()


if __name__ == "__main__":
    main()
