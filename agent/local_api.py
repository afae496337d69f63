"""The agent's loopback endpoint: training clients `POST /v1/report` with a `ClientReport`, and a
Prometheus on the node scrapes the agent's own metrics at `GET /metrics`.

Stdlib `http.server` on 127.0.0.1 is enough: one small request per training process every half
second, and it keeps the agent free of a second web framework.

Any local user can connect to the port, and a report can set its job's hang timeout and steps, which
decide whether the job is killed as hung. So a report is taken only from the user who runs the job: the
connection's peer is looked up in /proc/net/tcp (its uid: a TCP socket's peer credentials), the
reported process must be that user's, and a job name belongs on this node to the first user who
reported it (root may report for any). A report from anyone else gets 403 (docs/security.md).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import ValidationError

from gpuwatch.protocol import ClientReport

log = logging.getLogger("gpuwatch.agent.local_api")

MAX_REPORT_BYTES = 8 * 1024 * 1024
PROC = Path("/proc")


def peer_uid(peer_port: int, server_port: int, proc: Path = PROC) -> int | None:
    """The uid owning the client end (port ``peer_port``) of a loopback TCP connection to ``server_port``,
    from /proc/net/tcp and tcp6; None when it is not found (not Linux, or the connection is gone)."""
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 8:
                continue
            local, remote = fields[1].rpartition(":")[2], fields[2].rpartition(":")[2]
            if int(local, 16) == peer_port and int(remote, 16) == server_port:
                return int(fields[7])
    return None


def process_uid(pid: int, proc: Path = PROC) -> int | None:
    try:
        return (proc / str(pid)).stat().st_uid
    except OSError:
        return None


class JobOwners:
    """Which user's processes may report for each job name on this node: the first to report it."""

    def __init__(self) -> None:
        self._owners: dict[str, int] = {}
        self._lock = threading.Lock()

    def refuse(self, report: ClientReport, uid: int | None) -> str | None:
        """Why ``report``, sent by ``uid``, is not taken (None: it is)."""
        if uid is None:
            return "the reporting process could not be identified"
        if uid == 0:
            return None
        owner = process_uid(report.process.pid)
        if owner is not None and owner != uid:
            return f"process {report.process.pid} is not the reporting user's"
        with self._lock:
            first = self._owners.setdefault(report.process.job, uid)
        if first != uid:
            return f"job {report.process.job!r} on this node is another user's"
        return None


class LocalApi:
    """Serves client reports on ``host:port`` (port 0 picks a free one) until `close`; ``metrics`` gives
    the exposition served at /metrics (none: 404)."""

    def __init__(
        self,
        on_report: Callable[[ClientReport], None],
        host: str = "127.0.0.1",
        port: int = 8601,
        metrics: Callable[[], bytes] | None = None,
    ) -> None:
        attrs = {
            "on_report": staticmethod(on_report),
            "metrics": staticmethod(metrics) if metrics else None,
            "owners": JobOwners(),
        }
        handler = type("_Handler", (_Handler,), attrs)
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="local-api", daemon=True)

    def start(self) -> LocalApi:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Handler(BaseHTTPRequestHandler):
    on_report: Callable[[ClientReport], None]
    metrics: Callable[[], bytes] | None
    owners: JobOwners

    def do_GET(self) -> None:
        if self.path == "/v1/health":
            self._reply(200, b'{"status":"ok"}')
        elif self.path.partition("?")[0] == "/metrics" and self.metrics is not None:
            self._reply(200, self.metrics(), CONTENT_TYPE_LATEST)
        else:
            self._reply(404, b'{"detail":"not found"}')

    def do_POST(self) -> None:
        if self.path != "/v1/report":
            self._reply(404, b'{"detail":"not found"}')
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_REPORT_BYTES:
            self._reply(413, b'{"detail":"report too large"}')
            return
        try:
            report = ClientReport.model_validate_json(self.rfile.read(length))
        except ValidationError as exc:
            self._reply(422, exc.json(include_url=False).encode())
            return
        uid = peer_uid(self.client_address[1], self.server.server_address[1])
        if (why := self.owners.refuse(report, uid)) is not None:
            log.warning("refused a report for job %s from uid %s: %s", report.process.job, uid, why)
            self._reply(403, json.dumps({"detail": why}).encode())
            return
        self.on_report(report)
        self._reply(204, b"")

    def _reply(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        if body:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("local api: " + format, *args)
