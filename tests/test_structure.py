"""The layering holds: model <- engine <- service <- front ends.

The serving core must import no HTTP framework and no pydantic (other front ends use it
without them), and nothing outside the engine reaches into the engine's private state.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ownvoice"


def test_service_imports_no_http_framework_and_no_pydantic():
    modules = sorted(p.stem for p in (PACKAGE / "service").glob("*.py") if p.stem != "__init__")
    assert {"pool", "scheduler", "planning", "voicemap", "library", "admission"} <= set(modules)
    code = (
        "import sys\n"
        + "".join(f"import ownvoice.service.{m}\n" for m in modules)
        + "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('fastapi', 'starlette', 'pydantic', 'pydantic_settings', 'uvicorn'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the service pulled in: {out.stdout.strip()}"


def test_the_wyoming_front_end_uses_the_service_not_the_http_server():
    code = (
        "import sys\nimport ownvoice.wyoming\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('fastapi', 'starlette', 'pydantic', 'uvicorn') or m.startswith('ownvoice.server'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"ownvoice.wyoming pulled in: {out.stdout.strip()}"


def test_the_service_and_model_never_import_the_front_ends():
    pattern = re.compile(r"^\s*(from|import) ownvoice\.(server|cli|audiobook|web|wyoming)\b", re.M)
    for layer in ("model", "engine", "service"):
        for path in (PACKAGE / layer).rglob("*.py"):
            found = pattern.search(path.read_text())
            assert found is None, f"{path.relative_to(PACKAGE)} imports {found.group(0).strip()}"


def test_nothing_outside_the_engine_touches_its_private_attributes():
    private = re.compile(r"\bengine\._\w+|\._m\b")
    for path in PACKAGE.rglob("*.py"):
        if path.is_relative_to(PACKAGE / "engine"):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            assert not private.search(line), f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}"


def test_every_hand_made_mutant_still_applies():
    """`make mutation MODULES=handmade` mutates text of the kernels and the fast path; a mutant
    whose text moved or changed would only be reported when someone runs it (20 minutes), so
    each must still match exactly one place, and its tests must exist."""
    root = PACKAGE.parent
    sys.path.insert(0, str(root / "scripts"))
    try:
        from handmade_mutants import MUTANTS
    finally:
        sys.path.remove(str(root / "scripts"))
    for mutant in MUTANTS:
        text = (root / mutant.path).read_text(encoding="utf-8")
        assert text.count(mutant.old) == 1, f"{mutant.name!r}: not exactly once in {mutant.path}"
        assert mutant.new != mutant.old, mutant.name
        for test in mutant.tests:
            assert (root / test.split("::")[0]).is_file(), f"{mutant.name!r}: no {test}"


def test_front_ends_start_requests_only_through_the_service_entry():
    """A request's life (admission, generation, scheduling, drain, the record) is written once,
    in service/speech.py: no front end reaches past it."""
    inner = re.compile(
        r"^\s*(from|import) ownvoice\.service(\.| import )(scheduler|admission|generation)\b",
        re.M,
    )
    by_hand = re.compile(r"\.(admit|try_admit|submit)\(|\bGeneration\(|\bScheduler\(")
    for front_end in ("server", "wyoming", "audiobook", "cli"):
        for path in (PACKAGE / front_end).rglob("*.py"):
            text = path.read_text()
            found = inner.search(text) or by_hand.search(text)
            assert found is None, f"{path.relative_to(PACKAGE)}: {found.group(0).strip()}"


def test_the_http_answer_ends_its_request_in_one_place():
    """One generator with one `finally` owns the end of an HTTP speech request: a new stop
    reason is handled once, by the service's Run.status."""
    text = (PACKAGE / "server" / "streaming.py").read_text()
    assert text.count(".finish(") == 1  # in `_answer`'s finally
    assert text.count("run.cancel(") == 1  # the client left (its row is freed by finish)


def test_the_engine_and_its_test_double_keep_the_service_contract():
    """service/engine_protocol.py lists what a scheduler uses of an engine: the real Engine has
    every member, and so does the FakeEngine the server tests run on."""
    import inspect

    from ownvoice.engine.engine import Engine
    from ownvoice.service.engine_protocol import SpeechEngine
    from tests.server.fakes import FakeEngine

    members = set(SpeechEngine.__annotations__) | {
        name for name, _ in inspect.getmembers(SpeechEngine) if not name.startswith("_")
    }
    text = (PACKAGE / "engine" / "engine.py").read_text()
    for name in sorted(members):  # an attribute set in __init__, or a method or property
        assert name in dir(Engine) or f"self.{name} =" in text, f"Engine has no {name}"
        assert hasattr(FakeEngine(), name), f"FakeEngine has no {name}"
