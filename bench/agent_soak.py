"""The agent soak of issue 21 (acceptance 3) for a given duration: a real `gpuwatch server` (SQLite) and
`gpuwatch agent`, a job writing mixed ~100-byte and ~5 KB lines at ``--rate`` lines/s, the agent's spool
on a ``--disk`` tmpfs that fills and empties, the server SIGKILLed twice and restarted, the log rotated
while the agent is down (stopped with its spool's disk full, by default). Once everything has drained it
prints lines written / stored / dropped by reason / duplicates / missing, and the agent's CPU and RSS.
The scenario is tests/agent/soak.py, which tests/agent/test_soak.py runs for 45 s. Needs root (tmpfs).

    .venv/bin/python bench/agent_soak.py [--duration 300] [--rate 2000] [--disk 2m] [--outage 8]
                                         [--agent-stop full|empty] [--json FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.agent.soak import SoakConfig, mount_tmpfs, run_soak, unmount  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=300.0, help="seconds the job writes")
    ap.add_argument("--rate", type=int, default=2000, help="lines per second")
    ap.add_argument("--disk", default="2m", help="size of the spool's tmpfs (mount syntax)")
    ap.add_argument("--outage", type=float, default=8.0, help="seconds the server is down, each time")
    ap.add_argument("--pending-max-bytes", type=int, default=2 * 1024 * 1024)
    ap.add_argument("--agent-stop", choices=["full", "empty"], default="full")
    ap.add_argument("--json", type=Path, help="write the result here too")
    args = ap.parse_args()
    cfg = SoakConfig(
        duration_s=args.duration,
        rate=args.rate,
        disk=args.disk,
        outage_s=args.outage,
        pending_max_bytes=args.pending_max_bytes,
        agent_stop=args.agent_stop,
    )
    with tempfile.TemporaryDirectory(prefix="agent-soak-") as tmp:
        disk = Path(tmp) / "spool-disk"
        if not mount_tmpfs(disk, cfg.disk):
            print("mounting a small tmpfs needs root", file=sys.stderr)
            return 2
        try:
            result = run_soak(Path(tmp), disk, cfg)
        finally:
            unmount(disk)
    print(*result.events, sep="\n")
    print(f"written     {result.written}")
    print(f"stored      {result.stored_lines} ({result.stored_rows} rows)")
    for reason, n in sorted(result.dropped.items()) or [("-", 0)]:
        print(f"dropped     {int(n)} ({reason})")
    print(f"duplicates  {result.duplicates}")
    print(f"wrong text  {result.wrong_text}")
    print(f"missing     {result.missing}  (written - stored - dropped; negative: counted dropped and stored)")
    print(f"seq gaps    {result.seq_gaps}; the server's count of the node's drops: {result.server_dropped}")
    print(
        f"spool disk  {result.disk_size // 1024} KiB; fullest {result.disk_min_free // 1024} KiB free; "
        f"at the end {result.disk_free_end // 1024} KiB free, {result.spool_files_end} batches"
    )
    print(
        f"agent       CPU {result.agent_cpu_s:.1f} s in {result.agent_wall_s:.0f} s "
        f"({100 * result.agent_cpu_s / result.agent_wall_s:.1f} % of a core); "
        f"RSS max {result.agent_rss_max / 2**20:.0f} MiB, at the end {result.agent_rss_end / 2**20:.0f} MiB"
    )
    ok = result.missing == 0 and result.duplicates == 0 and result.wrong_text == 0 and result.spool_files_end == 0
    print("verdict     " + ("every line stored once or counted dropped" if ok else "LINES LOST OR DOUBLED"))
    if args.json:
        out = {
            **dataclasses.asdict(result),
            "config": {k: v for k, v in dataclasses.asdict(cfg).items() if k != "events"},
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "kernel": platform.release()},
            "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        }
        args.json.write_text(json.dumps(out, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
