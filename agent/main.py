"""`gpuwatch agent`: pick the collector, wire signals, run the agent."""

from __future__ import annotations

import signal
import sys
from types import FrameType

from agent.agent import Agent
from agent.collectors.base import CollectorUnavailable, GpuCollector
from gpuwatch.config import Settings


def make_collector(settings: Settings) -> GpuCollector:
    if settings.simulate:
        from agent.collectors.simulated import SimulatedCollector

        return SimulatedCollector(settings.node, settings.simulate, fault_dir=settings.agent_dir / "faults")
    from agent.collectors.nvml import NvmlCollector

    return NvmlCollector()


def run_agent(settings: Settings) -> int:
    try:
        collector = make_collector(settings)
        agent = Agent(settings, collector)
    except (CollectorUnavailable, ValueError, OSError) as exc:
        print(f"gpuwatch agent: {exc}", file=sys.stderr)
        return 2

    def _stop(signum: int, _frame: FrameType | None) -> None:
        agent.stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    agent.run()
    return 0
