"""The whole job: read -> plan -> render missing chunks -> assemble -> encode once -> report.

    report = render_book("book.epub", "book.m4b", ServerBackend("http://127.0.0.1:8880", voice="ryan"))

If any chunk still fails after its retries, nothing is encoded: the report lists the failures and
every finished chunk stays in the work folder, so running the same command again only retries
what is missing. Knows nothing about the command line.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from ownvoice.audiobook import assemble, overlay
from ownvoice.audiobook.backends import SAMPLE_RATE
from ownvoice.audiobook.document import chapter_names
from ownvoice.audiobook.encode import (
    ChapterMark,
    Tags,
    output_format,
    resample_blocks,
    write_audio,
)
from ownvoice.audiobook.options import BookOptions
from ownvoice.audiobook.plan import (
    default_chunk_chars,
    plan_chunks,
    split_language,
    synthesis_language,
)
from ownvoice.audiobook.progress import Progress
from ownvoice.audiobook.reader import read_book
from ownvoice.audiobook.render import Job, render_chunks
from ownvoice.audiobook.report import BookReport
from ownvoice.audiobook.subtitles import cues, write_subtitles
from ownvoice.audiobook.workdir import WorkDir, chunk_key
from ownvoice.errors import InvalidInput

MAX_COVER_BYTES = 16 * 2**20


def default_work_dir(output: str) -> str:
    return str(Path(output).with_name(Path(output).name + ".work"))


def render_book(
    source: str,
    output: str,
    backend,
    options: BookOptions | None = None,
    *,
    work_dir: str | None = None,
    redo: Sequence[int] = (),
    input_format: str | None = None,
    show_progress: bool = True,
    stop: threading.Event | None = None,
) -> BookReport:
    """Render `source` (a file read_book reads, or "-") to `output`; `redo` holds 1-based chunk
    numbers."""
    options = options or BookOptions()
    options.validate()
    fmt = output_format(output, options.format)
    cover = _read_cover(options.cover) if options.cover else None
    book, jobs, identity, max_chars = prepare(source, backend, options, input_format)
    language = identity["language"]

    work = WorkDir(work_dir or default_work_dir(output))
    work.lock()
    try:
        _forget_redone(work, jobs, redo)
        work.write_json("manifest.json", _manifest(source, book, identity, max_chars, jobs))
        progress = Progress(len(jobs), sum(len(j.chunk.text) for j in jobs), enabled=show_progress)
        steps_before = backend.batch_steps()
        try:
            stats = render_chunks(jobs, backend, work, options, progress, language, stop)
        finally:
            progress.close()
        steps_after = backend.batch_steps()
        batch = steps_after.since(steps_before) if steps_after else None
        report = BookReport(
            chunks=len(jobs),
            reused=stats.reused,
            rendered=stats.rendered,
            failed=len(stats.failures),
            retries=dict(stats.retries),
            failures=[{"chunk": i + 1, "text": t, "error": e} for i, t, e in stats.failures],
            synth_seconds=stats.synth_wall_s,
            new_audio_seconds=stats.new_audio_s,
            work_dir=str(work.root),
            batch_rows=batch.mean_rows if batch and stats.rendered else None,
            batch_size=backend.batch_size(),
        )
        if not stats.failures:
            _finish(report, book, jobs, work, output, fmt, options, cover, language)
        work.write_json("report.json", report.to_dict())
        return report
    finally:
        work.unlock()


def _finish(report, book, jobs, work, output, fmt, options, cover, language) -> None:
    plan = [j.chunk for j in jobs]

    def load(chunk):
        return work.load(jobs[chunk.index].key)

    asm = assemble.measure(plan, load, SAMPLE_RATE, options.pauses, options.target_lufs)
    blocks = assemble.stream(plan, load, asm, options.peak_dbtp)
    rate, starts, total = SAMPLE_RATE, asm.chapter_starts, asm.total
    if options.sample_rate and options.sample_rate != SAMPLE_RATE:
        rate = options.sample_rate
        blocks = resample_blocks(blocks, SAMPLE_RATE, rate)
        starts = [round(s * rate / SAMPLE_RATE) for s in starts]
        total = round(total * rate / SAMPLE_RATE)
    ends = [*starts[1:], total]
    names = chapter_names(book)
    marks = tuple(
        ChapterMark(names[c], s, e) for c, s, e in zip(asm.chapter_ids, starts, ends, strict=True)
    )
    tags = Tags(
        title=options.title or book.title,
        author=options.author or book.author,
        cover=cover if cover is not None else book.cover,
        chapters=marks,
    )
    write_audio(output, blocks, rate, fmt, tags, options.bitrate)
    starts_of = asm.chunk_starts
    # where each chunk's (trimmed) audio lies in the file, for tools that follow the text
    work.write_json("timings.json", [
        {"n": i + 1, "start": s / SAMPLE_RATE, "end": (s + n) / SAMPLE_RATE}
        for i, (s, n) in enumerate(zip(starts_of, asm.lengths, strict=True))
    ])  # fmt: skip
    items = cues(plan, starts_of, asm.lengths, SAMPLE_RATE,
                 split_language(book, options.language),
                 lambda text: options.spoken_lexicon.apply(text, language))  # fmt: skip
    for path in options.subtitles:
        write_subtitles(path, items)
    if options.epub_overlay:
        parts = overlay.chapter_parts(book, plan, items, asm.chapter_ids, asm.chapter_starts,
                                      asm.total)  # fmt: skip
        track = assemble.stream(plan, load, asm, options.peak_dbtp)  # read once more, per chapter
        overlay.write_overlay(options.epub_overlay, book, parts, track, SAMPLE_RATE,
                              _book_language(book, language))  # fmt: skip
        report.epub_overlay = options.epub_overlay
    before = [x for x in asm.before_lufs if x is not None]
    after = [x for x in asm.after_lufs if x is not None]
    report.audio_seconds = asm.total / SAMPLE_RATE
    report.loudness_before = (min(before), max(before)) if before else None
    report.loudness_after = (min(after), max(after)) if after else None
    report.limited_chunks = asm.limited
    if len({c.voice for c in plan}) > 1:
        report.loudness_by_voice = {
            voice or "(--voice)": round(lufs, 2)
            for voice, lufs in assemble.loudness_by_voice(plan, asm).items()
        }
    report.output, report.format, report.chapters = str(output), fmt, len(marks)


def _book_language(book, language: str) -> str:
    """A BCP 47 tag for the read-along book: the source's own, else the spoken language's."""
    from ownvoice.languages import iso_code

    return book.language or iso_code(language) or "und"


def prepare(source: str, backend, options: BookOptions, input_format: str | None = None):
    """Read and plan a book: (book, jobs, identity, chunk size). Shared by a render and a dry
    run, so a dry run shows exactly what a render would say."""
    book = read_book(source, input_format, options.reading)
    max_chars = options.chunk_chars or default_chunk_chars(book)
    plan = plan_chunks(book, max_chars, split_language(book, options.language), options.cast)
    language = synthesis_language(book, options.language)
    identity = {**backend.identity(), "language": language, "seed": options.seed}
    return book, _jobs(plan, identity, options.spoken_lexicon, language), identity, max_chars


def _jobs(plan, identity: dict, lexicon, language: str) -> list[Job]:
    """A job per chunk; its key covers what is spoken (the text after the lexicon) and who
    says it, so a new lexicon entry or cast re-renders exactly the chunks it changes."""
    jobs = []
    for chunk in plan:
        spoken = lexicon.apply(chunk.text, language)
        said_by = identity if chunk.voice is None else {**identity, "voice": chunk.voice}
        jobs.append(Job(chunk, chunk_key(spoken, said_by), spoken if spoken != chunk.text else ""))
    return jobs


def _forget_redone(work: WorkDir, jobs: list[Job], redo: Sequence[int]) -> None:
    for n in redo:
        if not 1 <= n <= len(jobs):
            raise InvalidInput(f"--redo {n}: the book has chunks 1 to {len(jobs)}", param="redo")
        key = jobs[n - 1].key
        work.forget(key)
        work.bump_redo(key)  # a new seed, so the redone chunk really sounds different


def _manifest(source, book, identity, max_chars, jobs) -> dict:
    return {
        "input": source,
        "identity": identity,
        "chunk_chars": max_chars,
        "chapters": [c.title for c in book.chapters],
        "chunks": [
            {
                "n": j.chunk.index + 1,
                "key": j.key,
                "chapter": j.chunk.chapter,
                "pause": j.chunk.pause,
                "text": j.chunk.text,
                **({"voice": j.chunk.voice} if j.chunk.voice else {}),
                **({"spoken": j.spoken} if j.spoken else {}),
            }
            for j in jobs
        ],
    }


def _read_cover(path: str) -> bytes:
    p = Path(path)
    if p.suffix.lower() not in (".jpg", ".jpeg", ".png"):
        raise InvalidInput(f"cover must be a .jpg or .png file, got {path!r}", param="cover")
    if not p.is_file():
        raise InvalidInput(f"cover file {path!r} does not exist", param="cover")
    if p.stat().st_size > MAX_COVER_BYTES:
        raise InvalidInput(f"cover {path!r} is larger than 16 MiB", param="cover")
    return p.read_bytes()
