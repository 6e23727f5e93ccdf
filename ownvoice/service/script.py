"""A request in parts: spans of speech, each with its own voice, language and speed, and pauses.

SSML, pause tags (`[pause:1.5]`) and the dialogue endpoint all become a ScriptPlan:

    plan = scripts.plan(req)              # SSML or pause tags in req.input (markup.py)
    plan = scripts.dialogue(dialogue)     # POST /v1/audio/dialogue: turns of voices
    service.start(plan, origin)           # a Run like any other (script_run.py)

Each span is planned as a request of its own, through the same planner with the same checks,
so a span says exactly what `POST /v1/audio/speech` says for its text, voice and seed, and the
whole is the spans joined with exact silences. Everything is checked before admission: an
unknown voice in the fifth turn is a 400 before the first turn speaks.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ownvoice.errors import InvalidInput, OwnvoiceError
from ownvoice.service.encode import MAX_SPEED, MIN_SPEED, SAMPLE_RATE
from ownvoice.service.markup import Pause, Span, parse_input
from ownvoice.service.planning import SpeechInput, SpeechPlan, check_unicode

MAX_TURNS = 200
DEFAULT_TURN_PAUSE_S = 0.4
TARGET_LUFS = -18.0  # a dialogue's voices are each brought to this (the book's default too)
PEAK_DBTP = -1.0
# a span's request fields that are a turn's own: where an error names one, it names the turn's
_TURN_FIELDS = {"input": "text", "voice": "voice", "language": "language",
                "instructions": "instructions"}  # fmt: skip


@dataclass(frozen=True)
class Silence:
    """An exact pause: its length is round(seconds x 24000) samples of zeros."""

    seconds: float
    turn: int | None = None

    @property
    def samples(self) -> int:
        return round(self.seconds * SAMPLE_RATE)


@dataclass(frozen=True)
class Levelling:
    """Each span brought to `target_lufs`, a span too short to measure given its voice's
    typical gain so far, and every peak kept under `peak_dbtp` (as a book's cast is)."""

    target_lufs: float = TARGET_LUFS
    peak_dbtp: float = PEAK_DBTP


@dataclass(frozen=True)
class Turn:
    voice: str
    text: str
    instructions: str | None = None
    language: str | None = None


@dataclass(frozen=True)
class DialogueInput:
    """Turns of several voices in one request; `base` holds what every turn shares (model,
    format, seed, sampling, speed), its `input` unused."""

    turns: tuple[Turn, ...]
    base: SpeechInput
    pause_s: float = DEFAULT_TURN_PAUSE_S  # between two turns
    level: bool = True


@dataclass
class ScriptPlan:
    """The parts in order: each span's own SpeechPlan (its speed is its own), and silences."""

    parts: list[SpeechPlan | Silence]
    turns: list[int | None]  # each part's dialogue turn (None outside a dialogue)
    response_format: str
    stream_format: str
    input_chars: int
    level: Levelling | None = None
    speed = 1.0  # the spans apply their own speed before the encoder
    streamed = False
    ignored: list[str] = field(default_factory=list)

    @property
    def spoken(self) -> list[SpeechPlan]:
        return [p for p in self.parts if isinstance(p, SpeechPlan)]

    @property
    def choice(self):
        """The first span's voice and model: what admits the request and names it in the log."""
        return self.spoken[0].choice

    @property
    def chars(self) -> int:
        return self.input_chars

    @property
    def pieces(self) -> list[str]:
        """Every span's text pieces, in order."""
        return [piece for p in self.spoken for piece in p.pieces]

    @property
    def piece_count(self) -> int:
        return sum(p.piece_count for p in self.spoken)


class ScriptPlanner:
    def __init__(self, planner, limits):
        self.planner = planner  # SpeechPlanner: each span is planned by it
        self.limits = limits

    def plan(self, req: SpeechInput) -> ScriptPlan | SpeechPlan:
        """A request whose input holds SSML or pause tags (one plain span: a plain plan)."""
        check_unicode(req.input, "input")
        text = self.planner.check_input(req.input)
        found = parse_input(text, req.input_format, req.language)
        if len(found) == 1 and found[0] == Span(found[0].text):  # no pause, no change: plain
            return self.planner.plan(replace(req, input=found[0].text, input_format="text"))
        parts, turns = [], []
        self._add(parts, turns, found, req, None)
        return self._script(parts, turns, req, len(text), None)

    def dialogue(self, dialogue: DialogueInput) -> ScriptPlan:
        turns_in = dialogue.turns
        if not turns_in:
            raise InvalidInput("turns is empty; send at least one turn", param="turns")
        if len(turns_in) > MAX_TURNS:
            raise InvalidInput(f"{len(turns_in)} turns; the limit is {MAX_TURNS}", param="turns")
        if not 0 <= dialogue.pause_s <= 10:
            raise InvalidInput("pause_s must be between 0 and 10 seconds", param="pause_s")
        chars = sum(len(t.text) for t in turns_in)  # each turn: at most max_input_chars
        base = dialogue.base
        parts, turns = [], []
        for k, turn in enumerate(turns_in):
            param = f"turns[{k}]"
            for name in ("voice", "text", "instructions", "language"):
                value = getattr(turn, name)
                if value is not None:
                    check_unicode(value, f"{param}.{name}")
            self.planner.check_input(turn.text, f"{param}.text")
            req = replace(
                base,
                input=turn.text,
                voice=turn.voice,
                instructions=turn.instructions if turn.instructions is not None
                else base.instructions,
                language=turn.language if turn.language is not None else base.language,
            )  # fmt: skip
            if k and dialogue.pause_s > 0:
                parts.append(Silence(dialogue.pause_s))
                turns.append(None)
            try:
                found = parse_input(turn.text, base.input_format, req.language)
                self._add(parts, turns, found, req, k)
            except OwnvoiceError as e:  # say which turn, keeping the error's kind (a 404...)
                e.message = f"{param}: {e.message}"
                if e.param in _TURN_FIELDS:
                    e.param = f"{param}.{_TURN_FIELDS[e.param]}"
                e.args = (e.message,)
                raise
        level = Levelling() if dialogue.level else None
        return self._script(parts, turns, base, chars, level)

    def _add(self, parts: list, turns: list, found, req: SpeechInput, turn: int | None) -> None:
        for part in found:
            if isinstance(part, Pause):
                parts.append(Silence(part.seconds, turn))
            else:
                parts.append(self._span(part, req))
            turns.append(turn)

    def _span(self, span: Span, req: SpeechInput) -> SpeechPlan:
        speed = req.speed * span.rate
        if not MIN_SPEED <= speed <= MAX_SPEED:
            raise InvalidInput(
                f"speed {req.speed:g} at prosody rate {span.rate:g} is {speed:g}; the speed "
                f"must stay between {MIN_SPEED:g} and {MAX_SPEED:g}",
                param="input",
            )
        sub = replace(
            req,
            input=span.text,
            input_format="text",
            voice=span.voice if span.voice is not None else req.voice,
            language=span.language if span.language is not None else req.language,
            speed=speed,
        )
        return self.planner.plan(sub)

    def _script(self, parts, turns, req: SpeechInput, chars: int, level) -> ScriptPlan:
        spoken = [p for p in parts if isinstance(p, SpeechPlan)]
        if not spoken:
            raise InvalidInput("input has nothing to speak", param="input")
        ignored = sorted({name for p in spoken for name in p.ignored})
        return ScriptPlan(
            parts=parts,
            turns=turns,
            response_format=req.response_format,
            stream_format=req.stream_format,
            input_chars=chars,
            level=level,
            ignored=ignored,
        )
