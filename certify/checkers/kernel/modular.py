"""Ranks modulo a prime: the lower bound of every exact rank claim.

Statement. If ``p`` is a prime and ``det A[R, C] != 0 (mod p)`` for an integer matrix ``A``, then ``det
A[R, C] != 0`` over the integers, so the ``|R| x |R|`` minor is nonsingular over Q and ``rank_Q A >=
|R|``. (Reduction modulo ``p`` is a ring homomorphism Z -> Z/p; it maps the integer determinant to the
determinant modulo ``p``, and the image of 0 is 0.) The determinant modulo ``p`` is computed by
python-flint's ``nmod_mat.det`` (exact arithmetic in Z/p); primality by ``fmpz.is_prime`` (deterministic
for the word-size primes used here).

:func:`pivot_minor_mod_p` fixes which minor a producer must record: the pivot columns ``C`` of ``rref(F
mod p)``, then the pivot columns of ``rref(F[:, C]^T mod p)`` as rows ``R``, so the producer has no choice
left.
"""

from __future__ import annotations

from typing import Any, Sequence


def det_nonzero_mod_p(M: Any, p: int) -> bool:
    """``det M != 0 (mod p)`` for a square ``fmpz_mat`` ``M`` and a prime ``p`` (primality
    checked by the caller)."""
    import flint
    return int(flint.nmod_mat(M, p).det()) != 0


def minor_nonzero_mod_p(F: Any, p: int, R: Sequence[int], C: Sequence[int]) -> bool:
    """``det F[R, C] != 0 (mod p)``, ``p`` prime, for a python-flint ``fmpz_mat`` ``F``: then
    ``rank_Q F >= len(R)`` (module docstring). False for anything that is not such a minor
    (repeated or out-of-range indices, unequal lengths, ``p`` not a prime); the empty minor
    (``R = C = []``) is nonsingular."""
    import flint
    if isinstance(p, bool) or not isinstance(p, int) or p < 2:
        return False
    if len(R) != len(C) or len(set(R)) != len(R) or len(set(C)) != len(C):
        return False
    if not all(0 <= i < F.nrows() for i in R) or not all(0 <= j < F.ncols() for j in C):
        return False
    if not R:
        return True
    if not flint.fmpz(p).is_prime():
        return False
    minor = _select(F.nrows(), R, p).transpose() * flint.nmod_mat(F, p) * _select(F.ncols(), C, p)
    return int(minor.det()) != 0


def _select(n: int, idx: Sequence[int], p: int) -> Any:
    """The ``n x len(idx)`` 0/1 matrix mod ``p`` whose column ``t`` is the unit vector
    ``idx[t]`` (``F S``: the columns ``idx`` of ``F``)."""
    import flint
    S = flint.nmod_mat(n, len(idx), p)
    for t, i in enumerate(idx):
        S[i, t] = 1
    return S


def rref_pivots(A: Any) -> list[int]:
    """The pivot columns of the reduced row echelon form of a python-flint ``nmod_mat`` ``A``
    (the first nonzero column of each of its ``rank`` rows)."""
    Rr, rk = A.rref()
    out: list[int] = []
    for i in range(rk):
        out.append(next(j for j in range(out[-1] + 1 if out else 0, A.ncols()) if int(Rr[i, j])))
    return out


def pivot_minor_mod_p(F: Any, p: int) -> tuple[list[int], list[int]]:
    """``(R, C)``: the canonical pivot minor of the ``fmpz_mat`` ``F`` modulo the prime ``p``
    (module docstring)."""
    import flint
    Fp = flint.nmod_mat(F, p)
    cols = rref_pivots(Fp)
    if not cols:
        return [], []
    rows = rref_pivots((Fp * _select(F.ncols(), cols, p)).transpose())
    return rows, cols
