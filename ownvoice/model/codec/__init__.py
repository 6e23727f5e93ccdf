"""The Qwen3-TTS 12 Hz speech tokenizer ("codec"): codes <-> 24 kHz audio, 1920 samples per frame.

config.py       CodecConfig (+ decoder / encoder parts) from speech_tokenizer/config.json
decoder.py      CodecDecoder: codes (B, 16, T) -> waveform (B, T * 1920)
encoder.py      CodecEncoder: waveform (B, N) -> codes (B, 16, ceil(N / 1920))
streaming.py    StreamingDecoder (exact, incremental), WindowedDecoder (approximation)
loading.py      load_codec(folder, device, dtype, with_encoder) -> Codec
checkpoint.py   upstream tensor layout and its translation to our modules
convs.py, transformer.py   building blocks
"""

from .config import CodecConfig, CodecDecoderConfig, CodecEncoderConfig
from .decoder import CodecDecoder
from .encoder import CodecEncoder
from .loading import Codec, load_codec
from .streaming import StreamingDecoder, WindowedDecoder, decode_chunked

__all__ = [
    "Codec",
    "CodecConfig",
    "CodecDecoder",
    "CodecDecoderConfig",
    "CodecEncoder",
    "CodecEncoderConfig",
    "StreamingDecoder",
    "WindowedDecoder",
    "decode_chunked",
    "load_codec",
]
