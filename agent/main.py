"""`gpuwatch agent`: build the agent and its collectors, wire signals, run it."""

from __future__ import annotations

import signal
import sys
from types import FrameType

from agent.agent import Agent
from agent.collectors.base import CollectorUnavailable
from gpuwatch.config import Settings


def run_agent(settings: Settings) -> int:
    try:
        agent = Agent(settings)
    except (CollectorUnavailable, ValueError, OSError) as exc:  # no driver, an unknown collector, no port
        print(f"gpuwatch agent: {exc}", file=sys.stderr)
        return 2

    def _stop(signum: int, _frame: FrameType | None) -> None:
        agent.stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    agent.run()
    return 0
