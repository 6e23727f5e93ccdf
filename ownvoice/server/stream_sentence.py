"""The WebSocket speech stream's utterances and sentences (server/speech_stream.py): what one
utterance holds, and one sentence's audio on the wire."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from ownvoice.errors import ClientStalled
from ownvoice.service.speech import Run


@dataclass(eq=False)
class Utterance:
    """The text between two input.done, and its run."""

    index: int
    # a SpeechPlan whose pieces are a StreamedText; in a markup session (input_format set), the
    # whole text's plan, made at input.done (a script, or a plain plan); None: nothing to say
    plan: object | None
    stream_audio: bool  # as configured when it began
    task: object | None = None  # its asyncio.Task
    run: Run | None = None
    cancelled: bool = False
    markup: list[str] | None = None  # a markup session's text so far

    def stop(self) -> None:
        if self.plan is not None and self.plan.streamed:
            self.plan.pieces.close()
        if self.run is not None:
            self.run.cancel()  # the row leaves the batch at the next step


class Sentence:
    """One piece's audio on the wire: audio.start, the bytes (as made, or one file), audio.done."""

    def __init__(self, stream, run: Run, u: Utterance, index: int, text: str):
        self.stream, self.text = stream, text
        self.format = run.plan.response_format
        self.ids = {"utterance_index": u.index, "sentence_index": index}
        self.audio = run.audio()  # the session's format, at its speed
        self.streaming = u.stream_audio
        self.held = bytearray()
        self.sent = 0  # bytes of audio sent for it

    async def start(self) -> None:
        # the rate and channels as vLLM-Omni's clients read them to play raw PCM
        await self.stream._send({"type": "audio.start", **self.ids, "sentence_text": self.text,
                                 "format": self.format, "sample_rate": self.audio.sample_rate,
                                 "channels": 1})  # fmt: skip

    async def write(self, samples) -> None:
        data = self.audio.write(samples)
        if data and self.streaming:
            await self.stream._send_bytes(data)
            self.sent += len(data)
        else:
            self.held += data

    async def end(self, text: str, cancelled: bool = False, failed: bool = False) -> None:
        """audio.done with the bytes sent and whether the sentence failed; a whole file is sent
        first unless the sentence was cancelled or failed (no partial file: `cancelled: true`
        or `error: true` says so)."""
        self.held += self.audio.close()
        with contextlib.suppress(ClientStalled):
            if self.held and (self.streaming or not (cancelled or failed)):
                await self.stream._send_bytes(bytes(self.held))
                self.sent += len(self.held)
        done = {"type": "audio.done", **self.ids, "sentence_text": text,
                "total_bytes": self.sent, "error": failed}  # fmt: skip
        if cancelled:
            done["cancelled"] = True
        await self.stream._send(done)


def piece_text(plan, index: int) -> str:
    """Piece `index`'s text as known now (a piece spoken word by word may still grow)."""
    given = plan.pieces.given if plan.streamed else plan.pieces
    return given[index] if index < len(given) else ""
