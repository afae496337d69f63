"""What `gpuwatch simulate` does, apart from parsing its flags (simulate/cli.py)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from simulate.cluster import POLICIES, load_config, simulate
from simulate.report import plot_png, report

POLICY_CHOICES = ("all", *POLICIES)
FORMATS = ("table", "json", "md")


def run(
    *,
    config: Path | None,
    nodes: int | None,
    gpus_per_node: int | None,
    days: float | None,
    seed: int | None,
    policy: str,
    fmt: str,
    plot: Path | None,
) -> None:
    """Simulate, print the result in ``fmt``, write the plot; ValueError for bad input."""
    if policy not in POLICY_CHOICES:
        raise ValueError(f"--policy must be one of {', '.join(POLICY_CHOICES)}")
    if fmt not in FORMATS:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}")
    cfg = load_config(config, nodes=nodes, gpus_per_node=gpus_per_node, days=days, seed=seed)
    started = time.perf_counter()
    result = simulate(cfg, list(POLICIES) if policy == "all" else [policy])
    took = time.perf_counter() - started
    text = report(result, fmt)
    if text is not None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    if plot is not None:
        plot.write_bytes(plot_png(result))
    sys.stdout.flush()
    print(f"simulated in {took:.1f} s", file=sys.stderr)
