"""GET /v1/models[/{id}] (OpenAI shape); GET /v1/audio/models (Open WebUI discovery, open)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from ownvoice.errors import ModelNotFound
from ownvoice.server.auth import require_api_key
from ownvoice.server.protocol import ERROR_RESPONSES, AudioModelList, ModelCard, ModelList
from ownvoice.service.voicemap import GENERIC_MODELS

public = APIRouter(responses=ERROR_RESPONSES)
router = APIRouter(dependencies=[Depends(require_api_key)], responses=ERROR_RESPONSES)


def model_ids(request: Request) -> list[str]:
    """Configured model names first, then the generic names that route by voice."""
    return [*request.app.state.service.pool.workers, *GENERIC_MODELS]


@router.get("/v1/models", response_model=ModelList)
async def list_models(request: Request) -> dict:
    return {"object": "list", "data": [{"id": m} for m in model_ids(request)]}


@router.get("/v1/models/{model_id:path}", response_model=ModelCard)
async def get_model(model_id: str, request: Request) -> dict:
    """One model (hub ids contain a slash, hence :path); 404 model_not_found otherwise."""
    for m in model_ids(request):
        if m.lower() == model_id.lower() or (
            m in request.app.state.service.pool.sources
            and request.app.state.service.pool.sources[m].lower() == model_id.lower()
        ):
            return {"id": m}
    raise ModelNotFound(f"model {model_id!r} does not exist on this server", param="model")


@public.get("/v1/audio/models", response_model=AudioModelList)
async def list_audio_models(request: Request) -> dict:
    return {"models": [{"id": m} for m in model_ids(request)]}
