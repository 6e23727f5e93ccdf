"""The voice library: a folder of cloned-voice profiles, one sub-folder per voice.

    voices/                         (the seed server's voices/profiles/<dir>/ nesting also works)
    └── alice/
        ├── meta.json               {"name", "profile_id", "ref_audio_filename", "ref_text",
        │                            "x_vector_only_mode", "language", ...}
        ├── reference.wav           the clip named by ref_audio_filename
        └── .cache/                 encoded VoicePrompts, keyed by audio hash + ref text + model

Profiles written by hand or by the seed server (groxaxo Qwen3-TTS-Openai-Fastapi) work as they
are. The folder is rescanned on every lookup, which is cheap: only meta.json files whose mtime
or size changed are parsed again, so a new folder is usable on the next request. Names never
become paths: lookups match scanned profiles, and new folders are made from validated names.
Knows nothing about HTTP; needs an engine only to encode a reference (`prompt`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import threading
import time
import unicodedata
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ownvoice.audio import load_audio, write_wav
from ownvoice.errors import AudioError, InvalidInput, VoiceNotFound

log = logging.getLogger(__name__)

META_FILE = "meta.json"
CACHE_DIR = ".cache"
MIN_REF_SECONDS, MAX_REF_SECONDS = 3.0, 30.0
SILENCE_RMS = 10 ** (-50 / 20)  # below -50 dBFS RMS the clip is treated as silence
CLIP_LEVEL = 0.999  # |sample| at or above this counts as clipped
MAX_CLIPPED_FRACTION = 0.001  # more than 0.1 % clipped samples = distorted reference
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}$"
_NAME_RE = re.compile(NAME_PATTERN)
NAME_RULE = (
    "1-64 characters: letters, digits, space, '_', '-', '.', starting with a letter or digit"
)
# names of the library's own layout: a voice folder with one of these names would be read as
# part of the layout (`profiles/` nests the seed server's voices) or shadow a file of it
RESERVED_NAMES = frozenset({"profiles", META_FILE, "reference.wav", "designs.json", "designs"})
# device names Windows reserves in every folder, whatever the case or extension ("nul.txt" is
# NUL too): a voice folder so named cannot be opened, copied or deleted there
WINDOWS_DEVICES = frozenset(
    {"CON", "PRN", "AUX", "NUL"} | {f"{port}{n}" for port in ("COM", "LPT") for n in range(10)}
)
# a transcript longer than a 30 s clip can hold only slows every request with the voice
MAX_REF_TEXT_CHARS = 1000
MAX_LANGUAGE_CHARS = 32
MAX_CONSENT_CHARS = 256
# what an interrupted write leaves: `.tmp-<pid>-<hex>` (an upload), `.trash-<pid>-<hex>` (a delete)
_LEFTOVER_RE = re.compile(r"^\.(tmp|trash)-(?:(\d+)-)?[0-9a-f]{32}$")


class VoiceExists(InvalidInput):
    """A profile with that name is already in the library."""

    status = 409  # for the HTTP edge
    code = "voice_exists"


@dataclass(frozen=True)
class VoiceProfile:
    """One library voice, as read from its meta.json."""

    name: str
    profile_id: str | None
    folder: Path
    ref_audio: Path
    ref_text: str | None
    x_vector_only: bool
    language: str | None  # as written in meta.json ("English", "Auto", "en", ...)
    created_at: str | None = None
    consent: str | None = None  # what the uploader gave as consent ("true", or an id)
    description: str | None = None  # who the speaker is, in words (vLLM-Omni's field); shown only

    @property
    def voice_id(self) -> str:
        return f"clone:{self.name}"


MAX_DESCRIPTION_CHARS = 500  # a speaker's description: a sentence or two


def check_description(text: str | None) -> str | None:
    """A speaker description as stored: stripped, None when blank, at most 500 characters."""
    if text is not None and len(text) > MAX_DESCRIPTION_CHARS:
        raise InvalidInput(
            f"speaker_description is {len(text)} characters; at most {MAX_DESCRIPTION_CHARS}",
            param="speaker_description",
        )
    return " ".join((text or "").split()) or None


def _description(value) -> str | None:
    if not isinstance(value, str):
        return None
    text = " ".join(value.split())
    return text[:MAX_DESCRIPTION_CHARS] or None


def validate_name(name: str) -> str:
    """NFC-normalise a voice name and check it can safely be a folder name."""
    name = unicodedata.normalize("NFC", str(name)).strip()
    if not _NAME_RE.match(name) or ".." in name:
        shown = name if len(name) <= 80 else name[:80] + "..."
        raise InvalidInput(f"voice name {shown!r} is not allowed; use {NAME_RULE}", param="name")
    if name.lower() in RESERVED_NAMES:
        raise InvalidInput(
            f"voice name {name!r} is reserved by the voice library's layout; choose another",
            param="name",
        )
    # the name becomes a folder, and a library is copied between systems: refuse what
    # Windows cannot hold (the pattern already keeps out <>:"/\|?* and control characters)
    stem = name.split(".", 1)[0].rstrip(" ")  # Windows reads "CON .wav" as CON as well
    if stem.upper() in WINDOWS_DEVICES:
        raise InvalidInput(
            f"voice name {name!r} is not allowed: Windows reserves {stem!r} for a device "
            "(CON, PRN, AUX, NUL, COM0-9, LPT0-9, with any extension); choose another",
            param="name",
        )
    if name.endswith("."):
        raise InvalidInput(
            f"voice name {name!r} ends with '.', which Windows drops from folder names; remove it",
            param="name",
        )
    return name


def check_voice_fields(
    ref_text: str | None, language: str | None, consent: str | None = None, languages=None
) -> tuple[str | None, str | None]:
    """The rules a voice's text fields meet at upload, the same ones speaking applies: a
    transcript of at most MAX_REF_TEXT_CHARS, a language the model knows (`languages`: the
    clone model's list, or every language of the model family when it is not loaded). Returns
    (ref_text or None, language or None), stripped."""
    from ownvoice.languages import check_language

    ref_text = ref_text.strip() if ref_text and ref_text.strip() else None
    if ref_text is not None and len(ref_text) > MAX_REF_TEXT_CHARS:
        raise InvalidInput(
            f"ref_text is {len(ref_text)} characters; at most {MAX_REF_TEXT_CHARS} (the "
            "transcript of a clip of at most 30 s)",
            param="ref_text",
        )
    language = language.strip() if language and language.strip() else None
    if language is not None:
        if len(language) > MAX_LANGUAGE_CHARS:
            raise InvalidInput(
                f"language is {len(language)} characters; at most {MAX_LANGUAGE_CHARS}",
                param="language",
            )
        check_language(language, languages)
    if consent is not None and len(consent) > MAX_CONSENT_CHARS:
        raise InvalidInput(
            f"consent is {len(consent)} characters; at most {MAX_CONSENT_CHARS} (a yes or an id)",
            param="consent",
        )
    return ref_text, language


def load_reference(source) -> tuple[np.ndarray, int]:
    """Decode and check a reference clip (see check_reference), never decoding more than the
    longest clip allowed."""
    samples, rate = load_audio(source, max_seconds=MAX_REF_SECONDS)
    check_reference(samples, rate)
    return samples, rate


def check_reference(samples: np.ndarray, sample_rate: int) -> None:
    """Raise AudioError unless the clip is 3-30 s, not silent and not clipped."""
    seconds = samples.size / sample_rate
    if not MIN_REF_SECONDS <= seconds <= MAX_REF_SECONDS:
        raise AudioError(
            f"reference audio is {seconds:.1f} s long; it must be between "
            f"{MIN_REF_SECONDS:.0f} and {MAX_REF_SECONDS:.0f} s "
            "(about 10 s of clear speech works best)"
        )
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))
    if rms < SILENCE_RMS:
        level = 20 * np.log10(max(rms, 1e-12))
        raise AudioError(f"reference audio is silent ({level:.0f} dBFS RMS); record some speech")
    clipped = float(np.mean(np.abs(samples) >= CLIP_LEVEL))
    if clipped > MAX_CLIPPED_FRACTION:
        raise AudioError(
            f"reference audio is clipped ({100 * clipped:.2f} % of samples at full scale); "
            "record it again at a lower level"
        )


class VoiceLibrary:
    """Profiles under `root`; safe to share between threads."""

    def __init__(self, root: str | os.PathLike, prompt_cache_size: int = 32):
        self.root = Path(root)
        self._lock = threading.RLock()
        self._scanned: dict[Path, tuple[tuple[int, int], VoiceProfile | None]] = {}
        self._warned: set[tuple[Path, tuple[int, int]]] = set()
        self._prompts: OrderedDict[str, object] = OrderedDict()  # key -> VoicePrompt
        self._prompt_cache_size = prompt_cache_size
        self.encode_count = 0  # references encoded by `prompt` (a cache miss on disk and memory)

    # -- reading ------------------------------------------------------------------------------

    def profiles(self) -> list[VoiceProfile]:
        """Every readable profile, sorted by name; half-written folders are skipped."""
        with self._lock:
            seen: dict[Path, tuple[tuple[int, int], VoiceProfile | None]] = {}
            for folder in self._folders():
                meta = folder / META_FILE
                try:
                    st = meta.stat()
                except OSError:
                    continue  # no meta.json (yet): not a profile
                stamp = (st.st_mtime_ns, st.st_size)
                cached = self._scanned.get(folder)
                if cached is not None and cached[0] == stamp:
                    seen[folder] = cached
                else:
                    seen[folder] = (stamp, self._read_profile(folder, stamp))
            self._scanned = seen
            found = [p for _, p in seen.values() if p is not None]
        return sorted(found, key=lambda p: p.name.lower())

    def get(self, key: str) -> VoiceProfile:
        """Find a profile by name (case-insensitive, with or without `clone:`), id or folder."""
        wanted = key.removeprefix("clone:").strip()
        profiles = self.profiles()
        for match in (
            lambda p: p.name.lower() == wanted.lower(),
            lambda p: p.profile_id is not None and p.profile_id == wanted,
            lambda p: p.folder.name == wanted,
        ):
            for p in profiles:
                if match(p):
                    return p
        names = ", ".join(p.voice_id for p in profiles) or "none (the library is empty)"
        raise VoiceNotFound(f"voice {key!r} is not in the voice library; available: {names}")

    def _folders(self) -> list[Path]:
        out = []
        for parent in (self.root, self.root / "profiles"):
            try:
                entries = list(os.scandir(parent))
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith(".") or entry.name == "profiles" and parent == self.root:
                    continue
                if entry.is_dir():
                    out.append(Path(entry.path))
        return out

    def _read_profile(self, folder: Path, stamp: tuple[int, int]) -> VoiceProfile | None:
        try:
            meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
            if not isinstance(meta, dict):
                raise ValueError("meta.json is not a JSON object")
            name, audio_name = meta.get("name"), meta.get("ref_audio_filename")
            if not isinstance(name, str) or not name.strip():
                raise ValueError("'name' is missing")
            if not isinstance(audio_name, str) or not audio_name:
                raise ValueError("'ref_audio_filename' is missing")
            root = self.root.resolve()
            real_folder = folder.resolve()
            ref_audio = (real_folder / audio_name).resolve()
            # a symlink or a '../' in meta.json must not reach outside the library
            if not real_folder.is_relative_to(root) or not ref_audio.is_relative_to(real_folder):
                raise ValueError(f"{audio_name!r} points outside the voice library")
            if not ref_audio.is_file() or ref_audio.stat().st_size == 0:
                raise ValueError(f"reference audio {audio_name!r} is missing or empty")
            ref_text = meta.get("ref_text")
            if isinstance(ref_text, str) and len(ref_text.strip()) > MAX_REF_TEXT_CHARS:
                raise ValueError(
                    f"'ref_text' is {len(ref_text.strip())} characters; at most "
                    f"{MAX_REF_TEXT_CHARS} are used (a transcript of a clip of at most 30 s)"
                )
            profile_id = meta.get("profile_id")
            language = meta.get("language")
            return VoiceProfile(
                name=name.strip(),
                profile_id=str(profile_id) if profile_id else None,
                folder=folder,
                ref_audio=ref_audio,
                ref_text=ref_text.strip()
                if isinstance(ref_text, str) and ref_text.strip()
                else None,
                x_vector_only=bool(meta.get("x_vector_only_mode", False)),
                language=str(language) if language else None,
                created_at=meta.get("created_at"),
                consent=_consent(meta.get("consent")),
                description=_description(meta.get("speaker_description")),
            )
        except (OSError, ValueError) as e:  # json.JSONDecodeError is a ValueError
            if (folder, stamp) not in self._warned:
                self._warned.add((folder, stamp))
                log.warning("voice library: skipping %s: %s", folder, e)
            return None

    # -- writing ------------------------------------------------------------------------------

    def add(
        self,
        name: str,
        audio,
        ref_text: str | None = None,
        x_vector_only: bool = False,
        language: str | None = None,
        consent: dict | None = None,
        languages=None,
        description: str | None = None,
    ) -> VoiceProfile:
        """Check and store a new profile; `audio` is a file path or the bytes of an audio file.

        Without `ref_text` the profile is stored in x-vector-only mode (timbre only). The fields
        are checked as speaking checks them (`check_voice_fields`; `languages`: the clone
        model's). The clip is decoded (never past 30 s), checked (3-30 s, not silent, not
        clipped) and stored as 16-bit WAV at its own sample rate. The folder appears atomically:
        it is written under a hidden temporary name and renamed into place. The profile
        returned is the one written, even if another thread deletes it right after.
        """
        name = validate_name(name)
        ref_text, language = check_voice_fields(ref_text, language, None, languages)
        # ICL (the better mode) needs the transcript; without one only the timbre can be used
        x_vector_only = bool(x_vector_only) or ref_text is None
        samples, rate = load_reference(audio)
        parent = self.root / "profiles" if (self.root / "profiles").is_dir() else self.root
        parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            if any(p.name.lower() == name.lower() for p in self.profiles()):
                raise VoiceExists(f"a voice named {name!r} already exists", param="name")
            final = parent / name
            if os.path.lexists(final):  # a hand-made folder or file (never shown: a path)
                raise VoiceExists(
                    f"the name {name!r} is taken in the voice library's folder", param="name"
                )
            meta = {
                "name": name,
                "profile_id": uuid.uuid4().hex[:12],
                "ref_audio_filename": "reference.wav",
                "ref_text": ref_text or "",
                "x_vector_only_mode": bool(x_vector_only),
                "language": language or "Auto",
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "origin": "ownvoice",
            }
            if consent is not None:
                meta["consent"] = consent
            if description:
                meta["speaker_description"] = description
            tmp = parent / f".tmp-{os.getpid()}-{uuid.uuid4().hex}"
            tmp.mkdir()
            try:
                write_wav(tmp / "reference.wav", samples, rate)
                (tmp / META_FILE).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
                os.rename(tmp, final)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            # read back under the lock: a delete of the same name waits for the answer
            return self.get(name)

    def remove(self, key: str) -> VoiceProfile:
        """Delete a profile folder (renamed away first, so it vanishes atomically)."""
        with self._lock:
            profile = self.get(key)
            folder = profile.folder
            if not folder.resolve().is_relative_to(self.root.resolve()):  # never outside the root
                raise InvalidInput(f"voice {key!r} is not inside the voice library", param="voice")
            trash = folder.parent / f".trash-{os.getpid()}-{uuid.uuid4().hex}"
            os.rename(folder, trash)
            shutil.rmtree(trash, ignore_errors=True)
            self._scanned.pop(folder, None)
        return profile

    def clean_leftovers(self) -> list[str]:
        """Remove what interrupted uploads and deletes left (`.tmp-*`, `.trash-*` folders of
        processes no longer running), and nothing else; returns the names removed. Called when
        the server starts."""
        removed = []
        with self._lock:
            for parent in (self.root, self.root / "profiles"):
                try:
                    entries = list(os.scandir(parent))
                except OSError:
                    continue
                for entry in entries:
                    m = _LEFTOVER_RE.match(entry.name)
                    if m is None or not entry.is_dir(follow_symlinks=False):
                        continue
                    pid = int(m.group(2)) if m.group(2) else None
                    if pid is not None and pid != os.getpid() and _running(pid):
                        continue  # another process is writing it now
                    shutil.rmtree(entry.path, ignore_errors=True)
                    removed.append(entry.name)
        return removed

    # -- encoded prompts ----------------------------------------------------------------------

    def prompt(self, profile: VoiceProfile, engine, model_key: str, x_vector_only: bool):
        """The profile's VoicePrompt for this model, encoded at most once.

        Looked up in memory, then in `<profile>/.cache/`, and only then made with
        `engine.make_voice` (which must run on the engine's own thread, as this call does in the
        server). The key covers the audio bytes, the transcript, the mode and the model, so an
        edited clip or transcript, or another checkpoint, gets a fresh encoding.
        """
        from ownvoice.engine.voice import VoicePrompt

        ref_text = None if x_vector_only else profile.ref_text
        audio_bytes = profile.ref_audio.read_bytes()
        key = _prompt_key(audio_bytes, ref_text, x_vector_only, model_key)
        with self._lock:
            if key in self._prompts:
                self._prompts.move_to_end(key)
                return self._prompts[key]
        stem = profile.folder / CACHE_DIR / f"prompt-{key}"
        prompt = None
        if stem.with_suffix(".json").is_file():
            try:
                prompt = VoicePrompt.load(stem)
            except Exception as e:  # a stale or damaged cache entry is re-made, never fatal
                log.warning("voice %s: ignoring cached prompt %s: %s", profile.name, stem, e)
        if prompt is None:
            samples, rate = load_audio(audio_bytes)
            prompt = engine.make_voice(
                (samples, rate), ref_text=ref_text, x_vector_only=x_vector_only
            )
            self.encode_count += 1
            try:
                prompt.save(stem)
            except OSError as e:  # a read-only library still works, from memory
                log.warning("voice %s: cannot cache the encoded prompt: %s", profile.name, e)
        with self._lock:
            self._prompts[key] = prompt
            while len(self._prompts) > self._prompt_cache_size:
                self._prompts.popitem(last=False)
        return prompt


def _consent(record) -> str | None:
    """The consent a profile was added with: a record's value ({"value": ...}) or a string."""
    if isinstance(record, dict):
        record = record.get("value")
    return str(record) if isinstance(record, str | int | bool) and str(record) else None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def _prompt_key(audio: bytes, ref_text: str | None, x_vector_only: bool, model_key: str) -> str:
    h = hashlib.sha256()
    for part in (hashlib.sha256(audio).hexdigest(), ref_text or "", str(x_vector_only), model_key):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:20]
