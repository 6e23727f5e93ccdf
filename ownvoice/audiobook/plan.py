"""Plan a book: the ordered list of chunks to synthesize and the pause after each.

Chunks never span a paragraph, nor a change of voice (cast.py: a dialogue voice for quotes,
voices per chapter, inline markers). The pause after a chunk is "sentence" inside a paragraph,
"paragraph" at its end, "chapter" at a chapter's end and "end" after the last chunk. A pause
tag in the text (`[pause:1.5]`, service/markup.py) ends a chunk there, and the silence after it
is exactly the tag's, whatever its kind says (a tag at a paragraph's start: after the chunk
before it).
How long a text should sound (for runaway detection) also lives here. Knows nothing about audio.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ownvoice.audiobook.cast import BACK_TO_CAST, NO_CAST, Cast, split_dialogue, split_markers
from ownvoice.audiobook.document import Book
from ownvoice.languages import NAMES
from ownvoice.service.markup import Pause, parse_text
from ownvoice.textsplit import chunk_paragraphs, cjk_fraction, is_cjk, language_code

CHUNK_CHARS = 200  # ~13 s of English speech: inside the range the models read stably
CHUNK_CHARS_CJK = 100  # ~20-25 s of Chinese or Japanese; long CJK inputs drift and break first

# seconds each character usually takes to say (a brisk reader; slow voices are within the margins
# that runaway detection allows)
_SECONDS_PER_LETTER = 0.075
_SECONDS_PER_DIGIT = 0.25  # "1999" is read as four syllables or more
_SECONDS_PER_CJK = 0.2
_SECONDS_PER_STOP = 0.15  # a pause at . , ; ! ? and their CJK forms


@dataclass(frozen=True)
class PlannedChunk:
    index: int  # 0-based position in the book (shown 1-based to people)
    text: str
    chapter: int  # index into book.chapters
    pause: str  # "sentence" | "paragraph" | "chapter" | "end"
    voice: str | None = None  # who says it; None = the backend's own voice (--voice)
    pause_s: float | None = None  # a pause tag's seconds: the silence after it, exactly

    def gap(self, pauses) -> float:
        """Seconds of silence after it (`pauses`: the book's Pauses)."""
        return self.pause_s if self.pause_s is not None else pauses.after(self.pause)


def default_chunk_chars(book: Book) -> int:
    sample = " ".join(p for ch in book.chapters for p in ch.paragraphs[:20])[:20000]
    return CHUNK_CHARS_CJK if cjk_fraction(sample) > 0.3 else CHUNK_CHARS


def split_language(book: Book, language: str) -> str | None:
    """The language to split sentences with: the one asked for, else the book's own."""
    if language.lower() != "auto":
        return language
    if book.language:
        try:
            return language_code(book.language)
        except ValueError:
            return None
    return None


def synthesis_language(book: Book, language: str) -> str:
    """The language to ask the model for: given, else the book's declared one if the model
    knows it (an EPUB's "en-US" becomes "english"), else "auto"."""
    if language.lower() != "auto" or not book.language:
        return language
    code = book.language.split("-")[0].split("_")[0].lower()
    return NAMES.get(code, "auto")


def plan_chunks(
    book: Book, max_chars: int, language: str | None = None, cast: Cast = NO_CAST
) -> list[PlannedChunk]:
    cast.check([c.title for c in book.chapters])
    chunks: list[PlannedChunk] = []
    marked: list[str | None] = [None]  # an inline marker's voice, until the next marker
    for chapter_index, chapter in enumerate(book.chapters):
        voices = cast.voices(chapter_index, chapter.title)
        pieces = []  # [voice, text, pause, pause_s]
        for paragraph in chapter.paragraphs:
            said = []
            for part in parse_text(paragraph):
                if isinstance(part, Pause):  # the silence after what was said before it
                    if said or pieces:
                        (said or pieces)[-1][3] = part.seconds
                    continue
                for voice, text in _voiced(part.text, voices, marked, language):
                    chunked = chunk_paragraphs([text], max_chars, language)
                    said += [[voice, c.text, "sentence", None] for c in chunked]
            if said:
                said[-1][2] = "paragraph"
            pieces += said
        for i, (voice, text, pause, pause_s) in enumerate(pieces):
            pause = "chapter" if i == len(pieces) - 1 else pause
            chunks.append(PlannedChunk(len(chunks), text, chapter_index, pause, voice, pause_s))
    if chunks:
        last = chunks[-1]
        chunks[-1] = replace(last, pause="end")
    return chunks


def _voiced(paragraph: str, voices, marked: list, language: str | None):
    """[(voice, text)] of one paragraph: cut at voice markers (a marker's voice says all until
    the next one), else into narration and quoted speech when the cast has a dialogue voice."""
    narrator, dialogue = voices
    for switch, text in split_markers(paragraph):
        if switch is not None:
            marked[0] = None if switch.lower() in BACK_TO_CAST else switch
        if marked[0] is not None:
            yield marked[0], text
        elif dialogue is None:
            yield narrator, text
        else:
            for quoted, part in split_dialogue(text, language):
                yield (dialogue if quoted else narrator), part


def expected_seconds(text: str) -> float:
    """Roughly how long `text` takes to say; the yardstick for runaway and truncated audio."""
    total = 0.0
    for ch in text:
        if is_cjk(ch):
            total += _SECONDS_PER_STOP if ch in "。！？，、；：" else _SECONDS_PER_CJK
        elif ch.isdigit():
            total += _SECONDS_PER_DIGIT
        elif ch.isalpha():
            total += _SECONDS_PER_LETTER
        elif ch in ".,;:!?":
            total += _SECONDS_PER_STOP
    return total
