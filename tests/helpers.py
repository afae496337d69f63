"""Real processes and servers on loopback for the tests, and polling with a deadline."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import uvicorn
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Select

from gpuwatch.config import Settings
from gpuwatch.protocol import GpuSample, GpuSeries, to_series
from server.app import create_app
from server.store.db import make_engine, make_sessionmaker, transaction
from server.store.migrate import upgrade
from server.store.nodes import create_token
from server.store.tokens import create_admin_token

TESTS = Path(__file__).resolve().parent  # the shared data (data/, fixtures/, jobs/) and helpers
REPO = TESTS.parent

T = TypeVar("T")
R = TypeVar("R")
CLI = [sys.executable, "-m", "gpuwatch"]


REQUIRE_TOOLS_ENV = "GPUWATCH_TEST_REQUIRE_TOOLS"  # CI sets it to 1: a missing tool fails instead of skipping


def require_tool(*names: str) -> str:
    """The path of the first of ``names`` on PATH (or in /usr/sbin); skip the test without one, or fail
    where GPUWATCH_TEST_REQUIRE_TOOLS=1 (CI installs .ci/system-packages)."""
    import shutil

    for name in names:
        found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
        if found:
            return found
    reason = f"{' or '.join(names)} not installed (see .ci/system-packages)"
    if os.environ.get(REQUIRE_TOOLS_ENV) == "1":
        pytest.fail(f"{reason} [{REQUIRE_TOOLS_ENV}=1]", pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reserved_port() -> socket.socket:
    """A loopback port held for a server started later: a socket bound with ``SO_REUSEADDR`` that never
    listens. The kernel hands a bound port to no outgoing connection and to no other ``bind(0)``, so the
    port stays free for the minutes a stack takes to start (`free_port`'s port can be taken meanwhile by
    any connection's ephemeral port), while a server that also sets ``SO_REUSEADDR`` (uvicorn, Go's
    listeners, ``http.server``) can still bind and listen on it. Close it when the server has stopped."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    return s


def wait_until(check: Callable[[], T], timeout: float = 20.0, what: str = "condition", every: float = 0.05) -> T:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except Exception as exc:  # the thing polled may not be up yet
            last_exc = exc
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last error: {last_exc})")


def metric_values(text: str, name: str, **labels: str) -> list[float]:
    """The values of the samples named ``name`` in a /metrics exposition whose labels include ``labels``,
    read by prometheus_client's own parser (a label value holding a quote or a comma is read right). The
    parser renames a counter's samples whose name lacks ``_total`` (dcgm-exporter's upper-case
    ``DCGM_FI_DEV_ECC_DBE_VOL_TOTAL``) to end in it; they are found by the name exported."""
    return [
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if (s.name == name or (family.name == name and s.name == f"{name}_total"))
        and labels.items() <= s.labels.items()
    ]


def migrated_sqlite(tmp: Path) -> str:
    url = f"sqlite:///{tmp / 'gpuwatch.db'}"
    upgrade(url)
    return url


def stored_one(url: str, statement: Select[tuple[R]]) -> R:
    """The one row ``statement`` selects from the database at ``url``, read through an engine of its own
    (what a test sees of what the server stored; the objects come detached)."""
    engine = make_engine(url)
    try:
        with make_sessionmaker(engine)() as session:
            return session.scalars(statement).one()
    finally:
        engine.dispose()


def new_token(url: str, node: str) -> str:
    engine = make_engine(url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            return create_token(session, node)
    finally:
        engine.dispose()


def new_admin_token(url: str, name: str = "ops") -> str:
    engine = make_engine(url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            return create_admin_token(session, name)
    finally:
        engine.dispose()


class InProcessServer:
    """The real app under a real uvicorn on 127.0.0.1, in a thread of the test process."""

    def __init__(self, settings: Settings) -> None:
        self.app = create_app(settings)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = uvicorn.Server(
            uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False)
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def services(self):  # type: ignore[no-untyped-def]
        return self.app.state.services

    def __enter__(self) -> InProcessServer:
        self._thread.start()
        wait_until(lambda: self._server.started, what="uvicorn to start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self.services.engine.dispose()


class Proc:
    """A `gpuwatch …` child process with its output captured to a file."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.args, self.log_path = args, log
        self._out = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            [*CLI, *args], stdout=self._out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self._out.close()
        return self.popen.returncode


def start_server(data_dir: Path, port: int, log: Path, extra_env: dict[str, str] | None = None) -> Proc:
    """`gpuwatch server` as a child process, returned once /readyz answers."""
    env = {"GPUWATCH_DATA_DIR": str(data_dir), "GPUWATCH_DATABASE_URL": "", **(extra_env or {})}
    proc = Proc(["server", "--port", str(port)], log, env)

    def ready() -> bool:
        if proc.popen.poll() is not None:
            raise AssertionError(f"server exited with {proc.popen.returncode}:\n{proc.output()}")
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200

    wait_until(ready, timeout=30, what="the server's /readyz")
    return proc


def add_samples(target: Any, node: str, samples: list[GpuSample], **kwargs: Any) -> None:
    """Feed ``samples`` to a `Telemetry` or `JobTracker`, as series (what the ingest path hands them)."""
    target.add_series(node, to_series(samples, GpuSeries), **kwargs)
