"""One error envelope for every failure: {"error": {"message", "type", "param", "code"}}.

Routes raise ownvoice errors (or the server-only ones below) and never build responses for
errors themselves; `install_error_handlers` maps each exception class to a status and an OpenAI
error type. FastAPI's 422 validation errors become 400s in the same envelope, without echoing
the request's values back (the input text stays private).
"""

from __future__ import annotations

import logging
import math

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from ownvoice.errors import (  # noqa: F401  (re-exported: the server's errors in one place)
    EngineBusy,
    InsufficientResources,
    InvalidInput,
    ModelLoadError,
    ModelNotFound,
    OwnvoiceError,
    PayloadTooLarge,
    QueueFull,
    QueueTimeout,
    ServiceUnavailable,
    ShuttingDown,
    VoiceNotFound,
    describe,
    is_out_of_memory,
)

log = logging.getLogger("ownvoice.server")


class Unauthorized(OwnvoiceError):
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class InvalidHost(InvalidInput):
    """The Host header is not one this server answers to (DNS-rebinding protection)."""

    code = "invalid_host"


class OriginNotAllowed(OwnvoiceError):
    """A browser on another site tried to change something (cross-site request forgery)."""

    status = 403
    type = "permission_error"
    code = "origin_not_allowed"


def error_body(message: str, type_: str, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def error_response(exc: Exception) -> JSONResponse:
    """The envelope (and headers) for an exception raised while handling a request."""
    info = describe(exc)
    headers = {}
    if isinstance(exc, QueueFull):
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
        headers["x-should-retry"] = "true"
    if info.code == "insufficient_resources":
        headers["Retry-After"] = "1"
    if isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, ShuttingDown):
        headers["Connection"] = "close"
    return JSONResponse(info.envelope(), status_code=info.status, headers=headers)


def validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    errors = exc.errors()  # FastAPI raises it with at least one
    first = errors[0]
    if first["type"] == "json_invalid":
        return "the request body is not valid JSON", None
    # a location starts with where the value came from ("body", "query", ...); a field inside
    # a union (voice: str | {"id"}) then reports its variant name: the field comes first
    loc = [str(p) for p in first["loc"][1:]]
    param = loc[0] if loc else None
    where = ".".join(loc) or "request body"
    # the message only; pydantic's `input` (the value sent) is never echoed
    message = f"{where}: {first['msg']}"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return message, param


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(OwnvoiceError)
    async def _ownvoice(request: Request, exc: OwnvoiceError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = validation_message(exc)
        return JSONResponse(error_body(message, "invalid_request_error", param), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        type_ = "invalid_request_error" if exc.status_code < 500 else "server_error"
        code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(
            exc.status_code
        )
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:  # Starlette names the first route's methods, not all of them
            headers["Allow"] = ", ".join(_methods_for(request))
        return JSONResponse(
            error_body(_http_message(exc), type_, None, code),
            status_code=exc.status_code,
            headers=headers or None,
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        if is_out_of_memory(exc):  # not a bug: this request did not fit, the next may
            return error_response(exc)
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return JSONResponse(
            error_body(f"internal error: {type(exc).__name__}", "server_error"), status_code=500
        )


def _http_message(exc: StarletteHTTPException) -> str:
    """The exception's detail, or what FastAPI's "There was an error parsing the body" was."""
    if isinstance(exc.__cause__, RecursionError):  # `[[[[...`, past the JSON parser's depth
        return "the request body is JSON nested too deeply to read"
    if isinstance(exc.__cause__, UnicodeDecodeError):
        return "the request body is not valid JSON: it is not UTF-8 text"
    return str(exc.detail)


def _methods_for(request: Request) -> list[str]:
    """Every method some route serves at this path (GET /v1/audio/voices is public, POST is
    behind the key: two routers, one path), found by asking each route as the router does
    (included routers keep their routes to themselves: they only answer such questions)."""
    allowed = []
    for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"):
        scope = {**request.scope, "method": method}
        if any(r.matches(scope)[0] == Match.FULL for r in request.app.router.routes):
            allowed.append(method)
    return allowed
