"""`gpuwatch rules suggest` on small corpora: a learnt rule's pattern is literal text escaped, its
variable tokens `\\S+`; it is accepted only when it fixes its cluster and changes no other case."""

from __future__ import annotations

import re
import time
from pathlib import Path

from gpuwatch.diagnosis.corpus import load_corpus, write_case
from gpuwatch.diagnosis.engine import diagnose_rules
from gpuwatch.diagnosis.suggest import suggest, write_rule
from tests.helpers import TESTS

# Regex metacharacters in the message: they must reach the pattern escaped.
WEIRD = "fatal: shard[main] (*ckpt*) commit failed: quorum+lost? at {host} |retry=$none^ step {n}"


def _case(corpus: Path, name: str, reason: str, lines: list[str]) -> None:
    write_case(corpus / name, {"reason": reason, "source": "test", "note": name}, {"train.log": (lines, {})})


def test_a_rule_learnt_from_two_cases_escapes_their_text_and_fixes_both(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    for i, host in enumerate(["gpu-a01", "gpu-b17"], 1):
        _case(corpus, f"00{i}-quorum", "storage_error", ["step 10 loss 1.0", WEIRD.format(n=i * 7, host=host)])
    _case(corpus, "003-other", "script_error", ["Traceback (most recent call last):", "KeyError: 'x'"])
    result = suggest(load_corpus([corpus]))
    assert result.wrong == {"001-quorum": ("storage_error", "unknown"), "002-quorum": ("storage_error", "unknown")}
    (proposal,) = result.proposals
    assert proposal.accepted and proposal.cluster == ("001-quorum", "002-quorum")
    (pattern,) = proposal.rule["patterns"]
    # Each token with a digit is variable (`\S+`); the variable ends are left out (the pattern is searched).
    literal = r"fatal: shard\[main\] \(\*ckpt\*\) commit failed: quorum\+lost\? at \S+ \|retry=\$none\^ step"
    assert pattern == literal.replace(" ", r"\s+")
    compiled = re.compile(pattern)
    hostile = "fatal: shard[main] (*ckpt*) commit " + "a" * 200_000
    started = time.perf_counter()
    assert compiled.search(hostile) is None
    assert time.perf_counter() - started < 0.5, "no catastrophic backtracking on a long line"

    rules = write_rule(tmp_path / "rules", proposal).parent
    for case in load_corpus([corpus]):
        assert diagnose_rules(case.sources, str(rules)).reason == case.reason, case.name


def test_a_rule_that_would_change_another_case_is_refused_naming_it(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    line = "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered"
    _case(corpus, "001-said-hardware", "gpu_hardware", [line])
    _case(corpus, "002-real-cuda", "cuda_error", ["step 3 loss 2.0", line])
    result = suggest(load_corpus([corpus]))
    (proposal,) = result.proposals
    assert not proposal.accepted and result.accepted == []
    assert proposal.changed == {"002-real-cuda": ("cuda_error", "gpu_hardware")}


def test_only_the_cases_holding_a_rule_s_keyword_are_diagnosed_again_and_the_verdicts_are_those_of_all(
    tmp_path: Path,
) -> None:
    """A rule can change no case none of whose lines holds its keyword, so `suggest` diagnoses only the
    others again: over a slice of the real corpus (its misses and every seventh case), each proposal's fixed,
    missed and changed cases are exactly what diagnosing every case with the rule gives (checked for every
    proposal that changes another case and for six that change none: each check diagnoses the whole slice)."""
    # On-call's wrong label: its rule would turn the corpus's real illegal memory accesses into gpu_hardware.
    line = "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered"
    _case(tmp_path / "labelled", "001-said-hardware", "gpu_hardware", [line])
    corpus = load_corpus([TESTS / "data" / "failures", tmp_path / "labelled"])
    wrong = {c.name for c in corpus if diagnose_rules(c.sources).reason != c.reason}
    cases = [c for i, c in enumerate(corpus) if i % 7 == 0 or c.name in wrong]
    before = {c.name: diagnose_rules(c.sources).reason for c in cases}
    result = suggest(cases)
    assert set(result.wrong) == wrong and result.proposals
    assert any(p.changed for p in result.proposals), "a proposal that changes another case is among them"
    with_rules = [p for p in result.proposals if p.rule]
    for proposal in [p for p in with_rules if p.changed] + [p for p in with_rules if not p.changed][:6]:
        rules = tmp_path / proposal.rule["id"]
        rules.mkdir()
        (rules / "rule.toml").write_text(proposal.toml())  # refused ones too, which write_rule will not write
        after = {c.name: diagnose_rules(c.sources, str(rules)).reason for c in cases}
        assert proposal.missed == tuple(n for n in proposal.cluster if after[n] != proposal.reason)
        changed = {n: (before[n], after[n]) for n in before if n not in proposal.cluster and after[n] != before[n]}
        assert proposal.changed == changed, proposal.rule["id"]


def test_learning_from_one_corpus_leaves_the_other_corpus_misses_alone_but_checks_them(tmp_path: Path) -> None:
    """--learn-from: on-call's exported cases are learnt from; the shipped corpus's own misses are not clusters, and
    its cases still refuse a rule that would change them."""
    shipped, exported = tmp_path / "shipped", tmp_path / "exported"
    _case(shipped, "001-shipped-miss", "storage_error", [WEIRD.format(n=1, host="gpu-a01")])
    _case(
        shipped,
        "002-real-cuda",
        "cuda_error",
        ["[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered"],
    )
    _case(exported, "101-oncall", "storage_error", [WEIRD.format(n=9, host="gpu-c03")])
    cases = load_corpus([shipped, exported])
    everything = suggest(cases)
    assert set(everything.wrong) == {"001-shipped-miss", "101-oncall"}
    learnt = suggest(cases, learn_from=[exported])
    assert set(learnt.wrong) == {"101-oncall"}
    (proposal,) = learnt.proposals
    assert proposal.cluster == ("101-oncall",)
    # the shipped miss has the same text: the rule fixes it too, which is a change to another case's answer
    assert proposal.changed == {"001-shipped-miss": ("unknown", "storage_error")} and not proposal.accepted
