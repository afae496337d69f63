"""Numbers as the reports print them."""

from __future__ import annotations

import math


def significant(value: float, digits: int = 2, missing: str = "not known") -> str:
    """Two decimals from 1 up (``1,234.57``); below, ``digits`` significant ones (``0.0031``), so a loss
    that is not zero never prints as ``0.00``; ``0`` for zero."""
    if not math.isfinite(value):
        return missing
    if value == 0:
        return "0"
    if abs(value) >= 1:
        return f"{value:,.2f}"
    decimals = digits - 1 - math.floor(math.log10(abs(value)))
    return f"{value:.{decimals}f}"
