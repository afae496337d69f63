"""A supervisor's own diagnosis and decision (their `to_json()` shapes) read back into objects."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuwatch.diagnosis.model import Diagnosis, Evidence
from gpuwatch.recovery import Decision


def diagnosis_from_json(data: Mapping[str, Any]) -> Diagnosis:
    """Raises KeyError/TypeError/ValueError on a malformed object, or a reason outside the taxonomy."""
    return Diagnosis(
        reason=str(data["reason"]),
        confidence=float(data.get("confidence", 0.0)),
        source=str(data.get("source", "rules")),
        evidence=tuple(Evidence(str(e["file"]), int(e["line"]), str(e["text"])) for e in data.get("evidence", ())),
        node=data.get("node"),
        rank=data.get("rank"),
        explanation=str(data.get("explanation") or ""),
        rule_id=data.get("rule"),
    )


def decision_from_json(data: Mapping[str, Any]) -> Decision:
    decision = Decision(
        reason=str(data["reason"]),
        action=str(data["action"]),
        rule=str(data["rule"]),
        restart=bool(data["restart"]),
        delay_s=float(data.get("delay_s", 0.0)),
        exclude_nodes=tuple(str(n) for n in data.get("exclude_nodes", ())),
        alert=bool(data.get("alert", False)),
        why=str(data.get("why", "")),
        dry_run=bool(data.get("dry_run", False)),
        checkpoint_step=data.get("checkpoint_step"),
        node=data.get("node"),
        at=float(data["at"]),
    )
    decision.to_json()  # a reason outside the taxonomy fails here
    return decision
