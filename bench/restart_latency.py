"""Time from a job's exit to its restart decision, over N+1 injected failures (issue 5, acceptance 4).

A real server (subprocess, SQLite) and a real `gpuwatch run` supervisor; the supervised command is a
tiny script that prints a CUDA error and exits 1, so almost all of an attempt is the recovery path
and none of it is a training job's start-up. The policy is opened up (no crash-loop guard, no
backoff, N restarts allowed) so that every failure is restarted. The supervisor logs, for each
failure, the seconds from the exit it saw to the decision it received: that includes delivering the
run's last log lines, the exit report, the server's settle time (`incident_settle_s`), diagnosis,
the policy, the audit rows and the long-poll answer.

    .venv/bin/python bench/restart_latency.py [--failures 20] [--settle 0.5]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere: the tests' helpers
from tests.helpers import Proc, free_port, migrated_sqlite, new_token, start_server

FAIL = "import sys; print('RuntimeError: CUDA error: unspecified launch failure', file=sys.stderr); sys.exit(1)"
LINE = re.compile(r"decision by the (server|supervisor) ([0-9.]+)s after the exit")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--failures", type=int, default=20)
    ap.add_argument("--settle", type=float, default=0.5, help="the server's incident_settle_s")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        url = migrated_sqlite(tmp)
        port = free_port()
        server = start_server(tmp, port, tmp / "server.log", {"GPUWATCH_INCIDENT_SETTLE_S": str(args.settle)})
        token = new_token(url, "bench-node")
        policy = [f"max_restarts={args.failures}", f"max_in_window={args.failures}", "crash_loop_n=0"]
        cmd = ["run", "--job", "bench", "--server", f"http://127.0.0.1:{port}", "--token", token]
        cmd += ["--node", "bench-node", "--data-dir", str(tmp / "sup")]
        for p in policy:
            cmd += ["--policy", p]
        sup = Proc([*cmd, "--", sys.executable, "-c", FAIL], tmp / "sup.log")
        try:
            sup.popen.wait(600)
        finally:
            sup.stop()
            server.stop()
        found = [(who, float(s)) for who, s in LINE.findall(sup.output())]
    times = sorted(s for who, s in found if who == "server")
    assert len(times) == args.failures + 1, f"expected {args.failures + 1} server decisions, got {found}"
    p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
    print(f"exit → restart decision over {len(times)} failures (settle {args.settle:.2f} s):")
    print(f"  p50 {statistics.median(times) * 1000:.0f} ms   p99 {p99 * 1000:.0f} ms   max {times[-1] * 1000:.0f} ms")
    print(f"  without the settle wait: p50 {(statistics.median(times) - args.settle) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
