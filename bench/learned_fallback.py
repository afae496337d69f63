"""Would a classifier learnt from the corpus answer what the rules leave `unknown`? (issue 19, an experiment)

Unlike hand-written rules, a learnt model can be held out honestly: here it is trained only on the
batches of cases added before each batch (in the order their first sight was recorded) and asked about
that batch, as the next round's cases would meet it. The model is a Bernoulli naive Bayes over the
words and word pairs of each log's error-looking lines and last five lines; what matters is how it does
on the cases whose first sight was `unknown`, the ones a fallback would answer, and how many of its
answers there would be wrong (a wrong reason is a wrong action; `unknown` pages a person).

    .venv/bin/python bench/learned_fallback.py [--skip-first 3]

Not used by gpuwatch: see bench/README.md for what it found.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpuwatch.diagnosis.corpus import case_dirs, load_case
from gpuwatch.diagnosis.model import LogSource
from tests.gpuwatch.diagnosis.test_diagnosis_corpus import CORPUS

_ALARM = re.compile(
    r"(?i)error|exception|fatal|fail|abort|killed|denied|not found|no such|out of memory|oom|\bnan\b|timeout"
    r"|timed out|assert|segmentation|core dumped|traceback|terminate|cannot|can't|unable|invalid|refused|lost|exit"
)
_WORD = re.compile(r"[a-z_][a-z0-9_]+")
THRESHOLDS = (0.0, 0.5, 0.8, 0.95, 0.99)


def features(sources: Iterable[LogSource]) -> set[str]:
    """Words and word pairs of the error-looking lines and the last five lines of each log."""
    out: set[str] = set()
    for src in sources:
        lines = list(src.lines)
        for line in [ln for ln in lines if _ALARM.search(ln)] + lines[-5:]:
            words = _WORD.findall(line.lower()[:400])
            out.update(words)
            out.update(f"{a}_{b}" for a, b in pairwise(words))
    return out


class NaiveBayes:
    """Bernoulli naive Bayes over feature presence, additive smoothing 0.1."""

    def __init__(self, examples: list[tuple[str, set[str]]]) -> None:
        self.docs: Counter[str] = Counter(reason for reason, _ in examples)
        self.seen: dict[str, Counter[str]] = defaultdict(Counter)
        for reason, feats in examples:
            self.seen[reason].update(feats)
        self.vocab = set().union(*(feats for _, feats in examples))
        self.total = len(examples)

    def best(self, feats: set[str]) -> tuple[float, str]:
        """(posterior, reason) of the likeliest reason."""
        known = feats & self.vocab
        scores = {
            reason: math.log(n / self.total) + sum(math.log((self.seen[reason][f] + 0.1) / (n + 0.2)) for f in known)
            for reason, n in self.docs.items()
        }
        top = max(scores.values())
        norm = sum(math.exp(v - top) for v in scores.values())
        reason = max(scores, key=scores.__getitem__)
        return 1.0 / norm, reason


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skip-first", type=int, default=3, help="batches only trained on, never asked about")
    args = ap.parse_args()
    cases = []
    for case in case_dirs(CORPUS):
        meta, sources = load_case(case)
        cases.append((meta, features(sources)))
    batches: list[str] = []
    for meta, _ in cases:
        commit = meta.get("first_sight_commit")
        if commit and commit not in batches:
            batches.append(commit)
    asked = right = 0
    unknown = 0
    answered: dict[float, list[int]] = {t: [0, 0] for t in THRESHOLDS}  # threshold → [answered, right]
    for k, commit in enumerate(batches):
        if k < args.skip_first:
            continue
        earlier = set(batches[:k])
        train = [  # the synthetic cases and every earlier batch
            (m["reason"], f) for m, f in cases if m.get("first_sight_commit", "synthetic") in earlier | {"synthetic"}
        ]
        model = NaiveBayes(train)
        for meta, feats in cases:
            if meta.get("first_sight_commit") != commit:
                continue
            p, reason = model.best(feats)
            asked += 1
            right += reason == meta["reason"]
            if meta["first_sight"] == "unknown":
                unknown += 1
                for t in THRESHOLDS:
                    if p >= t:
                        answered[t][0] += 1
                        answered[t][1] += reason == meta["reason"]
    print(f"held out batch by batch, the model alone: {right}/{asked} = {right / asked:.1%} right")
    print(f"on the {unknown} cases the rules left unknown at first sight:")
    for t, (n, ok) in answered.items():
        print(f"  posterior >= {t}: answers {n}, right {ok} ({ok / max(n, 1):.0%}), wrong {n - ok}")


if __name__ == "__main__":
    main()
