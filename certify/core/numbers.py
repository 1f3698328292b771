"""Exact numbers: a rational as text is ``"p/q"`` (or ``"p"``), never a float;
a numeric matrix is checked (2-D, real, finite) before any exact conversion.

Evidence in a certificate carries exact numbers in this form; the checker
parses the same strings with its own code (``certify.checkers.common.rational``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from certify.core.errors import InputError


def q_to_str(x: Fraction | int) -> str:
    """Exact rational -> ``"p/q"`` (or ``"p"`` for integers)."""
    x = Fraction(x)
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def str_to_q(s: str | int) -> Fraction:
    """``"p/q"`` or ``"p"`` (or an int) -> Fraction. Floats are rejected: they are
    not exact evidence."""
    if isinstance(s, bool) or isinstance(s, float):
        raise InputError(f"expected an exact rational, got {s!r}")
    if isinstance(s, int):
        return Fraction(s)
    if not isinstance(s, str):
        raise InputError(f"expected an exact rational string, got {type(s).__name__}")
    try:
        num, _, den = s.strip().partition("/")
        if not den:
            return Fraction(int(num))
        d = int(den)
        if d == 0:
            raise ZeroDivisionError
        return Fraction(int(num), d)
    except (ValueError, ZeroDivisionError):
        raise InputError(f"not an exact rational: {s!r}") from None


def check_matrix(a: Any, what: str = "matrix") -> np.ndarray:
    """A non-empty 2-D numeric array; NaN/Inf, ragged, complex, object data are bad input."""
    try:
        arr = np.asarray(a)
    except ValueError as exc:               # ragged nested lists
        raise InputError(f"{what}: not a rectangular array ({exc})") from None
    if arr.dtype == object:
        raise InputError(f"{what}: not a rectangular numeric array")
    if arr.ndim != 2:
        raise InputError(f"{what}: expected a 2-D matrix, got shape {arr.shape}")
    if arr.size == 0:
        raise InputError(f"{what}: empty matrix {arr.shape}")
    if np.iscomplexobj(arr):
        raise InputError(f"{what}: complex entries are not supported")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise InputError(f"{what}: non-finite entry {arr[tuple(bad)]} at {tuple(int(i) for i in bad)}")
    if arr.dtype.kind not in "biuf":
        raise InputError(f"{what}: unsupported dtype {arr.dtype}")
    return arr
