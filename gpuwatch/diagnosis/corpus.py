"""Labelled failure cases on disk (the format of tests/data/failures, its README): a directory per case
with a `case.toml` (the label, and what is known of each file from outside its text) and the log files.

One reader and one writer, for everyone who handles cases: the corpus test, bench/corpus_report.py,
`gpuwatch corpus export` (labelled incidents become cases) and `gpuwatch rules suggest`.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuwatch.diagnosis.model import LogSource

CASE_FILE = "case.toml"
_NOT_LOGS = (CASE_FILE, "README.md")
#: What `[files."<name>"]` may say of a file, in this order.
FILE_FIELDS = ("node", "rank", "exit_code", "signal")


@dataclass(frozen=True, slots=True)
class Case:
    """A case read from disk: its directory, its `case.toml` and its logs as sources."""

    path: Path
    meta: dict[str, Any]
    sources: list[LogSource] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def reason(self) -> str:
        return str(self.meta["reason"])


def load_case(case: Path) -> tuple[dict, list[LogSource]]:
    """The case's `case.toml` and one source per log file, with the `[files]` metadata applied."""
    meta = tomllib.loads((case / CASE_FILE).read_text())
    files = meta.get("files", {})
    sources = []
    for path in sorted(p for p in case.iterdir() if p.is_file() and p.name not in _NOT_LOGS):
        known = files.get(path.name, {})
        sources.append(
            LogSource(
                file=path.name,
                lines=path.read_text(errors="replace").splitlines(),
                node=known.get("node"),
                rank=known.get("rank"),
                exit_code=known.get("exit_code"),
                signal=known.get("signal"),
            )
        )
    return meta, sources


def case_dirs(corpus: Path) -> list[Path]:
    """The corpus's case directories, in the order of their running numbers (``1001-x`` after ``999-y``,
    which a sort by name would not give), then by name."""
    return sorted((p for p in corpus.iterdir() if (p / CASE_FILE).is_file()), key=_running_number)


def _running_number(path: Path) -> tuple[int, str]:
    number, _, _ = path.name.partition("-")
    return (int(number) if number.isdigit() else -1, path.name)


def load_corpus(corpora: Iterable[Path]) -> list[Case]:
    """Every case of every corpus directory given, in order."""
    return [Case(path, *load_case(path)) for corpus in corpora for path in case_dirs(corpus)]


def toml_value(value: Any) -> str:
    """A TOML value for a string, integer, float, bool or list of them. A JSON string is a valid TOML
    basic string (the same escapes), so strings are written with json.dumps."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML for {type(value).__name__}")


def write_case(case: Path, meta: Mapping[str, Any], files: Mapping[str, tuple[list[str], Mapping[str, Any]]]) -> None:
    """Write a case: `case.toml` from ``meta`` (top-level keys; None values left out) and, for each file
    name, its lines and what is known of it (`FILE_FIELDS`). Files of the directory that are not among
    them are removed, so a case written again is exactly what was given."""
    bad = [n for n in files if n in _NOT_LOGS or "/" in n or n.startswith(".") or not n]
    if bad:
        raise ValueError(f"not a log file name in a case: {bad}")
    case.mkdir(parents=True, exist_ok=True)
    for stale in case.iterdir():
        if stale.is_file() and stale.name not in files and stale.name != CASE_FILE:
            stale.unlink()
    out = [f"{key} = {toml_value(value)}" for key, value in meta.items() if value is not None]
    for name, (lines, known) in files.items():
        (case / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        fields = [f"{k} = {toml_value(known[k])}" for k in FILE_FIELDS if known.get(k) is not None]
        if fields:
            out += ["", f"[files.{json.dumps(name)}]", *fields]
    (case / CASE_FILE).write_text("\n".join(out) + "\n", encoding="utf-8")
