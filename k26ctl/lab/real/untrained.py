"""The garbage twin of the tiny model: the same files, architecture and tokenizer, untrained weights.

Every tensor of the trained model's safetensors file is replaced by values drawn from a seeded
`random.Random` (normal, std 0.02, as a fresh Llama is initialised; norm weights 1.0), written in the
same dtype. Pure Python, so the bytes are the same on every machine. Served by real SGLang it loads,
answers /health 200 and produces token soup: the case smoke exists for.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
from pathlib import Path

WEIGHTS = "model.safetensors"
INIT_STD = 0.02
_PACK = {"F32": ("<f", 4), "BF16": ("<f", 2), "F16": ("<e", 2)}


def _header(path: Path) -> tuple[dict[str, dict[str, object]], dict[str, str]]:
    with path.open("rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    meta = header.pop("__metadata__", {})
    return header, meta


def _values(count: int, dtype: str, norm: bool, rng: random.Random) -> bytes:
    fmt, _width = _PACK[dtype]
    floats = [1.0] * count if norm else [rng.gauss(0.0, INIT_STD) for _ in range(count)]
    if dtype == "BF16":  # the upper half of each float32
        raw = struct.pack(f"<{count}f", *floats)
        return b"".join(raw[i + 2 : i + 4] for i in range(0, len(raw), 4))
    return struct.pack(f"<{count}{fmt[1]}", *floats)


def write_untrained(trained: Path, out: Path, seed: int = 7) -> Path:
    """Copy `trained` to `out` with every weight re-drawn; returns `out`."""
    header, meta = _header(trained / WEIGHTS)
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    for item in trained.iterdir():
        if item.name not in (WEIGHTS, "SHA256SUMS") and item.is_file():
            shutil.copy2(item, out / item.name)
    names = sorted(header, key=lambda n: header[n]["data_offsets"][0])  # type: ignore[index]
    blobs: list[bytes] = []
    offset = 0
    new_header: dict[str, object] = {}
    for name in names:
        info = header[name]
        dtype = str(info["dtype"])
        if dtype not in _PACK:
            raise ValueError(
                f"{trained / WEIGHTS}: tensor {name} has dtype {dtype}, not one of {sorted(_PACK)}"
            )
        shape = [int(x) for x in info["shape"]]  # type: ignore[attr-defined]
        count = 1
        for dim in shape:
            count *= dim
        blob = _values(count, dtype, name.endswith("norm.weight"), rng)
        new_header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if meta:
        new_header["__metadata__"] = meta
    text = json.dumps(new_header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with (out / WEIGHTS).open("wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    return out
