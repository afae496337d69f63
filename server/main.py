"""`gpuwatch server`: run the app under uvicorn, refusing to start on an out-of-date schema."""

from __future__ import annotations

import logging
import sys

import uvicorn

from gpuwatch.config import Settings
from server.app import create_app
from server.store.db import SchemaOutOfDate

log = logging.getLogger("gpuwatch.server")


def serve(settings: Settings) -> int:
    if (settings.ssl_certfile is None) != (settings.ssl_keyfile is None):
        print("gpuwatch server: HTTPS needs both ssl_certfile and ssl_keyfile", file=sys.stderr)
        return 2
    try:
        app = create_app(settings)
    except SchemaOutOfDate as exc:
        print(f"gpuwatch server: {exc}", file=sys.stderr)
        return 2
    scheme = "https" if settings.ssl_certfile else "http"
    log.info(
        "serving on %s://%s:%d (database %s)",
        scheme,
        settings.host,
        settings.port,
        settings.effective_database_url.split("@")[-1],
    )
    # No access log: a request line is of little use at this rate, and nothing of a request (its
    # Authorization header least of all) should end up in a log file.
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        access_log=False,
        ssl_certfile=settings.ssl_certfile,
        ssl_keyfile=settings.ssl_keyfile,
    )
    return 0
