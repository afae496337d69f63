"""The node side's one HTTP client to the server, shared by the agent's shipper and `gpuwatch run`'s
supervisor: one place for the base URL, the bearer token, the User-Agent and the paths (spelled once,
in `gpuwatch.protocol.Api`).

Two kinds of call, because the callers handle failure differently. The shipper's calls (register,
heartbeat, ingest) return the response: its status decides between retrying, backing off for the
server's Retry-After and setting a batch aside. The supervisor's calls (runs, exits, decisions) speak
the typed run protocol of `gpuwatch.protocol` and return the answer's model, or `Unanswered` when the
server is unreachable or refuses (with what it said, for the caller's backoff): the supervisor then
decides locally and keeps the record in its outbox.

A decision is long-polled: the server holds the request up to ``wait_s``, so that request's timeout
is the wait plus the client's own timeout (a wait as long as the timeout would always time out).
"""

from __future__ import annotations

import gzip
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from gpuwatch import __version__
from gpuwatch.columnar import CONTENT_TYPE as COLUMNAR_TYPE
from gpuwatch.protocol import (
    DECISION_WAIT_MAX_S,
    Api,
    Batch,
    DecisionAnswer,
    Heartbeat,
    RegisterRequest,
    RunEnded,
    RunExit,
    RunStart,
    RunStarted,
    StackAnswer,
    StackTasks,
)

M = TypeVar("M", bound=BaseModel)

#: Answers after which sending the same request again can never succeed.
PERMANENT = frozenset({400, 401, 403, 404, 409, 413, 415, 422})


@dataclass(frozen=True, slots=True)
class Unanswered:
    """No answer to act on: the server was unreachable (``status`` None) or refused (its HTTP status)."""

    status: int | None = None
    retry_after: float | None = None  # seconds, when the server said (429, 503)
    detail: str = ""

    @property
    def permanent(self) -> bool:
        """Sending the same request again would be refused again."""
        return self.status in PERMANENT


log = logging.getLogger("gpuwatch.agent.api_client")
_JSON = {"Content-Type": "application/json"}


class ServerClient:
    """Connections to the server, kept open between calls; ``timeout_s`` bounds each request."""

    def __init__(
        self, base_url: str, token: str, timeout_s: float = 10.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.clock = clock
        self.timeout_s = timeout_s
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

    def send_batch(self, gzipped: bytes, columnar: bool = False) -> httpx.Response:
        """POST a batch (protocol 3's body with ``columnar``, else JSON); its acknowledgement carries the
        server's time (servers since the field was added)."""
        return self._timed(Api.INGEST, gzipped, gzip=True, content_type=COLUMNAR_TYPE if columnar else None)

    def read_clock(self) -> httpx.Response:
        """An empty batch, which the server stores nothing of, for its acknowledgement's time."""
        body = gzip.compress(Batch(batch_id=0).model_dump_json().encode())
        return self._timed(Api.INGEST, body, gzip=True)

    def _timed(self, path: str, body: bytes, gzip: bool = False, content_type: str | None = None) -> httpx.Response:
        """POST, and measure the clock offset from the answer's ``server_time``: the server read its clock
        between our send and our receipt, so the midpoint is off by at most half the round trip."""
        sent = self.clock()
        resp = self._post(path, body, gzip, content_type)
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

    def start_run(self, start: RunStart) -> RunStarted | Unanswered:
        return self._call("POST", Api.RUNS, RunStarted, json=_json(start))

    def report_exit(self, run_id: int, body: RunExit) -> RunEnded | Unanswered:
        return self._call("POST", Api.RUN_EXIT.format(run_id=run_id), RunEnded, json=_json(body))

    def decision(self, run_id: int, wait_s: float) -> DecisionAnswer | Unanswered:
        """The server's decision about a run, long-polled for up to ``wait_s`` (at most
        `DECISION_WAIT_MAX_S`); the request may take that long plus the usual timeout."""
        wait_s = max(0.0, min(wait_s, DECISION_WAIT_MAX_S))
        path = Api.RUN_DECISION.format(run_id=run_id)
        return self._call("GET", path, DecisionAnswer, params={"wait": wait_s}, timeout=wait_s + self.timeout_s)

    # -- the agent's stack captures (agent/stacks.py) ------------------------------------------------

    def stack_tasks(self) -> StackTasks | Unanswered:
        """The stack captures the server asks of this node."""
        return self._call("GET", Api.STACK_TASKS, StackTasks)

    def answer_stacks(self, dump_id: int, body: StackAnswer) -> Unanswered | None:
        """Post one capture's answer; None when the server took it."""
        path = Api.STACK_TASK.format(dump_id=dump_id)
        try:
            resp = self._http.post(path, content=body.model_dump_json(exclude_none=True).encode(), headers=_JSON)
        except httpx.TransportError as exc:
            log.warning("server unreachable (POST %s: %s)", path, exc)
            return Unanswered(detail=str(exc))
        if resp.status_code >= 300:
            log.warning("server refused POST %s: HTTP %d %s", path, resp.status_code, resp.text[:300])
            return Unanswered(resp.status_code, retry_after(resp), resp.text[:300])
        return None

    def _call(self, method: str, path: str, model: type[M], **kwargs: Any) -> M | Unanswered:
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            log.warning("server unreachable (%s %s: %s)", method, path, exc)
            return Unanswered(detail=str(exc))
        if resp.status_code >= 300:
            log.warning("server refused %s %s: HTTP %d %s", method, path, resp.status_code, resp.text[:300])
            return Unanswered(resp.status_code, retry_after(resp), resp.text[:300])
        try:
            return model.model_validate_json(resp.content)
        except ValidationError as exc:  # not the protocol's answer (a proxy's page): as if unreachable
            log.warning("unexpected answer to %s %s: %s", method, path, exc)
            return Unanswered(resp.status_code, None, "unexpected answer")

    def close(self) -> None:
        self._http.close()

    def _post(self, path: str, body: bytes, gzip: bool = False, content_type: str | None = None) -> httpx.Response:
        headers = {"Content-Type": content_type or "application/json"}
        if gzip:
            headers["Content-Encoding"] = "gzip"
        return self._http.post(path, content=body, headers=headers)


def _json(model: BaseModel) -> dict[str, Any]:
    """A request body: the fields set, without the absent optional ones (an older server ignores none)."""
    return model.model_dump(mode="json", exclude_none=True)


def retry_after(resp: httpx.Response) -> float | None:
    """The server's Retry-After in seconds (an HTTP date is rare enough to leave to the backoff)."""
    value = resp.headers.get("retry-after", "")
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
