"""Ranks and minors modulo primes, and the exact span check by python-flint.

Lower bound: ``rank_p(N) <= rank_Q(N)`` for every prime ``p``; a minor whose
determinant is nonzero mod ``p`` is nonzero over Z, so the evidence is the
prime and the minor's row and column indices. Upper bound (matrix form): with
``M = N[R, C]`` nonsingular, every column is in the span of the columns ``C``
iff ``N[:, C] Y = N[:, notC]`` for ``Y = M^-1 N[R, notC]``; :func:`span_check`
solves it exactly with python-flint (any entry size); the float64 multimodular
check of large int64 matrices is :mod:`solvers.exact.span`, and the canonical minor
of a large int64 matrix by blocked elimination in BLAS is
:mod:`solvers.exact.elimination`.
"""

from __future__ import annotations

from typing import Any, Sequence

from solvers.exact.draws import IntegerDraws
from solvers.exact.integers import IntMatrix


def random_prime(rng: IntegerDraws, bits: int = 60) -> int:
    """A uniformly drawn ``bits``-bit start, then the next prime (deterministic test)."""
    import flint
    if not 8 <= bits <= 63:
        raise ValueError("prime size must be 8..63 bits")
    x = int(rng.integers(1 << (bits - 1), 1 << bits)) | 1
    while not flint.fmpz(x).is_prime():
        x += 2
    return x


def _pivots(R: Any, rank: int, ncols: int) -> list[int]:
    """Pivot columns of an rref ``nmod_mat``: O(rank + ncols) entry reads."""
    piv, j = [], 0
    for i in range(rank):
        while int(R[i, j]) == 0:
            j += 1
        piv.append(j)
        j += 1
    return piv


def minor_mod_p(N: IntMatrix, p: int) -> tuple[int, list[int], list[int]]:
    """``(rank mod p, rows, cols)`` with ``N[rows, cols]`` nonsingular mod ``p``."""
    n1, n2 = N.shape
    R, rk = N.nmod(p).rref()
    if rk == 0:
        return 0, [], []
    cols = _pivots(R, rk, n2)
    sub = N.nmod(p, cols=cols).transpose()          # (rk, n1)
    R2, rk2 = sub.rref()
    rows = _pivots(R2, rk2, n1)
    if rk2 != rk or N.nmod(p, rows, cols).det() == 0:   # cannot happen; never trust silently
        raise RuntimeError("internal error: modular minor is singular")
    return rk, rows, cols


def span_check(N: IntMatrix, rows: Sequence[int], cols: Sequence[int], *, block: int = 256) -> bool:
    """Exact: every column of ``N`` lies in the span of ``N[:, cols]``, given that
    ``N[rows, cols]`` is nonsingular. True proves ``rank(N) <= len(cols)``.
    Columns are checked in blocks (``Y`` has entries of ~r log|N| bits)."""
    n2 = N.shape[1]
    cset = set(cols)
    other = [j for j in range(n2) if j not in cset]
    if not other:
        return True
    M = N.fmpz(rows, cols)
    NC = N.fmpz(None, cols)
    for s in range(0, len(other), block):
        blk = other[s:s + block]
        Yn, den = M.solve(N.fmpz(rows, blk)).numer_denom()     # (r, b), N[R,C] Y = N[R,blk]
        if NC * Yn != N.fmpz(None, blk) * den:
            return False
    return True
