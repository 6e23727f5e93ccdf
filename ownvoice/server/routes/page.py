"""The web page (ownvoice/web) at `/` and its files under `/static/`: only the files shipped in
the package, each with a strict Content-Security-Policy (this origin only; no inline script;
audio and downloads from blob: URLs the page makes), never framed, never sniffed. The page
itself needs no key (it asks for one when the API does); what it does goes through the API."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import FileResponse, Response
from starlette.exceptions import HTTPException

from ownvoice.web import CONTENT_TYPES, static_files

public = APIRouter(include_in_schema=False)
router = APIRouter(include_in_schema=False)

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "media-src 'self' blob:; connect-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",  # a new version's page, not a stale one, after an upgrade
}
_FILES = static_files()


@public.get("/")
async def page() -> Response:
    return _file("index.html")


@public.get("/static/{name}")
async def static(name: str) -> Response:
    return _file(name)


def _file(name: str) -> Response:
    path = _FILES.get(name)
    if path is None:  # answered in the error envelope, as every other refusal is
        raise HTTPException(404, "no such file of the web page", headers=HEADERS)
    return FileResponse(path, media_type=CONTENT_TYPES[path.suffix], headers=HEADERS)
