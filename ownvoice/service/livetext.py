"""Text still being written, cut into the pieces the HTTP path would cut the whole text into.

    live = LiveText(max_chars=300, language="english", limit=4096, wake=scheduler.wake)
    live.push("Sure! The weather tomorrow is")      # front end, as the text arrives
    live.piece(0)   # TextSoFar("Sure! The weather tomorrow is", final=False): speak it already
    live.push(" sunny."); live.close()
    live.piece(0)   # TextSoFar("Sure! The weather tomorrow is sunny.", final=True)

Each piece is spoken by one sequence that starts on its first words (Engine.start_open) and
takes the rest as it arrives, so the audio equals `POST /v1/audio/speech` with the whole text,
which splits it with `split_input`. A piece is handed out word by word only as far as that split
is already decided: the text so far is split as it is and as it would be with each of several
continuations (nothing more, a word glued on, a lowercase clause, a new sentence, a new
paragraph, a digit, enough words to pass `max_chars`); what every one of them agrees on is
decided. So a piece ends as soon as the packer can tell, and the words of a piece are spoken
before its sentence ends, except where the split could still move them (text that may outgrow
`max_chars` keeps its line breaks only while it is short, so they wait until that is settled).
The one continuation not tried is a change of script inside a paragraph with language "auto"
(English that turns Japanese), which would re-split what came before it. Thread-safe.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

from ownvoice.engine.opentext import TextSoFar
from ownvoice.errors import InvalidInput
from ownvoice.service.generation import PENDING


def split_input(text: str, max_chars: int, language: str | None) -> list[str]:
    """What the HTTP path speaks as separate pieces: the text (stripped) when it fits in
    `max_chars`, else its sentences packed up to `max_chars`."""
    text = text.strip()
    if len(text) <= max_chars:
        return [text] if text else []
    from ownvoice.textsplit import chunk_text

    lang = None if language in (None, "auto") else language
    pieces = [p for p in chunk_text(text, max_chars, language=lang) if p.strip()]
    return pieces or [text]


_LOOSE_END = re.compile(r"\s+[^\w\s]+$")


def _continuations(max_chars: int) -> list[str]:
    """Ways the text may go on that move the split differently: nothing more, a glued letter or
    digit, a glued word too long for a piece, the last sentence growing by a quarter to more than a whole piece (with and without a
    period first, so that the packer must move it on), a new sentence, a new paragraph, and a
    quote or bracket closing (an open one hides sentence ends)."""
    out = ["", "x", "x" * (max_chars + 1), "5", ". And so on.", " And so on.", "\n\nAnd so on."]
    for share in (4, 2, 1):
        growth = " and so" * max(1, max_chars // (7 * share))
        out += [growth, "." + growth]
    out += [" and so" * (max_chars // 7 + 2)]  # longer than a piece: the sentence is cut
    for closer in ('"', "'", ")", "”", "»", "」"):  # a quote closing, or one opened and closed
        out += [closer + ". And so on.", "Ab" + closer + ". And so on."]
    return out


class StreamedText:
    """Text that arrives while it is spoken: the front end pushes it, the engine's side reads it
    as pieces (`piece(k)`). What every kind of streamed text shares: the limit, the end, and
    how long it has been since text last came (limits.idle_timeout_s ends a silent one)."""

    # whether a piece starts before its text is whole (word by word) or only once it is
    opens_pieces = True

    def __init__(
        self,
        max_chars: int,
        language: str | None,
        limit: int,
        wake: Callable[[], None] = lambda: None,
    ):
        self.max_chars, self.language, self.limit, self.wake = max_chars, language, limit, wake
        self.received = 0  # characters pushed so far
        self._lock = threading.Lock()
        self._text = ""
        self._closed = False
        self._last_text = time.monotonic()
        self._setup()

    def _setup(self) -> None:
        """A kind of text's own state."""

    # -- the front end's side ------------------------------------------------------------------

    def push(self, text: str) -> None:
        """Add text as it arrives; InvalidInput past `limit` characters in all."""
        with self._lock:
            if self._closed:
                raise InvalidInput("text arrived after the end of the text", param="text")
            if self.received + len(text) > self.limit:
                raise InvalidInput(
                    f"the streamed text passed {self.limit} characters (limits.max_input_chars)",
                    param="text",
                )
            self.received += len(text)
            self._text += text
            self._last_text = time.monotonic()
        self.wake()

    def close(self) -> None:
        """No more text."""
        with self._lock:
            self._closed = True
        self.wake()

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed

    @property
    def has_text(self) -> bool:
        with self._lock:
            return bool(self._text.strip())

    @property
    def idle_seconds(self) -> float:
        """Seconds since text last came; 0 once the text is complete."""
        with self._lock:
            return 0.0 if self._closed else time.monotonic() - self._last_text

    # -- the engine's side (each kind of text) --------------------------------------------------

    @property
    def given(self) -> list[str]:
        """The text of every piece begun so far (the last may still grow)."""
        raise NotImplementedError

    def piece(self, k: int):
        """Piece k as known now: a TextSoFar, PENDING while it cannot begin yet, None when the
        text ended before it."""
        raise NotImplementedError


class LiveText(StreamedText):
    def _setup(self) -> None:
        self._decided: tuple | None = None  # (received, closed, pieces, open piece)
        self._continuations = _continuations(self.max_chars)

    @property
    def given(self) -> list[str]:
        """The text of every piece begun so far (the last may still grow)."""
        pieces, current, _ = self._decide()
        return pieces + ([current] if current else [])

    # -- the engine's side ---------------------------------------------------------------------

    def piece(self, k: int):
        """Piece k as known now: a TextSoFar (final once decided), PENDING while it has not
        begun, None when the text ended before it."""
        # `closed` as of the text the pieces were cut from: read again, it could say the text
        # ended while the pieces were still those of an open text (a close between the two
        # reads), and piece 0 of a text with words would look like the end of an empty one
        pieces, current, closed = self._decide()
        if k < len(pieces):
            return TextSoFar(pieces[k], True)
        if k == len(pieces) and not closed:
            return TextSoFar(current, False)
        return None if closed else PENDING

    def _decide(self) -> tuple[list[str], str, bool]:
        """(the decided pieces, what is decided of the next one, whether the text they were
        cut from was complete), from one reading of the text."""
        with self._lock:
            text, closed, received = self._text, self._closed, self.received
            if self._decided is not None and self._decided[:2] == (received, closed):
                return self._decided[2], self._decided[3], closed
        if closed:
            pieces, current = split_input(text, self.max_chars, self.language), ""
        else:
            pieces, current = self._agreed(text)
        with self._lock:
            self._decided = (received, closed, pieces, current)
        return pieces, current, closed

    def _agreed(self, text: str) -> tuple[list[str], str]:
        text = text.lstrip()
        if not text:
            return [], ""
        splits = [split_input(text + more, self.max_chars, self.language)
                  for more in self._continuations]  # fmt: skip
        decided: list[str] = []
        for k in range(min(map(len, splits))):
            ones = {split[k] for split in splits}
            if len(ones) == 1 and all(len(split) > k + 1 for split in splits):
                decided.append(ones.pop())
            else:
                break
        k = len(decided)
        nexts = [split[k] if k < len(split) else "" for split in splits]
        current = _common_prefix([*nexts, self._settled(text, nexts[0])])
        # a last "word" of punctuation alone may open the next sentence (a quote): not yet
        return decided, _LOOSE_END.sub("", current)

    def _settled(self, text: str, piece: str) -> str:
        """The open piece without the text's last sentence, unless that is all of it: the last
        sentence may still grow past what the piece can hold and move on to the next piece."""
        from ownvoice.textsplit import split_sentences

        sentences = split_sentences(text, self.language, None)
        last = sentences[-1] if sentences else ""
        if piece == last or not piece:
            return piece
        return piece[: len(piece) - len(last)].rstrip() if piece.endswith(last) else ""


def _common_prefix(texts: list[str]) -> str:
    first = min(texts, key=len)
    for i, c in enumerate(first):
        if any(t[i] != c for t in texts):
            return first[:i]
    return first
