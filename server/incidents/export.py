"""Labelled incidents as corpus cases (`gpuwatch corpus export`): what on-call said an incident was,
with the logs the server diagnosed it from, in the format of tests/data/failures.

Each incident whose latest label names a reason a log can show becomes one case directory: its
`case.toml` holds the label, where it came from (`incident:<id>@<server>`), the note, the server's own
diagnosis (`first_sight`) and, per file, the node, rank and exit status; the files are the run's streams,
the node's kernel log and its Xid events as the diagnosis read them (server/incidents/pipeline.py
`incident_sources`), cut to an excerpt around the evidence, every line scrubbed of secrets. When the
log lines are gone (retention), the diagnosis's own evidence lines are what is left to export.

Exporting again rewrites an incident's case in place (found by its `source`), so the corpus follows
relabelling; new cases take the next running number of the directory.
"""

from __future__ import annotations

import re
import tomllib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpuwatch.diagnosis.corpus import CASE_FILE, case_dirs, write_case
from gpuwatch.diagnosis.model import LogSource
from gpuwatch.diagnosis.scrub import scrub_line, scrub_lines
from server.incidents.pipeline import incident_sources
from server.store.models import Diagnosis, Incident, IncidentLabel

#: Reasons no case may have (tests/data/failures/README.md): a hang is observed, not read in a log, and
#: `unknown` teaches nothing.
NOT_CASES = ("hang", "unknown")
#: A file longer than this is cut to its head, its tail and the lines around the evidence.
MAX_LINES = 3000
HEAD, TAIL, AROUND = 200, 1500, 50

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_NUMBERED = re.compile(r"^(\d+)-")


@dataclass(slots=True)
class Exported:
    written: list[Path] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (incident, why)


def export_labelled(session: Session, out: Path, server: str, since: datetime | None = None) -> Exported:
    """Write a case into ``out`` for each incident labelled (its latest label) since ``since``."""
    latest = select(func.max(IncidentLabel.id)).group_by(IncidentLabel.incident_id)
    query = select(IncidentLabel).where(IncidentLabel.id.in_(latest)).order_by(IncidentLabel.incident_id)
    if since is not None:
        query = query.where(IncidentLabel.created_at >= since)
    result = Exported()
    out.mkdir(parents=True, exist_ok=True)
    existing = _cases_by_source(out)
    for label in session.scalars(query):
        if label.reason in NOT_CASES:
            result.skipped.append((label.incident_id, f"labelled {label.reason}: not a reason a case can have"))
            continue
        incident = session.get(Incident, label.incident_id)
        assert incident is not None
        diagnosis = session.get(Diagnosis, label.diagnosis_id) if label.diagnosis_id is not None else None
        sources, _ = incident_sources(session, incident)
        files = _files(sources, diagnosis)
        if not files:
            result.skipped.append((label.incident_id, "nothing left of its logs or its evidence"))
            continue
        source = f"incident:{incident.id}@{server}"
        name = f"incident-{incident.id}-{label.reason.replace('_', '-')}"
        path = existing.get(source)
        if path is None:
            path = out / f"{_next_number(out):03d}-{name}"
        elif not path.name.endswith(name) and (numbered := _NUMBERED.match(path.name)):
            path = path.rename(path.with_name(f"{numbered.group(1)}-{name}"))  # relabelled: the slug follows
        write_case(path, _meta(label, diagnosis, source), files)
        existing[source] = path
        result.written.append(path)
    return result


def _meta(label: IncidentLabel, diagnosis: Diagnosis | None, source: str) -> dict[str, object]:
    """The case's top-level fields; the blamed node and rank only when the label confirms the diagnosis
    (a correction says the reason was wrong, and then its node and rank are not known to be right)."""
    confirmed = diagnosis is not None and diagnosis.reason == label.reason
    note = " ".join((label.note or "").split()) or (
        f"diagnosed {label.diagnosed}; on-call said {label.reason}"
        if label.diagnosed != label.reason
        else f"diagnosed {label.diagnosed}, confirmed by on-call"
    )
    return {
        "reason": label.reason,
        "node": diagnosis.node_name if confirmed and diagnosis else None,
        "rank": diagnosis.rank if confirmed and diagnosis else None,
        "source": source,
        "first_sight": label.diagnosed,
        "note": scrub_line(note),
    }


def _files(sources: Sequence[LogSource], diagnosis: Diagnosis | None) -> dict[str, tuple[list[str], dict[str, object]]]:
    """File name → (excerpt lines, scrubbed; what is known of the file) for each source; the evidence
    lines alone when no source has a line left."""
    evidence: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for e in diagnosis.evidence if diagnosis else []:
        evidence[str(e.get("file"))].append((int(e.get("line") or 0), str(e.get("text") or "")))
    if not any(s.lines for s in sources):  # the logs were pruned: the evidence is what is left
        sources = [
            LogSource(file=f, lines=[t for _, t in sorted(lines)], node=diagnosis.node_name if diagnosis else None)
            for f, lines in evidence.items()
            if f and any(t for _, t in lines)
        ] + [s for s in sources if s.exit_code or s.signal]
        evidence.clear()
    files: dict[str, tuple[list[str], dict[str, object]]] = {}
    for s in sources:
        name = _file_name(s.file, files)
        keep = excerpt(s.lines, [n - 1 for n, _ in evidence.get(s.file, [])])
        known = {"node": s.node, "rank": s.rank, "exit_code": s.exit_code, "signal": s.signal}
        files[name] = (scrub_lines(keep), known)
    return files


def excerpt(lines: Sequence[str], anchors: Sequence[int]) -> list[str]:
    """The lines, cut (past `MAX_LINES`) to the head, the tail and the lines around each anchor (0-based),
    in order: what a log collector keeping the head and tail of a run stores, plus the failure."""
    if len(lines) <= MAX_LINES:
        return list(lines)
    keep = set(range(HEAD)) | set(range(len(lines) - TAIL, len(lines)))
    for a in anchors:
        keep.update(range(max(0, a - AROUND), min(len(lines), a + AROUND + 1)))
    return [lines[i] for i in sorted(keep)]


def _file_name(stream: str, taken: dict[str, object]) -> str:
    """A file name for a stream (`run/12/stderr` → `run-12-stderr.log`, `kernel` → `kernel.log`), unique
    in the case."""
    base = _UNSAFE.sub("-", stream).strip("-.") or "log"
    base = base if base.endswith((".log", ".out", ".txt")) else base + ".log"
    name, n = base, 2
    while name in taken or name in (CASE_FILE, "README.md"):
        name, n = f"{base.rsplit('.', 1)[0]}-{n}.{base.rsplit('.', 1)[1]}", n + 1
    return name


def _cases_by_source(out: Path) -> dict[str, Path]:
    found = {}
    for path in case_dirs(out):
        try:
            source = tomllib.loads((path / CASE_FILE).read_text()).get("source")
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            continue
        if isinstance(source, str):
            found[source] = path
    return found


def _next_number(out: Path) -> int:
    numbers = [int(m.group(1)) for p in out.iterdir() if p.is_dir() and (m := _NUMBERED.match(p.name))]
    return max(numbers, default=0) + 1
