"""The web page `ownvoice serve` shows at `/`: static files, shipped in the package, no build
step, nothing fetched from elsewhere. It talks to the same HTTP API as every other client
(same admission, voices and cancellation); the server (server/routes/page.py) serves the files
with a strict Content-Security-Policy.

    static/index.html     the page: Speak, Voices, Design, Status
    static/main.js        wiring: tabs, the API key dialog, start-up
    static/api.js         every call to the server (the key, the error envelope)
    static/player.js      plays 24 kHz PCM as it streams in; WAV files of the result
    static/speak.js       the Speak form, its live figures and the history
    static/voices.js      the voice picker and the library: preview, add (file or microphone), delete
    static/recorder.js    the microphone, recorded as raw PCM (recorder-worklet.js)
    static/design.js      describe a voice, listen, keep it as a cloned voice
    static/status.js      models, device, queue, batch and the start-up warnings
"""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).parent / "static"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}


def static_files() -> dict[str, Path]:
    """name -> path of every file the page is made of (nothing else is served)."""
    return {p.name: p for p in sorted(STATIC.iterdir()) if p.suffix in CONTENT_TYPES}
