"""The agent's loopback endpoint: training clients `POST /v1/report` with a `ClientReport`, and a
Prometheus on the node scrapes the agent's own metrics at `GET /metrics`.

Stdlib `http.server` on 127.0.0.1 is enough: one small request per training process every half
second, and it keeps the agent free of a second web framework.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import ValidationError

from gpuwatch.protocol import ClientReport

log = logging.getLogger("gpuwatch.agent.local_api")

MAX_REPORT_BYTES = 8 * 1024 * 1024


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
        attrs = {"on_report": staticmethod(on_report), "metrics": staticmethod(metrics) if metrics else None}
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
