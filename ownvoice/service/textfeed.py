"""Text that arrives while it is being spoken (an LLM writing its answer), handed out as pieces.

    feed = TextFeed(max_chars=300, language="english", limit=4096, wake=scheduler.wake)
    feed.push("Sure! The weather tomorrow is")   # front end, as text arrives
    feed.push(" sunny. Highs around 20 degrees.")
    feed.close()                                   # the text is complete
    for piece in feed: ...                         # engine thread: "Sure!", then the rest

A piece is every whole sentence known when the previous piece has been spoken, packed up to
`max_chars` as the HTTP path packs long input, so text that arrives faster than it is spoken
loses no prosody to needless cuts. The last sentence is held back until more text or the end
arrives: it may still go on ("It costs 3." + "5 euros."). While nothing whole is known the
iterator yields PENDING (the scheduler parks the generation until `wake`). Thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterator

from ownvoice.engine.opentext import TextSoFar
from ownvoice.service.generation import PENDING
from ownvoice.service.livetext import StreamedText
from ownvoice.textsplit import pack, split_sentences


class TextFeed(StreamedText):
    opens_pieces = False  # a piece is spoken once its sentences are whole

    def _setup(self) -> None:
        self.language = None if self.language in (None, "auto") else self.language
        self._given: list[str] = []  # the pieces handed out, in order (a front end names them)

    @property
    def given(self) -> list[str]:
        return list(self._given)

    def piece(self, k: int):
        """Piece k, whole (TextSoFar(text, final=True)): taken when first asked for, from
        every whole sentence known then; PENDING while none is whole, None after the end."""
        if k < len(self._given):
            return TextSoFar(self._given[k], True)
        piece = self.next_piece()
        return piece if piece is None or piece is PENDING else TextSoFar(piece, True)

    def __iter__(self) -> Iterator:
        while True:
            piece = self.next_piece()
            if piece is None:
                return
            yield piece

    def next_piece(self):
        """The next piece to speak, PENDING while none is whole yet, None after the end."""
        with self._lock:
            sentences = split_sentences(self._text, self.language, self.max_chars)
            whole = sentences if self._closed else sentences[:-1]
            if not whole:
                if self._closed:
                    self._text = ""
                    return None
                return PENDING
            piece = pack(whole, self.max_chars)[0]
            self._text = _drop_spoken(self._text, piece)
            self._given.append(piece)
            return piece


def _drop_spoken(text: str, piece: str) -> str:
    """`text` after the piece taken from its start: as many non-space characters as the piece
    has (the splitter only changes spaces: line breaks, runs of them)."""
    left = sum(not c.isspace() for c in piece)
    for i, c in enumerate(text):
        if left == 0:
            return text[i:]
        if not c.isspace():
            left -= 1
    return ""
