"""Seeded integer draws for the exact rank's random choices (its primes and
projections), from the standard library's Mersenne Twister (``random.Random``):
the same draws on every machine and Python version for a given seed, and no
import of ``numpy.random`` (a third of the numpy script's run on a 512 x 512
matrix; ``certify rank`` starts in less).

Nothing drawn here is trusted: a poor prime or projection makes an exact check
fail (and the caller retries or falls back), so the draws need to be uniform
only for the stated success probabilities, which they are (``getrandbits``
masked to a power of two, rejection otherwise).
"""

from __future__ import annotations

import random
from typing import Any, Protocol

import numpy as np


class IntegerDraws(Protocol):
    """What the exact rank draws with: ``integers(low, high)`` (a Python int) and
    ``integers(low, high, shape)`` (an int64 array), uniform on ``[low, high)``.
    :class:`Draws`; a ``numpy.random.Generator`` also has it."""

    def integers(self, low: int, high: int, size: Any = None) -> Any: ...


class Draws:
    """Uniform integers on ``[low, high)`` from ``random.Random(seed)``: scalars by
    ``randrange``, arrays (``high - low <= 2^32``) from ``randbytes`` as
    little-endian uint32 masked to the range's bit length, out-of-range values
    redrawn."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def integers(self, low: int, high: int, size: Any = None) -> Any:
        if high <= low:
            raise ValueError("empty range")
        if size is None:
            return self._rng.randrange(low, high)
        shape = (size,) if isinstance(size, int) else tuple(size)
        width, count = high - low, int(np.prod(shape))
        if width > 1 << 32:
            raise ValueError("array draws span at most 2^32 values")
        mask = np.uint32((1 << (width - 1).bit_length()) - 1)
        out = np.empty(0, dtype=np.int64)
        while len(out) < count:
            need = count - len(out) if width & (width - 1) == 0 else 2 * (count - len(out)) + 64
            u = np.frombuffer(self._rng.randbytes(4 * need), dtype="<u4") & mask
            out = np.concatenate((out, u[u < width].astype(np.int64)))
        return (out[:count] + low).reshape(shape)
