"""The inputs and the output of a diagnosis."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuwatch.taxonomy import REASONS, info


@dataclass(frozen=True, slots=True)
class LogSource:
    """One log of a run: a rank's output, a node's kernel log, a launcher's or scheduler's output.
    ``node``/``rank`` are what is known from outside the text (the rules may still find them in it)."""

    file: str
    lines: Sequence[str]
    node: str | None = None
    rank: int | None = None
    exit_code: int | None = None  # of the process whose output this is, when known
    signal: int | None = None


@dataclass(frozen=True, slots=True)
class Evidence:
    file: str
    line: int  # 1-based
    text: str


@dataclass(frozen=True, slots=True)
class Diagnosis:
    reason: str
    confidence: float
    source: str  # "rules" | "llm" | "none"
    evidence: tuple[Evidence, ...] = ()
    node: str | None = None
    rank: int | None = None
    explanation: str = ""
    rule_id: str | None = None
    rules_guess: str | None = None  # when the answer is "unknown": what the rules thought most likely
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        info(self.reason)  # a reason outside the taxonomy is a programming error, caught here

    @property
    def category(self) -> str:
        return info(self.reason).category

    @property
    def action(self) -> str:
        return info(self.reason).action

    @property
    def guess(self) -> str | None:
        """What the rules thought most likely: their reason, or their guess when they answered `unknown`."""
        return self.reason if self.reason != "unknown" else self.rules_guess

    def llm_unknown(self, explanation: str, extra: dict[str, Any]) -> Diagnosis:
        """The LLM path's `unknown` for these rules' answer: their evidence, node, rank and guess kept."""
        return Diagnosis(
            reason="unknown",
            confidence=0.0,
            source="llm",
            evidence=self.evidence,
            node=self.node,
            rank=self.rank,
            explanation=explanation,
            rules_guess=self.guess,
            extra=extra,
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Diagnosis:
        """A diagnosis from its `to_json()`; KeyError/TypeError/ValueError when malformed or off-taxonomy."""
        reason = str(data["reason"])
        if reason not in REASONS:
            raise ValueError(f"{reason!r} is not a reason of the taxonomy")
        return cls(
            reason=reason,
            confidence=float(data.get("confidence", 0.0)),
            source=str(data.get("source", "rules")),
            evidence=tuple(Evidence(str(e["file"]), int(e["line"]), str(e["text"])) for e in data.get("evidence", ())),
            node=data.get("node"),
            rank=data.get("rank"),
            explanation=str(data.get("explanation") or ""),
            rule_id=data.get("rule"),
        )

    def to_json(self) -> dict[str, Any]:
        """The stable shape of DESIGN.md (`gpuwatch diagnose --format json`), plus explanation fields;
        when the LLM was asked, also its model, its time and whether its answer was used."""
        llm = {k: self.extra[k] for k in ("model", "llm_seconds", "used", "cached") if k in self.extra}
        return {
            "reason": self.reason,
            "category": self.category,
            "action": self.action,
            "confidence": round(self.confidence, 3),
            "source": self.source,
            "evidence": [{"file": e.file, "line": e.line, "text": e.text} for e in self.evidence],
            "node": self.node,
            "rank": self.rank,
            "explanation": self.explanation,
            "rule": self.rule_id,
            "rules_guess": self.rules_guess,
        } | llm
