"""What a detector found: the kind, the job, the node and ranks it blames, and why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Detection:
    kind: str  # "straggler" | "hang"
    job: str
    node: str | None
    ranks: tuple[int, ...]
    message: str
    data: dict[str, Any]
