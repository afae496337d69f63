"""Reading a request body with a size limit, gzip, and pydantic validation that reports the field."""

from __future__ import annotations

import zlib
from typing import TypeVar

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def _too_large(limit: int) -> HTTPException:
    return HTTPException(
        413, f"request body over the {limit}-byte limit (GPUWATCH_MAX_BODY_BYTES); send smaller batches"
    )


async def read_model(request: Request, model: type[M], limit: int) -> M:
    """The body as ``model``; 413 past ``limit`` bytes (before and after gunzip), 422 naming the bad field."""
    raw = await read_body(request, limit)
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise validation_error(exc) from None


def validation_error(exc: ValidationError) -> RequestValidationError:
    """pydantic's errors as FastAPI's 422, located in the body."""
    # Without the input: an invalid-UTF-8 one cannot be encoded (a 500), and a bad body is not echoed back.
    raw = exc.errors(include_url=False, include_context=False, include_input=False)
    errors = [{**e, "loc": ("body", *e["loc"])} for e in raw]
    return RequestValidationError(errors)


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, gunzipped; 413 past ``limit`` bytes (before and after gunzip), 400/415 for bad encodings."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    raw = b"".join(chunks)
    request.state.body_bytes = size
    encoding = request.headers.get("content-encoding", "identity").lower()
    if encoding == "gzip":
        raw = _gunzip(raw, limit)
    elif encoding != "identity":
        raise HTTPException(415, f"unsupported Content-Encoding {encoding!r}: send gzip or identity")
    return raw


def _gunzip(raw: bytes, limit: int) -> bytes:
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(raw, limit + 1)
    except zlib.error as exc:
        raise HTTPException(400, f"body is not valid gzip: {exc}") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise _too_large(limit)
    if not inflater.eof:
        raise HTTPException(400, "body is not valid gzip: truncated stream")
    return out
