"""`ownvoice say TEXT`: synthesize one utterance to a WAV file."""

from __future__ import annotations

import argparse
import json
import math
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("say", help="speak a text into a WAV file", description=__doc__)
    p.add_argument("text", nargs="?", help="the text to speak ('-' reads stdin)")
    p.add_argument("--model", required=True, help="checkpoint folder or Hugging Face hub id")
    p.add_argument("-o", "--output", help="output WAV (24 kHz mono)")
    voice = p.add_argument_group("voice (one of)")
    voice.add_argument("--speaker", help="preset speaker (CustomVoice models)")
    voice.add_argument("--ref-audio", help="reference recording to clone (Base models)")
    voice.add_argument("--ref-text", help="transcript of --ref-audio (ICL cloning)")
    voice.add_argument(
        "--x-vector-only", action="store_true", help="clone from the speaker embedding only"
    )
    voice.add_argument(
        "--instruct", help="voice description (VoiceDesign) or style (1.7B CustomVoice)"
    )
    p.add_argument("--language", default="auto", help="language name, or 'auto' (default)")
    p.add_argument(
        "--text-mode", choices=("streaming", "non-streaming"), help="how text enters the model"
    )
    p.add_argument("--seed", type=int)
    p.add_argument("--greedy", action="store_true", help="argmax instead of sampling (both stages)")
    p.add_argument("--max-frames", type=int, help="cap on frames (12.5 per second of audio)")
    s = p.add_argument_group("sampling (defaults from the checkpoint's generation_config.json)")
    s.add_argument("--temperature", type=float)
    s.add_argument("--top-k", type=int)
    s.add_argument("--top-p", type=float)
    s.add_argument("--repetition-penalty", type=float)
    s.add_argument("--sub-temperature", type=float, help="code predictor temperature")
    s.add_argument("--sub-top-k", type=int)
    s.add_argument("--sub-top-p", type=float)
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"))
    p.add_argument(
        "--threads",
        type=int,
        help="CPU threads (default: what this process may use: cores, "
        "CPU affinity and a container's CPU quota)",
    )
    p.add_argument(
        "--quantize",
        choices=("int8", "int4"),
        help="integer talker and code-predictor weights (CPU): int8 about 0.6x the time per "
        "frame of float32, int4 about 0.5x, at a cost in fidelity (see README, Speed)",
    )
    p.add_argument(
        "--decoder-dtype",
        choices=("float32", "bfloat16", "float16"),
        help="the speech decoder's precision (default: --dtype); bfloat16 is about 1.5x faster "
        "on CPUs with AVX512-BF16 or AMX",
    )
    p.add_argument(
        "--overlap-decoder",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="decode the audio on a worker thread while the next frames generate (CPU, 2+ "
        "threads; default: on with --quantize, where it was measured to pay)",
    )
    p.add_argument("--codes-out", help="also write the codes: a JSON list of frames of 16 ints")
    p.add_argument("--list-speakers", action="store_true")
    p.add_argument("--list-languages", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from ownvoice.audio import write_wav
    from ownvoice.engine.engine import Engine
    from ownvoice.errors import InvalidInput

    engine = Engine.load(
        args.model,
        device=args.device,
        dtype=args.dtype,
        num_threads=args.threads,
        quantize=args.quantize,
        decoder_dtype=args.decoder_dtype,
        overlap_decoder=args.overlap_decoder,
    )
    if args.list_speakers or args.list_languages:
        names = engine.supported_speakers if args.list_speakers else engine.supported_languages
        print("\n".join(names) if names else f"({engine.model_type} model: no preset speakers)")
        return 0
    text = sys.stdin.read() if args.text == "-" else args.text
    if not text:
        raise InvalidInput("no text given (pass TEXT, or '-' to read stdin)", param="text")
    if not args.output:
        raise InvalidInput("-o/--output is required", param="output")
    chunks = _speak(engine, text, args)
    audio = np.concatenate([c.samples for c in chunks]).astype(np.float32, copy=False)
    codes = np.concatenate([c.codes for c in chunks]).reshape(-1, engine.num_codebooks)
    write_wav(args.output, audio, engine.sample_rate)
    if args.codes_out:
        with open(args.codes_out, "w") as f:
            json.dump(codes.tolist(), f)
    print(
        f"wrote {args.output}: {len(audio) / engine.sample_rate:.2f} s, {len(codes)} frames "
        f"(stopped: {chunks[-1].stop_reason})"
    )
    return 0


def _speak(engine, text: str, args: argparse.Namespace) -> list:
    """The text's audio chunks, through the speech service as the server makes them: long
    text in sentence pieces, each piece capped by its length unless --max-frames is given."""
    from ownvoice.errors import InvalidInput
    from ownvoice.service.config import Limits
    from ownvoice.service.planning import SpeechInput
    from ownvoice.service.speech import Origin, SpeechService

    sampling = {"do_sample": False, "sub_do_sample": False} if args.greedy else {}
    for name in ("temperature", "top_k", "top_p", "repetition_penalty", "sub_temperature",
                 "sub_top_k", "sub_top_p"):  # fmt: skip
        if getattr(args, name) is not None:
            sampling[name] = getattr(args, name)
    prompt, voice = None, args.speaker or ""
    if args.ref_audio:
        prompt = engine.make_voice(
            args.ref_audio, ref_text=args.ref_text, x_vector_only=args.x_vector_only
        )
    elif engine.model_type == "base":
        raise InvalidInput(
            "a Base model speaks a cloned voice: give --ref-audio (and --ref-text, or "
            "--x-vector-only)",
            param="ref_audio",
        )
    elif engine.model_type == "voice_design":
        voice = "design"
    request = SpeechInput(
        input=text,
        voice=voice,
        voice_prompt=prompt,
        instructions=args.instruct,
        language=args.language,
        seed=args.seed,
        max_frames=args.max_frames,
        text_mode=args.text_mode,
        first_chunk_frames=64,
        response_format="pcm",
        sampling=sampling,
    )
    limits = Limits(max_input_chars=1 << 30, request_timeout_s=math.inf)
    service = SpeechService.local(engine, name="say", limits=limits, chunk_frames=64)
    error = None
    try:
        run = service.speak(request, Origin("say"))
        try:
            return list(run.chunks_blocking())
        except BaseException as e:
            error = e
            raise
        finally:
            run.finish(error)
    finally:
        service.pool.close()
