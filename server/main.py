"""`gpuwatch server`: run the app under uvicorn, refusing to start on an out-of-date schema."""

from __future__ import annotations

import gc
import logging
import sys

import uvicorn

from gpuwatch.config import Settings
from server.app import create_app
from server.store.db import SchemaOutOfDate

log = logging.getLogger("gpuwatch.server")


#: Tracked allocations between two young-generation collections (CPython's default: 700).
GC_YOUNG_THRESHOLD = 50_000


def _tune_gc() -> None:
    """Collect garbage cycles less often, and never look at what start-up built again.

    A decoded batch allocates thousands of lists (a series' columns) that are freed when the batch is
    done, and with the default threshold each batch set off several collections that walked the live
    ones: at 40,000 samples/s the collector took more CPU than decoding did (bench/README.md). Cycles
    are rare on the ingest path; they are still collected, just a few times a second rather than
    hundreds."""
    gc.collect()
    gc.freeze()  # the app, its modules and caches: alive for good, never worth scanning
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def serve(settings: Settings) -> int:
    if (settings.server.ssl_certfile is None) != (settings.server.ssl_keyfile is None):
        print("gpuwatch server: HTTPS needs both ssl_certfile and ssl_keyfile", file=sys.stderr)
        return 2
    try:
        app = create_app(settings)
    except SchemaOutOfDate as exc:
        print(f"gpuwatch server: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # a setting refused at start-up (a notify URL, Alertmanager's labels): named
        print(f"gpuwatch server: {exc}", file=sys.stderr)
        return 2
    _tune_gc()
    scheme = "https" if settings.server.ssl_certfile else "http"
    log.info(
        "serving on %s://%s:%d (database %s)",
        scheme,
        settings.server.host,
        settings.server.port,
        settings.effective_database_url.split("@")[-1],
    )
    # No access log: a request line is of little use at this rate, and nothing of a request (its
    # Authorization header least of all) should end up in a log file.
    uvicorn.run(
        app,
        host=settings.server.host,
        port=settings.server.port,
        log_level=settings.log_level.lower(),
        access_log=False,
        ssl_certfile=settings.server.ssl_certfile,
        ssl_keyfile=settings.server.ssl_keyfile,
    )
    return 0
