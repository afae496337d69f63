"""The server's own alerts, posted to Alertmanager's v2 API (``POST /api/v2/alerts``) the moment it learns of
them: a fatal Xid, a GPU that fell off the bus, a failed run once diagnosed. Prometheus' rules of the same
names stay, as the safety net (and for everything series-based), and make the same alerts later (a scrape,
an evaluation, a ``for``, a resend): the labels are equal by construction (server/notify/alert_rules.py),
so Alertmanager sees one alert and sends one notification.

How it stays right across crashes, Prometheus-style:

- What to assert is derived each time from the database and the state rebuilt from it
  (`server.notify.alert_state.active_alerts`), never from a queue of events: a restarted server asserts
  the same set, and an event that arrives while Alertmanager is down is in the next post.
- One background thread posts. `AlertSender.poke` (after an ingest commit with a fatal Xid, a diagnosis,
  an incident's close, a GPU judged lost) only sets a flag: the queue holds one wake-up, however many
  events come, so it is bounded and never blocks ingest; the next post carries all of them.
- Every alert is posted again every ``resend_s``, valid until ``now + 4 * resend_s`` (Prometheus' own
  rule): a restarted Alertmanager has it back within ``resend_s``, and an alert of a server that died
  ends by itself a few intervals later while the Prometheus rule goes on.
- A failed post is tried again after ``backoff_s · 2ⁿ`` (at most 30 s), with full jitter so that
  replicas do not retry in step; pokes meanwhile wait for it.
- An alert whose state ends is resolved explicitly: posted once more with its end, then forgotten. The
  end is the rule's: ``keep_firing_for`` after the state ended (``hold_resolved``), because Prometheus
  goes on firing that long, and an end before its (Alertmanager keeps the latest post of an alert) would
  be undone by its next resend: a resolved notification, then a firing one. Without the rules alongside,
  ``hold_resolved=False`` ends it at once.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

import httpx
from prometheus_client import Counter, Gauge
from prometheus_client.registry import CollectorRegistry
from sqlalchemy.orm import Session, sessionmaker

from gpuwatch import __version__
from gpuwatch.config import Settings
from server.notify.alert_state import Alert, Labels, active_alerts
from server.notify.webhooks import quiet_httpx_here
from server.telemetry.latest import Telemetry

log = logging.getLogger("gpuwatch.server.notify")

Outcome = Literal["sent", "failed", "rejected", "error"]
BACKOFF_MAX_S = 30.0
PATH = "/api/v2/alerts"
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def payload(alert: Alert, ends_at: float, extra: Mapping[str, str], generator_url: str) -> dict[str, Any]:
    """One alert as Alertmanager's v2 API takes it. ``extra`` labels (Prometheus' external_labels) give way
    to the rule's own, as Prometheus' do."""
    labels = {**extra, "alertname": alert.rule.name, "severity": alert.rule.severity, **dict(alert.labels)}
    body: dict[str, Any] = {
        "labels": labels,
        "annotations": alert.rule.annotations(labels),
        "startsAt": _rfc3339(min(alert.starts_at, ends_at)),
        "endsAt": _rfc3339(ends_at),
    }
    if generator_url:
        body["generatorURL"] = generator_url
    return body


def check_url(url: str) -> str:
    """Alertmanager's base URL without a trailing slash; ValueError (without the URL, which may carry a
    password) unless it is http(s)://host[:port][/prefix]."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(
            "notify_alertmanager_url: expected http(s)://host[:port][/path], e.g. http://alertmanager:9093"
        )
    return url.strip().rstrip("/")


def check_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """The extra labels, refused with the offending name unless each is a valid, non-empty label."""
    for name, value in labels.items():
        if not _LABEL_NAME.match(name) or name.startswith("__") or name in ("alertname", "severity"):
            raise ValueError(f"notify_alertmanager_labels: {name!r} is not a label name gpuwatch may add")
        if not value:
            raise ValueError(f"notify_alertmanager_labels: {name!r} has an empty value")
    return dict(labels)


class AlertSender:
    """Posts what ``source(now)`` says holds to Alertmanager from one daemon thread (see the module)."""

    def __init__(
        self,
        url: str,
        source: Callable[[float], list[Alert]],
        *,
        extra_labels: Mapping[str, str] | None = None,
        timeout_s: float = 5.0,
        resend_s: float = 30.0,
        backoff_s: float = 1.0,
        backoff_max_s: float = BACKOFF_MAX_S,
        hold_resolved: bool = True,
        generator_url: str = "",
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = check_url(url)
        self.target = urlsplit(self.url).netloc.rpartition("@")[2]  # host[:port]: what logs may show
        self._source = source
        self.extra_labels = check_labels(extra_labels or {})
        self.timeout_s, self.resend_s = timeout_s, resend_s
        self.backoff_s, self.backoff_max_s = backoff_s, backoff_max_s
        self.hold_resolved = hold_resolved
        self.generator_url = generator_url
        self._clock = clock
        registry = registry if registry is not None else CollectorRegistry()
        self.posts = Counter(
            "gpuwatch_alertmanager_posts",
            "The server's posts of its own alerts to Alertmanager, by outcome (sent; failed: to be retried; "
            "rejected: a 4xx; error: the state could not be read).",
            ["outcome"],
            registry=registry,
        )
        for outcome in get_args(Outcome):
            self.posts.labels(outcome)
        self.asserted_count = Gauge(
            "gpuwatch_alertmanager_alerts",
            "Alerts the server last posted to Alertmanager as firing.",
            registry=registry,
        )
        self._asserted: dict[tuple[str, Labels], Alert] = {}  # posted as firing, and Alertmanager took it
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpuwatch-alertmanager", daemon=True)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        sessions: sessionmaker[Session],
        telemetry: Telemetry,
        public_url: str,
        registry: CollectorRegistry | None = None,
    ) -> AlertSender | None:
        """The sender the settings describe, not started; None when no Alertmanager is configured."""
        notify, timeout = settings.notify, settings.server.node_timeout_s
        if not (notify.alertmanager_url or "").strip():
            return None
        return cls(
            notify.alertmanager_url or "",
            lambda now: active_alerts(sessions, telemetry, timeout, now),
            extra_labels=notify.alertmanager_labels,
            timeout_s=notify.alertmanager_timeout_s,
            resend_s=notify.alertmanager_resend_s,
            backoff_s=notify.alertmanager_backoff_s,
            generator_url=public_url,
            registry=registry,
        )

    def start(self) -> None:
        self._thread.start()

    def poke(self) -> None:
        """Something changed: post soon (never blocks; many pokes make one post)."""
        self._wake.set()

    def close(self, timeout: float = 5.0) -> None:
        """Stop posting. Nothing is resolved: the alerts hold (their state is in the database) and the last
        post's end covers a restart of a few resend intervals."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    # -- the worker

    def _run(self) -> None:
        failures = 0
        quiet_httpx_here()
        with httpx.Client(timeout=self.timeout_s, headers={"User-Agent": f"gpuwatch/{__version__}"}) as client:
            while not self._stop.is_set():
                self._wake.clear()
                outcome = self.sync(client)
                if outcome == "failed" or outcome == "error":
                    failures += 1
                    delay = random.uniform(0, min(self.backoff_max_s, self.backoff_s * 2 ** (failures - 1)))
                    self._stop.wait(max(delay, 0.05))  # pokes wait for the backoff: the retry carries them
                    continue
                failures = 0
                self._wake.wait(self.resend_s)

    def sync(self, client: httpx.Client) -> Outcome:
        """One post of every alert that holds and of those that ended since the last post."""
        now = self._clock()
        try:
            active = {alert.key: alert for alert in self._source(now)}
        except Exception as exc:  # a database that does not answer: try again, the alerts hold meanwhile
            return self._count("error", f"cannot read the alerts' state: {str(exc).splitlines()[0]}")
        horizon = now + 4 * self.resend_s
        body = []
        for alert in active.values():
            ends = horizon if alert.until is None else min(horizon, alert.until + self._hold(alert))
            body.append(payload(alert, ends, self.extra_labels, self.generator_url))
        ended = [alert for key, alert in self._asserted.items() if key not in active]
        for alert in ended:
            state_end = alert.until if alert.until is not None and alert.until <= now else now
            body.append(payload(alert, state_end + self._hold(alert), self.extra_labels, self.generator_url))
        if not body:
            return "sent"
        outcome = self._post(client, body, f"{len(active)} firing, {len(ended)} resolved")
        if outcome == "sent":
            self._asserted = active
            self.asserted_count.set(len(active))
        return outcome

    def _hold(self, alert: Alert) -> float:
        return alert.rule.keep_firing_s if self.hold_resolved else 0.0

    def _post(self, client: httpx.Client, body: list[dict[str, Any]], what: str) -> Outcome:
        try:
            response = client.post(self.url + PATH, json=body)
        except httpx.TransportError as exc:  # refused, reset, timed out
            return self._count("failed", f"{type(exc).__name__}; {what} to be posted again")
        if response.is_success:
            return self._count("sent", what)
        why = f"HTTP {response.status_code} {response.text[:200].strip()!r}"
        if response.status_code == 429 or response.status_code >= 500:
            return self._count("failed", f"{why}; {what} to be posted again")
        return self._count("rejected", f"{why}; posted again in {self.resend_s:g}s")

    def _count(self, outcome: Outcome, detail: str) -> Outcome:
        self.posts.labels(outcome).inc()
        if outcome == "sent":
            log.debug("alertmanager %s: %s", self.target, detail)
        else:
            level = logging.WARNING if outcome == "failed" else logging.ERROR
            log.log(level, "alertmanager %s: post %s: %s", self.target, outcome, detail)
        return outcome
