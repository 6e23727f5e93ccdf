"""Designed voices by name (`design:<name>`): list, save, delete (ownvoice/service/designs.py)."""

from __future__ import annotations

import asyncio
import logging

from fastapi import APIRouter, Depends, Request

from ownvoice.server.auth import require_api_key
from ownvoice.server.protocol import ERROR_RESPONSES, DesignList, DesignRequest, DesignResource

log = logging.getLogger("ownvoice.server")
router = APIRouter(dependencies=[Depends(require_api_key)], responses=ERROR_RESPONSES)


@router.get("/v1/audio/designs", response_model=DesignList)
async def list_designs(request: Request) -> dict:
    designs = await asyncio.to_thread(request.app.state.service.designs.list)
    return {"designs": [_resource(d) for d in designs]}


@router.post("/v1/audio/designs", response_model=DesignResource)
async def save_design(body: DesignRequest, request: Request) -> dict:
    """Save a description under a name; `design:<name>` then speaks it, without instructions.
    With a `seed` the voice is the same each time; without, each request samples a new one."""
    state = request.app.state
    if state.service.pool.roles.get("design") is None:
        log.warning("designed voice saved, but no VoiceDesign model is configured (roles.design)")
    design = await asyncio.to_thread(
        state.service.designs.add, body.name, body.instructions, body.language, body.seed
    )
    log.info("designed voice saved: %s", design.voice_id)
    return _resource(design)


@router.delete("/v1/audio/designs/{name}")
async def delete_design(name: str, request: Request) -> dict:
    design = await asyncio.to_thread(request.app.state.service.designs.remove, name)
    log.info("designed voice deleted: %s", design.voice_id)
    return {"id": design.voice_id, "object": "audio.design.deleted", "deleted": True}


def _resource(design) -> dict:
    return {
        "id": design.voice_id,
        "name": design.name,
        "instructions": design.instructions,
        "language": design.language,
        "seed": design.seed,
        "source": design.source,
    }
