"""A model named by its weights: the canonical sha256 of a tensor set
(standard library only).

The hash covers, for every tensor in the order of its name: the name, the dtype
(``float32``, ``bfloat16``, ...), the shape, and the bytes (C order,
little-endian). It does not depend on how the weights were saved: a
safetensors file, a torch file, a sharded checkpoint or a training dict
holding the same tensors under the same names have the same hash. The
producer computes it from the tensors it loaded
(:func:`certify.sources.tensor_hash.weights_sha256`); verify recomputes it
from a present safetensors file here (:func:`safetensors_sha256`) or takes it
from the extraction replay.

>>> tensor_set_sha256([("w", "float32", (1,), b"\\x00\\x00\\x80?")])[:16]
'06d9104ce489c497'
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Iterable

FORMAT = "certify-attention/tensor-set/1"

#: safetensors dtype codes -> canonical names, and bytes per element
SAFETENSORS_DTYPES = {"F64": ("float64", 8), "F32": ("float32", 4), "F16": ("float16", 2),
                      "BF16": ("bfloat16", 2), "I64": ("int64", 8), "I32": ("int32", 4),
                      "I16": ("int16", 2), "I8": ("int8", 1), "U8": ("uint8", 1),
                      "BOOL": ("bool", 1)}
#: largest safetensors header read here (the format allows up to 100 MB)
MAX_HEADER = 100 << 20


class TensorFileError(Exception):
    """Not a readable safetensors file."""


def tensor_set_sha256(tensors: Iterable[tuple[str, str, tuple[int, ...], bytes]]) -> str:
    """The canonical hash of ``(name, dtype, shape, little-endian C-order bytes)``
    tuples; names must be distinct."""
    items = sorted(tensors, key=lambda t: t[0])
    names = [t[0] for t in items]
    if len(set(names)) != len(names):
        raise ValueError("tensor names are not distinct")
    h = hashlib.sha256(FORMAT.encode() + b"\n")
    for name, dtype, shape, data in items:
        head = json.dumps({"name": name, "dtype": dtype, "shape": [int(d) for d in shape],
                           "bytes": len(data)}, sort_keys=True, separators=(",", ":"))
        h.update(head.encode() + b"\n")
        h.update(data)
    return h.hexdigest()


def read_safetensors(path: str | Path) -> list[tuple[str, str, tuple[int, ...], bytes]]:
    """The tensors of a safetensors file as ``(name, dtype, shape, bytes)``,
    parsed here from the format (8-byte header length, JSON header, data)."""
    p = Path(path)
    size = p.stat().st_size
    with open(p, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise TensorFileError("truncated header")
        n = struct.unpack("<Q", head)[0]
        if not 2 <= n <= min(MAX_HEADER, size - 8):
            raise TensorFileError("bad header length")
        try:
            meta = json.loads(f.read(n))
        except (ValueError, UnicodeDecodeError):
            raise TensorFileError("header is not JSON") from None
        if not isinstance(meta, dict):
            raise TensorFileError("header is not an object")
        data = f.read()
    out = []
    for name, info in meta.items():
        if name == "__metadata__":
            continue
        try:
            dtype, width = SAFETENSORS_DTYPES[info["dtype"]]
            shape = tuple(int(d) for d in info["shape"])
            a, b = (int(v) for v in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise TensorFileError(f"tensor {name!r:.60}: unreadable entry") from None
        count = 1
        for d in shape:
            count *= d
        if not 0 <= a <= b <= len(data) or b - a != count * width:
            raise TensorFileError(f"tensor {name!r:.60}: offsets do not match its shape")
        out.append((name, dtype, shape, data[a:b]))
    return out


def safetensors_sha256(path: str | Path) -> str:
    """The canonical weights hash of a safetensors file."""
    return tensor_set_sha256(read_safetensors(path))
