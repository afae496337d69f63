"""The LLM analyser against a real small model, with the answer's schema and without it.

The questions: the corpus cases (tests/data/failures) that the rules did not get right at first sight
(`first_sight` unknown or another reason than the label): the kind of log the LLM is there for. The
rules' hint is withheld (the model sees "none matched"), so that the answer is the model's own. Each
case is asked once with the schema (`json_schema`, which llama-cpp-python's server takes as a grammar)
and once with free-form JSON (`json_object`), one after the other, so both meet the same machine load.

Per mode: answers valid (a taxonomy reason, every cited id in the excerpt: what the analyser accepts),
used (valid and at or above the threshold), right (used and the label's reason), right at any
confidence, and the seconds per question (median, p90).

    .venv/bin/python bench/llm_accuracy.py [--timeout 180] [--threshold 0.6] [--limit N] [--no-examples]
                                           [--json bench/results/llm-accuracy.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpuwatch.config import LlmSettings
from gpuwatch.diagnosis.diagnose import combine
from gpuwatch.diagnosis.llm import LlmAnalyser
from gpuwatch.diagnosis.model import Diagnosis
from tests.gpuwatch.diagnosis.test_diagnosis_corpus import CORPUS, load_case
from tests.local_llm import local_llm, missing

NO_HINT = Diagnosis("unknown", 0.0, "none")
MODES = ("schema", "json_object")


def missed_at_first_sight() -> list[Path]:
    cases = []
    for case in sorted(p for p in CORPUS.iterdir() if (p / "case.toml").exists()):
        meta = tomllib.loads((case / "case.toml").read_text())
        if "first_sight" in meta and meta["first_sight"] != meta["reason"]:
            cases.append(case)
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeout", type=float, default=180.0, help="the analyser's deadline per question, s")
    parser.add_argument("--threshold", type=float, default=LlmSettings().min_confidence)
    parser.add_argument("--limit", type=int, default=0, help="only the first N cases")
    parser.add_argument("--no-examples", action="store_true", help="without the few-shot examples")
    parser.add_argument("--json", type=Path, help="write every answer here")
    args = parser.parse_args()
    if (why := missing()) is not None:
        raise SystemExit(why)
    cases = missed_at_first_sight()[: args.limit or None]
    rows = []
    with local_llm() as llm:
        analysers = {
            mode: LlmAnalyser(
                llm.base_url,
                llm.model,
                timeout_s=args.timeout,
                min_confidence=args.threshold,
                constrained=mode == "schema",
                examples=not args.no_examples,
            )
            for mode in MODES
        }
        # Untimed: the server evaluates the fixed start of the prompt (instructions, examples) once and
        # reuses it for every later question; the first question alone would pay for it.
        warm = LlmAnalyser(llm.base_url, llm.model, timeout_s=600, examples=not args.no_examples)
        warm.analyse(load_case(CORPUS / "001-xid79-fell-off-bus-two-nodes")[1], NO_HINT)
        for case in cases:
            meta, sources = load_case(case)
            for mode, analyser in analysers.items():
                analyser.cache.clear()  # every question asked, not remembered
                started = time.monotonic()
                answer = analyser.analyse(sources, NO_HINT)
                seconds = time.monotonic() - started
                final = combine(NO_HINT, answer, args.threshold)
                valid = "cached" in answer.extra  # only a validated answer of the model has it
                row = {
                    "case": case.name,
                    "mode": mode,
                    "label": meta["reason"],
                    "first_sight": meta["first_sight"],
                    "valid": valid,
                    "answer": answer.reason if valid else None,
                    "confidence": answer.confidence if valid else None,
                    "used": final.extra["used"],
                    "right": final.extra["used"] and final.reason == meta["reason"],
                    "right_any_confidence": valid and answer.reason == meta["reason"],
                    "seconds": round(seconds, 2),
                    "why": "" if valid else answer.explanation[:160],
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        record = {"threshold": args.threshold, "timeout_s": args.timeout, "examples": not args.no_examples}
        args.json.write_text(json.dumps({**record, "rows": rows}, indent=1) + "\n")
    print(f"\n{len(cases)} cases (first sight unknown or wrong), hint withheld, threshold {args.threshold}")
    print("| mode | valid | used | right | right at any confidence | median s | p90 s |")
    print("|---|---|---|---|---|---|---|")
    for mode in MODES:
        mine = [r for r in rows if r["mode"] == mode]
        n = len(mine)
        secs = sorted(r["seconds"] for r in mine)
        p90 = secs[min(n - 1, int(0.9 * n))] if secs else 0.0
        counts = [sum(r[k] for r in mine) for k in ("valid", "used", "right", "right_any_confidence")]
        print(
            f"| {mode} | "
            + " | ".join(f"{c}/{n}" for c in counts)
            + f" | {statistics.median(secs) if secs else 0:.1f} | {p90:.1f} |"
        )


if __name__ == "__main__":
    main()
