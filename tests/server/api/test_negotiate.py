"""Which format a post-mortem's `Accept` header gets (the HTTP round trip is in
tests/server/reports/test_report_postmortem.py)."""

from __future__ import annotations

import pytest
from fastapi import HTTPException

from server.api.negotiate import negotiate

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        (None, "md"),
        ("", "md"),
        ("*/*", "md"),  # curl, httpx, scripts: the default
        (BROWSER, "html"),  # Chromium and Firefox
        ("text/html", "html"),
        ("text/markdown", "md"),
        ("text/plain", "md"),
        ("text/*", "md"),
        ("text/html;q=0.5, text/markdown", "md"),
        ("text/markdown;q=0.2, text/html;q=0.9", "html"),
        ("TEXT/HTML", "html"),
        ("text/html;q=0, */*", "md"),  # refused outright, the wildcard does not bring it back
        ("text/html;q=oops, */*;q=0.5", "md"),  # a bad weight counts as none
        ("application/json, text/html;q=0.1", "html"),
    ],
)
def test_accept_picks_the_format(accept: str | None, chosen: str) -> None:
    assert negotiate(accept) == chosen


@pytest.mark.parametrize("accept", ["application/json", "image/png, application/pdf", "text/markdown;q=0"])
def test_an_accept_with_neither_format_is_refused_saying_what_there_is(accept: str) -> None:
    with pytest.raises(HTTPException) as refused:
        negotiate(accept)
    assert refused.value.status_code == 406
    assert "text/markdown or text/html" in str(refused.value.detail) and "?format=" in str(refused.value.detail)
