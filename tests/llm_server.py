"""A scripted OpenAI-compatible chat-completions server on loopback, so the tests drive the real `openai`
client over real HTTP (timeouts, status codes and all) without a model."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

#: (request body) -> (HTTP status, the assistant message's content or None; for another status than 200,
#: the error message or None)
Script = Callable[[dict[str, Any]], tuple[int, str | None]]


class FakeLlmServer:
    """`with FakeLlmServer(script, delay_s=...) as llm:` serves POST /v1/chat/completions at `llm.base_url`
    and records every request body in `llm.requests`."""

    def __init__(self, script: Script, delay_s: float = 0.0) -> None:
        self.script = script
        self.delay_s = delay_s
        self.requests: list[dict[str, Any]] = []
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False  # a handler still "thinking" must not hold up the test's end
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), name="fake-llm", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeLlmServer:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stopping.set()  # wakes handlers sleeping out a delay
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
                    return
                request = json.loads(body)
                server.requests.append(request)
                if server.delay_s and server._stopping.wait(server.delay_s):
                    return
                status, content = server.script(request)
                if status != 200:
                    error = {"message": content or "scripted failure", "type": "server_error"}
                    self._send(status, {"error": error})
                    return
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": request.get("model", "fake"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                    },
                )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its timeout): expected in the timeout tests

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
