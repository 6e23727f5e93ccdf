"""GET /v1/models (OpenAI shape) and GET /v1/audio/models (Open WebUI's discovery, no auth)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from ownvoice.server.auth import require_api_key
from ownvoice.server.protocol import ERROR_RESPONSES, AudioModelList, ModelList
from ownvoice.service.voices import GENERIC_MODELS

public = APIRouter(responses=ERROR_RESPONSES)
router = APIRouter(dependencies=[Depends(require_api_key)], responses=ERROR_RESPONSES)


def model_ids(request: Request) -> list[str]:
    """Configured model names first, then the generic names that route by voice."""
    return [*request.app.state.pool.workers, *GENERIC_MODELS]


@router.get("/v1/models", response_model=ModelList)
async def list_models(request: Request) -> dict:
    return {"object": "list", "data": [{"id": m} for m in model_ids(request)]}


@public.get("/v1/audio/models", response_model=AudioModelList)
async def list_audio_models(request: Request) -> dict:
    return {"models": [{"id": m} for m in model_ids(request)]}
