"""The rules engine on small, targeted logs: normalisation, roles, tracebacks, Xids, exits, and the
choice of the root cause across ranks and nodes. The labelled corpus test measures accuracy."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwatch.diagnosis.engine import diagnose_rules
from gpuwatch.diagnosis.model import LogSource
from gpuwatch.diagnosis.normalize import normalize
from gpuwatch.diagnosis.rules import Rule, RuleSet, load_frameworks, load_rules
from gpuwatch.taxonomy import REASONS
from tests.gpuwatch.diagnosis.test_diagnosis_corpus import CORPUS

NCCL_TIMEOUT = (
    "[rank{r}]:[E ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=8812, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800082 "
    "milliseconds before timing out."
)


def _src(name: str, text: str, **kw: object) -> LogSource:
    return LogSource(file=name, lines=text.strip("\n").splitlines(), **kw)  # type: ignore[arg-type]


def test_a_rule_id_used_twice_in_the_shipped_rules_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two shipped rules of one id: the later silently replaced the earlier (round 94's session lost an older
    extension-build rule this way, three corpus cases with it), so loading them is an error that names the id."""
    from gpuwatch.diagnosis import rules as rules_module

    shipped = rules_module._shipped()
    first = next(r for r in shipped["rules"] if r["id"] == "extension-build-failed")
    doubled = {**shipped, "rules": [*shipped["rules"], {**first, "examples": []}]}
    monkeypatch.setattr(rules_module, "_shipped", lambda: doubled)
    with pytest.raises(ValueError, match="rule id used twice: extension-build-failed"):
        load_rules()


def test_every_rule_matches_its_examples_and_they_are_diagnosed_as_its_reason() -> None:
    """Matching the rule is not enough: an ignore rule that also matches a root rule's example drops
    the line before the root rule counts, so each example is diagnosed too (an ignore rule's: unknown)."""
    rules = RuleSet(load_rules())
    for rule in rules.rules:
        assert rule.reason in REASONS
        for example in rule.examples:
            assert rule in rules.match(normalize(example)[0]), (rule.id, example)
            assert rules.prefilter(example), (rule.id, example)
            want = "unknown" if rule.role == "ignore" else rule.reason
            assert diagnose_rules([_src("example.log", example)]).reason == want, (rule.id, example)


def _every_rule(rules: RuleSet, line: str) -> list[tuple[Rule, int]]:
    """What `RuleSet.match_at` answers, asked of each rule in turn (as it did before it indexed keywords)."""
    lower = line.lower()
    return [(r, at) for r in rules.rules if (at := r.match_at(line, lower)) is not None]


def test_the_keyword_index_tries_every_rule_one_of_whose_keywords_the_line_holds() -> None:
    """`RuleSet.match_at` looks each keyword up once (an RE2 set) and tries only the rules it opens: the
    same rules, in the same order, as asking every rule. Overlapping keywords (an alternation finds only one
    of two that overlap), a keyword inside another, and lines RE2 and str.lower fold differently."""
    table = [
        ("cuda-error", ["cuda error"], r"CUDA error"),
        ("errors", ["errors"], r"errors"),
        ("error", ["error"], r"error"),
        ("kelvin", ["5 k"], r"5 (?i:k)"),
        ("dotted-i", ["illegal"], r"(?i)illegal"),
    ]
    rules = RuleSet(
        [
            Rule(id=i, reason="cuda_error", role="root", keywords=tuple(k), sources=(p,), confidence=0.5, priority=1)
            for i, k, p in table
        ]
    )
    for line in ["CUDA errors: 3", "cuda errors", "nothing here", "at 5 \u212a it froze", "\u0130llegal", "errors"]:
        line = line.encode().decode("unicode_escape")
        assert rules.match_at(line) == _every_rule(rules, line), line
    assert [r.id for r, _ in rules.match_at("CUDA errors: 3")] == ["cuda-error", "errors", "error"]
    shipped = RuleSet(load_rules())
    lines = [
        ln for case in sorted(CORPUS.iterdir())[::5] for f in case.glob("*.log") for ln in f.read_text().splitlines()
    ]
    assert len(lines) > 5_000
    assert [shipped.match_at(ln) for ln in lines] == [_every_rule(shipped, ln) for ln in lines]


def test_every_shipped_pattern_compiles_and_a_users_bad_pattern_is_refused_at_load(tmp_path: Path) -> None:
    """The shipped rules' patterns are compiled when a log first meets their keywords (start-up compiled
    none of them); each is compiled here. A user's rule is compiled as it loads, refused naming its file."""
    for rule in load_rules():
        assert len(rule.patterns) == len(rule.sources) > 0, rule.id
    (tmp_path / "site.toml").write_text(
        '[[rules]]\nid = "acme"\nreason = "script_error"\nkeywords = ["acme"]\npatterns = ["acme(("]\n'
        "confidence = 0.5\npriority = 10\n"
    )
    with pytest.raises(ValueError, match="rule 'acme' is invalid") as refused:
        load_rules(tmp_path)
    assert "site.toml" in str(refused.value)


def test_normalisation_strips_colour_time_and_launcher_prefixes() -> None:
    assert normalize("\x1b[31m2024-05-01 12:34:56,789 - ERROR - boom\x1b[0m") == ("boom", None)
    assert normalize("[default3]:RuntimeError: x") == ("RuntimeError: x", 3)
    assert normalize("[12345.678901] NVRM: Xid (PCI:0000:18:00): 79, pid=1") == (
        "NVRM: Xid (PCI:0000:18:00): 79, pid=1",
        None,
    )


def test_an_oom_on_one_rank_beats_the_nccl_timeouts_it_causes_elsewhere() -> None:
    ranks = [_src(f"rank{r}.log", "iteration 10 loss 2.1\n" + NCCL_TIMEOUT.format(r=r), rank=r) for r in (0, 2, 3)]
    oom = _src(
        "rank1.log",
        """
[rank1]: Traceback (most recent call last):
[rank1]:   File "/work/train.py", line 88, in <module>
[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 79.11 GiB total capacity)
""",
        node="gpu-node-02",
    )
    d = diagnose_rules([*ranks, oom])
    assert (d.reason, d.rank, d.node, d.source) == ("gpu_oom", 1, "gpu-node-02", "rules")
    assert d.evidence[0].file == "rank1.log" and d.evidence[0].line == 3
    assert "nccl_timeout" in d.explanation


def test_a_fatal_xid_in_the_kernel_log_blames_its_node() -> None:
    kern = _src(
        "kern.log",
        """
[ 8812.113321] NVRM: Xid (PCI:0000:3a:00): 79, pid=4471, name=python, GPU has fallen off the bus.
[ 8812.113390] NVRM: GPU 0000:3a:00.0: GPU has fallen off the bus.
""",
        node="gpu-node-07",
    )
    rank = _src(
        "rank5.log",
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "CUDA kernel errors might be asynchronously reported at some other API call",
        rank=5,
    )
    d = diagnose_rules([rank, kern])
    assert (d.reason, d.node) == ("gpu_hardware", "gpu-node-07")
    assert [e.line for e in d.evidence if e.file == "kern.log"] == [1, 2]


def test_application_xid_is_not_hardware() -> None:
    kern = _src("kern.log", "[1.0] NVRM: Xid (PCI:0000:3a:00): 13, pid=4471, Graphics Exception", node="n1")
    assert diagnose_rules([kern]).reason != "gpu_hardware"


def test_torchrun_summary_is_unwrapped_to_the_failing_ranks_error() -> None:
    log = _src(
        "torchrun.log",
        """
[default2]:Traceback (most recent call last):
[default2]:  File "/work/train.py", line 41, in <module>
[default2]:    batch = buckets[key]
[default2]:KeyError: 'seq_len_4096'
[default0]:Traceback (most recent call last):
[default0]:  File "/work/train.py", line 77, in <module>
[default0]:RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.3.12]:27418
Traceback (most recent call last):
  File "/opt/conda/bin/torchrun", line 8, in <module>
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-06-01_10:11:12
  host      : gpu-node-04
  rank      : 2 (local_rank: 2)
  exitcode  : 1 (pid: 8812)
  error_file: <N/A>
============================================================
""",
    )
    d = diagnose_rules([log])
    assert (d.reason, d.rank, d.node) == ("script_error", 2, "gpu-node-04")


def test_exception_in_framework_code_is_a_framework_error() -> None:
    log = _src(
        "rank0.log",
        """
Traceback (most recent call last):
  File "/work/train.py", line 12, in <module>
  File "/usr/lib/python3/dist-packages/deepspeed/runtime/engine.py", line 1800, in step
AssertionError: optimizer state not initialised
""",
    )
    assert diagnose_rules([log]).reason == "framework_error"


def test_script_exception_in_user_code() -> None:
    log = _src(
        "rank0.log",
        'Traceback (most recent call last):\n  File "/work/train.py", line 3\nZeroDivisionError: division by zero',
    )
    d = diagnose_rules([log])
    assert (d.reason, d.evidence[0].line) == ("script_error", 3)


def test_exit_statuses_speak_only_when_the_text_does_not() -> None:
    assert diagnose_rules([_src("r.log", "iteration 5", exit_code=137)]).reason == "host_oom"
    assert diagnose_rules([_src("r.log", "iteration 5", signal=15)]).reason == "preempted"
    assert diagnose_rules([_src("r.log", "KeyError: 'x'\n", exit_code=137)]).reason == "host_oom"
    nothing = diagnose_rules([_src("r.log", "all good\niteration 5")])
    assert (nothing.reason, nothing.source, nothing.confidence) == ("unknown", "none", 0.0)


def test_user_rules_add_and_replace(tmp_path: Path) -> None:
    (tmp_path / "site.toml").write_text("""
[[rules]]
id = "lustre-eviction"
reason = "storage_error"
keywords = ["evicted by"]
patterns = ["LustreError: .* evicted by"]
confidence = 0.9
priority = 66
""")
    log = _src("kern.log", "[5.0] LustreError: 11-0: lustre-OST0004: operation failed; evicted by 10.0.0.1@o2ib")
    assert diagnose_rules([log]).reason == "unknown"
    assert diagnose_rules([log], rules_dir=str(tmp_path)).reason == "storage_error"


def test_a_rule_outside_the_taxonomy_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text(
        '[[rules]]\nid = "x"\nreason = "cosmic_rays"\nkeywords = ["x"]\n'
        'patterns = ["x"]\nconfidence = 1\npriority = 1\n'
    )
    with pytest.raises(ValueError, match="cosmic_rays"):
        load_rules(tmp_path)


def test_a_rule_with_an_unknown_severity_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text(
        '[[rules]]\nid = "x"\nreason = "storage_error"\nkeywords = ["x"]\n'
        'patterns = ["x"]\nconfidence = 1\npriority = 1\nseverity = "catastrophic"\n'
    )
    with pytest.raises(ValueError, match="severity"):
        load_rules(tmp_path)


_ACME_NAME_ERROR = """
Traceback (most recent call last):
  File "/opt/job/train.py", line 12, in <module>
    trainer.fit()
  File "/opt/conda/lib/python3.11/site-packages/acme_trainer/loop.py", line 88, in fit
    self._step(batch)
  File "/opt/conda/lib/python3.11/site-packages/acme_trainer/loop.py", line 141, in _step
    scaler.update()
NameError: name 'scaler' is not defined
"""


def test_a_site_names_its_own_training_framework_in_the_rules_directory(tmp_path: Path) -> None:
    """A code bug raised inside an installed package that is no known framework is the run's (an application
    installed as a package); a site whose own trainer is that package says so once, in [frameworks], and the
    same traceback is the framework's."""
    log = _src("train.log", _ACME_NAME_ERROR)
    assert diagnose_rules([log]).reason == "script_error"
    (tmp_path / "site.toml").write_text('[frameworks]\npackages = ["acme_*"]\n')
    assert diagnose_rules([log], rules_dir=str(tmp_path)).reason == "framework_error"


def test_a_framework_run_from_a_checkout_is_named_by_its_path(tmp_path: Path) -> None:
    """A framework run from a checkout (not installed) is known by its frame's path."""
    text = """
Traceback (most recent call last):
  File "/home/u/run.py", line 3, in <module>
    main()
  File "/home/u/acme-llm/acme_llm/engine.py", line 40, in main
    raise RuntimeError("pipeline stage 3 received no embeddings")
RuntimeError: pipeline stage 3 received no embeddings
"""
    log = _src("train.log", text)
    assert diagnose_rules([log]).reason == "script_error"
    (tmp_path / "site.toml").write_text("[frameworks]\npaths = ['/acme_llm/']\n")
    assert diagnose_rules([log], rules_dir=str(tmp_path)).reason == "framework_error"


def test_a_sites_library_is_judged_by_its_caller(tmp_path: Path) -> None:
    """A site names its own general-purpose library: its argument errors called from the run's code are the run's."""
    text = """Traceback (most recent call last):
  File "/work/train.py", line 7, in <module>
    grid = acme_math.grid(n)
  File "/venv/lib/python3.11/site-packages/acme_math/grid.py", line 40, in grid
    raise ValueError("n must be a power of two")
ValueError: n must be a power of two
"""
    log = _src("train.log", text)
    assert diagnose_rules([log]).reason == "framework_error"  # installed code, as before
    (tmp_path / "site.toml").write_text("[frameworks]\nlibraries = ['acme_math']\n")
    assert diagnose_rules([log], rules_dir=str(tmp_path)).reason == "script_error"


@pytest.mark.parametrize("sep", ["/", "\\"])
def test_an_installed_non_framework_package_s_code_bug_is_the_application_s(sep: str) -> None:
    """The interpreter's code-bug wording raised in an installed package that is no framework (a project's own
    package installed with pip) is the application's, with Windows' backslashes as with slashes."""
    site = sep.join(["C:", "Python311", "Lib", "site-packages", "acme_app", "pipeline.py"])
    text = f"""Traceback (most recent call last):
  File "C:\\work\\run.py", line 7, in <module>
    acme_app.run(cfg)
  File "{site}", line 40, in run
    self.writer.add_scalar("loss", loss)
AttributeError: 'NoneType' object has no attribute 'add_scalar'
"""
    assert diagnose_rules([_src("train.log", text)]).reason == "script_error"


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ('[frameworks]\npackages = ["Acme Trainer"]\n', "not a lower-case package name"),
        ("[frameworks]\npaths = ['/acme(/']\n", "not a regular expression"),
        ('[frameworks]\nmodules = ["acme"]\n', "only the lists packages, libraries, paths"),
        ('[frameworks]\nlibraries = ["Acme-Math"]\n', "library 'Acme-Math' is not a lower-case package name"),
    ],
)
def test_a_bad_frameworks_table_is_refused_naming_its_file(tmp_path: Path, body: str, complaint: str) -> None:
    (tmp_path / "site.toml").write_text(body)
    with pytest.raises(ValueError, match=complaint) as refused:
        load_frameworks(tmp_path)
    assert "site.toml" in str(refused.value)


def test_a_warning_is_outweighed_only_in_its_own_process() -> None:
    """A warning on rank 0 and a specific error on rank 1, in one file: rank 0's warning still stands
    against rank 1's error by priority; the same two on one rank: the error ended the run."""
    warn = "[rank{r}]: 2024-05-01 10:00:00,000 - mmdet - WARNING - size mismatch for head.fc.weight: copying a param"
    err = "[rank{r}]: RuntimeError: DataLoader worker (pid(s) 9912) exited unexpectedly"
    one = diagnose_rules([_src("t.log", warn.format(r=0) + "\n" + err.format(r=0))])
    two = diagnose_rules([_src("t.log", warn.format(r=0) + "\n" + err.format(r=1))])
    assert (one.reason, two.reason) == ("dataloader_error", "checkpoint_load_error")
