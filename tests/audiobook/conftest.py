"""Fixtures for the audiobook tests: a 16-chunk story and a fake speech server."""

from __future__ import annotations

import pytest

from tests.audiobook.fake_server import FakeSpeechServer

# 2 chapters x (heading + 2 + 2 + 3 sentences) = 16 chunks at chunk_chars=60: every sentence is
# 40-48 characters, so no two fit one chunk. The first word of each sentence is unique.
STORY_CHAPTERS = [
    (
        "The Lighthouse",
        [
            [
                "Alpha waves broke against the old stone pier.",
                "Bravo gulls circled high above the lantern room.",
            ],
            [
                "Charlie the keeper climbed the spiral stairs.",
                "Delta light spilled across the dark water.",
            ],
            [
                "Echo of the foghorn rolled over the bay.",
                "Foxtrot boats hurried home before the night.",
                "Golf balls of hail began to drum on the glass.",
            ],
        ],
    ),
    (
        "The Storm",
        [
            [
                "Hotel guests watched the storm from the hill.",
                "India ink clouds swallowed the last of the sun.",
            ],
            [
                "Juliett pulled her coat tight against the wind.",
                "Kilo after kilo of sand washed over the road.",
            ],
            [
                "Lima beans rattled in a tin on the windowsill.",
                "Mike, the ferryman, tied his boat twice over.",
                "November rain fell until the morning came.",
            ],
        ],
    ),
]
STORY_CHUNK_CHARS = 60
# what the story's structure implies, counted by hand from STORY_CHAPTERS
STORY_CHUNKS = 16
STORY_GAPS = {"sentence": 8, "paragraph": 6, "chapter": 1}


def story_markdown() -> str:
    parts = ["---\ntitle: Harbour Tales\nauthor: Ann Author\n---\n"]
    for title, paragraphs in STORY_CHAPTERS:
        parts.append(f"# {title}\n")
        parts += [" ".join(p) + "\n" for p in paragraphs]
    return "\n".join(parts)


def story_texts() -> list[str]:
    """Every chunk's text, in reading order."""
    out = []
    for title, paragraphs in STORY_CHAPTERS:
        out.append(title)
        out += [s for p in paragraphs for s in p]
    return out


@pytest.fixture
def story(tmp_path):
    path = tmp_path / "story.md"
    path.write_text(story_markdown())
    return path


@pytest.fixture
def server():
    with FakeSpeechServer() as s:
        yield s
