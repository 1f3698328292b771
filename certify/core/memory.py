"""Give a long command's freed heap back to the kernel between its phases.

A command runs with glibc's heap kept for reuse (:mod:`certify.__main__`: arrays
below 1 GB come from malloc's heap, which is trimmed only past 2 GB free at its top),
so the temporaries of one layer or one head are reused by the next without the
kernel zeroing fresh pages (that was 8-17 % of a checkpoint's CPU as system time).
What a finished phase freed stays in the process's resident set until then: a
24-layer checkpoint held every layer's high-water mark at once. :func:`trim` asks
glibc (``malloc_trim(0)``, which also returns free pages inside the heap, not only
at its top) to give back what is free at a phase boundary: a layer's end, before
the certificate is written. The values computed do not depend on it.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

__all__ = ["trim"]

_TRIM: list[Any] = []          # [glibc's malloc_trim or None], looked up once


def trim() -> bool:
    """Return the free heap to the kernel (glibc's ``malloc_trim(0)``); True when some
    memory was given back, False when none was or the C library has no such call."""
    if not _TRIM:
        fn: Any = None
        if sys.platform == "linux":
            try:
                fn = ctypes.CDLL(None).malloc_trim
                fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
            except (OSError, AttributeError):        # not glibc (musl has no malloc_trim)
                fn = None
        _TRIM.append(fn)
    return bool(_TRIM[0](0)) if _TRIM[0] is not None else False
