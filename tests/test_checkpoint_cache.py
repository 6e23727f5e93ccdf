"""The full-size checkpoints kept between runs are never stale: the key follows the generator's
sources, and a checkpoint is only ever found whole."""

from __future__ import annotations

from tests import checkpoint_cache
from tests.checkpoint_cache import GENERATOR, ROOT, cached_random_checkpoint, generator_sources


def test_the_key_covers_every_module_the_generator_imports():
    sources = {str(p.relative_to(ROOT)) for p in generator_sources()}
    # imported at the top, inside a function, and only through another module
    for module in ("model/tts_model.py", "dev/random_codec.py", "model/talker.py"):
        assert f"ownvoice/{module}" in sources
    assert str(GENERATOR.relative_to(ROOT)) in sources


def test_written_once_whole_and_replaced_when_the_generator_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("OWNVOICE_TEST_CACHE", str(tmp_path))
    first = cached_random_checkpoint("0.6B-Base", tiny=True, seed=5)
    assert (first / "model.safetensors").is_file() and (first / checkpoint_cache.DONE).is_file()
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert cached_random_checkpoint("0.6B-Base", tiny=True, seed=5) == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp  # not written again
    assert cached_random_checkpoint("0.6B-Base", tiny=True, seed=6) != first  # other arguments

    monkeypatch.setattr(checkpoint_cache, "checkpoint_key", lambda like, **kw: "changed")
    (tmp_path / ".0.6B-Base-x.999999999").mkdir()  # a writer killed half-way
    new = cached_random_checkpoint("0.6B-Base", tiny=True, seed=5)
    assert new.name == "0.6B-Base-changed"
    assert [p.name for p in tmp_path.iterdir()] == [new.name]
