"""`gpuwatch rules suggest` on small corpora: a learnt rule's pattern is literal text escaped, its
variable tokens `\\S+`; it is accepted only when it fixes its cluster and changes no other case."""

from __future__ import annotations

import re
import time
from pathlib import Path

from gpuwatch.diagnosis.corpus import load_corpus, write_case
from gpuwatch.diagnosis.engine import diagnose_rules
from gpuwatch.diagnosis.suggest import suggest, write_rule

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
