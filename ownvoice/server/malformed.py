"""Requests too broken to reach the app get the error envelope too.

uvicorn answers a request it cannot parse (HTTP/1.1 without a Host header, two Host headers, a
garbled request line) itself, in plain text, before any middleware runs; a client that reads
`error.message` then gets nothing useful, and the refusal has no request id. `enveloped_http`
is uvicorn's own HTTP protocol (h11 or httptools, whichever it picks) with that one answer
replaced by the envelope, a request id, and a `refused 400` line like every other refusal.
"""

from __future__ import annotations

import json
import logging
import uuid

from ownvoice.server.errors import error_body

log = logging.getLogger("ownvoice.server")


def enveloped_http(name: str = "auto") -> type:
    """uvicorn's HTTP protocol class `name` ("auto", "h11", "httptools"), answering
    unparseable requests in the envelope; for uvicorn.Config(http=...)."""
    from uvicorn.config import HTTP_PROTOCOLS
    from uvicorn.importer import import_from_string

    base = import_from_string(HTTP_PROTOCOLS[name])

    class EnvelopedHTTP(base):
        def send_400_response(self, msg: str) -> None:
            rid = uuid.uuid4().hex[:12]
            message = f"the request is not valid HTTP ({msg.rstrip('.')})"
            envelope = error_body(message, "invalid_request_error", None, "bad_request")
            envelope["error"]["request_id"] = rid
            body = json.dumps(envelope, separators=(",", ":")).encode()
            head = (
                "HTTP/1.1 400 Bad Request\r\n"
                "content-type: application/json\r\n"
                f"content-length: {len(body)}\r\n"
                f"x-request-id: {rid}\r\n"
                "connection: close\r\n\r\n"
            )
            self.transport.write(head.encode("ascii") + body)
            self.transport.close()  # the parser's state is unknown: nothing more is read
            log.warning("refused 400 id=%s code=bad_request: %s", rid, message)

    return EnvelopedHTTP
