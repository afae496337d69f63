"""The alerts the server posts to Alertmanager itself, defined once, as deploy/prometheus/alerts.yml's rules
of the same name produce them.

Alertmanager identifies an alert by its label set (the fingerprint): the server's post and the Prometheus
rule's alert are one alert, and make one notification, only if their labels are equal. So each rule in
alerts.yml aggregates to an explicit label set (``max by (<labels>)``), which drops whatever the scrape
adds (``job="gpuwatch"``, ``replica``, a GPU's ``UUID``), and `AlertRule.labels` below is that list;
``tests/server/notify/test_alert_rules.py`` holds names, label lists, severities, windows, hold times and
annotation templates equal to alerts.yml. Prometheus' ``external_labels`` would be added to the rule's
alerts only: the ``notify_alertmanager_labels`` setting adds the same to the server's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from gpuwatch.diagnosis.xid import XID_REASONS


@dataclass(frozen=True, slots=True)
class AlertRule:
    """One alert of alerts.yml that the server also posts.

    ``window_s``: for an alert on an event (an Xid), how long after the event the rule's expression
    holds; ``keep_firing_s``: the rule's ``keep_firing_for``, how long Prometheus goes on firing once its
    expression stops holding (the server holds its own post as long: see `server.notify.alertmanager`)."""

    name: str
    severity: str
    labels: tuple[str, ...]
    keep_firing_s: float
    summary: str
    description: str
    runbook: str
    window_s: float | None = None

    def annotations(self, labels: Mapping[str, str]) -> dict[str, str]:
        """The annotations as Prometheus renders the rule's templates for these labels."""
        return {
            "summary": render(self.summary, labels),
            "description": render(self.description, labels),
            "runbook": self.runbook,
        }


_LABEL = re.compile(r"\{\{ \$labels\.(\w+) \}\}")


def render(template: str, labels: Mapping[str, str]) -> str:
    """``{{ $labels.NAME }}`` replaced by the label's value (empty when absent), as Prometheus does; the
    only template construct these annotations use."""
    return _LABEL.sub(lambda m: labels.get(m.group(1), ""), template)


#: GpuFatalXid's codes: the Xids the diagnosis blames on the GPU's hardware, but 79 (GpuFellOffTheBus).
FATAL_XIDS: frozenset[int] = frozenset(x for x, reason in XID_REASONS.items() if reason == "gpu_hardware") - {79}
FELL_OFF_XID = 79

FATAL_XID = AlertRule(
    name="GpuFatalXid",
    severity="critical",
    labels=("instance", "gpu", "xid"),
    window_s=3600.0,
    keep_firing_s=600.0,
    summary="Fatal Xid {{ $labels.xid }} on GPU {{ $labels.gpu }} of {{ $labels.instance }}",
    description=(
        "GPU {{ $labels.gpu }} on {{ $labels.instance }} reported Xid {{ $labels.xid }} within the last hour, "
        "a hardware fault (ECC, micro-controller or GSP). Drain the node and reset the GPU; repeated faults "
        "mean an RMA."
    ),
    runbook="deploy/README.md#gpufatalxid",
)

FELL_OFF_THE_BUS = AlertRule(
    name="GpuFellOffTheBus",
    severity="critical",
    labels=("instance", "gpu"),
    window_s=600.0,  # the Xid 79 side; a lost GPU holds while it is lost
    keep_firing_s=600.0,
    summary="GPU {{ $labels.gpu }} on {{ $labels.instance }} has fallen off the bus",
    description=(
        "GPU {{ $labels.gpu }} on {{ $labels.instance }} stopped reporting while its node's agent is alive, "
        "or reported Xid 79. Jobs on it have failed or will; the node needs a GPU reset or a reboot before "
        "it takes work again."
    ),
    runbook="deploy/README.md#gpufelloffthebus",
)

JOB_FAILED = AlertRule(
    name="GpuwatchJobFailed",
    severity="warning",
    labels=("incident", "job", "node", "run", "trigger", "reason", "category"),
    keep_firing_s=300.0,
    summary="Job {{ $labels.job }} failed on {{ $labels.node }}: {{ $labels.reason }} ({{ $labels.category }})",
    description=(
        "Run {{ $labels.run }} of {{ $labels.job }} failed on {{ $labels.node }} and gpuwatch diagnosed it as "
        "{{ $labels.reason }} ({{ $labels.category }}); incident {{ $labels.incident }}, opened by "
        "{{ $labels.trigger }}. It stays open until a later run of the job succeeds. The incident page has "
        "the evidence, the action taken and the post-mortem."
    ),
    runbook="deploy/README.md#gpuwatchjobfailed",
)

RULES: tuple[AlertRule, ...] = (FATAL_XID, FELL_OFF_THE_BUS, JOB_FAILED)
#: The Xid codes whose arrival changes what the server asserts (a poke of the sender, not a wait).
ALERTED_XIDS: frozenset[int] = FATAL_XIDS | {FELL_OFF_XID}
