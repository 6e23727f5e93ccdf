"""`ownvoice serve`: run the OpenAI-compatible speech server.

    ownvoice serve                                   # Qwen3-TTS 0.6B CustomVoice on 127.0.0.1:8880
    ownvoice serve --config config.yaml              # models, roles, limits (config.example.yaml)
    ownvoice serve --model ./my-checkpoint --port 9000
    ownvoice serve --model ./cv-ckpt --model ./base-ckpt   # roles chosen by each checkpoint's type
    ownvoice serve --wyoming tcp://0.0.0.0:10200     # also speak Wyoming (Home Assistant)

Environment variables OWNVOICE_<KEY> (nested with __, e.g. OWNVOICE_SERVER__API_KEY) override
the config file; command-line flags override both.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="run the OpenAI-compatible speech server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", help="YAML config file (see config.example.yaml)")
    p.add_argument(
        "--model",
        action="append",
        metavar="PATH_OR_ID",
        help="serve this checkpoint folder or hub id instead of the config's models (repeatable)",
    )
    p.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8880)")
    p.add_argument("--device", help="auto, cpu, cuda, cuda:N")
    p.add_argument("--voices-dir", help="voice library folder (default ./voices)")
    p.add_argument("--lazy", action="store_true", help="load models on first use")
    p.add_argument(
        "--wyoming",
        metavar="URI",
        help="also listen for Home Assistant's Wyoming protocol (wyoming.uri), e.g. "
        "tcp://127.0.0.1:10200",
    )
    p.add_argument(
        "--threads",
        type=int,
        help="CPU threads (optimization.num_threads; default: what this "
        "process may use, a container's CPU quota included)",
    )
    p.set_defaults(func=run)


def build_settings(args: argparse.Namespace):
    """The config file + environment, with the command line's flags on top."""
    from ownvoice.server.settings import ModelEntry, Roles, load_settings

    settings = load_settings(args.config)
    server = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    update: dict = {}
    if server:
        update["server"] = settings.server.model_copy(update=server)
    if args.model:
        update["models"] = {_model_name(m): ModelEntry(source=m) for m in args.model}
        update["roles"] = Roles()  # each role goes to the only model of its type
    if args.device:
        update["device"] = args.device
    if args.voices_dir:
        update["voices_dir"] = Path(args.voices_dir)
    if args.lazy:
        update["lazy_load"] = True
    if getattr(args, "wyoming", None):
        update["wyoming"] = type(settings.wyoming).model_validate(
            {**settings.wyoming.model_dump(), "uri": args.wyoming}
        )
    if getattr(args, "threads", None):
        update["optimization"] = settings.optimization.model_copy(
            update={"num_threads": args.threads}
        )
    # flags must win over the environment, so they are applied after validation, then checked
    return settings.model_copy(update=update).check_roles()


def _model_name(source: str) -> str:
    return Path(source.rstrip("/")).name or source


def run(args: argparse.Namespace) -> int:
    try:
        from ownvoice.server import create_app
        from ownvoice.server.runner import run_server
    except ImportError as e:
        print(
            f"ownvoice serve needs the server extra ({e}): pip install 'ownvoice[server]'",
            file=sys.stderr,
        )
        return 1

    settings = build_settings(args)
    # SIGTERM/SIGINT drain (server.shutdown_timeout_s), exit 0; a model that cannot load: 1
    return run_server(create_app(settings), settings)
