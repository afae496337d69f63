"""The README a newcomer reads, and the docs it links: short, the two commands first, no dead links."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def test_readme_is_short_and_starts_with_the_two_commands() -> None:
    text = README.read_text()
    assert len(text.splitlines()) < 200
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[0] == "The two commands"
    first_block = text.split("```sh", 1)[1].split("```", 1)[0]
    assert [line.split()[:2] for line in first_block.strip().splitlines()] == [["make", "demo"], ["make", "test"]]


def test_every_page_of_docs_is_linked_from_the_readme() -> None:
    linked = {(README.parent / target).resolve() for target in LINK.findall(README.read_text())}
    pages = set(p.resolve() for p in DOCS.glob("*.md"))
    assert pages - linked == set()


def test_relative_links_resolve() -> None:
    dead = [
        f"{page.relative_to(ROOT)} -> {target}"
        for page in _markdown_files()
        for target in LINK.findall(page.read_text())
        if not target.startswith(("http://", "https://", "mailto:")) and not (page.parent / target).exists()
    ]
    assert dead == []


def test_deploy_page_names_every_alert() -> None:
    groups = yaml.safe_load((ROOT / "deploy/prometheus/alerts.yml").read_text())["groups"]
    alerts = [rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule]
    page = (DOCS / "deploy.md").read_text()
    assert alerts and [name for name in alerts if f"`{name}`" not in page] == []
