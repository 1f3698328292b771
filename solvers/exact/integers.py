"""Integer matrices and the lossless float -> integer conversion.

Every finite binary float is a dyadic rational ``mant * 2^e``; a matrix of
floats is ``N * 2^E`` for one integer matrix ``N`` and one exponent ``E``
(:func:`dyadic`). Rationals are made integral row by row (row scaling keeps
the rank). NaN and Inf are bad input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterable, Sequence

import numpy as np

from certify.core.errors import InputError
from certify.core.numbers import check_matrix


@dataclass(frozen=True, eq=False)
class IntMatrix:
    """An integer matrix: ``values`` is int64 when every entry fits, else an object
    array of Python ints. ``scale`` records what it represents: the source matrix
    is ``values * 2^exponent`` (dyadic) or ``diag(1/row_den) values`` (rational)."""

    values: np.ndarray
    exponent: int = 0
    row_den: tuple[int, ...] | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.values.shape[0]), int(self.values.shape[1]))

    def entries(self) -> list[int]:
        return [int(v) for v in self.values.ravel().tolist()]

    def rows(self) -> list[list[int]]:
        return [[int(v) for v in row] for row in self.values.tolist()]

    def fmpz(self, rows: Sequence[int] | None = None, cols: Sequence[int] | None = None) -> Any:
        return fmpz_matrix(_take(self.values, rows, cols))

    def nmod(self, p: int, rows: Sequence[int] | None = None, cols: Sequence[int] | None = None) -> Any:
        return nmod_matrix(_take(self.values, rows, cols), p)

    def max_bits(self) -> int:
        if self.values.size == 0:
            return 0
        return int_max_abs(self.values).bit_length()


def int_max_abs(a: np.ndarray) -> int:
    """``max |a|`` of an integer array (int64 or object) as a Python int, exactly: never
    ``np.abs`` on int64, which leaves ``-2^63`` negative. 0 for an empty array."""
    if a.size == 0:
        return 0
    return max(int(a.max()), -int(a.min()))


def int_max_abs_along(a: np.ndarray, axis: int) -> list[int]:
    """``max |a|`` along ``axis`` of a 2-D integer array, exactly, as Python ints."""
    return [max(int(h), -int(lo)) for h, lo in zip(a.max(axis).tolist(), a.min(axis).tolist())]


def _take(a: np.ndarray, rows: Sequence[int] | None, cols: Sequence[int] | None) -> np.ndarray:
    if rows is not None:
        a = a[np.asarray(rows, dtype=np.int64)]
    if cols is not None:
        a = a[:, np.asarray(cols, dtype=np.int64)]
    return a


def fmpz_matrix(a: np.ndarray) -> Any:
    import flint
    a = np.asarray(a)
    n1, n2 = a.shape
    return flint.fmpz_mat(n1, n2, [int(v) for v in a.ravel().tolist()])


def nmod_matrix(a: np.ndarray, p: int) -> Any:
    """Reduce an integer array (int64 or object) mod ``p`` into a flint ``nmod_mat``."""
    import flint
    a = np.asarray(a)
    n1, n2 = a.shape
    if a.dtype == object:
        flat = [int(v) % p for v in a.ravel().tolist()]
    else:
        flat = (a.astype(np.int64) % np.int64(p)).ravel().tolist() if p < (1 << 63) else \
            [int(v) % p for v in a.ravel().tolist()]
    return flint.nmod_mat(n1, n2, flat, p)


def _mantissas(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``arr = mant * 2^exp`` exactly with odd ``mant`` (int64) for nonzero entries
    (mant = 0, exp = 0 for zeros). ``arr`` is a finite float array."""
    x = arr.astype(np.float64)               # float16/32 -> float64 is exact
    f, e = np.frexp(x)
    mant = (f * float(1 << 53)).astype(np.int64)   # exact: |f| < 1, 53-bit significand
    exp = e.astype(np.int64) - 53
    nz = mant != 0
    low = mant & -mant                          # lowest set bit (a power of two)
    tz = np.zeros_like(mant)
    tz[nz] = np.frexp(low[nz].astype(np.float64))[1] - 1
    mant = np.where(nz, mant >> tz, 0)
    exp = np.where(nz, exp + tz, 0)
    return mant, exp


def _dyadic_int64(arr: np.ndarray) -> IntMatrix | None:
    """The vectorized conversion (a few whole-array passes) when the result fits
    int64: ``E0 = e - 62`` for ``max|x| = f 2^e`` (``f`` in [1/2, 1)) is the finest
    grid whose integers stay below ``2^62``; ``X = x 2^-E0`` (an exact power-of-two
    scaling, or a rounding that the next test sees) is integral everywhere iff
    every ``x`` is a multiple of ``2^E0`` (``trunc(X) == X``; ``trunc(X)`` has at
    most 53 significant bits, so comparing it in float64 is exact). The common
    trailing zeros of all ``X`` (their bitwise or) are then shifted out, so the
    exponent is canonical (a scaling down that flushes a tiny ``x`` to 0 is
    caught by counting nonzeros). None when some ``x`` has a bit below ``2^E0``: no
    int64 form exists, and the caller builds Python integers."""
    x = arr.astype(np.float64, copy=False)         # float16/32 -> float64 is exact
    amax = max(float(x.max()), -float(x.min()))
    if amax == 0.0:
        return IntMatrix(np.zeros(arr.shape, dtype=np.int64))
    E0 = int(np.frexp(amax)[1]) - 62
    X = np.ldexp(x, -E0)
    Xi = X.astype(np.int64)                        # truncation; |X| < 2^62
    if not (Xi == X).all():
        return None
    del X
    if E0 > 0 and np.count_nonzero(Xi) != np.count_nonzero(x):
        return None                                # scaling down flushed a tiny x to 0
    g = int(np.bitwise_or.reduce(Xi, axis=None))
    tz = (g & -g).bit_length() - 1
    if tz:
        Xi >>= tz
    return IntMatrix(Xi, exponent=E0 + tz)


def dyadic(a: Any, what: str = "matrix") -> IntMatrix:
    """Lossless integer form of a float or integer matrix: ``a = N * 2^E``.

    >>> d = dyadic(np.array([[0.5, 0.75], [3.0, 0.0]]))
    >>> d.values.tolist(), d.exponent
    ([[2, 3], [12, 0]], -2)
    """
    arr = check_matrix(a, what)
    if arr.dtype.kind in "biu":
        # bounds in Python integers (np.abs(-2^63) is -2^63 in int64, and a uint64 above
        # 2^63 - 1 wraps in int64): int64 only below 2^62 in magnitude, as compact() keeps it
        if -(1 << 62) <= int(arr.min()) and int(arr.max()) < (1 << 62):
            return IntMatrix(arr.astype(np.int64))
        return IntMatrix(np.array([[int(v) for v in row] for row in arr.tolist()], dtype=object))
    fast = _dyadic_int64(arr)
    if fast is not None:
        return fast
    mant, exp = _mantissas(arr)
    nz = mant != 0
    if not nz.any():
        return IntMatrix(np.zeros(arr.shape, dtype=np.int64))
    E = int(exp[nz].min())
    shift = np.where(nz, exp - E, 0)
    bits = np.zeros_like(mant)
    bits[nz] = np.frexp(np.abs(mant[nz]).astype(np.float64))[1]   # bit length (<= 53)
    if int((bits + shift).max()) <= 62:
        return IntMatrix(mant << shift, exponent=E)
    vals = np.empty(arr.shape, dtype=object)
    for idx, (m_, s_) in enumerate(zip(mant.ravel().tolist(), shift.ravel().tolist())):
        vals.flat[idx] = int(m_) << int(s_)
    return IntMatrix(vals, exponent=E)


def rational_rows(rows: Sequence[Sequence[Fraction]], what: str = "matrix") -> IntMatrix:
    """Integer matrix with the rank of a rational matrix: each row times the lcm of
    its denominators (``row_den``)."""
    if not rows or not rows[0]:
        raise InputError(f"{what}: empty matrix")
    n2 = len(rows[0])
    if any(len(r) != n2 for r in rows):
        raise InputError(f"{what}: ragged matrix")
    vals = np.empty((len(rows), n2), dtype=object)
    dens = []
    for i, row in enumerate(rows):
        L = 1
        for v in row:
            L = L * v.denominator // math.gcd(L, v.denominator)
        dens.append(L)
        for j, v in enumerate(row):
            vals[i, j] = v.numerator * (L // v.denominator)
    return IntMatrix(compact(vals), row_den=tuple(dens))


def compact(vals: np.ndarray) -> np.ndarray:
    """int64 when every entry fits, else keep the object array."""
    flat = vals.ravel().tolist()
    if all(-(1 << 62) <= int(v) < (1 << 62) for v in flat):
        return np.array(flat, dtype=np.int64).reshape(vals.shape)
    return vals


def dyadic_to_fraction(mant: int, exponent: int) -> Fraction:
    return Fraction(mant) * (Fraction(2) ** exponent)


def _obj(F: Any) -> np.ndarray:
    """flint integer matrix -> object array of Python ints."""
    out = np.empty((F.nrows(), F.ncols()), dtype=object)
    for i, row in enumerate(F.tolist()):
        out[i, :] = [int(v) for v in row]
    return out


def _zero(n1: int, n2: int) -> Any:
    import flint
    return flint.fmpz_mat(n1, n2)


def as_int_lists(values: np.ndarray) -> list[list[int]]:
    return [[int(v) for v in row] for row in np.asarray(values).tolist()]


def iter_int(values: Iterable) -> list[int]:
    return [int(v) for v in values]
