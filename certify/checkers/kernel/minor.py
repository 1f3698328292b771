"""Rank lower bounds from a minor nonsingular modulo a prime.

Statement: if ``p`` is prime and ``det F[R, C] != 0 (mod p)`` for index lists
``R``, ``C`` of equal length ``r`` (no repeats), then ``det F[R, C] != 0`` over Z
(a multiple of ``p`` would be 0 mod p), so ``rank_Q F >= r``. The converse does
not hold: a minor may be nonzero over Z and zero mod ``p``; then the check fails
(an honest refusal, never a wrong proof). :func:`minor_nonzero_mod_p` decides the
hypothesis exactly (primality by flint's deterministic test for the sizes used,
the determinant in ``Z/pZ`` by ``nmod_mat``).

:func:`pivot_minor_mod_p` returns the canonical minor a producer must record:
the pivot columns ``C`` of ``rref(F mod p)``, then the pivot columns of
``rref(F[:, C]^T mod p)`` as rows ``R``; fixing it removes the producer's choice.
"""
from typing import Any


def minor_nonzero_mod_p(F, p: Any, R: list[int], C: list[int]) -> bool:
    """``det F[R, C] != 0 (mod p)`` with ``p`` prime, for a flint ``fmpz_mat`` ``F``.
    False when ``p`` is not a prime integer >= 2, the index lists differ in length,
    repeat an index or leave the matrix; True for the empty minor."""
    import flint
    if len(R) != len(C) or len(set(R)) != len(R) or len(set(C)) != len(C):
        return False
    if not R:
        return True
    if isinstance(p, bool) or not isinstance(p, int) or p < 2 or not flint.fmpz(p).is_prime():
        return False
    if any(not 0 <= i < F.nrows() for i in R) or any(not 0 <= j < F.ncols() for j in C):
        return False
    sub = flint.nmod_mat(len(R), len(C), [int(F[i, j]) % p for i in R for j in C], p)
    return int(sub.det()) != 0


def pivot_minor_mod_p(F, p: int) -> tuple[list[int], list[int]]:
    """``(R, C)``: the canonical pivot minor of the flint ``fmpz_mat`` ``F`` mod ``p``."""
    import flint

    def pivots(A) -> list[int]:
        Rr, rk = A.rref()
        out, j = [], 0
        for i in range(rk):
            while int(Rr[i, j]) == 0:
                j += 1
            out.append(j)
            j += 1
        return out

    n1, n2 = F.nrows(), F.ncols()
    if not n1 or not n2:
        return [], []
    cols = pivots(flint.nmod_mat(n1, n2, [int(F[i, j]) % p for i in range(n1) for j in range(n2)], p))
    if not cols:
        return [], []
    sub = flint.nmod_mat(len(cols), n1, [int(F[i, j]) % p for j in cols for i in range(n1)], p)
    return pivots(sub), cols
