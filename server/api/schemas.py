"""Response models of the read API (kept apart from the SQLAlchemy models)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gpuwatch.protocol import GpuSample
from server.store.models import IncidentLabel
from server.telemetry.job_tracker import JobSummary


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class NodeOut(_Out):
    name: str
    hostname: str | None
    collector: str | None
    agent_version: str | None
    driver_version: str | None
    registered_at: datetime | None
    last_seen_at: datetime | None
    up: bool
    gpus: int
    dropped: dict[str, int]


class GpuOut(_Out):
    node: str
    index: int
    uuid: str
    model: str
    memory_total_mib: float | None
    sample: GpuSample | None
    sample_age_s: float | None = None  # seconds since the latest sample reached the server


class JobOut(_Out):
    id: int
    name: str
    scheduler: str
    external_id: str | None
    owner: str | None
    world_size: int | None
    checkpoint_dir: str | None
    state: str
    created_at: datetime
    updated_at: datetime


class JobDetailOut(JobOut):
    """A job, and what a failure now would cost it: the work since its last complete checkpoint."""

    last_checkpoint_path: str | None = None
    last_checkpoint_step: int | None = None
    last_checkpoint_at: datetime | None = None
    checkpoint_age_s: float | None = None
    gpus: int | None = None
    gpu_hours_at_risk: float | None = None
    cost_at_risk: float | None = None
    currency: str | None = None


class RunOut(_Out):
    id: int
    job_id: int
    attempt: int
    state: str
    command: str | None
    resume_from: str | None
    started_at: datetime
    ended_at: datetime | None
    exit_code: int | None
    signal: int | None


class CheckpointOut(_Out):
    id: int
    run_id: int | None
    path: str
    step: int | None
    valid: bool
    created_at: datetime


class LogLineOut(_Out):
    stream: str
    seq: int
    ts: datetime
    text: str
    run_id: int | None
    rank: int | None


class EventOut(_Out):
    stream: str
    seq: int
    ts: datetime
    kind: str
    gpu_index: int | None
    message: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobUtilizationOut(JobSummary):
    """The tracker's summary of a job (per rank inside), plus its id and its whole-life totals from the
    stored rollups. It extends `JobSummary` rather than copying its fields."""

    id: int
    stored_gpu_hours: float
    stored_idle_gpu_hours: float
    stored_energy_kwh: float


class LabelOut(_Out):
    """An admin's verdict on an incident's diagnosis (server/incidents/labels.py)."""

    id: int
    incident_id: int
    diagnosed: str = Field(description="the diagnosis's reason, kept as the machine made it")
    reason: str = Field(description="the reason it really was")
    confirmed: bool
    note: str | None
    by: str
    at: datetime

    @classmethod
    def of(cls, row: IncidentLabel) -> LabelOut:
        return cls(
            id=row.id,
            incident_id=row.incident_id,
            diagnosed=row.diagnosed,
            reason=row.reason,
            confirmed=row.reason == row.diagnosed,
            note=row.note,
            by=row.actor,
            at=row.created_at,
        )
