"""Ranks modulo a prime: the lower bound of every exact rank claim.

Statement. If ``p`` is a prime and ``det A[R, C] != 0 (mod p)`` for an integer
matrix ``A``, then ``det A[R, C] != 0`` over the integers, so the ``|R| x |R|``
minor is nonsingular over Q and ``rank_Q A >= |R|``. (Reduction modulo ``p`` is a
ring homomorphism Z -> Z/p; it maps the integer determinant to the determinant
modulo ``p``, and the image of 0 is 0.) The determinant modulo ``p`` is computed
by python-flint's ``nmod_mat.det`` (exact arithmetic in Z/p); primality by
``fmpz.is_prime`` (deterministic for the word-size primes used here).
"""

from __future__ import annotations

from typing import Any, Sequence


def det_nonzero_mod_p(M: Any, p: int) -> bool:
    """``det M != 0 (mod p)`` for a square python-flint ``fmpz_mat`` ``M`` and a
    prime ``p`` (the caller has checked primality)."""
    import flint
    return int(flint.nmod_mat(M, p).det()) != 0


def minor_nonzero_mod_p(F: Any, p: int, R: Sequence[int], C: Sequence[int]) -> bool:
    """``det F[R, C] != 0 (mod p)``, ``p`` prime, for a python-flint ``fmpz_mat``
    ``F``: then ``rank_Q F >= len(R)`` (module docstring). False for anything that
    is not such a minor (repeated or out-of-range indices, unequal lengths, ``p``
    not a prime); the empty minor (``R = C = []``) is nonsingular."""
    import flint
    if isinstance(p, bool) or not isinstance(p, int) or p < 2:
        return False
    if len(R) != len(C) or len(set(R)) != len(R) or len(set(C)) != len(C):
        return False
    if not R:
        return True
    if not flint.fmpz(p).is_prime():
        return False
    if any(not 0 <= i < F.nrows() for i in R) or any(not 0 <= j < F.ncols() for j in C):
        return False
    sub = flint.nmod_mat(len(R), len(C), [int(F[i, j]) % p for i in R for j in C], p)
    return int(sub.det()) != 0
