"""The form of new held-out cases before their first sight is recorded (docs/held-out-rounds.md).

    .venv/bin/python bench/check_cases.py FIRST LAST [--corpus DIR] [--other DIR ...]

Checks cases FIRST..LAST of the corpus (default tests/data/failures): a directory named NNNN-slug; a label from the
taxonomy other than `hang` and `unknown`; a `source` naming one public report (owner/repo#N) that no other case of this
corpus or of the `--other` corpora (a helper's worktree) names; a `format` and a `note`; no `first_sight` yet (it is
recorded on committed rules, after this check); log files of some substance, and every file `[files]` describes
present; at most three cases from one repository. Prints the problems (nothing else when there are none) and exits 1
if there are any.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpuwatch.taxonomy import REASONS

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "failures"
LABELS = set(REASONS) - {"hang", "unknown"}
PER_REPOSITORY = 3
MIN_LOG_CHARS = 40
_NAME = re.compile(r"\d+-[a-z0-9][a-z0-9-]*")
_SOURCE = re.compile(r"[\w.-]+/[\w.-]+#\d+")


def _number(case: Path) -> int | None:
    head = case.name.split("-", 1)[0]
    return int(head) if head.isdigit() else None


def _sources(corpus: Path, skip: range | None = None) -> dict[str, str]:
    out = {}
    for toml in corpus.glob("*/case.toml"):
        n = _number(toml.parent)
        if skip is not None and n is not None and n in skip:
            continue
        source = tomllib.loads(toml.read_text()).get("source")
        if source:
            out[source] = f"{corpus}/{toml.parent.name}"
    return out


def problems(first: int, last: int, corpus: Path = CORPUS, others: tuple[Path, ...] = ()) -> list[str]:
    """What is wrong with cases ``first``..``last`` of ``corpus`` (an empty list when nothing is)."""
    new = range(first, last + 1)
    known = _sources(corpus, skip=new)
    for other in others:
        known.update(_sources(other))
    out: list[str] = []
    seen: dict[str, str] = {}
    repositories: Counter[str] = Counter()
    for case in sorted(p for p in corpus.iterdir() if p.is_dir() and _number(p) in new):
        name = case.name
        if not _NAME.fullmatch(name):
            out.append(f"{name}: the directory is not NNNN-slug (lowercase letters, digits, dashes)")
        try:
            meta = tomllib.loads((case / "case.toml").read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            out.append(f"{name}: case.toml: {exc}")
            continue
        if meta.get("reason") not in LABELS:
            out.append(f"{name}: reason {meta.get('reason')!r} is not a taxonomy reason a case may carry")
        source = str(meta.get("source", ""))
        if not _SOURCE.fullmatch(source):
            out.append(f"{name}: source {source!r} is not owner/repo#N")
        elif source in known:
            out.append(f"{name}: source {source} is already {known[source]}")
        elif source in seen:
            out.append(f"{name}: source {source} is also {seen[source]}")
        seen[source] = name
        repositories[source.split("#")[0]] += 1
        out += [f"{name}: no {key}" for key in ("format", "note") if not meta.get(key)]
        if "first_sight" in meta:
            out.append(f"{name}: first_sight is recorded after this check, on committed rules")
        logs = [p for p in case.iterdir() if p.is_file() and p.name not in ("case.toml", "README.md")]
        if not logs:
            out.append(f"{name}: no log file")
        out += [
            f"{name}: {p.name} is shorter than {MIN_LOG_CHARS} characters"
            for p in logs
            if len(p.read_text(errors="replace").strip()) < MIN_LOG_CHARS
        ]
        out += [
            f"{name}: [files] names {f}, which is not there" for f in meta.get("files", {}) if not (case / f).is_file()
        ]
    out += [f"{repo}: {n} cases (at most {PER_REPOSITORY})" for repo, n in repositories.items() if n > PER_REPOSITORY]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("first", type=int)
    parser.add_argument("last", type=int)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--other", type=Path, action="append", default=[], help="another corpus whose sources count")
    args = parser.parse_args()
    found = problems(args.first, args.last, args.corpus, tuple(args.other))
    print("\n".join(found))
    raise SystemExit(1 if found else 0)


if __name__ == "__main__":
    main()
