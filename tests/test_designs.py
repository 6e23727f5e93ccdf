"""Designed voices kept by name (ownvoice/service/designs.py): the file, the config, the checks."""

from __future__ import annotations

import json

import pytest

from ownvoice.errors import InvalidInput, VoiceNotFound
from ownvoice.service.designs import DesignedVoice, DesignLibrary


def test_saved_designs_survive_a_restart_and_config_ones_win(tmp_path):
    config = {"narrator": DesignedVoice("narrator", "Deep and slow.", source="config")}
    lib = DesignLibrary(tmp_path, config)
    lib.add("Guide", "Bright and quick.", language="english", seed=5)
    again = DesignLibrary(tmp_path, config)  # a new process reads the same file
    guide = again.get("design:guide")
    assert (guide.name, guide.instructions, guide.language, guide.seed) == (
        "Guide", "Bright and quick.", "english", 5,
    )  # fmt: skip
    assert [d.voice_id for d in again.list()] == ["design:Guide", "design:narrator"]
    with pytest.raises(InvalidInput, match="config"):
        again.add("Narrator", "Something else.")
    with pytest.raises(InvalidInput, match="config"):
        again.remove("narrator")
    again.add("guide", "Replaced.")  # same name, other case: replaces, does not duplicate
    assert [d.instructions for d in again.list() if d.name.lower() == "guide"] == ["Replaced."]
    again.remove("design:GUIDE")
    with pytest.raises(VoiceNotFound):
        again.get("guide")


@pytest.mark.parametrize("name", ["", "../x", "a" * 65, "-lead", "new\nline"])
def test_bad_names_are_refused(tmp_path, name):
    with pytest.raises(InvalidInput):
        DesignLibrary(tmp_path).add(name, "A voice.")


def test_empty_description_is_refused_and_hand_edits_that_make_no_sense_are_skipped(tmp_path):
    lib = DesignLibrary(tmp_path)
    with pytest.raises(InvalidInput, match="instructions"):
        lib.add("Quiet", "   ")
    (tmp_path / "designs.json").write_text(json.dumps({"designs": [
        {"name": "ok", "instructions": "Fine."}, {"name": "no text"}, {"instructions": "x"},
        {"name": "bad seed", "instructions": "x", "seed": "many"},
    ]}))  # fmt: skip
    assert [d.name for d in lib.list()] == ["ok"]
