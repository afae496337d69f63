"""A webhook receiver on loopback for the notification tests: records every POST, can fail or hold."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.helpers import free_port

SECRET = "T0001/B0002/s3cr3tT0k3n"


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class Receiver:
    """A webhook receiver on loopback that records every POST. ``fail(n, status)`` answers the next n
    requests with ``status``; ``hold()`` keeps requests waiting until ``release()``."""

    def __init__(self) -> None:
        self.port = free_port()
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        self._failures: list[int] = []
        self._open = threading.Event()
        self._open.set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with receiver._lock:
                    receiver.requests.append(Received(self.path, dict(self.headers), body))
                    status = receiver._failures.pop(0) if receiver._failures else 200
                receiver._open.wait(30)
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def url(self, path: str = f"/services/{SECRET}") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def fail(self, n: int, status: int = 500) -> None:
        with self._lock:
            self._failures = [status] * n

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def stop(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
