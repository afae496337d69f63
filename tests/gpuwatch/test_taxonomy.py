"""gpuwatch/taxonomy.py agrees with the contract, ../shared/failure-taxonomy.md, when it is present."""

from __future__ import annotations

import re

import pytest

from gpuwatch.taxonomy import REASONS
from tests.helpers import REPO

CONTRACT = REPO.parent / "shared" / "failure-taxonomy.md"
_ROW = re.compile(r"^\| (\w+) \| (\w+) \| ([\w ()]+?) \|", re.M)


def test_reasons_categories_and_actions_match_the_contract() -> None:
    if not CONTRACT.exists():
        pytest.skip(f"{CONTRACT} is not beside this checkout")
    rows = {m.group(1): (m.group(2), m.group(3).split()[0]) for m in _ROW.finditer(CONTRACT.read_text())}
    rows.pop("reason", None)  # the header row
    assert {r: (i.category, i.action) for r, i in REASONS.items()} == rows
