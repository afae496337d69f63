"""The client's logger, made on first use: importing `logging` costs a training script's start more
than the rest of ``import gpuwatch.client`` (bench/README.md), and the client logs only when
something has gone wrong."""

from __future__ import annotations

LOGGER = "gpuwatch.client"


class _LazyLog:
    """``log.debug(...)`` on the ``gpuwatch.client`` logger, importing `logging` at the first call."""

    __slots__ = ()

    def debug(self, msg: str, *args: object, exc_info: bool = False) -> None:
        import logging

        # Called inside the ``except`` block that logs, so exc_info still finds the exception.
        logging.getLogger(LOGGER).debug(msg, *args, exc_info=exc_info)


log = _LazyLog()
