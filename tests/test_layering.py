"""DESIGN.md's split, checked on the source: what each folder must never import.

The shared core (gpuwatch/) imports neither the agent, the server nor the simulation, nor the web, the
database or the plotting libraries; it needs no httpx either (the LLM analyser talks through the openai
client, which brings its own). The agent never imports the server or the simulation, nor the server the
agent or the simulation; the simulation starts both as processes, so it imports neither. Every import
counts, one inside a function too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = {"fastapi", "sqlalchemy", "httpx", "matplotlib"}
# A folder (relative to the repository) → the top-level modules that no file under it may import. The
# pure parts of the core are listed on their own so that they stay pure even if the core's rule relaxes.
FORBIDDEN = {
    "gpuwatch": {"agent", "server", "simulate", *HEAVY},
    "gpuwatch/diagnosis": HEAVY,
    "gpuwatch/recovery": HEAVY,
    "gpuwatch/client": HEAVY,
    "agent": {"server", "simulate"},
    "server": {"agent", "simulate"},
    "simulate": {"agent", "server"},
}


def _imports(path: Path) -> set[str]:
    tops = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            tops |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            tops.add(node.module.split(".")[0])
    return tops


def _offenders(root: Path, folder: str) -> list[str]:
    """'file imports a, b' for each file under ``root/folder`` that imports what the folder must not."""
    return [
        f"{path.relative_to(root)} imports {', '.join(sorted(bad))}"
        for path in sorted((root / folder).rglob("*.py"))
        if (bad := _imports(path) & FORBIDDEN[folder])
    ]


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_package_respects_the_layering(folder: str) -> None:
    assert (ROOT / folder).is_dir(), f"{folder}/ is gone: update FORBIDDEN"
    offenders = _offenders(ROOT, folder)
    assert not offenders, f"{folder}/ must import none of {sorted(FORBIDDEN[folder])}: " + "; ".join(offenders)


def test_an_import_inside_a_function_is_an_offence(tmp_path: Path) -> None:
    diagnosis = tmp_path / "gpuwatch" / "diagnosis"
    diagnosis.mkdir(parents=True)
    (diagnosis / "ok.py").write_text("import re\nfrom gpuwatch.taxonomy import REASONS\n")
    (diagnosis / "bad.py").write_text("def plot():\n    import httpx as h\n    from sqlalchemy.orm import Session\n")
    assert _offenders(tmp_path, "gpuwatch/diagnosis") == ["gpuwatch/diagnosis/bad.py imports httpx, sqlalchemy"]
    assert _offenders(tmp_path, "gpuwatch") == ["gpuwatch/diagnosis/bad.py imports httpx, sqlalchemy"]
