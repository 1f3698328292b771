"""Positive semidefiniteness, by one method: exact symmetric elimination.

Statement. A symmetric rational matrix ``M`` is positive semidefinite exactly when symmetric Gaussian
elimination without pivoting (``M = L D L^T``) meets no negative pivot, and every zero pivot has a zero
remaining column. Proof: the step at pivot ``d = M[k, k] > 0`` replaces the trailing block by its Schur
complement ``S = B - b b^T / d``, and ``M`` is PSD iff ``S`` is (congruence by a unit triangular matrix);
at ``d < 0`` the vector ``e_k`` gives ``e_k^T M e_k < 0``; at ``d = 0`` with ``M[i, k] != 0`` the 2 x 2
principal minor on ``{k, i}`` is ``-M[i, k]^2 < 0``; at ``d = 0`` with a zero column the step drops row
and column ``k``. Positive definite: every pivot ``> 0``. Arithmetic is exact (python-flint rationals
``fmpq``), by blocks where it can: with the leading block ``A`` positive definite, ``[[A, B], [B^T, C]]``
is congruent to ``diag(A, C - B^T A^-1 B)``, so it is PSD (PD) iff that Schur complement is
(python-flint's ``solve``); else pivot by pivot.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Sequence


def _rows(M: Any) -> list[list[Any]]:
    """``M`` (rows of ints / Fractions / ``"p/q"``, or an ``fmpz_mat`` / ``fmpq_mat``) as ``fmpq`` rows."""
    import flint
    q = lambda v: flint.fmpq(v) if isinstance(v, (flint.fmpz, flint.fmpq)) else flint.fmpq(
        *Fraction(v).as_integer_ratio())
    return [[q(v) for v in row] for row in (M.tolist() if hasattr(M, "nrows") else M)]


def _pivots(A: list[list[Any]], strict: bool) -> bool:
    n = len(A)                                          # square and symmetric (the callers' check)
    for k in range(n):
        d = A[k][k]
        if d < 0 or (d == 0 and (strict or any(A[i][k] != 0 for i in range(k + 1, n)))):
            return False
        for i in range(k + 1, n) if d != 0 else ():
            if A[i][k] != 0:
                f = A[i][k] / d
                A[i][k:] = [a - f * b for a, b in zip(A[i][k:], A[k][k:])]
    return True


def _blocks(A: list[list[Any]], strict: bool) -> bool:
    n, h = len(A), len(A) // 2
    if n <= 32:
        return _pivots(A, strict)
    if not _blocks([r[:h] for r in A[:h]], True):       # a principal block of a PD matrix is PD
        return False if strict else _pivots(A, strict)
    import flint
    B, C = flint.fmpq_mat([r[h:] for r in A[:h]]), flint.fmpq_mat([r[h:] for r in A[h:]])
    return _blocks((C - B.transpose() * flint.fmpq_mat([r[:h] for r in A[:h]]).solve(B)).tolist(), strict)


def is_psd(M: Sequence[Sequence[Any]] | Any, strict: bool = False) -> bool:
    """Is the square matrix ``M`` symmetric and positive semidefinite (definite when ``strict``)? (a
    non-symmetric one is not)"""
    A = _rows(M)
    n = len(A)
    if not all(len(r) == n for r in A):
        return False                                    # not square
    if not all(A[i][j] == A[j][i] for i in range(n) for j in range(i)):
        return False                                    # not symmetric
    return _blocks(A, strict)


def is_positive_definite(M: Sequence[Sequence[Any]] | Any) -> bool:
    """Is the square matrix ``M`` symmetric and positive definite (every pivot > 0)?"""
    return is_psd(M, True)


def is_psd_by_rank(G: Any, part_is_pd: Any, p: int = (1 << 61) - 1) -> bool:
    """True when a symmetric integer ``fmpz_mat`` ``G`` is proved PSD through a principal part: with ``S``
    the pivot columns of ``rref(G mod p)``, ``|S| = rank_Q G`` (python-flint's exact ``rank``) and ``G[S,
    S]`` nonsingular mod ``p`` (so over Q) make the Schur complement of ``G[S, S]`` zero: ``G`` is PSD iff
    ``G[S, S]`` is positive definite, which ``part_is_pd(S)`` must prove. False means only: not proved
    this way."""
    from certify.checkers.kernel.modular import pivot_minor_mod_p
    R, S = pivot_minor_mod_p(G, p)
    return R == S and len(S) == G.rank() and bool(part_is_pd(S))
