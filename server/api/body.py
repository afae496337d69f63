"""Reading a request body with a size limit, gzip, and pydantic validation that reports the field.

Every JSON body the API reads comes through `read_body`, which is why the checks that hold for any
string anywhere in any body are made here: a NUL (``\u0000``, the only way JSON can carry one) becomes
U+FFFD, as the agent does with log lines (`gpuwatch.protocol.log_text`), because PostgreSQL's text and
JSON columns cannot hold it. A batch that kept one was acknowledged, then failed every later rollup
flush, for every node, until a restart (docs/security.md). The replacing (`without_nul`) lives with the
ingest decoder, which applies it to protocol 3's JSON envelope too.
"""

from __future__ import annotations

import zlib
from typing import Any, TypeVar

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from server.ingest.decode import without_nul

M = TypeVar("M", bound=BaseModel)
_SCHEMAS = "#/components/schemas/"
_declared: dict[str, type[BaseModel]] = {}


def json_body(model: type[BaseModel]) -> dict[str, Any]:
    """A route's ``openapi_extra`` declaring ``model`` as its JSON request body. The handlers read their
    bodies themselves (`read_model`, `read_body`: size limits before parsing, gzip, NUL), so FastAPI
    knows nothing of them; without this the spec had no body to generate clients or fuzz with."""
    _declared[model.__name__] = model
    schema = {"$ref": _SCHEMAS + model.__name__}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def with_body_schemas(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` (the app's OpenAPI document) with the schemas of every `json_body` model in its components."""
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    for name, model in _declared.items():
        schema = model.model_json_schema(ref_template=_SCHEMAS + "{model}", mode="validation")
        for inner, definition in schema.pop("$defs", {}).items():
            schemas.setdefault(inner, definition)
        schemas[name] = schema
    return spec


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


async def read_body(request: Request, limit: int, *, json: bool = True) -> bytes:
    """The raw body, gunzipped; 413 past ``limit`` bytes (before and after gunzip), 400/415 for bad encodings.
    A JSON body has its NULs replaced (`without_nul`); another (``json`` false: protocol 3's binary batch)
    is left as it is, its reader replacing them where it finds JSON (server/ingest/decode.py)."""
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
    return without_nul(raw) if json else raw


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
    if inflater.unused_data:  # a second member or junk: what it holds would be checked by nobody
        raise HTTPException(400, "body is not valid gzip: bytes after the end of the stream")
    return out
