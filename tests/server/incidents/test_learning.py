"""Learning from on-call (issue 19): an incident the server could not diagnose is labelled by an admin,
exported as a corpus case, and `gpuwatch rules suggest` writes the rule that makes it right, checked
against the whole labelled corpus; a suggestion that would change another case's answer is refused.
Real server on loopback, the real CLI in subprocesses, SQLite and PostgreSQL."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import httpx
import pytest

from gpuwatch.config import Settings
from gpuwatch.diagnosis.corpus import case_dirs, load_case
from gpuwatch.diagnosis.engine import diagnose_rules
from gpuwatch.protocol import Api
from tests.helpers import CLI, REPO, InProcessServer, new_admin_token, new_token
from tests.server.api.test_incident_labels import UNKNOWN_LINES, corrections, failed_run

CORPUS = REPO / "tests" / "data" / "failures"
SECRET = "hf_Zq3xVv8TtYy2Ww6Uu1Ss4Rr7Qq0Pp9Oo"
LUSTRE = [*UNKNOWN_LINES[:1], f"2026-11-26 03:10:00 launcher: export HF_TOKEN={SECRET}", *UNKNOWN_LINES[1:]]
ILLEGAL = ["[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered"]


def gpuwatch(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUWATCH_")} | {"GPUWATCH_DATABASE_URL": db_url}
    # a guard against a hang, not a speed check (`rules suggest` learning from the whole corpus's misses took 256 s on
    # the 2-core VM with 3,718 cases and 10-15 minutes in fresh-ci with 4,003: it learns from the exported cases only)
    return subprocess.run([*CLI, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)


@pytest.mark.slow
def test_an_unknown_failure_labelled_by_on_call_becomes_a_case_and_a_rule_that_diagnoses_it_next_time(
    tmp_path: Path, db_url: str
) -> None:
    rules, cases = tmp_path / "rules", tmp_path / "cases"
    settings = Settings(
        data_dir=tmp_path, database_url=db_url, incident_settle_s=0.05, token_cache_s=0.2, rules_dir=rules
    )
    node_token, admin_token = new_token(db_url, "gpu-node-03"), new_admin_token(db_url, "alice")
    with InProcessServer(settings) as srv:
        lustre = failed_run(srv, node_token, LUSTRE)
        illegal = failed_run(srv, node_token, ILLEGAL, job="bert")
        diagnosed = [httpx.get(srv.url + Api.INCIDENT.format(incident_id=i)).json() for i in (lustre, illegal)]
        assert [d["diagnosis"]["reason"] for d in diagnosed] == ["unknown", "cuda_error"]

        # On-call: the first was Lustre (by the CLI); the second, wrongly, called hardware (by the API).
        note = f"MDS evicted the client; key {SECRET} was in the launcher's env"
        labelled = gpuwatch(db_url, "incident", "label", str(lustre), "--reason", "storage_error", "--note", note)
        assert labelled.returncode == 0, labelled.stderr
        assert f"incident {lustre}: corrected: unknown -> storage_error" in labelled.stdout
        refused = gpuwatch(db_url, "incident", "label", str(lustre), "--reason", "cosmic_rays")
        assert refused.returncode == 2 and "not in the failure taxonomy" in refused.stderr
        admin = {"Authorization": f"Bearer {admin_token}"}
        wrong = httpx.post(
            srv.url + Api.INCIDENT_LABEL.format(incident_id=illegal), json={"reason": "gpu_hardware"}, headers=admin
        )
        assert wrong.status_code == 201, wrong.text
        # The running server counts the CLI's label too: the counter is read from the database.
        assert corrections(srv.url) == {("unknown", "storage_error"): 1.0, ("cuda_error", "gpu_hardware"): 1.0}
        audit = httpx.get(srv.url + "/api/v1/audit", params={"action": "incident.label"}, headers=admin).json()
        assert [(e["target"], e["actor"].split()[0]) for e in audit] == [
            (f"incident {illegal}", "admin"),
            (f"incident {lustre}", "cli"),
        ]

    exported = gpuwatch(db_url, "corpus", "export", "--out", str(cases))
    assert exported.returncode == 0, exported.stderr
    assert "2 case(s) written" in exported.stderr
    first, second = case_dirs(cases)
    assert re.fullmatch(rf"001-incident-{lustre}-storage-error", first.name), first.name
    meta, sources = load_case(first)
    assert meta["reason"] == "storage_error" and meta["first_sight"] == "unknown"
    assert re.fullmatch(rf"incident:{lustre}@\S+", meta["source"])
    assert "MDS evicted the client" in meta["note"] and "node" not in meta, "a correction blames no node"
    (log,) = [s for s in sources if s.lines]
    assert (log.node, log.exit_code) == ("gpu-node-03", 1)
    assert any("lustre client evicted" in line for line in log.lines)
    everything = "".join(p.read_text() for p in [*first.iterdir(), *second.iterdir()])
    assert SECRET not in everything and "HF_TOKEN=***" in everything, "secrets are scrubbed, the note's too"
    assert diagnose_rules(sources).reason == "unknown", "an exported case loads and diagnoses as the server did"
    assert diagnose_rules(load_case(second)[1]).reason == "cuda_error"
    again = gpuwatch(db_url, "corpus", "export", "--out", str(cases))  # the same incidents: the same cases
    assert again.returncode == 0 and case_dirs(cases) == [first, second]
    if db_url.startswith("postgresql"):
        return  # `rules suggest` reads files only (minutes over the whole corpus): once, on SQLite, is enough

    suggested = gpuwatch(
        db_url,
        "rules",
        "suggest",
        "--corpus",
        str(CORPUS),
        "--corpus",
        str(cases),
        "--learn-from",
        str(cases),
        "--rules-dir",
        str(rules),
        "--write",
    )
    assert suggested.returncode == 1, suggested.stdout + suggested.stderr  # one cluster refused
    out = suggested.stdout
    assert f"{first.name}: labelled storage_error, the rules say unknown" in out
    assert f"accepted: makes {first.name} storage_error, changes no other case; written to {rules}" in out
    # The wrong label's rule would turn a corpus case of a real illegal memory access into gpu_hardware.
    assert re.search(r"refused.*\n(#   \S+ would change: cuda_error -> gpu_hardware\n)+", out), out
    # Only the exported cases are learnt from (--learn-from): the corpus's own misses are not clusters.
    learnt = set(re.findall(r"^  (\S+): labelled ", out, re.M))
    assert learnt and learnt <= {first.name, second.name}, learnt
    (rule_file,) = list(rules.glob("learned-*.toml"))
    text = rule_file.read_text()
    assert 'reason = "storage_error"' in text and SECRET not in text
    (pattern,) = re.findall(r'^patterns = \["(.*)"\]$', text, re.M)
    assert re.fullmatch(r"(?:[A-Za-z0-9_:,'-]|\\\\[sS]\+|\\\\.)+", pattern), f"escaped literals, \\s+, \\S+: {pattern}"
    assert diagnose_rules(sources, rules_dir=str(rules)).reason == "storage_error"

    # A server that reads the rules diagnoses the next such failure by itself.
    with InProcessServer(settings) as srv:
        next_time = failed_run(srv, node_token, UNKNOWN_LINES, job="llama-70b-2")
        d = httpx.get(srv.url + Api.INCIDENT.format(incident_id=next_time)).json()["diagnosis"]
        assert (d["reason"], d["source"]) == ("storage_error", "rules")
        assert d["explanation"].startswith("learned-storage-error-")
