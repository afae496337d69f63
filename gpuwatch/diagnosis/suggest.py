"""Rules learnt from what on-call labelled (`gpuwatch rules suggest`).

The cases to learn from are those of the corpus that the rules get wrong: an incident the server
diagnosed `unknown`, or diagnosed wrongly, that an admin labelled and `gpuwatch corpus export` wrote out.
For each reason they should have had:

1. their error-looking lines (normalised as the engine sees them, each token with a digit or a slash
   masked) are clustered into templates by Drain3;
2. the template found in the most of them (then the most specific) becomes a rule: its constant tokens
   escaped, each variable token `\\S+`, tokens joined by `\\s+`; only escaped literals and two disjoint
   classes that alternate, so the pattern cannot backtrack badly on any line;
3. the whole corpus is diagnosed with and without the rule. The rule is accepted only when every case
   of its cluster then gets its label and no other case's answer changes; otherwise the next template
   is tried, and when none passes the cluster is refused, naming the cases each try would change. A
   case none of whose lines holds the rule's keyword (as written or as the engine normalises it) cannot
   be changed by it (the rule can match no line of it), so only the others are diagnosed again.

Nothing is written unless asked, and then only an accepted rule, as one `*.toml` file in the user rules
directory (`GPUWATCH_RULES_DIR`), which the engine loads after the shipped rules.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import re2
from drain3 import TemplateMiner
from drain3.template_miner_config import TemplateMinerConfig

from gpuwatch.diagnosis.corpus import Case, toml_value
from gpuwatch.diagnosis.engine import CONFIDENT, diagnose_rules, scan
from gpuwatch.diagnosis.excerpt import looks_like_error
from gpuwatch.diagnosis.normalize import normalize
from gpuwatch.diagnosis.scrub import scrub_line

#: Templates tried per cluster before it is refused.
MAX_TRIES = 8
#: A learnt rule's confidence: confident (the LLM is not asked over it), below the shipped rules' best.
CONFIDENCE = 0.8
_WILDCARD = "<*>"
_VARIABLE = re.compile(r"[0-9/]")
_MAX_LINE = 1000
_MIN_KEYWORD = 4
_PARAM = r"\S+"


@dataclass(frozen=True, slots=True)
class Proposal:
    """A rule proposed for a cluster of wrongly diagnosed cases, and what it did to the corpus."""

    reason: str
    cluster: tuple[str, ...]  # the cases (of this reason) whose lines the template was found in
    rule: dict[str, Any]  # in the shape of rules.toml
    missed: tuple[str, ...] = ()  # cases of the cluster the rule does not make right
    changed: dict[str, tuple[str, str]] = field(default_factory=dict)  # other case → (before, after)

    @property
    def accepted(self) -> bool:
        return not self.missed and not self.changed

    def toml(self) -> str:
        """The rule as a rules file (the `rules.toml` shape), with where it was learnt from."""
        head = [f"# Learnt by `gpuwatch rules suggest` from: {', '.join(self.cluster)}"]
        body = [f"{k} = {toml_value(v)}" for k, v in self.rule.items()]
        return "\n".join([*head, "[[rules]]", *body]) + "\n"


@dataclass(slots=True)
class Suggestions:
    wrong: dict[str, tuple[str, str]]  # case → (its label, the rules' answer) before any rule
    proposals: list[Proposal] = field(default_factory=list)  # accepted, and the refused clusters' first try

    @property
    def accepted(self) -> list[Proposal]:
        return [p for p in self.proposals if p.accepted]

    @property
    def refused(self) -> list[Proposal]:
        return [p for p in self.proposals if not p.accepted]


@dataclass(slots=True)
class _Template:
    cid: int
    cases: set[str] = field(default_factory=set)
    examples: dict[str, str] = field(default_factory=dict)  # case → one of its lines of this template


def suggest(
    cases: Sequence[Case],
    rules_dir: Path | None = None,
    max_tries: int = MAX_TRIES,
    learn_from: Sequence[Path] | None = None,
) -> Suggestions:
    """Rules for the cases the rules (shipped, and the user's in ``rules_dir``) get wrong, each checked
    against every case given. ``learn_from``: learn only from the wrong cases under these directories (say the
    incidents on-call exported), the others serving as the check; by default every wrong case is learnt from."""
    before = {c.name: diagnose_rules(c.sources, _dir(rules_dir)).reason for c in cases}
    texts = {c.name: _text(c) for c in cases}
    roots = [p.resolve() for p in learn_from] if learn_from is not None else None
    wrong = [
        c
        for c in cases
        if before[c.name] != c.reason and (roots is None or any(c.path.resolve().is_relative_to(r) for r in roots))
    ]
    result = Suggestions(wrong={c.name: (c.reason, before[c.name]) for c in wrong})
    if not wrong:
        return result
    templates, miner = _mine(wrong)
    by_case = {c.name: c for c in cases}
    for reason in sorted({c.reason for c in wrong}):
        todo = {c.name for c in wrong if c.reason == reason}
        while todo:
            ranked = sorted(
                (t for t in templates.values() if t.cases & todo),
                key=lambda t: (-len(t.cases & todo), -_constant_chars(miner, t.cid), t.cid),
            )
            tried: list[Proposal] = []
            for t in ranked:
                rule = _rule(reason, _tokens(miner, t.cid), t, by_case, rules_dir)
                if rule is None:
                    continue
                cluster = tuple(sorted(t.cases & todo))
                tried.append(_check(reason, cluster, rule, cases, before, texts, rules_dir))
                if tried[-1].accepted or len(tried) >= max_tries:
                    break
            if not tried:  # no line of these cases makes a rule: nothing to propose
                result.proposals.append(Proposal(reason, tuple(sorted(todo)), {}, missed=tuple(sorted(todo))))
                break
            chosen = next((p for p in tried if p.accepted), tried[0])
            result.proposals.append(chosen)
            todo -= set(chosen.cluster)
    return result


def write_rule(rules_dir: Path, proposal: Proposal) -> Path:
    """Write an accepted proposal into the user rules directory as ``<rule id>.toml``."""
    if not proposal.accepted:
        raise ValueError(f"rule {proposal.rule.get('id')!r} was refused; it is not written")
    rules_dir.mkdir(parents=True, exist_ok=True)
    path = rules_dir / f"{proposal.rule['id']}.toml"
    path.write_text(proposal.toml(), encoding="utf-8")
    return path


def _dir(rules_dir: Path | None) -> str | None:
    return str(rules_dir) if rules_dir is not None else None


def _mask(text: str) -> str:
    return " ".join(_WILDCARD if _VARIABLE.search(tok) else tok for tok in text.split())


def _mine(wrong: Sequence[Case]) -> tuple[dict[int, _Template], TemplateMiner]:
    """Each error-looking line of the wrong cases into Drain3; the templates with the cases they are in."""
    config = TemplateMinerConfig()
    config.drain_sim_th = 0.5
    config.profiling_enabled = False
    miner = TemplateMiner(persistence_handler=None, config=config)
    templates: dict[int, _Template] = {}
    for case in wrong:
        for source in case.sources:
            for raw in source.lines:
                text = normalize(raw)[0]
                if not text or len(text) > _MAX_LINE or not looks_like_error(text):
                    continue
                cid = miner.add_log_message(_mask(text))["cluster_id"]
                t = templates.setdefault(cid, _Template(cid))
                t.cases.add(case.name)
                t.examples.setdefault(case.name, text)
    return templates, miner


def _tokens(miner: TemplateMiner, cid: int) -> list[str]:
    # Read at the end: a cluster's template generalises as later lines join it.
    return miner.drain.id_to_cluster[cid].get_template().split()


def _constant_chars(miner: TemplateMiner, cid: int) -> int:
    return sum(len(tok) for tok in _tokens(miner, cid) if _WILDCARD not in tok)


def _pattern(tokens: Sequence[str]) -> str | None:
    """The template as a regex: constant tokens escaped, a variable one `\\S+`, joined by `\\s+`; the
    variable tokens at either end left out (the pattern is searched, not anchored)."""
    parts = [_PARAM if _WILDCARD in tok else re.escape(tok) for tok in tokens]
    while parts and parts[0] == _PARAM:
        parts.pop(0)
    while parts and parts[-1] == _PARAM:
        parts.pop()
    return r"\s+".join(parts) or None


def _rule(
    reason: str, tokens: list[str], t: _Template, by_case: dict[str, Case], rules_dir: Path | None
) -> dict[str, Any] | None:
    """A rule for the template, or None when it has no keyword worth the prefilter."""
    pattern = _pattern(tokens)
    constants = [tok for tok in tokens if _WILDCARD not in tok and any(ch.isalpha() for ch in tok)]
    keyword = max(constants, key=len, default="").lower()
    if pattern is None or len(keyword) < _MIN_KEYWORD:
        return None
    re2.compile(pattern)  # no backreference or lookaround slipped in: it is a regular language
    compiled = re.compile(pattern)
    example = next(iter(t.examples.values()))
    if not compiled.search(example):  # the template generalises its lines; it must still match them
        return None
    # Above whatever root cause the rules found in these cases (+5: the engine's boost for the rank a
    # launcher named as failing first), so that it wins there; as low as that allows elsewhere.
    found = [c.priority for n in t.cases for c in scan(by_case[n].sources, _dir(rules_dir))[0] if c.role == "root"]
    priority = max(found, default=4) + 6
    digest = hashlib.sha256(f"{reason}\n{pattern}".encode()).hexdigest()[:8]
    return {
        "id": f"learned-{reason.replace('_', '-')}-{digest}",
        "reason": reason,
        "role": "root",
        "keywords": [keyword],
        "patterns": [pattern],
        "confidence": max(CONFIDENCE, CONFIDENT),
        "priority": priority,
        "examples": [scrub_line(example)],
    }


def _text(case: Case) -> str:
    """A case's lines, lower-cased, each as written and as the engine normalises it, and the exception the engine
    reads for a traceback cut after its assert statement ("AssertionError", which no line of the case holds:
    LLaMA-Factory's DPO run ending on DeepSpeed's assert, case 4063): where a rule's keyword must appear for the rule
    to match any line of the case."""
    out = []
    for source in case.sources:
        for raw in source.lines:
            said = normalize(raw)[0].lower()
            out.append(f"{raw.lower()}\n{said}")
            if said.lstrip().startswith("assert "):
                out.append("assertionerror")
    return "\n".join(out)


def _check(
    reason: str,
    cluster: tuple[str, ...],
    rule: dict[str, Any],
    cases: Sequence[Case],
    before: dict[str, str],
    texts: dict[str, str],
    rules_dir: Path | None,
) -> Proposal:
    """Diagnose with the rule added to the user's rules every case holding its keyword (no other case's
    answer can change); what it fixes, misses and changes."""
    proposal = Proposal(reason, cluster, rule)
    keywords = [k.lower() for k in rule["keywords"]]
    touched = [c for c in cases if c.name in cluster or any(k in texts[c.name] for k in keywords)]
    with _with_rule(rules_dir, proposal) as trial:
        after = before | {c.name: diagnose_rules(c.sources, str(trial)).reason for c in touched}
    missed = tuple(name for name in cluster if after[name] != reason)
    changed = {n: (before[n], after[n]) for n in before if n not in cluster and after[n] != before[n]}
    return Proposal(reason, cluster, rule, missed, changed)


@contextmanager
def _with_rule(rules_dir: Path | None, proposal: Proposal) -> Iterator[Path]:
    """A temporary rules directory: the user's rules files, and the proposal's."""
    with tempfile.TemporaryDirectory(prefix="gpuwatch-rules-") as tmp:
        trial = Path(tmp)
        if rules_dir is not None and rules_dir.is_dir():
            for path in rules_dir.glob("*.toml"):
                shutil.copy(path, trial / path.name)
        (trial / f"{proposal.rule['id']}.toml").write_text(proposal.toml(), encoding="utf-8")
        yield trial
