"""What a post-mortem says, as data: gathered by `server.reports.postmortem`, rendered to Markdown and
HTML by `server.reports.render`. Every text field that came from a log is raw here; renderers escape."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    at: datetime
    what: str  # "run started", "last valid checkpoint", "first error", "exit", "incident opened", ...
    detail: str = ""


@dataclass(frozen=True, slots=True)
class EvidenceLine:
    file: str  # the log stream or file
    line: int  # 1-based
    text: str  # raw log text (escape when rendering)
    rank: int | None = None
    node: str | None = None


@dataclass(frozen=True, slots=True)
class GpuPoint:
    ts: float  # unix seconds
    util: float | None = None  # %
    fb_used_mib: float | None = None
    power_w: float | None = None
    temp_c: float | None = None


@dataclass(frozen=True, slots=True)
class GpuSeries:
    """One GPU of the affected node around the failure (the ring buffer when the incident opened)."""

    node: str
    gpu: int
    points: tuple[GpuPoint, ...]
    xids: tuple[tuple[float, int], ...] = ()  # (unix seconds, Xid code)
    window: tuple[float, float] | None = None  # the plotted time span (unix seconds); None: the samples'
    memory_total_mib: float | None = None  # the framebuffer's size: the memory axis's top
    marks: tuple[tuple[float, str], ...] = ()  # (unix seconds, what): the restart and its first step


@dataclass(frozen=True, slots=True)
class LostWork:
    steps: int | None  # steps since the last valid checkpoint (None: the job reports no steps)
    wall_s: float  # time since the last valid checkpoint (or the run's start) until the exit
    gpus: int
    gpu_hours: float  # gpus * (wall_s + downtime_s) / 3600
    cost: float  # gpu_hours * gpu_hour_price
    currency: str
    downtime_s: float | None  # exit → the restarted run's start (None: not restarted)
    time_to_recover_s: float | None  # exit → the restarted run's first step (else its start)
    restarts_so_far: int


@dataclass(frozen=True, slots=True)
class PostMortem:
    incident_id: int
    trigger: str
    state: str
    job: str | None
    attempt: int | None
    node: str | None
    gpus: tuple[int, ...]
    reason: str | None
    category: str | None
    action: str | None  # the recovery decision's outcome, else the diagnosis's default action
    outcome: str  # what came of it, in words: "restarted as attempt 3, which succeeded", ...
    confidence: float | None
    source: str | None  # rules | llm | none
    explanation: str
    llm_explanation: bool  # the explanation is the LLM analyser's (mark it as such)
    why: str  # the decision's reason in words
    evidence: tuple[EvidenceLine, ...]
    evidence_total: int  # evidence lines before capping
    timeline: tuple[TimelineEntry, ...]
    lost: LostWork | None
    plots: tuple[GpuSeries, ...]
    recommendations: tuple[str, ...]  # Markdown (code spans, emphasis) by gpuwatch; values escaped in it
    logs_url: str  # where the full logs are (the API)
    generated_at: datetime = field(default_factory=datetime.now)
    # a node's incident (no run): the jobs at work on the node when it opened, "job (run N)"
    jobs_on_node: tuple[str, ...] = ()
    job_gpus: tuple[int, ...] = ()  # the node's GPUs the job's ranks were attributed to (none: not known)
    plotted: str = ""  # which GPUs the plots show and why, in words
    window: tuple[datetime, datetime] | None = None  # the plots' time span
    window_text: str = ""  # how that span was chosen, in words
    stack_groups: StackGroups | None = None  # a hang's ranks grouped by stack (server/reports/stack_groups.py)


@dataclass(frozen=True, slots=True)
class StackGroupRow:
    """Ranks whose stacks were alike when a hang was captured (server/incidents/stacks.py)."""

    ranks: tuple[int, ...]
    nodes: tuple[str, ...]
    collective: str | None  # the collective they wait in, None: outside any
    frames: tuple[str, ...]  # their innermost user frames, raw (escape when rendering)
    suspect: bool
    flight: str = ""  # what their flight recorders said


@dataclass(frozen=True, slots=True)
class StackGroups:
    state: str  # the capture's: done, expired (some node did not answer), pending
    why: str  # how the suspects were found, or why none was
    groups: tuple[StackGroupRow, ...]
    more: int = 0  # groups not shown
    failed: tuple[str, ...] = ()  # ranks without a stack, and why
