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

import logging
from typing import Any

import httpx

from gpuwatch import __version__
from gpuwatch.protocol import Api, Heartbeat, RegisterRequest

log = logging.getLogger("gpuwatch.agent.api_client")


class ServerClient:
    """Connections to the server, kept open between calls; ``timeout_s`` bounds each request."""

    def __init__(self, base_url: str, token: str, timeout_s: float = 10.0) -> None:
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}", "User-Agent": f"gpuwatch-agent/{__version__}"},
            timeout=timeout_s,
        )

    # -- the shipper's calls: the response, for the caller to judge -------------------------------

    def register(self, req: RegisterRequest) -> httpx.Response:
        return self._post(Api.REGISTER, req.model_dump_json().encode())

    def heartbeat(self, beat: Heartbeat) -> httpx.Response:
        return self._post(Api.HEARTBEAT, beat.model_dump_json().encode())

    def send_batch(self, gzipped: bytes) -> httpx.Response:
        return self._post(Api.INGEST, gzipped, gzip=True)

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
