"""The few-shot examples the LLM analyser shows a model before its question (examples.toml): a small
curated file shipped with the package, written from cases of the labelled corpus (the corpus itself is
test data, and the package does not read it)."""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from importlib import resources

from gpuwatch.diagnosis.model import LogSource
from gpuwatch.taxonomy import REASONS


@dataclass(frozen=True, slots=True)
class Example:
    """One short run's logs and the answer to give about them; ``evidence`` holds the cited lines' text."""

    sources: tuple[LogSource, ...]
    reason: str
    confidence: float
    explanation: str
    evidence: tuple[str, ...]


@functools.cache
def load_examples() -> tuple[Example, ...]:
    """The shipped examples, checked: a reason of the taxonomy, and cited lines that are in the logs."""
    raw = tomllib.loads(resources.files("gpuwatch.diagnosis").joinpath("examples.toml").read_text())
    examples = []
    for k, item in enumerate(raw["example"], 1):
        sources = tuple(
            LogSource(file=f["name"], lines=list(f["lines"]), node=f.get("node"), rank=f.get("rank"))
            for f in item["files"]
        )
        example = Example(
            sources=sources,
            reason=item["reason"],
            confidence=float(item["confidence"]),
            explanation=item["explanation"],
            evidence=tuple(item["evidence"]),
        )
        if example.reason not in REASONS:
            raise ValueError(f"examples.toml, example {k}: {example.reason!r} is not a reason of the taxonomy")
        every_line = {line for s in sources for line in s.lines}
        if missing := [e for e in example.evidence if e not in every_line]:
            raise ValueError(f"examples.toml, example {k}: cited lines not in its logs: {missing}")
        examples.append(example)
    return tuple(examples)
