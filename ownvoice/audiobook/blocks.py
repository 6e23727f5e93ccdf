"""What a parsed (X)HTML document is: blocks of text in reading order; and how blocks become
chapters, with notes at the end of the chapter that refers to them. Also where a run of blocks
that are nothing but links into the book is found and left out (a contents page or an index,
whatever its markup). Knows nothing about markup or audio."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field, replace

from ownvoice.audiobook.document import Chapter, with_notes_at_end
from ownvoice.audiobook.furniture import Skipped

# a run of at least this many blocks that are nothing but links into the book is a contents
# page (or an index), whatever its markup: Calibre's <p class="calibre5"><a>, bare lists
LINK_RUN = 3
LINK_SHARE = 0.8  # of a block's letters inside links into the book
LINK_BAR = 4  # links in one block that is all links: a navigation bar ("A | B | C | D")


@dataclass(frozen=True)
class Block:
    text: str
    heading: bool
    note: bool = False  # the body of a footnote or endnote
    level: int = 0  # 1-6 for a block from <h1>-<h6>
    anchor: str = ""  # a note's: the id of the note it belongs to
    home: int | None = None  # a note's: index of the block that refers to it (set by readers)
    linked: float = 0.0  # share of its letters inside links into the book (0..1)
    links: int = 0  # how many such links it has


@dataclass
class Parsed:
    blocks: list[Block]
    anchors: dict[str, int]  # id -> index of the block it is in or before
    refs: list[tuple[int, str]]  # note references: (index of the block they are in, href)
    skipped: Skipped = field(default_factory=Skipped)  # what was left out, per kind


def without_link_runs(parsed: Parsed) -> Parsed:
    """Drop the runs of blocks that are nothing but links into the book (a contents page or
    an index whatever its markup) and the blocks that are bars of such links; ids and note
    references that were in a dropped block move to the next block kept."""
    blocks = parsed.blocks

    def entry(b: Block) -> bool:
        return not b.heading and not b.note and b.links > 0 and b.linked >= LINK_SHARE

    drop = [entry(b) and b.links >= LINK_BAR for b in blocks]
    i = 0
    while i < len(blocks):
        j = i
        while j < len(blocks) and entry(blocks[j]):
            j += 1
        if j - i >= LINK_RUN:
            drop[i:j] = [True] * (j - i)
        i = max(j, i + 1)
    if not any(drop):
        return parsed
    new_index, kept = [], []
    for b, dropped in zip(blocks, drop, strict=True):
        new_index.append(len(kept))
        if not dropped:
            kept.append(b)
    new_index.append(len(kept))
    skipped = parsed.skipped
    skipped["contents entries"] += sum(drop)
    return Parsed(
        kept,
        {anchor: new_index[i] for anchor, i in parsed.anchors.items()},
        [(new_index[i], href) for i, href in parsed.refs],
        skipped,
    )


def chapters_at(blocks: list[Block], marks: list[tuple[int, str | None, int]]) -> list[Chapter]:
    """Chapters starting at `marks` ((block index, title, level), sorted, the first at 0). Each
    has its paragraphs, then, after a short announcement, the notes whose reference is in it
    (or that stand in it, when their reference is unknown). An untitled chapter is named by its
    first heading."""
    starts = [start for start, _, _ in marks]
    notes: list[list[tuple[int, int]]] = [[] for _ in marks]
    for i, b in enumerate(blocks):
        if b.note:
            home = i if b.home is None else b.home
            notes[bisect_right(starts, home) - 1].append((home, i))
    chapters = []
    for n, ((start, title, level), end) in enumerate(
        zip(marks, [*starts[1:], len(blocks)], strict=True)
    ):
        part = [b for b in blocks[start:end] if not b.note]
        if title is None:
            title = next((b.text for b in part if b.heading), None)
        said = [blocks[i].text for _, i in sorted(notes[n])]
        chapters.append(Chapter(title, with_notes_at_end([b.text for b in part], said), level))
    return chapters


def place_notes(blocks: list[Block], keys: list[str], refs: dict[str, int]) -> list[Block]:
    """Each note block with the index of the block that refers to it: `keys[i]` names the note
    block i belongs to (e.g. "ch1.xhtml#fn1"), `refs` maps such names to reference blocks."""
    return [
        replace(b, home=refs[keys[i]]) if b.note and keys[i] in refs else b
        for i, b in enumerate(blocks)
    ]
