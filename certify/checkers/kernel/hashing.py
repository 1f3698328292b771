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


def matrix_header(scale: Any, shape: Any, encoding: str) -> bytes:
    """The first line hashed into a matrix claim's ``matrix_sha256``: the canonical JSON of the
    encoding of the entries (``"int64"``: little-endian int64 bytes, row-major; ``"json"``: the
    compact JSON of the integer rows), the scale and the shape, and a newline. The hash binds the
    whole object: two matrices with the same entries in different shapes hash apart."""
    dims = [int(n) for n in shape]
    return (json.dumps({"encoding": encoding, "scale": scale, "shape": dims}, sort_keys=True,
                       separators=(",", ":")) + "\n").encode()


def array_sha256(A: Any, scale: Any) -> str:
    """A matrix claim's ``matrix_sha256`` of an int64 array: ``"int64:"`` + SHA-256 of
    :func:`matrix_header` and ``A``'s little-endian int64 bytes (row-major). ``A`` must be a
    two-dimensional int64 array (any other dtype is a caller's error, never cast)."""
    import numpy as np
    if not isinstance(A, np.ndarray) or A.dtype.kind != "i" or A.dtype.itemsize != 8 or A.ndim != 2:
        raise TypeError("array_sha256 takes a two-dimensional int64 array")
    h = hashlib.sha256(matrix_header(scale, A.shape, "int64"))
    h.update(np.ascontiguousarray(A, dtype="<i8").data)          # the bytes in place, no copy
    return "int64:" + h.hexdigest()


def rows_sha256(rows: list[list[int]], scale: Any) -> str:
    """``matrix_sha256`` of integer rows given as Python integers: :func:`array_sha256` of them
    when every entry fits in int64, else ``"json:"`` + SHA-256 of :func:`matrix_header` and the
    rows' compact JSON."""
    import numpy as np
    shape = (len(rows), len(rows[0]) if rows else 0)
    if all(-(1 << 63) <= v < (1 << 63) for r in rows for v in r):
        return array_sha256(np.array(rows, dtype="<i8").reshape(shape), scale)
    body = json.dumps(rows, separators=(",", ":")).encode()
    return "json:" + hashlib.sha256(matrix_header(scale, shape, "json") + body).hexdigest()


def float64_sha256(A: Any) -> str:
    """The ``values_sha256`` of a float64 matrix: ``"float64:"`` + SHA-256 of :func:`matrix_header`
    (encoding ``"float64"``, no scale: the values are the floats themselves) and ``A``'s little-endian
    float64 bytes (row-major). ``A`` must be a two-dimensional float64 array (never cast)."""
    import numpy as np
    if not isinstance(A, np.ndarray) or A.dtype != np.float64 or A.ndim != 2:
        raise TypeError("float64_sha256 takes a two-dimensional float64 array")
    h = hashlib.sha256(matrix_header(None, A.shape, "float64"))
    h.update(np.ascontiguousarray(A, dtype="<f8").data)
    return "float64:" + h.hexdigest()
