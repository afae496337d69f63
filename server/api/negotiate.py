"""Choosing a report's format from the request's ``Accept`` header (RFC 9110, section 12.5.1).

A browser asks for ``text/html`` first and gets the page; curl, httpx and scripts send ``*/*`` (or no
header) and get Markdown, the default. Only the two formats and their wildcards count: a header that
accepts neither (``application/json``) is refused with 406, saying what can be had.
"""

from __future__ import annotations

from typing import Literal

from fastapi import HTTPException

Format = Literal["md", "html"]
_TYPES: dict[Format, tuple[str, ...]] = {
    "md": ("text/markdown", "text/x-markdown", "text/plain", "text/*", "*/*"),
    "html": ("text/html", "application/xhtml+xml", "text/*", "*/*"),
}


def _ranges(accept: str) -> dict[str, float]:
    """Each media range of the header with its weight (q); a bad weight counts as 0."""
    out: dict[str, float] = {}
    for item in accept.split(","):
        kind, *params = (part.strip() for part in item.split(";"))
        if not kind:
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    q = 0.0
        out[kind.lower()] = max(q, out.get(kind.lower(), 0.0))
    return out


def negotiate(accept: str | None, default: Format = "md") -> Format:
    """The format ``accept`` prefers, the most specific range deciding each (so ``text/html`` beats
    ``*/*;q=0.8``); ties go to ``default``. 406 when it accepts neither."""
    if not accept or not accept.strip():
        return default
    ranges = _ranges(accept)
    weights: dict[Format, float] = {}
    for fmt, types in _TYPES.items():
        # the first listed type the header names is the most specific one that applies
        weights[fmt] = next((ranges[t] for t in types if t in ranges), 0.0)
    if max(weights.values()) <= 0:
        raise HTTPException(
            406, f"Accept {accept[:200]!r} accepts no format of this report: text/markdown or text/html (or ?format=)"
        )
    other: Format = "html" if default == "md" else "md"
    return other if weights[other] > weights[default] else default
