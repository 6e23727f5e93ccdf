"""`ownvoice book INPUT -o OUTPUT`: read a long text (.txt, .md, .epub, .html, .docx, .pdf or '-')
into one audio file (mp3, m4b, opus, flac, wav), through a running server (--server URL) or a model
loaded here (--model). Finished chunks are kept in a work folder (OUTPUT.work by default), so
running the same command again after a crash, a Ctrl-C or a failed chunk only does what is missing.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "book",
        help="turn a long text or an EPUB into one audio file",
        description=__doc__,
        formatter_class=_DefaultsHelp,
    )
    p.add_argument("input", help="a .txt, .md, .epub, .html, .docx or .pdf file, or '-' (stdin)")
    p.add_argument("-o", "--output", help="output file: .mp3 .m4b .opus .flac .wav")
    p.add_argument("--dry-run", action="store_true",
                   help="print the chapters and chunks as they would be said, the estimated "
                        "length and time; synthesize nothing")  # fmt: skip
    p.add_argument(
        "--input-format",
        choices=("txt", "md", "epub", "html", "docx", "pdf"),
        help="default: from the extension",
    )

    src = p.add_argument_group("where the speech comes from (one of)")
    where = src.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--server", metavar="URL", help="an OpenAI-compatible server, e.g. http://127.0.0.1:8880"
    )
    where.add_argument("--model", metavar="DIR_OR_ID", help="load a checkpoint in this process")
    src.add_argument(
        "--server-model", help="'model' sent to the server (default: its first listed model)"
    )
    src.add_argument("--api-key", help="bearer token for the server (default: $OWNVOICE_API_KEY)")
    src.add_argument(
        "--timeout", type=float, default=600.0, help="seconds to wait for one chunk from the server"
    )
    src.add_argument("--device", default="auto", help="--model only")
    src.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"))

    v = p.add_argument_group("voice")
    v.add_argument(
        "--voice",
        "--speaker",
        dest="voice",
        help="voice name (server) or preset speaker (CustomVoice)",
    )
    v.add_argument("--instruct", help="voice description (VoiceDesign) or speaking style")
    v.add_argument("--ref-audio", help="--model with a Base checkpoint: reference clip to clone")
    v.add_argument("--ref-text", help="transcript of --ref-audio")
    v.add_argument(
        "--x-vector-only", action="store_true", help="clone from the speaker embedding only"
    )
    v.add_argument("--cast", metavar="FILE",
                   help="who says what: YAML with narrator, dialogue (quoted speech), chapters "
                        "{number or title: voice} and a lexicon; see docs/audiobooks.md")  # fmt: skip
    v.add_argument("--language", default="auto", help="language name or ISO code; 'auto' guesses")
    v.add_argument("--seed", type=int, default=0, help="base seed; chunks derive theirs from it")

    t = p.add_argument_group("what is read")
    t.add_argument(
        "--notes",
        choices=("end", "skip"),
        default="end",
        help="footnotes and endnotes: read at the end of their chapter, or left out",
    )
    t.add_argument(
        "--tables",
        choices=("read", "skip"),
        default="read",
        help="tables: row by row with their headers, or a short notice",
    )
    t.add_argument(
        "--figures",
        choices=("read", "skip"),
        default="read",
        help="figures: their caption (or alt text), or nothing",
    )
    t.add_argument(
        "--code",
        choices=("announce", "skip", "read"),
        default="announce",
        help="code blocks and shell sessions: a short notice (announce), nothing, or read out",
    )
    t.add_argument(
        "--links",
        choices=("name", "skip", "read"),
        default="name",
        help="URLs and e-mail addresses: by their site ('a link to debian.org'), left out, "
        "or read as written",
    )
    t.add_argument("--lexicon", metavar="FILE",
                   help="how words are said: YAML of {language: {word or /regex/: said as}}")  # fmt: skip

    r = p.add_argument_group("rendering")
    r.add_argument("--chunk-chars", type=int, help="target chunk length (default 200, 100 for CJK)")
    r.add_argument(
        "--jobs", type=int, help="chunks in flight (default: as many as the model batches)"
    )
    r.add_argument("--retries", type=int, default=4, help="retries per chunk")
    r.add_argument("--work-dir", help="where finished chunks are kept (default: OUTPUT.work)")
    r.add_argument("--redo", type=int, action="append", default=[], metavar="N",
                   help="regenerate chunk N (numbers as in the report/manifest); repeatable")  # fmt: skip
    r.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    r.add_argument("--report-json", help="also write the final report as JSON here")

    a = p.add_argument_group("sound")
    # unset flags keep BookOptions' and Pauses' own defaults (one source, stated in the README;
    # tests/audiobook/test_cli_defaults.py holds the README, this help and the output to them);
    # they are filled in run(), so building the parser does not import the audiobook package
    a.add_argument("--target-lufs", type=float, help="loudness of every chunk, LUFS (default: -18)")
    a.add_argument("--peak", type=float, help="true-peak ceiling, dBTP; ACX: -3 (default: -1)")
    a.add_argument("--pause-sentence", type=float,
                   help="seconds between chunks of a paragraph (default: 0.35)")  # fmt: skip
    a.add_argument("--pause-paragraph", type=float,
                   help="seconds between paragraphs (default: 0.8)")  # fmt: skip
    a.add_argument("--pause-chapter", type=float, help="seconds between chapters (default: 2)")
    a.add_argument("--head", type=float, help="silence before the first chunk (default: 0.5)")
    a.add_argument("--tail", type=float, help="silence after the last chunk (default: 1)")

    o = p.add_argument_group("output")
    o.add_argument(
        "--format", choices=("mp3", "m4b", "opus", "flac", "wav"), help="default: from -o"
    )
    o.add_argument(
        "--bitrate", type=int, help="bits per second (default mp3 96000, m4b 64000, opus 32000)"
    )
    o.add_argument(
        "--sample-rate", type=int, help="resample the output, e.g. 44100 (default 24000)"
    )
    o.add_argument("--subtitles", action="append", default=[], metavar="FILE",
                   help="also write subtitles, a cue per sentence: .srt or .vtt; repeatable")  # fmt: skip
    o.add_argument("--epub-overlay", metavar="OUT.epub",
                   help="also write a read-along EPUB 3: the text, highlighted sentence by "
                        "sentence as its audio plays (Media Overlays)")  # fmt: skip
    o.add_argument("--title", help="title tag (default: from the book)")
    o.add_argument("--author", help="author tag (default: from the book)")
    o.add_argument("--cover", help="cover image, .jpg or .png (default: the EPUB's)")
    p.set_defaults(func=run)


class _DefaultsHelp(argparse.ArgumentDefaultsHelpFormatter):
    """Each flag's default in its help, but not "(default: None)" for a flag whose default is
    decided later (from -o, the model, BookOptions): its help says what it is."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or "default" in (action.help or ""):
            return action.help or ""
        return super()._get_help_string(action)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "verbose", False):
        return _render(args)
    with _quiet("httpx", "ownvoice.requests"):
        # one line per chunk is noise (the book's report says how its chunks went)
        return _render(args)


@contextlib.contextmanager
def _quiet(*names: str):
    """Warnings only from these loggers while the book renders; their levels come back after
    (the command can run inside a longer-lived process, a test's or a script's)."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _render(args: argparse.Namespace) -> int:
    import os

    from ownvoice.audiobook import render_book
    from ownvoice.errors import InvalidInput

    options = book_options(args)
    options.validate()  # before a model is loaded
    if not args.output and not args.dry_run:
        raise InvalidInput("-o/--output is required (or --dry-run)", param="output")
    if args.server:
        if args.ref_audio:
            raise InvalidInput(
                "--ref-audio works with --model; with --server, add the voice to the server "
                "(`ownvoice voices add`) and pass --voice NAME",
                param="ref_audio",
            )
        backend = _server_backend(args, os.environ.get("OWNVOICE_API_KEY"))
    else:
        backend = _engine_backend(args)
    if args.dry_run:
        from ownvoice.audiobook.dryrun import dry_run

        try:
            print(dry_run(args.input, backend, options, args.input_format).text, end="")
        finally:
            backend.close()
        return 0
    try:
        report = render_book(
            args.input,
            args.output,
            backend,
            options,
            work_dir=args.work_dir,
            redo=args.redo,
            input_format=args.input_format,
            show_progress=not args.no_progress,
        )
    finally:
        backend.close()
    print(report.text(), file=sys.stderr)
    if args.report_json:
        Path(args.report_json).write_text(
            json.dumps(report.to_dict(), indent=1, ensure_ascii=False)
        )
    return 0 if report.complete else 1


def book_options(args: argparse.Namespace):
    """The BookOptions the flags ask for; flags not given keep the options' defaults."""
    from ownvoice.audiobook import BookOptions, Pauses
    from ownvoice.audiobook.cast import NO_CAST, load_cast
    from ownvoice.audiobook.document import ReadOptions
    from ownvoice.audiobook.lexicon import EMPTY, load_lexicon

    return BookOptions(
        language=args.language,
        chunk_chars=args.chunk_chars,
        reading=ReadOptions(
            notes=args.notes,
            tables=args.tables,
            figures=args.figures,
            code=args.code,
            links=args.links,
        ),
        lexicon=load_lexicon(args.lexicon) if args.lexicon else EMPTY,
        cast=load_cast(args.cast) if args.cast else NO_CAST,
        seed=args.seed,
        jobs=args.jobs,
        retries=args.retries,
        **_given(target_lufs=args.target_lufs, peak_dbtp=args.peak),
        pauses=Pauses(
            **_given(
                sentence=args.pause_sentence,
                paragraph=args.pause_paragraph,
                chapter=args.pause_chapter,
                head=args.head,
                tail=args.tail,
            )
        ),
        format=args.format,
        bitrate=args.bitrate,
        sample_rate=args.sample_rate,
        title=args.title,
        author=args.author,
        cover=args.cover,
        subtitles=tuple(args.subtitles),
        epub_overlay=args.epub_overlay,
    )


def _given(**flags) -> dict:
    """The flags that were given; the others keep the options' defaults."""
    return {name: value for name, value in flags.items() if value is not None}


def _server_backend(args, env_key):
    from ownvoice.audiobook import ServerBackend

    return ServerBackend(
        args.server,
        voice=args.voice,
        model=args.server_model,
        instructions=args.instruct,
        timeout=args.timeout,
        api_key=args.api_key or env_key,
    )


def _engine_backend(args, engine=None):
    """An EngineBackend for --model; `engine` = one already loaded from args.model."""
    from ownvoice.audiobook import EngineBackend
    from ownvoice.errors import InvalidInput

    if engine is None:
        from ownvoice.engine.engine import Engine

        engine = Engine.load(args.model, device=args.device, dtype=args.dtype)
    voice, voice_id = args.voice, args.voice
    if args.ref_audio:
        if not Path(args.ref_audio).is_file():
            raise InvalidInput(f"--ref-audio {args.ref_audio!r} does not exist", param="ref_audio")
        voice = engine.make_voice(
            args.ref_audio, ref_text=args.ref_text, x_vector_only=args.x_vector_only
        )
        clip = hashlib.sha256(Path(args.ref_audio).read_bytes()).hexdigest()[:16]
        voice_id = f"clone:{clip}:{args.ref_text or ''}:{args.x_vector_only}"
    elif engine.model_type == "custom_voice" and not voice:
        raise InvalidInput(
            f"--voice is required for this CustomVoice model; speakers: {', '.join(engine.supported_speakers)}",
            param="voice",
        )
    model_id = str(Path(args.model).resolve()) if Path(args.model).exists() else args.model
    return EngineBackend(
        engine, model_id=model_id, voice=voice, voice_id=voice_id, instruct=args.instruct
    )
