"""What installing ownvoice pulls in, and what importing it loads."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import requires

FORBIDDEN = {"transformers", "librosa", "torchaudio", "gradio", "accelerate"}


def test_runtime_dependencies_exclude_the_heavy_reference_stack():
    runtime = [r for r in requires("ownvoice") if "extra ==" not in r]
    names = {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower() for r in runtime}
    assert names, runtime
    assert not names & FORBIDDEN, names & FORBIDDEN
    # the optional extras a user may install are clean too (only `test` brings the reference)
    for extra in ("server", "book"):
        extra_names = {
            re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower()
            for r in requires("ownvoice")
            if f'extra == "{extra}"' in r
        }
        assert not extra_names & FORBIDDEN, (extra, extra_names & FORBIDDEN)


def test_using_the_engine_imports_none_of_them(tiny_checkpoints):
    code = (
        "import sys; from ownvoice import Engine, SynthesisOptions, SamplingOptions;"
        f"e = Engine.load({str(tiny_checkpoints['0.6B-Base'])!r}, device='cpu');"
        "import numpy as np;"
        "v = e.make_voice((np.random.default_rng(0).normal(0, .1, 24000).astype('float32'), 24000), x_vector_only=True);"
        "e.synthesize('Hi there.', voice=v, options=SynthesisOptions(sampling=SamplingOptions.greedy(), max_frames=3));"
        "import ownvoice.server.app, ownvoice.audiobook;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in %r))" % (FORBIDDEN,)
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", proc.stdout
