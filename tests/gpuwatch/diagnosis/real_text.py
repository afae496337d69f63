"""What the real-text tests of the diagnosis share: a log excerpt as a `LogSource`, and the rules' answer on it.

An excerpt is written in a test as a triple-quoted string, verbatim from the public report its test names;
the blank lines around it are not the log's.
"""

from __future__ import annotations

from gpuwatch.diagnosis.engine import diagnose_rules
from gpuwatch.diagnosis.model import LogSource


def log_source(name: str, text: str, **known: object) -> LogSource:
    """``text`` as the file ``name``; ``known`` is what the launcher knows from outside it (node, rank,
    exit_code, signal)."""
    return LogSource(file=name, lines=text.strip("\n").splitlines(), **known)  # type: ignore[arg-type]


def reason_of(text: str, name: str = "train.log") -> str:
    """The reason the rules give for ``text`` as one file."""
    return diagnose_rules([log_source(name, text)]).reason


def reason_and_rule(text: str, name: str = "train.log") -> tuple[str, str | None]:
    """The reason the rules give for ``text`` as one file, and the rule that gave it."""
    d = diagnose_rules([log_source(name, text)])
    return d.reason, d.rule_id
