"""The node side's one HTTP client to the server, shared by the agent's shipper and `gpuwatch run`'s
supervisor: one place for the base URL, the bearer token, the User-Agent and the paths (spelled once,
in `gpuwatch.protocol.Api`).

Two kinds of call, because the callers handle failure differently. The shipper's calls (register,
heartbeat, ingest) return the response: its status decides between retrying, backing off for the
server's Retry-After and setting a batch aside. The supervisor's calls (runs, exits, decisions) return
the answer's JSON, or None when the server is unreachable or refuses: the supervisor then decides
locally and keeps the record in its outbox.
"""

from __future__ import annotations

import gzip
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx

from gpuwatch import __version__
from gpuwatch.protocol import Api, Batch, Heartbeat, RegisterRequest

log = logging.getLogger("gpuwatch.agent.api_client")


class ServerClient:
    """Connections to the server, kept open between calls; ``timeout_s`` bounds each request."""

    def __init__(
        self, base_url: str, token: str, timeout_s: float = 10.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.clock = clock
        #: The server's clock minus this node's, from the last answer that carried the server's time.
        self.offset_s: float | None = None
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}", "User-Agent": f"gpuwatch-agent/{__version__}"},
            timeout=timeout_s,
        )

    # -- the shipper's calls: the response, for the caller to judge -------------------------------

    def register(self, req: RegisterRequest) -> httpx.Response:
        return self._timed(Api.REGISTER, req.model_dump_json().encode())

    def heartbeat(self, beat: Heartbeat) -> httpx.Response:
        return self._post(Api.HEARTBEAT, beat.model_dump_json().encode())

    def send_batch(self, gzipped: bytes) -> httpx.Response:
        """POST a batch; its acknowledgement carries the server's time (servers since the field was added)."""
        return self._timed(Api.INGEST, gzipped, gzip=True)

    def read_clock(self) -> httpx.Response:
        """An empty batch, which the server stores nothing of, for its acknowledgement's time."""
        body = gzip.compress(Batch(batch_id=0).model_dump_json().encode())
        return self._timed(Api.INGEST, body, gzip=True)

    def _timed(self, path: str, body: bytes, gzip: bool = False) -> httpx.Response:
        """POST, and measure the clock offset from the answer's ``server_time``: the server read its clock
        between our send and our receipt, so the midpoint is off by at most half the round trip."""
        sent = self.clock()
        resp = self._post(path, body, gzip)
        received = self.clock()
        if resp.status_code < 300:
            try:
                server_time = resp.json().get("server_time")
            except ValueError:
                server_time = None
            if isinstance(server_time, (int, float)):
                self.offset_s = round(float(server_time) - (sent + received) / 2, 3)
        return resp

    # -- the supervisor's calls: the answer, or None when the server is away or refuses -----------

    def start_run(self, start: dict[str, Any]) -> dict[str, Any] | None:
        return self._call("POST", Api.RUNS, json=start)

    def report_exit(self, run_id: int, body: dict[str, Any]) -> dict[str, Any] | None:
        return self._call("POST", Api.RUN_EXIT.format(run_id=run_id), json=body)

    def decision(self, run_id: int, wait_s: float) -> dict[str, Any] | None:
        """The server's decision about a run, long-polled for up to ``wait_s``."""
        return self._call("GET", Api.RUN_DECISION.format(run_id=run_id), params={"wait": wait_s})

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any] | None:
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            log.warning("server unreachable (%s %s: %s)", method, path, exc)
            return None
        if resp.status_code >= 300:
            log.warning("server refused %s %s: HTTP %d %s", method, path, resp.status_code, resp.text[:300])
            return None
        return resp.json()

    def close(self) -> None:
        self._http.close()

    def _post(self, path: str, body: bytes, gzip: bool = False) -> httpx.Response:
        headers = {"Content-Type": "application/json"}
        if gzip:
            headers["Content-Encoding"] = "gzip"
        return self._http.post(path, content=body, headers=headers)
