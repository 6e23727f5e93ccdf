"""A stand-in for an OpenAI-compatible speech server, run on 127.0.0.1 in a thread.

It answers POST /v1/audio/speech with speech-like 16-bit PCM at 24 kHz whose length follows the
text (SECONDS_PER_CHAR, rounded to whole 10 ms), framed by exact-zero silence, at a per-text gain.
Scripts make chosen chunks misbehave: for a chunk whose text contains a trigger word, each request
takes the next action from its list ("500", "429", "stall", "runaway", "short", "400"); when the
list is used up the chunk answers normally. Every request is counted per input text.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

SR = 24000
SECONDS_PER_CHAR = 0.04
LEAD_S, TRAIL_S = 0.25, 0.3  # exact-zero silence around the speech


def speech_samples(text: str) -> int:
    """Speech length (without the silent edges) the server produces for `text`."""
    return round(len(text) * SECONDS_PER_CHAR * 100) * (SR // 100)


def speech(
    text: str, gain_db: float = 0.0, stretch: float = 1.0, spike: bool = False
) -> np.ndarray:
    """Voiced, syllable-modulated tone: loud enough to measure, never silent inside. `spike`
    puts a click near full scale in the middle (a peak the loudness gain must respect)."""
    n = round(speech_samples(text) * stretch)
    t = np.arange(n) / SR
    f0 = 130 + 10 * (sum(map(ord, text)) % 7)
    voiced = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 6))
    envelope = 0.65 + 0.35 * np.sin(2 * np.pi * 4.0 * t)
    body = 0.12 * 10 ** (gain_db / 20) * envelope * voiced
    if spike:
        body[n // 2 : n // 2 + 3] = 0.95
    out = np.concatenate([np.zeros(round(LEAD_S * SR)), body, np.zeros(round(TRAIL_S * SR))])
    return out.astype(np.float32)


class FakeSpeechServer:
    def __init__(self, *, delay_s: float = 0.0, stall_s: float = 3.0, gain_db=None):
        self.delay_s = delay_s  # every answer takes at least this long
        self.stall_s = stall_s  # how long a "stall" hangs before answering
        self.gain_db = gain_db or (lambda text: 0.0)
        self.voice_gain_db: dict[str, float] = {}  # a voice's level on top of the text's
        self.spike = lambda text: False  # which texts get a click near full scale
        self.scripts: dict[str, list[str]] = {}
        # a model's seeds that run away whatever is asked: (text trigger, seed) pairs
        self.runaway_seeds: set[tuple[str, int]] = set()
        self.counts: Counter[str] = Counter()  # input text -> requests
        self.answered: Counter[str] = Counter()  # input text -> 200 responses sent
        self.bodies: list[dict] = []
        self.active = self.max_active = 0  # speech requests being answered right now
        self.on_answer = None  # called with the total number of 200s after each one
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def script(self, trigger: str, *actions: str) -> None:
        self.scripts[trigger] = list(actions)

    def requests_for(self, word: str) -> int:
        return sum(n for text, n in self.counts.items() if word in text)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._httpd.shutdown()
        self._httpd.server_close()

    def _action(self, text: str) -> str:
        with self._lock:
            self.counts[text] += 1
            for trigger, actions in self.scripts.items():
                if trigger in text and actions:
                    return actions.pop(0)
        return "ok"

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def _send(self, status: int, body: bytes, ctype: str, headers=()):
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in headers:
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its timeout): nothing to do

            def _error(self, status: int, message: str, headers=()):
                envelope = {
                    "error": {
                        "message": message,
                        "type": "server_error",
                        "param": None,
                        "code": None,
                    }
                }
                self._send(status, json.dumps(envelope).encode(), "application/json", headers)

            def do_GET(self):
                if self.path == "/v1/models":
                    body = {"object": "list", "data": [{"id": "fake-tts", "object": "model"}]}
                    self._send(200, json.dumps(body).encode(), "application/json")
                else:
                    self._error(404, f"no route {self.path}")

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                text = body["input"]
                with server._lock:
                    server.bodies.append(body)
                    server.active += 1
                    server.max_active = max(server.max_active, server.active)
                self.counted = True
                try:
                    self._speak(body, text)
                finally:
                    self._uncount()

            def _uncount(self):
                with server._lock:
                    server.active -= self.counted
                    self.counted = False

            def _speak(self, body, text):
                action = server._action(text)
                if any(t in text and body.get("seed") == s for t, s in server.runaway_seeds):
                    action = "runaway"
                time.sleep(server.delay_s)
                if action == "500":
                    return self._error(500, "synthetic failure")
                if action == "429":
                    return self._error(429, "queue full", [("Retry-After", "0")])
                if action == "400":
                    return self._error(400, f"voice {body.get('voice')!r} not found")
                if action == "stall":
                    # the client gives up on it long before it answers and sends the chunk
                    # again: one of its jobs no longer, though still here
                    self._uncount()
                    time.sleep(server.stall_s)
                stretch = {"runaway": 20.0, "short": 0.05}.get(action, 1.0)
                gain = server.gain_db(text) + server.voice_gain_db.get(body.get("voice"), 0.0)
                audio = speech(text, gain, stretch, server.spike(text))
                pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()
                self._send(200, pcm, "audio/pcm")
                with server._lock:
                    server.answered[text] += 1
                    total = sum(server.answered.values())
                if server.on_answer is not None:
                    server.on_answer(total)

        return Handler
