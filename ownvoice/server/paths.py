"""ASGI middleware: `//` in a path means `/`, and a trailing `/` is dropped.

Open WebUI joins its base URL and the route with a slash, so a base URL entered with a trailing
slash (`http://host:8880/v1/`) makes it call `/v1//audio/speech` and `/v1//audio/voices`; the
first got 404 and the second made it fall back, silently, to OpenAI's six voice names.
A trailing slash (`/v1/models/`) is the same path; Starlette would answer it with a 307
redirect, which some clients do not follow for a POST or DELETE.
"""

from __future__ import annotations

import re

_SLASHES = re.compile(r"/{2,}")


class CollapseSlashes:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "")
        if scope["type"] in ("http", "websocket") and ("//" in path or path[1:].endswith("/")):
            scope = dict(scope)
            scope["path"] = _SLASHES.sub("/", path).rstrip("/") or "/"
            raw = scope.get("raw_path")
            if raw:
                scope["raw_path"] = re.sub(rb"/{2,}", b"/", raw).rstrip(b"/") or b"/"
        await self.app(scope, receive, send)
