"""gpuwatch's own on-call notifications: an incident's opening, diagnosis, recovery decision and
resolution, posted to generic JSON webhooks and Slack-compatible incoming webhooks.

`Notifier.notify` only enqueues, so the incident code never waits on someone else's web server; one
worker thread per notifier delivers, retrying what may succeed later (connection errors, timeouts, 5xx,
429) with exponential backoff. Webhook URLs are secrets (a Slack URL *is* its token): they never appear
in a log line, an exception message, a repr or a metric label — only the host does. Payloads and
settings are documented in server/notify/README.md.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args

import httpx
from prometheus_client import Counter
from prometheus_client.registry import CollectorRegistry

from gpuwatch import __version__
from gpuwatch.config import Settings
from gpuwatch.diagnosis.model import Diagnosis
from gpuwatch.protocol import Api

log = logging.getLogger("gpuwatch.server.notify")

Event = Literal["opened", "diagnosed", "decided", "resolved"]
Kind = Literal["webhook", "slack"]
Outcome = Literal["sent", "retry", "failed", "rejected", "dropped"]

MAX_EVIDENCE = 5  # lines a notice carries: enough to recognise the failure, the report has the rest
MAX_EVIDENCE_CHARS = 300
BACKOFF_MAX_S = 60.0
QUEUE_SIZE = 1000
PAYLOAD_SCHEMA = "gpuwatch.incident.v1"

_SLACK_ICONS: dict[str, str] = {
    "opened": ":rotating_light:",
    "diagnosed": ":mag:",
    "decided": ":arrows_counterclockwise:",
    "resolved": ":white_check_mark:",
}


@dataclass(frozen=True, slots=True)
class IncidentNotice:
    """One thing worth telling on-call about an incident. ``report_url`` left None is filled in by the
    notifier from ``public_url``; ``evidence`` lines read ``file:line text``."""

    event: Event
    incident_id: int
    job: str
    attempt: int | None = None
    node: str | None = None
    reason: str | None = None
    category: str | None = None
    action: str | None = None  # the taxonomy's action, or the recovery decision (restart, stop, crash_loop…)
    confidence: float | None = None
    source: str | None = None  # "rules" | "llm" | "none"
    summary: str = ""
    evidence: tuple[str, ...] = ()
    report_url: str | None = None
    ts: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __post_init__(self) -> None:
        if self.event not in get_args(Event):
            raise ValueError(f"unknown notice event {self.event!r}")

    @classmethod
    def from_diagnosis(
        cls,
        event: Event,
        incident_id: int,
        job: str,
        diagnosis: Diagnosis,
        *,
        attempt: int | None = None,
        node: str | None = None,
        action: str | None = None,
        summary: str | None = None,
        ts: datetime | None = None,
    ) -> IncidentNotice:
        """A notice carrying ``diagnosis``: its node, action and explanation unless given here."""
        return cls(
            event=event,
            incident_id=incident_id,
            job=job,
            attempt=attempt,
            node=node or diagnosis.node,
            reason=diagnosis.reason,
            category=diagnosis.category,
            action=action or diagnosis.action,
            confidence=diagnosis.confidence,
            source=diagnosis.source,
            summary=diagnosis.explanation if summary is None else summary,
            evidence=tuple(f"{e.file}:{e.line} {e.text}" for e in diagnosis.evidence[:MAX_EVIDENCE]),
            ts=ts or datetime.now(UTC),
        )


# ---------------------------------------------------------------------------------------- formatting


def _utc(ts: datetime) -> datetime:
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def headline(notice: IncidentNotice) -> str:
    """The one line a phone shows: what happened to which job."""
    where = f"job {notice.job}" + (f" attempt {notice.attempt}" if notice.attempt is not None else "")
    if notice.node:
        where += f" on {notice.node}"
    text = f"Incident #{notice.incident_id} {notice.event}: {where}"
    if notice.reason:
        text += f" — {notice.reason}"
    if notice.event == "decided" and notice.action:
        text += f" → {notice.action}"
    return text


def generic_payload(notice: IncidentNotice) -> dict[str, Any]:
    """The generic webhook's JSON body: every field of the notice, flat, plus the headline as ``text``."""
    return {
        "schema": PAYLOAD_SCHEMA,
        "event": notice.event,
        "incident_id": notice.incident_id,
        "job": notice.job,
        "attempt": notice.attempt,
        "node": notice.node,
        "reason": notice.reason,
        "category": notice.category,
        "action": notice.action,
        "confidence": None if notice.confidence is None else round(notice.confidence, 3),
        "source": notice.source,
        "summary": notice.summary,
        "evidence": list(notice.evidence),
        "report_url": notice.report_url,
        "ts": _utc(notice.ts).isoformat(timespec="milliseconds"),
        "text": headline(notice),
    }


def _esc(text: str) -> str:
    """Slack's mrkdwn reserves exactly these three characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def slack_payload(notice: IncidentNotice) -> dict[str, Any]:
    """A Slack incoming-webhook body: ``text`` (notifications, and clients without blocks) and
    ``blocks``, within Slack's limits (header 150 characters, section text 3000, 10 fields)."""
    title = headline(notice)
    facts: list[tuple[str, str | None]] = [
        ("Job", notice.job),
        ("Attempt", None if notice.attempt is None else str(notice.attempt)),
        ("Node", notice.node),
        ("Reason", notice.reason and f"`{notice.reason}`"),
        ("Category", notice.category),
        ("Action", notice.action and f"`{notice.action}`"),
    ]
    if notice.confidence is not None:
        facts.append(("Confidence", f"{notice.confidence:.2f}" + (f" ({notice.source})" if notice.source else "")))
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": _clip(f"{_SLACK_ICONS[notice.event]} {title}", 150), "emoji": True},
        },
        {
            "type": "section",
            "fields": [
                {"type": "mrkdwn", "text": _clip(f"*{name}*\n{_esc(value)}", 2000)} for name, value in facts if value
            ][:10],
        },
    ]
    if notice.summary:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _clip(_esc(notice.summary), 3000)}})
    if notice.evidence:
        lines = [_clip(line, MAX_EVIDENCE_CHARS) for line in notice.evidence[:MAX_EVIDENCE]]
        code = _esc("\n".join(lines)).replace("```", "`\u200b``")  # a fence inside would end the block
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _clip(f"```{code}```", 3000)}})
    context = [f"incident {notice.incident_id}", _utc(notice.ts).strftime("%Y-%m-%d %H:%M:%S UTC")]
    if notice.report_url:
        context.insert(0, f"<{notice.report_url}|Post-mortem report>")
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": " · ".join(context)}]})
    return {"text": _esc(title), "blocks": blocks}


FORMATTERS: dict[str, Callable[[IncidentNotice], dict[str, Any]]] = {
    "webhook": generic_payload,
    "slack": slack_payload,
}


# ------------------------------------------------------------------------------------------- targets


@dataclass(frozen=True, slots=True)
class Target:
    """Where notices go. ``name`` (kind and host) is what logs and metrics show; the URL never is."""

    kind: Kind
    url: str = field(repr=False)
    name: str = field(init=False)

    def __post_init__(self) -> None:
        if self.kind not in FORMATTERS:
            raise ValueError(f"unknown notification target kind {self.kind!r}")
        try:
            url = httpx.URL(self.url)
        except Exception:
            url = None
        if url is None or url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"a {self.kind} notification URL is not an http(s) URL (not shown: it may hold a secret)")
        host = f"[{url.host}]" if ":" in url.host else url.host
        object.__setattr__(self, "name", f"{self.kind}:{host}" + (f":{url.port}" if url.port else ""))

    def scrub(self, text: str) -> str:
        """``text`` (an error message, a response body) with this target's secret parts replaced."""
        url = httpx.URL(self.url)
        secrets = [self.url, str(url), url.raw_path.decode("ascii", "replace")]
        for secret in sorted(secrets, key=len, reverse=True):
            if len(secret) > 1:  # a bare "/" path is no secret, and replacing it would garble the text
                text = text.replace(secret, "…")
        return text


def read_url_file(path: Path) -> list[Target]:
    """Targets from a secret file: one URL a line, optionally after the kind (``slack URL``,
    ``webhook URL``); a bare URL is a generic webhook; blank lines and ``#`` comments are skipped."""
    targets = []
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        kind, _, url = line.partition(" ")
        if kind not in FORMATTERS:
            kind, url = "webhook", line
        try:
            targets.append(Target(kind, url.strip()))  # type: ignore[arg-type]
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: {exc}") from None
    return targets


def default_public_url(host: str, port: int) -> str:
    """``http://host:port``, with this machine's name instead of a wildcard address."""
    if host in ("", "0.0.0.0", "::"):
        host = socket.gethostname()
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


# ------------------------------------------------------------------------------------------ delivery


class _Quiet(logging.Filter):
    """httpx logs every request with its full URL at INFO: drop those records on the notifier's
    worker threads (which log each outcome themselves, by host), and only there."""

    local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(self.local, "active", False)


_QUIET = _Quiet()


def quiet_httpx_here() -> None:
    """Drop httpx's per-request log lines (full URLs: credentials) on the calling thread only."""
    httpx_log = logging.getLogger("httpx")
    if _QUIET not in httpx_log.filters:
        httpx_log.addFilter(_QUIET)
    _QUIET.local.active = True


@dataclass(frozen=True, slots=True)
class _Job:
    target: Target
    notice: IncidentNotice


class _Retry(Exception):
    def __init__(self, why: str, after: float = 0.0) -> None:
        super().__init__(why)
        self.why, self.after = why, after


class _GiveUp(Exception):
    pass


class Notifier:
    """Sends incident notices to the configured targets from one background thread."""

    def __init__(
        self,
        targets: Iterable[Target],
        *,
        public_url: str = "",
        timeout_s: float = 5.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        backoff_max_s: float = BACKOFF_MAX_S,
        queue_size: int = QUEUE_SIZE,
        registry: CollectorRegistry | None = None,
    ) -> None:
        unique: dict[tuple[str, str], Target] = {}
        for target in targets:
            unique.setdefault((target.kind, target.url), target)
        self.targets: tuple[Target, ...] = tuple(unique.values())
        self.public_url = public_url.rstrip("/")
        self.timeout_s, self.retries = timeout_s, retries
        self.backoff_s, self.backoff_max_s = backoff_s, backoff_max_s
        self.queue_size = max(1, queue_size)
        self.registry = registry if registry is not None else CollectorRegistry()
        self.outcomes = Counter(
            "gpuwatch_notifications",
            "Incident notifications, by target (kind:host) and outcome.",
            ["target", "outcome"],
            registry=self.registry,
        )
        for target in self.targets:
            for outcome in get_args(Outcome):
                self.outcomes.labels(target.name, outcome)
        self._items: deque[_Job] = deque()
        self._cond = threading.Condition()
        self._busy = False
        self._accepting = True
        self._stopping = False
        self._stop = threading.Event()  # interrupts a backoff wait at close
        self._thread: threading.Thread | None = None
        if self.targets:
            httpx_log = logging.getLogger("httpx")
            if _QUIET not in httpx_log.filters:
                httpx_log.addFilter(_QUIET)
            self._thread = threading.Thread(target=self._run, name="gpuwatch-notify", daemon=True)
            self._thread.start()

    @classmethod
    def from_settings(cls, settings: Settings, registry: CollectorRegistry | None = None) -> Notifier:
        """The notifier the settings describe; one with no targets accepts notices and does nothing."""
        targets = []
        notify = settings.notify
        for kind, setting, urls in (
            ("webhook", "notify_webhook_urls", notify.webhook_urls),
            ("slack", "notify_slack_urls", notify.slack_urls),
        ):
            for i, url in enumerate(urls):
                try:
                    targets.append(Target(kind, url))  # type: ignore[arg-type]
                except ValueError as exc:
                    raise ValueError(f"{setting}[{i}]: {exc}") from None
        if settings.notify.url_file is not None:
            targets += read_url_file(settings.notify.url_file)
        return cls(
            targets,
            public_url=settings.server.public_url or default_public_url(settings.server.host, settings.server.port),
            timeout_s=settings.notify.timeout_s,
            retries=settings.notify.retries,
            backoff_s=settings.notify.backoff_s,
            registry=registry,
        )

    @property
    def enabled(self) -> bool:
        return bool(self.targets)

    def report_url(self, incident_id: int) -> str:
        return self.public_url + Api.INCIDENT_REPORT.format(incident_id=incident_id)

    def notify(self, notice: IncidentNotice) -> None:
        """Queue ``notice`` for every target and return at once; never raises. When the queue is full
        the oldest waiting notice is dropped (counted as ``dropped``): on-call wants the latest news."""
        try:
            if not self.targets:
                return
            if notice.report_url is None and self.public_url:
                notice = dataclasses.replace(notice, report_url=self.report_url(notice.incident_id))
            with self._cond:
                if not self._accepting:
                    log.warning("notifier closed: incident %d %s not sent", notice.incident_id, notice.event)
                    return
                for target in self.targets:
                    if len(self._items) >= self.queue_size:
                        self._count(self._items.popleft(), "dropped", "queue full")
                    self._items.append(_Job(target, notice))
                self._cond.notify_all()
        except Exception:  # the incident code must go on whatever happens here
            log.exception("could not queue a notification")

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued for up to ``timeout`` seconds, then drop the rest and stop the worker."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._accepting = False
            self._cond.wait_for(lambda: not self._items and not self._busy, timeout)
            self._stopping = True
            self._stop.set()
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()) + 0.1)
            if self._thread.is_alive():
                log.warning("a notification was still being sent at shutdown; abandoned")

    def __enter__(self) -> Notifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the worker

    def _count(self, job: _Job, outcome: Outcome, detail: str = "") -> None:
        self.outcomes.labels(job.target.name, outcome).inc()
        n = job.notice
        if outcome == "sent":
            log.info("notified %s of incident %d %s", job.target.name, n.incident_id, n.event)
        else:
            level = logging.WARNING if outcome in ("retry", "dropped") else logging.ERROR
            log.log(
                level,
                "notification %s: %s, incident %d %s (%s)",
                outcome,
                job.target.name,
                n.incident_id,
                n.event,
                detail,
            )

    def _run(self) -> None:
        _QUIET.local.active = True
        headers = {"User-Agent": f"gpuwatch/{__version__}"}
        with httpx.Client(timeout=self.timeout_s, headers=headers, follow_redirects=False) as client:
            while True:
                with self._cond:
                    while not self._items and not self._stopping:
                        self._cond.wait()
                    if self._stopping:
                        abandoned = list(self._items)
                        self._items.clear()
                        break
                    job = self._items.popleft()
                    self._busy = True
                try:
                    self._deliver(client, job)
                except Exception as exc:  # a bug here must not kill the worker (nor show the URL)
                    self._count(job, "failed", f"internal error: {job.target.scrub(repr(exc))}")
                finally:
                    with self._cond:
                        self._busy = False
                        self._cond.notify_all()
        for job in abandoned:
            self._count(job, "dropped", "shutting down")

    def _deliver(self, client: httpx.Client, job: _Job) -> None:
        payload = FORMATTERS[job.target.kind](job.notice)
        for attempt in range(self.retries + 1):
            try:
                self._post(client, job.target, payload)
                self._count(job, "sent")
                return
            except _GiveUp as exc:
                self._count(job, "rejected", str(exc))
                return
            except _Retry as exc:
                if attempt == self.retries:
                    self._count(job, "failed", f"{exc.why}; gave up after {attempt + 1} attempts")
                    return
                delay = min(self.backoff_max_s, max(self.backoff_s * 2**attempt, exc.after))
                self._count(job, "retry", f"{exc.why}; attempt {attempt + 2} in {delay:.2f}s")
                if self._stop.wait(delay):
                    self._count(job, "dropped", "shutting down")
                    return

    def _post(self, client: httpx.Client, target: Target, payload: dict[str, Any]) -> None:
        try:
            response = client.post(target.url, json=payload)
        except httpx.UnsupportedProtocol as exc:
            raise _GiveUp(target.scrub(f"{type(exc).__name__}: {exc}")) from None
        except httpx.TransportError as exc:  # connection refused or reset, timeouts, protocol errors
            raise _Retry(target.scrub(f"{type(exc).__name__}: {exc}")) from None
        if response.is_success:
            return
        why = f"HTTP {response.status_code}"
        body = target.scrub(response.text[:200].strip())
        if body:
            why += f" {body!r}"
        if response.status_code == 429 or response.status_code >= 500:
            raise _Retry(why, _retry_after(response))
        raise _GiveUp(why + "; not retried")


def _retry_after(response: httpx.Response) -> float:
    """Seconds the receiver asked us to wait (``Retry-After`` in seconds; dates are ignored)."""
    try:
        return max(0.0, float(response.headers.get("Retry-After", "0")))
    except ValueError:
        return 0.0
