"""Exact numbers: a rational as text is ``"p/q"`` (or ``"p"``), never a float;
a numeric matrix is checked (2-D, real, finite, of a dtype read exactly) before
any exact conversion.

Dtypes read exactly (:func:`exact_dtype_problem`): bool, (u)int8..64 (as Python
integers: a uint64 above 2^63 - 1 is never wrapped) and float16/32/64 (each a
dyadic rational, ``Fraction(float(x))`` exactly). Everything else is refused:
``longdouble`` / ``float128`` (``float()`` would round it to float64), complex,
object, datetime and timedelta, strings and bytes, void and structured arrays.

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


#: array kinds and item sizes whose every value is exactly a Python int or a float64
EXACT_DTYPES = {"b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (2, 4, 8)}


def exact_dtype_problem(dtype: Any) -> str | None:
    """None when every value of ``dtype`` is read exactly (module docstring), else why not.
    Byte order does not matter (numpy converts it exactly)."""
    dt = np.dtype(dtype)
    if dt.fields is not None or dt.subdtype is not None:
        return f"structured dtype {dt}"
    if dt.itemsize in EXACT_DTYPES.get(dt.kind, ()):
        return None
    if dt.kind == "f":
        return (f"dtype {dt.name} ({dt.itemsize * 8}-bit extended float) is not read exactly here "
                "(converting it would round); save the matrix as float64 or as exact p/q text")
    if dt.kind == "c":
        return f"complex entries are not supported (dtype {dt.name})"
    return f"unsupported dtype {dt.name or dt.str} (numbers are bool, (u)int8..64 or float16/32/64)"


def check_matrix(a: Any, what: str = "matrix") -> np.ndarray:
    """A non-empty 2-D numeric array of an exactly read dtype (:func:`exact_dtype_problem`);
    NaN/Inf, ragged, complex, object, longdouble data are bad input."""
    try:
        arr = np.asarray(a)
    except ValueError as exc:               # ragged nested lists
        raise InputError(f"{what}: not a rectangular array ({exc})") from None
    if arr.dtype == object:
        raise InputError(f"{what}: not a rectangular numeric array")
    if (why := exact_dtype_problem(arr.dtype)) is not None:
        raise InputError(f"{what}: {why}")
    if arr.ndim != 2:
        raise InputError(f"{what}: expected a 2-D matrix, got shape {arr.shape}")
    if arr.size == 0:
        raise InputError(f"{what}: empty matrix {arr.shape}")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise InputError(f"{what}: non-finite entry {arr[tuple(bad)]} at {tuple(int(i) for i in bad)}")
    return arr


def exact_product(A: Any, B: Any) -> np.ndarray:
    """``A @ B`` exactly, for 2-D arrays of rationals (ints, Fractions): python-flint's
    ``fmpq_mat`` product, returned as an object array of Fractions. The same numbers as
    ``np.dot`` of the object arrays, which multiplies and reduces Fraction by Fraction
    (tests/test_exact.py compares the two)."""
    import flint

    A, B = np.asarray(A, dtype=object), np.asarray(B, dtype=object)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"shapes {A.shape} and {B.shape} do not multiply")
    (n, k), m = A.shape, B.shape[1]
    out = np.empty((n, m), dtype=object)
    if n * m == 0:
        return out
    if k == 0:
        out.fill(Fraction(0))
        return out

    def fmpq_mat(X: np.ndarray) -> Any:
        entries = [Fraction(v) for v in X.ravel().tolist()]
        return flint.fmpq_mat(X.shape[0], X.shape[1],
                              [flint.fmpq(v.numerator, v.denominator) for v in entries])

    P = fmpq_mat(A) * fmpq_mat(B)
    flat = [Fraction(int(q.p), int(q.q)) for q in P.entries()]
    out[:] = np.array(flat, dtype=object).reshape(n, m)
    return out
