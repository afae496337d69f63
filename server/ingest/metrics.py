"""The ingest stage's own counters, registered on the app's registry (not the global one, so several
apps can live in one test process). Label values known in advance start at 0, so that increase() and
rate() see the first event (a series born at 1 shows no increase)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge
from prometheus_client.registry import CollectorRegistry

BATCH_OUTCOMES = ("stored", "duplicate", "rejected")


class IngestMetrics:
    """Batches and items stored, replays recognised, requests refused."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.batches = Counter("gpuwatch_ingest_batches", "Ingest batches, by outcome.", ["outcome"], registry=registry)
        self.items = Counter(
            "gpuwatch_ingest_items", "Items stored from ingest batches, by kind.", ["kind"], registry=registry
        )
        self.duplicates = Counter(
            "gpuwatch_ingest_duplicate_items",
            "Log lines and events already stored (replays).",
            ["kind"],
            registry=registry,
        )
        self.rejected = Counter(
            "gpuwatch_ingest_rejected_requests", "Requests refused, by HTTP status.", ["status"], registry=registry
        )
        self.request_bytes = Counter(
            "gpuwatch_ingest_bytes",
            "Request body bytes received on ingest (as sent, compressed or not).",
            registry=registry,
        )
        self.foreign_jobs = Counter(
            "gpuwatch_ingest_foreign_job_reports",
            "Batches' reports (processes, steps, checkpoints) about a job that belongs to other nodes, left out "
            "(counted once per job and batch): a node reports only on its own jobs (docs/security.md).",
            registry=registry,
        )
        self.protocols = Counter(
            "gpuwatch_ingest_batches_by_protocol",
            "Ingest batches stored or found replays, by wire protocol: 2 (JSON) or 3 (binary columns).",
            ["protocol"],
            registry=registry,
        )
        self.writer_busy = Counter(
            "gpuwatch_ingest_writer_busy_seconds",
            "Seconds the ingest writer thread spent storing and folding batches. Its rate is the writer's "
            "utilisation: near 1, batches queue behind it and, once ingest_queue_bytes are waiting, are refused.",
            registry=registry,
        )
        self.groups = Counter(
            "gpuwatch_ingest_groups",
            "Groups of batches the writer stored, one transaction each: stored batches / groups is the mean "
            "group size, which grows with load.",
            registry=registry,
        )
        self.latency = Gauge(
            "gpuwatch_ingest_last_batch_seconds", "Time the last batch took to store.", registry=registry
        )
        for labelled, values in (
            (self.batches, BATCH_OUTCOMES),
            (self.items, ("sample", "log", "event")),
            (self.duplicates, ("log", "event")),
            (self.protocols, ("2", "3")),
        ):
            for value in values:
                labelled.labels(value)
