"""`ownvoice bench --server URL`: the rows a user gets for a running server, the clip cloned
both ways beside the preset voice, and the bench's voices gone from the library after."""

from __future__ import annotations

import json

import httpx
import pytest

from ownvoice.cli import main
from tests.server.helpers import make_settings, serve, speech_clip, wav_bytes


@pytest.fixture(scope="module")
def server(tiny_checkpoints, tmp_path_factory):
    settings = make_settings(
        tmp_path_factory.mktemp("voices"), device="cpu", dtype="float32",
        models={
            "cv": {"source": str(tiny_checkpoints["0.6B-CustomVoice"])},
            "base": {"source": str(tiny_checkpoints["0.6B-Base"])},
        },
        limits={"max_batch": 2},
    )  # fmt: skip
    with serve(settings) as (base, _):
        yield base


def test_server_bench_measures_the_clip_cloned_both_ways(server, tmp_path, capsys):
    clip = tmp_path / "me.wav"
    clip.write_bytes(wav_bytes(speech_clip(4.0, rate=24000), rate=24000))
    out = tmp_path / "bench.json"
    with pytest.raises(SystemExit) as done:
        main(["bench", "--server", server, "--concurrency", "1,2", "--requests", "1",
              "--frames", "4", "--voice", "ryan", "--clone", str(clip),
              "--clone-text", "This is my own voice.", "--json", str(out)])  # fmt: skip
    assert done.value.code == 0
    result = json.loads(out.read_text())
    tables = {"ryan": result["rows"], **result["clones"]}
    assert set(tables) == {"ryan", "icl", "x-vector"}
    for rows in tables.values():
        assert [r["concurrency"] for r in rows] == [1, 2]
        assert [r["requests"] for r in rows] == [1, 2]
        assert all(r["audio_per_s"] > 0 and 0 < r["ttfa_p50_ms"] <= r["ttfa_p95_ms"] for r in rows)
    table = capsys.readouterr().out
    assert "cloned (icl)" in table and "cloned (x-vector)" in table
    # the bench's voices are gone again
    listed = httpx.get(f"{server}/v1/audio/voices").json()["voices"]
    assert not [v for v in listed if "bench-" in str(v)]
