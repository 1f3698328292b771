"""Content binding by hash.

``canonical_sha256(obj)`` is the SHA-256 (hex) of the canonical JSON of ``obj`` (keys sorted, no spaces,
Python's JSON encoder). Two JSON values have the same canonical text exactly when they are equal with the
same key sets and number spellings, so the hash binds a certificate field to its content (up to SHA-256
collisions, the one cryptographic assumption of the checker)."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_sha256(obj: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of ``obj`` (module docstring)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

def array_sha256(A: Any, scale: Any) -> str:
    """A matrix claim's ``matrix_sha256`` of int64 data: ``"int64:"`` + SHA-256 of the canonical JSON of the
    scale, a newline, and ``A``'s little-endian int64 bytes (row-major)."""
    import numpy as np
    h = hashlib.sha256((json.dumps(scale, sort_keys=True, separators=(",", ":")) + "\n").encode())
    h.update(np.ascontiguousarray(A, dtype="<i8").data)          # the bytes in place, no copy
    return "int64:" + h.hexdigest()
