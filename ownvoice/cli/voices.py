"""`ownvoice voices list|add|rm`: manage the voice library the server reads (clone:<name>).

    ownvoice voices list
    ownvoice voices add alice alice.wav --ref-text "What Alice says in the clip."
    ownvoice voices add bob bob.mp3 --x-vector-only
    ownvoice voices rm alice

The folder is --voices-dir, else voices_dir of --config (or OWNVOICE_VOICES_DIR), else ./voices.
A running server sees changes on its next request.
"""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "voices",
        help="list, add or remove cloned voices",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--voices-dir", help="voice library folder")
    p.add_argument("--config", help="server config whose voices_dir to use")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    ls = actions.add_parser("list", help="list the voices")
    ls.add_argument("--json", action="store_true", help="machine-readable output")

    add = actions.add_parser("add", help="add a voice from a 3-30 s reference clip")
    add.add_argument("name", help="voice name (letters, digits, space, _ - .)")
    add.add_argument("audio", help="reference clip: wav, flac, ogg or mp3")
    add.add_argument("--ref-text", help="transcript of the clip (enables the better ICL mode)")
    add.add_argument("--x-vector-only", action="store_true", help="clone from the timbre alone")
    add.add_argument(
        "--language", help="the voice's language (English, Chinese, ...; default Auto)"
    )
    add.add_argument("--consent", action="store_true", help="record that the speaker consented")

    rm = actions.add_parser("rm", help="remove a voice")
    rm.add_argument("name", help="voice name, clone:<name> or profile id")
    p.set_defaults(func=run)


def library_dir(args: argparse.Namespace) -> str:
    if args.voices_dir:
        return args.voices_dir
    from ownvoice.server.settings import load_settings

    return str(load_settings(args.config).voices_dir)


def run(args: argparse.Namespace) -> int:
    import time

    from ownvoice.service.library import VoiceLibrary

    library = VoiceLibrary(library_dir(args))
    if args.action == "list":
        profiles = library.profiles()
        if args.json:
            rows = [
                {
                    "id": p.voice_id,
                    "name": p.name,
                    "profile_id": p.profile_id,
                    "mode": "x-vector" if p.x_vector_only else "icl",
                    "language": p.language,
                    "ref_text": p.ref_text,
                    "folder": str(p.folder),
                }
                for p in profiles
            ]
            print(json.dumps(rows, indent=2, ensure_ascii=False))
        elif not profiles:
            print(f"no voices in {library.root} (add one with `ownvoice voices add NAME AUDIO`)")
        else:
            width = max(len(p.voice_id) for p in profiles)
            for p in profiles:
                mode = "x-vector" if p.x_vector_only else "icl"
                print(f"{p.voice_id:<{width}}  {mode:<8}  {p.language or 'Auto':<10}  {p.folder}")
        return 0
    if args.action == "add":
        consent = None
        if args.consent:
            consent = {
                "attested": True,
                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "by": "cli",
            }
        p = library.add(
            args.name,
            args.audio,
            ref_text=args.ref_text,
            x_vector_only=args.x_vector_only,
            language=args.language,
            consent=consent,
        )
        mode = (
            "x-vector only (no --ref-text)"
            if p.x_vector_only and not args.x_vector_only
            else ("x-vector" if p.x_vector_only else "icl")
        )
        print(f"added {p.voice_id} ({mode}) in {p.folder}")
        return 0
    p = library.remove(args.name)
    print(f"removed {p.voice_id}")
    return 0
