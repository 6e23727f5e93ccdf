"""Request ids, and one log line for every refused request: the outermost ASGI middleware.

Clients such as Open WebUI and SillyTavern show only "Bad Request" or "Internal Server Error"
for our refusals, so the server log is where a user finds out why. Every 4xx and 5xx answer, on
every route (auth failures, unknown routes, host checks and body limits included), logs

    refused 400 POST /v1/audio/speech id=3f9c2a1b code=voice_not_found param=voice
        voice='Uncle Fu' model='tts-1': voice 'Uncle Fu' is not available; ...

with the reason read from the error envelope that goes to the client, and the voice and model
read from the JSON body. The body itself, the API key and other headers are never logged: only
the voice and model are read from the body (cut to 80 characters); a body that is not JSON, or
that is nested deeper than the parser goes (`[[[[...`), names neither.
An identical refusal repeated within REPEAT_WINDOW_S gets a short line that keeps its own id
and points at the full one (`refused 400 POST /v1/audio/speech id=9d1e0c2f: as id=3f9c2a1b`), so
a client's request id is always found and a flood does not repeat the reason. `/ready`'s 503
while the models load is part of a normal start: logged at INFO. Every response carries `x-request-id` (the client's own, when it sent a sane one), which
the per-request speech log line repeats and an error envelope carries as `error.request_id`.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid

log = logging.getLogger("ownvoice.server")

REPEAT_WINDOW_S = 60.0
CLIENT_GONE = 499  # the speech route's answer to a client that left: its line says "cancelled"
_BODY_CAPTURE = 64 * 1024  # enough for model and voice; a longer input is cut, never logged
_ERROR_CAPTURE = 16 * 1024
_CLIENT_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def request_id(scope) -> str:
    """The id of the request in `scope` (set by RefusalLog)."""
    return scope.get("state", {}).get("request_id", "-")


class RefusalLog:
    """ASGI middleware: request ids, and the refusal log line (see the module docstring)."""

    def __init__(self, app):
        self.app = app
        self._recent: dict[tuple, tuple[float, str]] = {}  # key -> (logged at, its id)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        given = headers.get(b"x-request-id", b"").decode("latin-1")
        rid = given if _CLIENT_ID.fullmatch(given) else uuid.uuid4().hex[:12]
        scope.setdefault("state", {})["request_id"] = rid
        json_body = b"json" in headers.get(b"content-type", b"")
        request_body = bytearray()
        status = 0
        error = bytearray()

        async def tee_receive():
            message = await receive()
            if json_body and message["type"] == "http.request":
                room = _BODY_CAPTURE - len(request_body)
                if room > 0:
                    request_body.extend(message.get("body", b"")[:room])
            return message

        held: dict | None = None  # an error's response start, until its body is whole
        pending: list[bytes] = []  # that body so far

        async def send_and_watch(message):
            nonlocal status, held
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {
                    **message,
                    "headers": [*message.get("headers", []), (b"x-request-id", rid.encode())],
                }
                if status >= 400 and _is_json(message["headers"]):
                    held = message  # the envelope gets the id: sent when the body is whole
                    return
            elif message["type"] == "http.response.body" and status >= 400:
                chunk = message.get("body", b"")
                more = message.get("more_body", False)
                room = _ERROR_CAPTURE - len(error)
                if room > 0:
                    error.extend(chunk[:room])
                if held is not None:
                    pending.append(chunk)
                    whole = b"".join(pending)
                    if more and len(whole) <= _ERROR_CAPTURE:
                        return
                    start, held = held, None
                    pending.clear()
                    if not more:  # complete: add the id
                        whole = _with_id(whole, rid)
                        start = {**start, "headers": _set_length(start["headers"], len(whole))}
                    await send(start)
                    message = {**message, "body": whole}
                if not more and status != CLIENT_GONE:
                    self._log(scope, rid, status, bytes(error), bytes(request_body))
            await send(message)

        await self.app(scope, tee_receive, send_and_watch)

    def _log(self, scope, rid: str, status: int, error: bytes, body: bytes) -> None:
        code = param = None
        message = ""
        try:
            envelope = _parse(error)["error"]
            code, param = envelope.get("code"), envelope.get("param")
            message = str(envelope.get("message") or "")
        except (KeyError, TypeError, AttributeError):
            message = error[:200].decode("utf-8", "replace")
        asked = _asked_for(body)
        path = _short(scope.get("path", ""), 200)
        key = (status, scope.get("method"), path, code, param, message, *asked.values())
        now = time.monotonic()
        head = f"refused {status} {scope.get('method')} {path} id={rid}"
        level = _level(status, path)
        seen = self._recent.get(key)
        if seen is not None and now - seen[0] < REPEAT_WINDOW_S:
            log.log(level, f"{head}: as id={seen[1]}")  # said a moment ago: the id, not the why
            return
        if len(self._recent) > 512:
            self._recent.clear()
        self._recent[key] = (now, rid)
        fields = [head]
        if code:
            fields.append(f"code={code}")
        if param:
            fields.append(f"param={param}")
        fields += [f"{k}={v!r}" for k, v in asked.items()]
        log.log(level, " ".join(fields) + f": {_short(message, 500)}")


def _level(status: int, path: str) -> int:
    if status == 503 and path == "/ready":  # the models are loading: a normal start
        return logging.INFO
    return logging.ERROR if status >= 500 else logging.WARNING


def _is_json(headers) -> bool:
    return any(k.lower() == b"content-type" and b"json" in v for k, v in headers)


def _parse(data: bytes):
    """The JSON value of `data`, or None when it is not JSON: malformed, or nested deeper than
    Python's parser goes (RecursionError; a refusal must be logged and sent all the same)."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def _with_id(body: bytes, rid: str) -> bytes:
    """The error envelope with `request_id` added, so that a user can find it in the log."""
    data = _parse(body)
    if not isinstance(data, dict) or not isinstance(data.get("error"), dict):
        return body
    data["error"]["request_id"] = rid
    return json.dumps(data, separators=(",", ":")).encode()


def _set_length(headers, length: int) -> list:
    kept = [(k, v) for k, v in headers if k.lower() != b"content-length"]
    return [*kept, (b"content-length", str(length).encode())]


def _asked_for(body: bytes) -> dict[str, str]:
    """The voice and model a JSON request asked for (never its text)."""
    data = _parse(body)
    if not isinstance(data, dict):
        return {}
    out = {}
    for key in ("voice", "model"):
        value = data.get(key)
        if isinstance(value, dict):  # OpenAI's {"id": ...} form of a voice
            value = value.get("id")
        if isinstance(value, str):
            out[key] = _short(value, 80)
    return out


def _short(text: str, limit: int) -> str:
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= limit else text[: limit - 3] + "..."
