"""Long text to one finished audio file: `ownvoice book`.

    from ownvoice.audiobook import BookOptions, ServerBackend, render_book
    report = render_book("novel.epub", "novel.m4b", ServerBackend(URL, voice="ryan"), BookOptions())
    print(report.text())

Modules, in the order the work flows:
    reader, markdown, epub, html,   read .txt / .md / .epub / .html / .docx / .pdf / stdin into a
    word, pdf,                      Book (document):
    xhtml, nav, blocks, pdf_text    notes moved to chapter ends, tables by row, no page numbers
    furniture, tidy                 no contents pages, navigation, code, raw URLs (every format)
    archive, safexml, budget        the limits an untrusted book is read within (zip and entity
                                    bombs, the most text a book may have)
    plan                            chunks of a target length and the pause after each
    lexicon                         how words are said (applied to what is spoken only)
    backends                        a server (HTTP) or an in-process Engine makes each chunk's audio
    render, workdir                 bounded parallel synthesis, retries, runaway checks, resume
    assemble, loudness              trim, level to -18 LUFS, true-peak limit, join with pauses
    encode                          one pass to mp3 / m4b (chapters, tags, cover) / opus / flac / wav
    progress, report                the progress line and the final report
    pipeline                        all of the above: render_book()
    dryrun                          what a render would say, its length and time: nothing made
"""

from ownvoice.audiobook.backends import EngineBackend, ServerBackend
from ownvoice.audiobook.options import BookOptions, Pauses
from ownvoice.audiobook.pipeline import render_book
from ownvoice.audiobook.report import BookReport

__all__ = ["BookOptions", "BookReport", "EngineBackend", "Pauses", "ServerBackend", "render_book"]
