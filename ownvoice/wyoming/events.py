"""Reading Wyoming events from a client, with limits: a client cannot make the server buffer
more than it allows.

An event is a JSON header line (`type`, optional `data`, `data_length`, `payload_length`),
then `data_length` bytes of JSON merged into `data`, then `payload_length` bytes of payload.
The wyoming package's own reader trusts both lengths and ends the connection silently on a bad
line; here a header past MAX_HEADER_BYTES, data past MAX_DATA_BYTES, a payload past
MAX_PAYLOAD_BYTES (a TTS server is never sent audio) or JSON that is not an event raise
BadEvent, which the connection answers with an `error` event before closing. Writing uses the
wyoming package as it is.
"""

from __future__ import annotations

import asyncio
import json

from wyoming.event import Event

MAX_HEADER_BYTES = 64 * 1024  # also the StreamReader's limit (listener.py)
MAX_DATA_BYTES = 256 * 1024  # 4096 characters of text take at most ~25 KB as escaped JSON
MAX_PAYLOAD_BYTES = 64 * 1024


class BadEvent(Exception):
    def __init__(self, message: str, code: str = "bad_event"):
        super().__init__(message)
        self.message = message
        self.code = code


async def read_event(reader: asyncio.StreamReader) -> Event | None:
    """The next event, or None when the client has gone (or closed mid-event)."""
    try:
        line = await reader.readline()
    except ValueError:  # asyncio's "separator not found, chunk exceeds the limit"
        raise BadEvent(
            f"event header longer than {MAX_HEADER_BYTES} bytes", "event_too_large"
        ) from None
    except ConnectionError:
        return None
    if not line.endswith(b"\n"):  # end of stream, possibly in the middle of a line
        return None
    header = _json_object(line, "event header")
    kind = header.get("type")
    if not isinstance(kind, str) or not kind:
        raise BadEvent("event header has no `type`")
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise BadEvent("event `data` must be a JSON object")
    data_length = _length(header, "data_length", MAX_DATA_BYTES)
    payload_length = _length(header, "payload_length", MAX_PAYLOAD_BYTES)
    try:
        if data_length:
            data.update(_json_object(await reader.readexactly(data_length), "event data"))
        payload = await reader.readexactly(payload_length) if payload_length else None
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    return Event(type=kind, data=data, payload=payload)


def _json_object(raw: bytes, what: str) -> dict:
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise BadEvent(f"{what} is not JSON") from None
    except RecursionError:  # `[[[[...`, deeper than Python's parser goes
        raise BadEvent(f"{what} is JSON nested too deeply to read") from None
    if not isinstance(value, dict):
        raise BadEvent(f"{what} must be a JSON object")
    return value


def _length(header: dict, key: str, limit: int) -> int:
    value = header.get(key) or 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BadEvent(f"`{key}` must be a byte count")
    if value > limit:
        raise BadEvent(f"`{key}` {value} is over the limit of {limit} bytes", "event_too_large")
    return value
