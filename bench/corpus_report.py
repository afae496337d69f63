"""Accuracy of the rules on the labelled corpus (tests/data/failures), first sight next to final.

A case written from a real public report carries `first_sight`: the reason `gpuwatch diagnose` gave
the first time the case was run, before any rule was changed for it (with `first_sight_commit`, the
commit whose rules gave it: the last commit that changed `gpuwatch/`). That is the honest held-out
number: the rules had not seen the text. The final number is what the rules say now, over the whole corpus.

    .venv/bin/python bench/corpus_report.py                 # first sight vs final, per reason, confusion
    .venv/bin/python bench/corpus_report.py --record        # write first_sight into cases that lack it
    .venv/bin/python bench/corpus_report.py --markdown      # the tables for docs/diagnosis.md
    .venv/bin/python bench/corpus_report.py --readme        # rewrite the accuracy, counts, index in its README
    .venv/bin/python bench/corpus_report.py --rules-of REV --since 1701
                                                            # the same cases under another commit's rules

`--rules-of` answers what a change did to the held-out number: the real-text cases from `--since` on,
diagnosed by the rules of REV (its `gpuwatch/` taken with `git archive`, run in a child process) beside
their recorded first sight. Cases written before REV's rules were fixed for them say nothing; cases whose
first sight was recorded after REV do (e.g. rules from before a change, on the rounds measured after it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The one reading of a case (the corpus test's too), so that the report and the test judge the same thing.
from gpuwatch.diagnosis.corpus import case_dirs as cases
from gpuwatch.diagnosis.corpus import load_case
from gpuwatch.diagnosis.engine import diagnose_rules
from gpuwatch.diagnosis.model import Diagnosis
from gpuwatch.taxonomy import REASONS
from tests.gpuwatch.diagnosis.test_diagnosis_corpus import CORPUS


def run(corpus: Path = CORPUS) -> list[tuple[str, dict, Diagnosis]]:
    return [(case.name, meta, diagnose_rules(sources)) for case in cases(corpus) for meta, sources in [load_case(case)]]


def _written(meta: dict) -> str:
    """The case's label when its first sight was recorded: `first_label` where the label was changed after it (the
    corpus README's labelling policy), else the label. First sight against it is the held-out number."""
    return str(meta.get("first_label", meta["reason"]))


def _category(reason: str) -> str:
    return REASONS[reason].category


def _action(reason: str) -> str:
    """What the product does with the answer: the reason's default action (restart, exclude the node, notify)."""
    return REASONS[reason].action


def record_first_sight(corpus: Path = CORPUS) -> list[str]:
    """Write the rules' current answer as `first_sight` into every real-text case (one with a `format`
    beside its `source`) that has none yet. Run it before changing any rule for the new cases, and
    commit the result."""
    root = corpus.parent.parent.parent
    # The commit whose rules answer: the last one that changed gpuwatch/ (a merge of new cases changes none of it).
    commit = subprocess.run(
        ["git", "log", "-1", "--format=%h", "--", "gpuwatch"], capture_output=True, text=True, check=True, cwd=root
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "gpuwatch/diagnosis"],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
    ).stdout.strip()
    if dirty:
        raise SystemExit("gpuwatch/diagnosis has uncommitted changes: first sight must be the committed rules'")
    written = []
    for case in cases(corpus):
        path = case / "case.toml"
        text = path.read_text()
        meta = tomllib.loads(text)
        if "first_sight" in meta or "format" not in meta:
            continue  # recorded already, or one of the synthetic cases (they name no public source)
        _, sources = load_case(case)
        got = diagnose_rules(sources).reason
        head, sep, tail = text.partition("\n[files.")
        head = head.rstrip("\n") + f'\nfirst_sight = "{got}"\nfirst_sight_commit = "{commit}"\n'
        path.write_text(head + ("\n" + sep.lstrip("\n") + tail if sep else ""))
        written.append(f"{case.name}: {got}")
    return written


_ANSWERS_OF = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from gpuwatch.diagnosis.corpus import load_case
from gpuwatch.diagnosis.engine import diagnose_rules
print(json.dumps({Path(c).name: diagnose_rules(load_case(Path(c))[1]).reason for c in sys.argv[2:]}))
"""


def answers_of(rev: str, case_paths: list[Path]) -> dict[str, str]:
    """What the rules of commit ``rev`` answer for each case (by directory name)."""
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="gpuwatch-rules-of-") as tmp:
        archive = subprocess.run(["git", "archive", rev, "gpuwatch"], capture_output=True, check=True, cwd=root)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        done = subprocess.run(
            [sys.executable, "-c", _ANSWERS_OF, tmp, *map(str, case_paths)], capture_output=True, text=True, cwd=tmp
        )
    if done.returncode != 0:  # e.g. a commit older than gpuwatch.diagnosis.corpus
        raise SystemExit(f"the rules of {rev} could not diagnose the cases:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def rules_of(rev: str, since: int) -> str:
    """The real-text cases numbered ``since`` and up: their first sight, and REV's rules' answers."""
    picked = [c for c in cases(CORPUS) if int(c.name.split("-")[0]) >= since]
    metas = {c.name: load_case(c)[0] for c in picked}
    picked = [c for c in picked if "first_sight" in metas[c.name]]
    theirs = answers_of(rev, picked)
    right_first = sum(metas[c.name]["first_sight"] == metas[c.name]["reason"] for c in picked)
    right_rev = sum(theirs[c.name] == metas[c.name]["reason"] for c in picked)
    out = [f"{len(picked)} real-text cases from {since}: first sight {right_first}, the rules of {rev} {right_rev}"]
    for c in picked:
        m = metas[c.name]
        if theirs[c.name] != m["first_sight"]:
            out.append(f"  {c.name}: label {m['reason']}, first sight {m['first_sight']}, {rev} {theirs[c.name]}")
    return "\n".join(out)


def _table(rows: list[tuple[str, dict, Diagnosis]], first: bool) -> dict[str, tuple[int, int, int]]:
    """reason → (cases, right at first sight, right now)."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for _, meta, d in rows:
        r = out[meta["reason"]]
        r[0] += 1
        r[1] += first and meta.get("first_sight") == meta["reason"]
        r[2] += d.reason == meta["reason"]
    return {k: (v[0], v[1], v[2]) for k, v in out.items()}


def report(markdown: bool = False, last: int | None = None) -> str:
    results = run()
    new = [r for r in results if "first_sight" in r[1]]
    if last:
        new = new[-last:]
    out: list[str] = []

    def pct(a: int, b: int) -> str:
        return f"{a}/{b} = {a / b:.1%}" if b else "-"

    first_reason = sum(m["first_sight"] == m["reason"] for _, m, _ in new)
    first_written = sum(m["first_sight"] == _written(m) for _, m, _ in new)
    first_cat = sum(_category(m["first_sight"]) == _category(m["reason"]) for _, m, _ in new)
    first_unknown = sum(m["first_sight"] == "unknown" for _, m, _ in new)
    first_action = sum(_action(m["first_sight"]) == _action(m["reason"]) for _, m, _ in new)
    final_new = sum(d.reason == m["reason"] for _, m, d in new)
    final_new_cat = sum(d.category == _category(m["reason"]) for _, m, d in new)
    all_reason = sum(d.reason == m["reason"] for _, m, d in results)
    all_cat = sum(d.category == _category(m["reason"]) for _, m, d in results)
    sources = {m.get("source") for _, m, _ in new}
    out.append(
        f"real-text cases: {len(new)} from {len(sources)} sources\n"
        f"  first sight: reason {pct(first_written, len(new))} on the labels as written "
        f"({first_reason} on today's), category {pct(first_cat, len(new))}, unknown {pct(first_unknown, len(new))}\n"
        f"               default action {pct(first_action, len(new))}\n"
        f"  final:       reason {pct(final_new, len(new))}, category {pct(final_new_cat, len(new))}\n"
        f"whole corpus: {len(results)} cases; final reason {pct(all_reason, len(results))}, "
        f"category {pct(all_cat, len(results))}"
    )
    batches: dict[str, list[dict]] = defaultdict(list)
    for _, m, _ in new:
        batches[m.get("first_sight_commit", "?")].append(m)
    if len(batches) > 1:
        out.append("first sight per batch (each measured on the rules of the commit named, before any change for it):")
        for commit, ms in batches.items():
            ok = sum(m["first_sight"] == _written(m) for m in ms)
            today = sum(m["first_sight"] == m["reason"] for m in ms)
            cat = sum(_category(m["first_sight"]) == _category(m["reason"]) for m in ms)
            act = sum(_action(m["first_sight"]) == _action(m["reason"]) for m in ms)
            out.append(
                f"  {commit}: {len(ms)} cases, reason {pct(ok, len(ms))} as written ({today} on today's labels), "
                f"category {pct(cat, len(ms))}, action {pct(act, len(ms))}"
            )
    per = _table(new, first=True)
    per_all = _table(results, first=False)
    if markdown:
        out.append(
            "\n| reason | real-text cases | first sight | final | whole corpus: cases | final |"
            "\n|---|---|---|---|---|---|"
        )
        for reason in sorted(per_all):
            n, f, now = per.get(reason, (0, 0, 0))
            na, _, nowa = per_all[reason]
            out.append(f"| `{reason}` | {n} | {f}/{n} | {now}/{n} | {na} | {nowa}/{na} |")
    else:
        out.append(f"\n{'reason':24} {'new':>4} {'first':>6} {'final':>6}   {'all':>4} {'final':>6}")
        for reason in sorted(per_all):
            n, f, now = per.get(reason, (0, 0, 0))
            na, _, nowa = per_all[reason]
            out.append(f"{reason:24} {n:>4} {f:>6} {now:>6}   {na:>4} {nowa:>6}")
    for title, pairs in (
        (
            "first-sight confusion over the real-text cases (expected -> answered: count)",
            [(m["reason"], m["first_sight"]) for _, m, _ in new],
        ),
        (
            "final confusion over the whole corpus (expected -> answered: count)",
            [(m["reason"], d.reason) for _, m, d in results],
        ),
    ):
        confusion = Counter(p for p in pairs if p[0] != p[1])
        if not confusion:
            out.append(f"\n{title}: none")
            continue
        out.append(f"\n{title}:" if not markdown else f"\n{title}:\n\n| expected | answered | cases |\n|---|---|---|")
        for (want, got), k in sorted(confusion.items(), key=lambda x: (-x[1], x[0])):
            out.append(f"| `{want}` | `{got}` | {k} |" if markdown else f"  {want} -> {got}: {k}")
    if not markdown:
        out.append("\nwrong now:")
        for name, m, d in results:
            if d.reason != m["reason"]:
                out.append(f"  {name}: want {m['reason']}, got {d.reason} ({d.rule_id}) {d.explanation[:100]}")
    return "\n".join(out)


README = CORPUS / "README.md"
# The README's parts written from the cases themselves: from the first heading to the next heading that is not one.
_GENERATED = (
    "## First sight and final accuracy",
    "## Counts per reason",
    "## Counts per source format",
    "## Index of the real-text cases",
)
_LAST = 150  # the held-out window issue 19 sets its target on
_TARGET = 0.90
_FEW = 3  # a format token with fewer cases is counted, not listed


def readme_sections(corpus: Path = CORPUS) -> dict[str, str]:
    """The corpus README's counts per reason, counts per format token and index of the real-text cases, as
    the cases say now (keyed by their headings' first words)."""
    results = run(corpus)
    metas = [(name, m) for name, m, _ in results]
    real = [(name, m) for name, m in metas if "format" in m]
    synthetic = len(metas) - len(real)
    by_reason = Counter(m["reason"] for _, m in metas)
    real_by_reason = Counter(m["reason"] for _, m in real)
    rows = [
        f"## Counts per reason ({len(metas):,} cases: {synthetic} synthetic, {len(real):,} from real reports)",
        "",
        "| reason | category | default action | synthetic | real-text | cases |",
        "|---|---|---|---|---|---|",
    ]
    for reason, info in REASONS.items():
        if reason in by_reason:
            n, r = by_reason[reason], real_by_reason[reason]
            rows.append(f"| `{reason}` | {info.category} | {info.action} | {n - r} | {r} | {n} |")
    rows += [f"| **total** | | | **{synthetic}** | **{len(real):,}** | **{len(metas):,}** |", ""]
    rows += [
        "`hang` and `unknown` have no cases: a hang is detected from live telemetry, not from logs, and",
        "`unknown` is the engine's own output, never a ground truth.",
    ]
    tokens = Counter(t for _, m in metas for t in set(str(m.get("format") or m["source"]).split("+")))
    listed = [(t, k) for t, k in sorted(tokens.items(), key=lambda x: (-x[1], x[0])) if k >= _FEW]
    formats = [
        "## Counts per source format",
        "",
        "A case counts once for each token of its `format` (real-text cases) or `source` (synthetic ones); tokens",
        f"of fewer than {_FEW} cases are not listed ({len(tokens) - len(listed)} of them).",
        "",
        "| format token | cases |",
        "|---|---|",
        *(f"| `{t}` | {k} |" for t, k in listed),
    ]
    index = [
        "## Index of the real-text cases",
        "",
        "| case | reason | node | rank | source | first sight |",
        "|---|---|---|---|---|---|",
        *(
            f"| {name} | {m['reason']} | {m.get('node', '')} | {m.get('rank', '')} | {m['source']} |"
            f" {m.get('first_sight', '')} |"
            for name, m in real
        ),
    ]
    parts = (_accuracy(results), rows, formats, index)
    return {head: "\n".join(part) + "\n" for head, part in zip(_GENERATED, parts, strict=True)}


def _accuracy(results: list[tuple[str, dict, Diagnosis]]) -> list[str]:
    """First sight (held out: as written, `first_label` where a label moved after it) next to the rules' answers now,
    over all real-text cases and over the last `_LAST`, per reason, and the last cases' first-sight confusion."""
    new = [r for r in results if "first_sight" in r[1]]
    last = new[-_LAST:]

    def line(title: str, rows: list[tuple[str, dict, Diagnosis]]) -> str:
        n = len(rows)
        written = sum(m["first_sight"] == _written(m) for _, m, _ in rows)
        today = sum(m["first_sight"] == m["reason"] for _, m, _ in rows)
        cat = sum(_category(m["first_sight"]) == _category(m["reason"]) for _, m, _ in rows)
        unknown = sum(m["first_sight"] == "unknown" for _, m, _ in rows)
        final = sum(d.reason == m["reason"] for _, m, d in rows)
        return (
            f"| {title} | {n:,} | {written:,} = {written / n:.1%} | {today:,} | {cat / n:.1%} | {unknown:,} |"
            f" {final:,} = {final / n:.1%} |"
        )

    all_cat = sum(d.category == _category(m["reason"]) for _, m, d in results)
    all_reason = sum(d.reason == m["reason"] for _, m, d in results)
    out = [
        "## First sight and final accuracy",
        "",
        "Written by `bench/corpus_report.py --readme` from the cases and the rules now. First sight is the held-out",
        "number: the rules' answer before any rule was changed for the case, against its label as written",
        f"(`first_label`); the target is {_TARGET:.0%} over the last {_LAST} cases. The final answers are the",
        "rules' now.",
        "",
        "| cases | count | first sight, reason (as written) | on today's labels | category | `unknown` | final |",
        "|---|---|---|---|---|---|---|",
        line("all real-text cases", new),
        line(f"the last {_LAST} (cases {last[0][0].split('-')[0]} to {last[-1][0].split('-')[0]})", last),
        "",
        f"Whole corpus, final: reason {all_reason:,}/{len(results):,} = {all_reason / len(results):.1%}, category"
        f" {all_cat:,}/{len(results):,} = {all_cat / len(results):.1%}.",
        "",
        "| reason | real-text cases | right at first sight | right now |",
        "|---|---|---|---|",
    ]
    for reason, (n, first, now) in sorted(_table(new, first=True).items()):
        out.append(f"| `{reason}` | {n} | {first} | {now} |")
    confusion = Counter((m["reason"], m["first_sight"]) for _, m, _ in last if m["reason"] != m["first_sight"])
    out += [
        "",
        f"First-sight confusion over the last {_LAST} (label, first sight, cases):",
        "",
        "| label | first sight | cases |",
        "|---|---|---|",
        *(f"| `{w}` | `{g}` | {k} |" for (w, g), k in sorted(confusion.items(), key=lambda x: (-x[1], x[0]))),
    ]
    return out


def rewrite_readme(path: Path = README) -> None:
    """Replace each generated section of the corpus README (its heading to the next heading) with the cases'
    counts and index now."""
    text = path.read_text()
    for head, body in readme_sections(path.parent).items():
        start = text.index(head)
        end = text.find("\n## ", start + 1)
        text = text[:start] + body + ("\n" + text[end + 1 :] if end != -1 else "")
    path.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--record", action="store_true", help="write first_sight into the cases without one")
    parser.add_argument("--markdown", action="store_true", help="tables for docs/diagnosis.md")
    parser.add_argument("--last", type=int, help="first sight over the last N real-text cases only")
    parser.add_argument("--readme", action="store_true", help="rewrite the counts and the index in the corpus's README")
    parser.add_argument("--rules-of", metavar="REV", help="the cases from --since under the rules of commit REV")
    parser.add_argument("--since", type=int, default=0, help="with --rules-of: the first case number")
    args = parser.parse_args()
    if args.rules_of:
        print(rules_of(args.rules_of, args.since))
        return
    if args.readme:
        rewrite_readme()
        return
    if args.record:
        for line in record_first_sight():
            print(line)
        return
    print(report(markdown=args.markdown, last=args.last))


if __name__ == "__main__":
    main()
