"""The one entry point: rules first; the LLM analyser only when the rules are not confident and one
is configured. The CLI, the supervisor and the server all call this."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from gpuwatch.diagnosis.engine import CONFIDENT, diagnose_rules
from gpuwatch.diagnosis.model import Diagnosis, Evidence, LogSource

if TYPE_CHECKING:
    from gpuwatch.diagnosis.llm import LlmAnalyser

_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


def diagnose(sources: list[LogSource], llm: LlmAnalyser | None = None, rules_dir: str | None = None) -> Diagnosis:
    rules = diagnose_rules(sources, rules_dir)
    if llm is None or rules.confidence >= CONFIDENT:
        return rules
    return llm.analyse(sources, rules)


def diagnose_silence(node: str, silent_s: float, timeout_s: float) -> Diagnosis:
    """A node whose agent stopped reporting: `node_failure`, blamed on that node. No log can say more,
    because the node that would have written it is the one that went away."""
    text = f"no data from node {node} for {silent_s:.0f} s (node timeout {timeout_s:.0f} s)"
    return Diagnosis(
        reason="node_failure",
        confidence=0.9,
        source="rules",
        evidence=(Evidence(file="agent-heartbeat", line=1, text=text),),
        node=node,
        explanation=f"The gpuwatch agent on {node} went silent: the node crashed, lost power or lost its network.",
        rule_id="node-silent",
    )


def read_sources(paths: Iterable[Path]) -> list[LogSource]:
    """Log files as sources; a file named like `rank3.log` is rank 3's output."""
    sources = []
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
        m = _RANK_IN_NAME.search(path.name)
        sources.append(LogSource(file=str(path), lines=lines, rank=int(m.group(1)) if m else None))
    return sources
