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
    try:
        app = create_app(settings)
    except SchemaOutOfDate as exc:
        print(f"gpuwatch server: {exc}", file=sys.stderr)
        return 2
    log.info(
        "serving on http://%s:%d (database %s)",
        settings.host,
        settings.port,
        settings.effective_database_url.split("@")[-1],
    )
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=settings.log_level.lower(), access_log=False)
    return 0
