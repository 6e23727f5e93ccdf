"""`ownvoice doctor`: check that synthesis will run where it should (GPU or CPU) and say how to fix it.

Prints the torch build, the GPUs torch sees, /dev/kfd and /dev/dri access and the process's
groups, HSA_OVERRIDE_GFX_VERSION and the AMD ISA, free GPU memory, whether the configured models
are cached, then a verdict. Exit status 0 when nothing is wrong, 1 when something is.
`--prepare` only builds the CPU kernels (`make serve` runs it before the server starts).
Run it where the server runs (inside the container: `docker compose exec ownvoice ownvoice doctor`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="check the GPU, drivers, groups and model cache; print the fixes",
        description=__doc__,
    )
    p.add_argument(
        "--config", metavar="FILE", help="the server's YAML config (its models and device)"
    )
    p.add_argument(
        "--model",
        metavar="ID_OR_DIR",
        action="append",
        help="a model to look for in the cache (repeatable; replaces the config's models)",
    )
    p.add_argument(
        "--expect-gpu",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="treat the CPU as a failure (default: when the config asks for a GPU, or the machine has one)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--prepare",
        action="store_true",
        help="only prepare this environment: build the CPU kernels now (about 2 minutes, once), "
        "not at the first model load; skipped where torch sees a GPU. `make serve` runs it "
        "before the server starts; run it when building an image",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.prepare:
        return prepare()
    from ownvoice.doctor import ConfigFacts, collect_probe, gpu_expected, model_sources, run_checks

    settings = _read_config(args.config)
    config = ConfigFacts.from_settings(settings)
    models = args.model or model_sources(settings) or [DEFAULT_MODEL]
    probe = collect_probe(models)
    expect = args.expect_gpu if args.expect_gpu is not None else gpu_expected(probe, config)
    report = run_checks(expect, models, probe, config=config)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.to_text())
    return 0 if report.ok else 1


def prepare() -> int:
    import logging

    import torch

    from ownvoice.kernels import prepare as build_kernels

    if torch.cuda.is_available():  # models run on the GPU by default: the build can wait
        print("CPU kernels: not built now (torch sees a GPU; built on first use on the CPU)")
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # the build's start and end
    fine, said = build_kernels()
    print(said)
    return 0 if fine else 1


def _read_config(path: str | None) -> Any:
    """The server's settings (env overrides applied) or, without the server extra, the raw YAML."""
    if path is None:
        return None
    from ownvoice.errors import InvalidInput

    try:
        from ownvoice.server.settings import load_settings
    except ImportError:
        load_settings = None
    if load_settings is not None:
        return load_settings(path)
    try:
        import yaml
    except ImportError as e:
        raise InvalidInput(
            "reading --config needs PyYAML: pip install 'ownvoice[server]'", param="config"
        ) from e
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise InvalidInput(f"cannot read config file {path!r}: {e}", param="config") from e
    if not isinstance(data, dict):
        raise InvalidInput(f"config file {path!r} must hold a mapping of keys", param="config")
    return data
