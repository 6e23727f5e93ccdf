"""Reading safetensors files with plain file reads.

safetensors' own loader maps the whole file; every page it touches counts as resident memory
until the file is closed, so loading a 1.8-3.8 GB checkpoint peaks at the file's size on top of
the model. Reading each tensor straight into its own buffer keeps the peak at what we keep.
The format: an 8-byte little-endian header length, a JSON header (name -> dtype, shape,
data_offsets), then the raw bytes.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import torch

DTYPES = {
    "BF16": torch.bfloat16,
    "F16": torch.float16,
    "F32": torch.float32,
    "F64": torch.float64,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


class SafetensorsFile:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._f = open(self.path, "rb")  # noqa: SIM115 -- closed in close() / __exit__
        try:
            (n,) = struct.unpack("<Q", self._f.read(8))
            if n > min(self.path.stat().st_size, 1 << 28):
                raise ValueError(f"header length {n} is impossible")
            header = json.loads(self._f.read(n))
        except (struct.error, ValueError) as e:
            self._f.close()
            raise ValueError(f"{self.path} is not a safetensors file: {e}") from e
        self._base = 8 + n
        self.metadata = header.pop("__metadata__", None)
        self._entries = header

    def __enter__(self) -> SafetensorsFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._f.close()

    def keys(self) -> list[str]:
        return list(self._entries)

    def shape(self, key: str) -> tuple[int, ...]:
        return tuple(self._entries[key]["shape"])

    def dtype(self, key: str) -> torch.dtype:
        return DTYPES[self._entries[key]["dtype"]]

    def data_offset(self, key: str) -> int:
        """Where the tensor's bytes start in the file."""
        return self._base + self._entries[key]["data_offsets"][0]

    def read(self, key: str) -> torch.Tensor:
        entry = self._entries[key]
        start, end = entry["data_offsets"]
        out = torch.empty(entry["shape"], dtype=DTYPES[entry["dtype"]])
        raw = out.reshape(-1).view(torch.uint8).numpy()
        if raw.nbytes != end - start:
            raise ValueError(f"{self.path}: {key} has {end - start} bytes, expected {raw.nbytes}")
        self._f.seek(self._base + start)
        if self._f.readinto(memoryview(raw)) != raw.nbytes:
            raise ValueError(f"{self.path}: truncated data for {key}")
        return out
