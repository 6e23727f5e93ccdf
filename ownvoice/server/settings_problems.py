"""A settings validation error as one line a user can act on: where, what, and for an unknown
key the known one it was probably meant to be ("did you mean optimization.quantize?")."""

from __future__ import annotations

import difflib
import typing
from typing import Any

from pydantic import BaseModel


def describe(err: dict, root: type[BaseModel], aliases: dict[type, list[str]]) -> str:
    """One pydantic error of `root` as text; `aliases`: extra keys a block accepts."""
    loc = tuple(err["loc"])
    where = ".".join(str(p) for p in loc) or "settings"
    if err["type"] == "missing" and loc[-1] == "source":
        return f"{where}: required (or hf_id): a Hugging Face hub id or a checkpoint folder"
    if err["type"] != "extra_forbidden":
        return f"{where}: {err['msg']}"
    known = keys_at(root, loc[:-1], aliases)
    guess = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    hint = f"did you mean {'.'.join([*map(str, loc[:-1]), guess[0]])}?" if guess else ""
    listed = f"known here: {', '.join(known)}" if known else ""
    return f"{where}: unknown key; {hint or listed}".rstrip("; ")


def keys_at(root: type[BaseModel], path: tuple, aliases: dict[type, list[str]]) -> list[str]:
    """The keys accepted at `path` (e.g. ("models", "cv") -> source, type, hf_id)."""
    block: Any = root
    for part in path:
        if isinstance(block, type) and issubclass(block, BaseModel):
            field = block.model_fields.get(str(part))
            if field is None:
                return []
            block = field.annotation
        elif typing.get_origin(block) is dict:
            block = typing.get_args(block)[1]  # models.<name>: the entry
        else:
            return []
    if not (isinstance(block, type) and issubclass(block, BaseModel)):
        return []
    return [*block.model_fields, *aliases.get(block, [])]
