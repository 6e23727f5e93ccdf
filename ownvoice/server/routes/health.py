"""GET /health (alive), GET /ready (models loaded and warmed, not shutting down), GET /metrics."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from ownvoice import __version__
from ownvoice.server.auth import require_api_key
from ownvoice.server.protocol import ERROR_RESPONSES

public = APIRouter()
router = APIRouter(dependencies=[Depends(require_api_key)], responses=ERROR_RESPONSES)
_STATUS = {"content": {"application/json": {"schema": {"type": "object"}}}}


@public.get("/health", responses={503: {"description": "A model failed to load", **_STATUS}})
async def health(request: Request) -> JSONResponse:
    """200 while the process can serve (503 once a model failed to load); says which models
    run where, and carries the loud warnings (CPU instead of GPU, exposed without a key)."""
    state = request.app.state
    models = state.service.pool.status()
    failed = [n for n, m in models.items() if m["state"] == "failed"]
    warnings = [*state.warnings, *state.service.pool.warnings]
    status = "degraded" if failed or warnings else ("ok" if state.service.pool.ready else "loading")
    if getattr(request.state, "foreign_host", False):  # see hosts.HostGuard
        body = {"status": "error" if failed else status, "ready": state.service.pool.ready}
        return JSONResponse(body, status_code=503 if failed else 200)
    body = {
        "status": "error" if failed else status,
        "ready": state.service.pool.ready,
        "version": __version__,
        "models": models,
        "roles": state.service.pool.roles,
        "warnings": warnings,
        "queue": {
            "generating": state.service.pool.generating,
            "waiting": state.service.pool.waiting,
        },
        "draining": state.drain.draining,
    }
    return JSONResponse(body, status_code=503 if failed else 200)


@public.get(
    "/ready", responses={503: {"description": "Not ready (loading or draining)", **_STATUS}}
)
async def ready(request: Request) -> JSONResponse:
    pool, draining = request.app.state.service.pool, request.app.state.drain.draining
    ready = pool.ready and not draining  # a load balancer stops sending once a drain begins
    body = {"ready": ready}
    if not getattr(request.state, "foreign_host", False):
        body["models"] = {n: m["state"] for n, m in pool.status().items()}
    if draining:
        body["draining"] = True
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get(
    "/metrics",
    response_class=Response,  # not PlainTextResponse: its 401 is JSON, as documented
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics(request: Request) -> Response:
    """Prometheus text exposition."""
    m = request.app.state.service.metrics
    return Response(m.render(), media_type=m.content_type)
