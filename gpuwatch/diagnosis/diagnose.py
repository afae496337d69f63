"""The one entry point: rules first; the LLM analyser only when the rules are not confident and one
is configured. The CLI, the supervisor and the server all call this."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpuwatch.diagnosis.engine import CONFIDENT, diagnose_rules
from gpuwatch.diagnosis.model import Diagnosis, Evidence, LogSource
from gpuwatch.diagnosis.stream import FileLines

if TYPE_CHECKING:
    from gpuwatch.diagnosis.llm import LlmAnalyser

_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


def diagnose(sources: list[LogSource], llm: LlmAnalyser | None = None, rules_dir: str | None = None) -> Diagnosis:
    rules = diagnose_rules(sources, rules_dir)
    if llm is None or rules.confidence >= CONFIDENT:
        return rules
    return combine(rules, llm.analyse(sources, rules), llm.min_confidence)


def combine(rules: Diagnosis, answer: Diagnosis, min_confidence: float) -> Diagnosis:
    """The one place where the rules' answer and the LLM's meet: the LLM's is used when it names a
    reason with at least ``min_confidence``; otherwise the result is `unknown`, with the rules' guess
    and what the model thought. ``extra["used"]`` says which (with the model and its time)."""
    used = answer.reason != "unknown" and answer.confidence >= min_confidence
    extra = {**answer.extra, "used": used}
    if used or answer.reason == "unknown":  # the analyser's own `unknown` carries the rules' guess already
        return replace(answer, extra=extra)
    why = (
        f"the LLM's answer {answer.reason} (confidence {answer.confidence:.2f}) is under the threshold "
        f"{min_confidence:.2f}, so it is not used"
    )
    return rules.llm_unknown(
        f"{why}; it said: {answer.explanation}" if answer.explanation else why,
        {**extra, "llm_reason": answer.reason, "llm_confidence": answer.confidence},
    )


def diagnose_silence(node: str, silent_s: float, timeout_s: float) -> Diagnosis:
    """A node whose agent stopped reporting: `node_failure`, blamed on that node. No log can say more,
    because the node that would have written it is the one that went away."""
    return _observed(
        "node_failure",
        "agent-heartbeat",
        f"no data from node {node} for {silent_s:.0f} s (node timeout {timeout_s:.0f} s)",
        node,
        f"The gpuwatch agent on {node} went silent: the node crashed, lost power or lost its network.",
        "node-silent",
    )


def diagnose_hang(message: str, node: str | None) -> Diagnosis:
    """A job that stopped stepping while its GPUs idle (the server's job tracker saw it): `hang`."""
    return _observed(
        "hang", "job-tracker", message, node, "No step progress and idle GPUs past the hang timeout.", "hang"
    )


def _observed(reason: str, source: str, text: str, node: str | None, explanation: str, rule: str) -> Diagnosis:
    """A diagnosis from what the server observed (not from a log): one evidence line, high confidence."""
    return Diagnosis(
        reason=reason,
        confidence=0.9,
        source="rules",
        evidence=(Evidence(file=source, line=1, text=text),),
        node=node,
        explanation=explanation,
        rule_id=rule,
    )


def read_sources(paths: Iterable[Path]) -> list[LogSource]:
    """Log files as sources, streamed by the rules (read in chunks, whatever their size); a file named
    like `rank3.log` is rank 3's output. A file that cannot be read fails here, before any diagnosis."""
    sources = []
    for path in paths:
        with open(path, "rb"):
            pass
        m = _RANK_IN_NAME.search(path.name)
        sources.append(LogSource(file=str(path), lines=FileLines(path), rank=int(m.group(1)) if m else None))
    return sources
