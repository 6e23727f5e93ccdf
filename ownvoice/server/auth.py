"""Optional API key (Bearer), the WebSocket handshake's checks and the request-body size limit.

With `server.api_key` set, every route except the discovery and health ones needs
`Authorization: Bearer <key>`; Open WebUI calls GET /v1/audio/models and /v1/audio/voices
without a key, so those stay open. The body limit is checked from Content-Length before
anything is parsed, and by counting bytes for bodies sent without one.
"""

from __future__ import annotations

import hmac
import json

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from ownvoice.server.errors import Unauthorized, error_body

# how much of an oversized body we read and drop so that the 413 reaches the client
DRAIN_BYTES = 64 * 2**20


# declares the Bearer scheme in the OpenAPI document; the check below is our own (its 401 is in
# the error envelope, and the key is compared in constant time)
_BEARER = Depends(HTTPBearer(auto_error=False, description="server.api_key, when one is set"))


def require_api_key(request: Request, _: HTTPAuthorizationCredentials | None = _BEARER) -> None:
    """FastAPI dependency: raises Unauthorized (401) unless the Bearer key matches."""
    key = request.app.state.settings.server.api_key
    if key is None:
        return
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    expected = key.get_secret_value().encode()
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected):
        raise Unauthorized(
            "missing or wrong API key; send the header `Authorization: Bearer <key>`"
        )


class BodyLimit:
    """ASGI middleware: answer 413 for request bodies over `max_bytes`."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.max_bytes
        message = f"request body is larger than {limit / 2**20:g} MB (limits.max_upload_mb)"
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await drain_body(scope, receive)
            body = json.dumps(
                error_body(message, "invalid_request_error", None, "payload_too_large")
            ).encode()
            await send({
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            })  # fmt: skip
            await send({"type": "http.response.body", "body": body})
            return
        received = 0

        async def limited_receive():
            nonlocal received
            msg = await receive()
            if msg["type"] == "http.request":
                received += len(msg.get("body", b""))
                if received > limit:
                    if msg.get("more_body", False):
                        await drain_body(scope, receive)
                    # FastAPI re-raises HTTPException from body parsing; the handler
                    # turns it into the envelope
                    raise HTTPException(413, message)
            return msg

        await self.app(scope, limited_receive, send)


async def drain_body(scope, receive, budget: int = DRAIN_BYTES) -> None:
    """Read and drop what the client is still sending, up to `budget` bytes, before a refusal.

    Closing a socket that still has unread request bytes makes the kernel send a reset,
    and a reset can destroy the 413 before the client reads it (seen in CI). Reading the
    rest of a modest body first lets the answer arrive. Not done when the client waits for
    `100 Continue` (reading would invite the upload we are refusing), nor when the declared
    body is past the budget (a partial read cannot prevent the reset).
    """
    headers = dict(scope["headers"])
    if headers.get(b"expect", b"").lower() == b"100-continue":
        return
    length = headers.get(b"content-length")
    if length is not None and length.isdigit() and int(length) > budget:
        return
    while budget > 0:
        msg = await receive()
        if msg["type"] != "http.request":
            return
        budget -= len(msg.get("body", b""))
        if not msg.get("more_body", False):
            return


def websocket_handshake(ws, state) -> tuple[str | None, str | None]:
    """(the subprotocol to accept, why the handshake is refused or None): the Host and Origin
    the server answers to (HostGuard checks them for HTTP), and the API key, as an
    `Authorization: Bearer` header or, from a browser (which cannot set headers), the
    subprotocols `bearer, <key>`."""
    headers, policy = ws.headers, state.hosts
    host, origin = headers.get("host"), headers.get("origin")
    if not policy.host_allowed(host):
        return None, f"host {host!r} not allowed"
    if origin is not None and not policy.origin_allowed(origin, host):
        return None, f"origin {origin!r} not allowed"
    key = state.settings.server.api_key
    if key is None:
        return None, None
    offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",") if p]
    expected = key.get_secret_value().encode()
    scheme, _, given = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected):
        return None, None
    if len(offered) == 2 and offered[0].lower() == "bearer":
        if hmac.compare_digest(offered[1].encode(), expected):
            return offered[0], None
    return None, "the API key is missing or wrong"
