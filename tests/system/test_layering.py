"""DESIGN.md's split, checked on the source: what each folder must never import.

The shared core (gpuwatch/) imports neither the agent, the server nor the simulation, nor the web, the
database or the plotting libraries; it needs no httpx either (the LLM analyser talks through the openai
client, which brings its own). The agent never imports the server or the simulation, nor the server the
agent or the simulation; the simulation starts both as processes, so it imports neither. Every import
counts, one inside a function too.

Inside the server, only the web layer and the app that mounts it import the web layer (server/api):
the stages below it never depend on it. And no two files import each other, directly or round a loop
(imports under ``if TYPE_CHECKING:`` aside): docs/architecture.md.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

from tests.helpers import REPO

ROOT = REPO
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


# -- the web layer, and cycles ----------------------------------------------------------------------

PACKAGES = ("gpuwatch", "agent", "server", "simulate")
WEB = "server.api"
MAY_IMPORT_WEB = ("server/api/", "server/app.py")  # the web layer itself, and the app that mounts it


def _module(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _project_imports(root: Path) -> dict[str, set[str]]:
    """Each project module → the project modules it imports (``from pkg import mod`` counts as ``pkg.mod``
    when that is a module), leaving out what only ``if TYPE_CHECKING:`` imports."""
    files = {_module(root, p): p for pkg in PACKAGES if (root / pkg).is_dir() for p in (root / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        typing_only = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for inner in ast.walk(node)
        }
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names}
        graph[name] = {m for m in found if m in files and m != name}
    return graph


def _web_importers(root: Path) -> list[str]:
    """'module imports server.api…' for each server module outside the web layer that imports it."""
    allowed = tuple(a.removesuffix(".py") for a in MAY_IMPORT_WEB)
    offenders = []
    for name, deps in _project_imports(root).items():
        web = sorted(m for m in deps if m == WEB or m.startswith(WEB + "."))
        if name.startswith("server.") and web and not name.replace(".", "/").startswith(allowed):
            offenders.append(f"{name} imports {', '.join(web)}")
    return sorted(offenders)


def _cycle(root: Path) -> list[str]:
    """One import cycle between project files, or [] when there is none."""
    try:
        graphlib.TopologicalSorter(_project_imports(root)).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return []


def test_only_the_web_layer_imports_the_web_layer() -> None:
    offenders = _web_importers(ROOT)
    assert not offenders, "only server/api/ and server/app.py may import server.api: " + "; ".join(offenders)


def test_no_import_cycle_between_files() -> None:
    cycle = _cycle(ROOT)
    assert not cycle, "import cycle: " + " → ".join(cycle)


def test_the_web_rule_and_the_cycle_check_can_fail(tmp_path: Path) -> None:
    for folder in ("server/api", "server/ingest"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "server" / "__init__.py").write_text("")
    (tmp_path / "server" / "api" / "deps.py").write_text("from server.ingest import writer\n")
    (tmp_path / "server" / "ingest" / "writer.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from server.api import deps\n"
    )
    assert _web_importers(tmp_path) == [] and _cycle(tmp_path) == [], "typing-only imports do not count"
    (tmp_path / "server" / "ingest" / "writer.py").write_text("def f():\n    from server.api.deps import x\n")
    assert _web_importers(tmp_path) == ["server.ingest.writer imports server.api.deps"]
    assert set(_cycle(tmp_path)) == {"server.api.deps", "server.ingest.writer"}
