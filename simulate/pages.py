"""Which simulated events would page on-call, under the critical rules of deploy/prometheus/alerts.yml.

Every policy runs under the same monitoring; only what recovers the jobs differs. Alertmanager sends
one page when an alert starts firing (the same labels firing on are not new pages), so each rule below
counts *firing episodes*:

| alert (critical)            | fires on                                  | an episode lasts                     |
|-----------------------------|-------------------------------------------|--------------------------------------|
| GpuFellOffTheBus            | Xid 79 on a node                          | until the node is repaired (the GPU  |
|                             |                                           | stays unexported while the node runs)|
| GpuUncorrectableEccErrors   | Xid 48 (a double-bit ECC error)           | until repaired (volatile counter)    |
| GpuFatalXid                 | Xid 48 61 62 63 64 92 94 95 119 120 140   | 1 h after the node's last such Xid   |
| GpuNvlinkError              | Xid 74                                    | 1 h after the node's last Xid 74     |
| GpuwatchNodeSilent          | a node that ran a job goes down           | until it is back                     |
| GpuwatchJobRestartLoop      | a job's 3rd restart within an hour        | while it has >= 3 in the last hour   |
| GpuwatchJobHang             | a hang the job tracker detects            | one page per hang                    |

The warning rules (GpuwatchJobFailed, checkpoint age, stragglers, ...) go to the team channel, not to
on-call, and are not counted. A bad node that is never excluded keeps raising Xids at every relaunch on
it; that is where policies differ in hardware pages, besides restart loops.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

FATAL_XIDS = frozenset({48, 61, 62, 63, 64, 92, 94, 95, 119, 120, 140})
HOLD_S = 3600.0
LOOP_WINDOW_S = 3600.0
LOOP_RESTARTS = 3


@dataclass
class Records:
    """What the monitoring saw during one simulated run."""

    xids: list[tuple[float, str, int]] = field(default_factory=list)  # (at, node, code)
    node_down: list[tuple[float, str]] = field(default_factory=list)
    repaired: list[tuple[float, str]] = field(default_factory=list)
    restarts: list[tuple[float, str]] = field(default_factory=list)  # (at, job)
    hangs: list[tuple[float, str]] = field(default_factory=list)


def pages(records: Records) -> dict[str, int]:
    """Pages by alert name."""
    out: dict[str, int] = {}
    repairs: dict[str, list[float]] = defaultdict(list)
    for at, node in records.repaired:
        repairs[node].append(at)

    def until_repair(events: list[tuple[float, str]]) -> int:
        """Episodes that start at an event and last until the node's next repair."""
        n, open_until = 0, dict[str, float]()
        for at, node in sorted(events):
            if at < open_until.get(node, -1.0):
                continue
            n += 1
            open_until[node] = min((r for r in repairs[node] if r > at), default=float("inf"))
        return n

    def held(events: list[tuple[float, str]]) -> int:
        """Episodes that last HOLD_S after the last event of the same node."""
        n, last = 0, dict[str, float]()
        for at, node in sorted(events):
            if at - last.get(node, -HOLD_S - 1) > HOLD_S:
                n += 1
            last[node] = at
        return n

    out["GpuFellOffTheBus"] = until_repair([(at, node) for at, node, code in records.xids if code == 79])
    out["GpuUncorrectableEccErrors"] = until_repair([(at, node) for at, node, code in records.xids if code == 48])
    out["GpuFatalXid"] = sum(
        held([(at, node) for at, node, c in records.xids if c == code]) for code in sorted(FATAL_XIDS)
    )
    out["GpuNvlinkError"] = held([(at, node) for at, node, code in records.xids if code == 74])
    out["GpuwatchNodeSilent"] = until_repair(records.node_down)
    out["GpuwatchJobRestartLoop"] = _restart_loops(records.restarts)
    out["GpuwatchJobHang"] = len(records.hangs)
    return out


def _restart_loops(restarts: list[tuple[float, str]]) -> int:
    by_job: dict[str, list[float]] = defaultdict(list)
    for at, job in sorted(restarts):
        by_job[job].append(at)
    n = 0
    for times in by_job.values():
        firing_until = -1.0
        for i in range(LOOP_RESTARTS - 1, len(times)):
            start = times[i - LOOP_RESTARTS + 1]
            if times[i] - start < LOOP_WINDOW_S:
                if times[i] >= firing_until:
                    n += 1
                # it fires until the oldest of these restarts leaves the window
                firing_until = max(firing_until, start + LOOP_WINDOW_S)
    return n
