"""Fixtures for the server tests (FakeEngine-based; real-engine ones are in test_real_engine)."""

from __future__ import annotations

import pytest

from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings, serve


@pytest.fixture
def voices_dir(tmp_path):
    d = tmp_path / "voices"
    d.mkdir()
    return d


@pytest.fixture
def fake_engines():
    """One FakeEngine of each type, registered as cv / design / clone."""
    return {
        "cv": FakeEngine("custom_voice"),
        "design": FakeEngine("voice_design"),
        "clone": FakeEngine("base"),
    }


@pytest.fixture
def fake_server(voices_dir, fake_engines):
    """A live server over the three fake engines; yields (base_url, app, engines)."""
    settings = make_settings(voices_dir)
    with serve(settings, engines=fake_engines) as (base, app):
        yield base, app, fake_engines
