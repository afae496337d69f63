"""Detection's own counters (on the app's registry): what was found, and every Xid a node reported."""

from __future__ import annotations

from prometheus_client import Counter
from prometheus_client.registry import CollectorRegistry

DETECTION_KINDS = ("straggler", "hang")


class DetectMetrics:
    """Stragglers and hangs found; Xid events by node, GPU and code. Xids are labelled by what only an
    event names, so their series appear with their first event."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.detections = Counter(
            "gpuwatch_detections", "Stragglers and hangs found, by kind.", ["kind"], registry=registry
        )
        self.xid_events = Counter(
            "gpuwatch_xid_events",
            "Xid events stored, by node (instance), GPU index and Xid code.",
            ["instance", "gpu", "xid"],
            registry=registry,
        )
        for kind in DETECTION_KINDS:
            self.detections.labels(kind)
