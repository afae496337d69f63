"""What the client's tests share: an in-memory transport and a reporter writing into it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import gpuwatch.client as gw
from gpuwatch.client.reporter import Reporter
from gpuwatch.protocol import ClientReport, StepReport


class Capture:
    """An in-memory transport, for tests about what is sent rather than how."""

    def __init__(self) -> None:
        self.reports: list[ClientReport] = []
        self.fail = False

    def __call__(self, url: str, body: bytes) -> None:
        if self.fail:
            raise ConnectionRefusedError("agent away")
        self.reports.append(ClientReport.model_validate_json(body))

    def steps(self) -> list[StepReport]:
        return [s for r in self.reports for s in r.steps]


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Reporter, Capture]]:
    """The public API writing into a reporter with no thread; ``flush()`` ships to ``Capture``."""
    capture = Capture()
    rep = Reporter(send=capture, env={}, autostart=False)
    monkeypatch.setattr(gw, "_reporter", rep)
    yield rep, capture
