"""Exact integer matrix products: identities and signs; a linear minimum over a box.

Statements. For integer matrices the products below are computed exactly by python-flint (``fmpz_mat``,
arbitrary precision), so

* ``product_identity(A, B, C, d, c)`` is true exactly when ``c A B = d C`` over the integers (the columns
  of ``C`` lie in the span of ``A``'s with coefficients ``c B / d``);
* ``product_min(Q, K)`` is the least entry of ``Q K^T``: ``>= 0`` exactly when every ``<q_x, k_z>`` is
  (scaled by a positive power of two, the sign of ``alpha(x, z)``).
* ``box_minimum(c, lo, hi)``: for rationals ``c_i`` and ``lo_i <= hi_i``, ``min { sum_i c_i v_i : lo_i <=
  v_i <= hi_i } = sum_i min(c_i lo_i, c_i hi_i)``: the objective separates, and each term is linear in
  ``v_i``, so its minimum over ``[lo_i, hi_i]`` sits at an end point (exact, ``Fraction``): the bound a
  dual-feasible point gives on every primal point of a box. For an empty box (some ``lo_i > hi_i``) the
  sum is no minimum (the caller's containment check fails first).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Iterable

from certify.checkers.kernel.matrices import fmpz_matrix


def product_identity(A: Any, B: Any, C: Any, d: int = 1, c: int = 1) -> bool:
    """``c A B == d C`` exactly over the integers (module docstring)."""
    A, B, C = fmpz_matrix(A), fmpz_matrix(B), fmpz_matrix(C)
    if A.ncols() != B.nrows() or (A.nrows(), B.ncols()) != (C.nrows(), C.ncols()):
        return False
    return bool(A * B * int(c) == C * int(d))


def product_min(Q: Any, K: Any) -> int | None:
    """The least entry of ``Q K^T`` (``None`` when it is empty), exactly."""
    Q, K = fmpz_matrix(Q), fmpz_matrix(K)
    if Q.nrows() == 0 or K.nrows() == 0:
        return None
    if Q.ncols() != K.ncols():
        raise ValueError("Q and K need the same number of columns")
    return min(int(v) for v in (Q * K.transpose()).entries())


def column_span_rational(F: Any, R: list[int], C: list[int], block: int = 256) -> bool:
    """Every column of the integer matrix ``F`` lies in the span of its columns ``C`` over Q (so ``rank_Q F
    <= |C|``), given ``M = F[R, C]`` nonsingular: for each block of other columns, ``Y = M^-1 F[R, blk] =
    Yn / den`` (exact) and ``F[:, C] Yn = den F[:, blk]`` (:func:`product_identity`); a column in the span
    has its coordinates fixed by the rows ``R``, so one outside it fails."""
    import flint
    n1, n2 = F.nrows(), F.ncols()
    if not C:                                    # the span of no columns is {0}
        return all(F[i, j] == 0 for i in range(n1) for j in range(n2))
    other = sorted(set(range(n2)) - set(C))
    M = flint.fmpz_mat([[F[i, j] for j in C] for i in R])
    FC = flint.fmpz_mat([[F[i, j] for j in C] for i in range(n1)])
    for s in range(0, len(other), block):
        blk = other[s:s + block]
        Y = M.solve(flint.fmpz_mat([[F[i, j] for j in blk] for i in R]))          # an fmpq_mat
        Yn, den = Y.numer_denom()  # type: ignore[attr-defined]
        if not product_identity(FC, Yn, flint.fmpz_mat([[F[i, j] for j in blk] for i in range(n1)]),
                                int(den)):
            return False
    return True


def box_minimum(c: Iterable, lo: Iterable, hi: Iterable) -> Fraction:
    """``sum_i min(c_i lo_i, c_i hi_i)`` exactly (equal lengths required)."""
    c, lo, hi = list(c), list(lo), list(hi)
    if not len(c) == len(lo) == len(hi):
        raise ValueError("box_minimum: c, lo and hi differ in length")
    return sum((min(Fraction(a) * l, Fraction(a) * h) for a, l, h in zip(c, lo, hi)), Fraction(0))
