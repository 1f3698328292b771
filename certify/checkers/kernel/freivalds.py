"""The Freivalds test of a rank upper bound, its randomness and its error.

Statement. Let ``A`` be an integer matrix, ``M = A[R, C]`` (``r x r``) nonsingular
and ``B_ij = det A[R + {i}, C + {j}]`` its bordered minors, all zero iff
``rank A = r``, with ``|B_ij| <= H`` (:func:`certify.checkers.kernel.span.bound_sq`).
If ``rank A > r``, the test below (``Y = A X`` over Z; for each prime ``q``,
``W = M^-1 Y[R] mod q`` and ``A[:, C] W = Y mod q``) passes with probability at
most :func:`error` ``= 2^-(s t) + e^m`` over the draw of ``X`` (``t`` vectors of
``s``-bit entries) and ``m`` primes from a random oracle (SHAKE-256 of a challenge
hashing every field a producer chooses; the draw: :mod:`certify.checkers.rank.freivalds`),
with ``2^L > n2 (2^s - 1) H``, ``2^L_D > |det M|``,
``e = floor(L / 61) / (P - floor(L_D / 61))`` and ``P`` the primes in ``[2^61, 2^62)`` at
least (:func:`primes_lower`).

Proof (``rank A > r``, so ``B != 0``): a nonzero row ``b`` of ``B`` has
``b . x = 0`` for at most one value of one coordinate of ``x`` given the others,
so ``Pr[B X = 0] <= 2^-(s t)``; otherwise an entry ``v != 0`` of ``B X`` has
``|v| < 2^L``, at most ``floor(L / 61)`` prime factors in ``[2^61, 2^62)``, and
the test modulo ``q`` (``q`` not dividing ``det M``) misses it only when ``q | v``:
each uniform prime misses with probability ``<= e``.

Against a producer who retries. Each change of a hashed field is a fresh draw,
so an author who makes ``2^g`` attempts on a false claim succeeds with
probability at most ``2^(g - error_log2)`` (a union bound); the checker's floor
on ``error_log2`` is fixed (:data:`certify.checkers.rank.freivalds.FLOOR`)."""

from __future__ import annotations

from fractions import Fraction
from typing import Iterable

import numpy as np

from certify.checkers.kernel.matrices import fmpz_matrix

_QB = 62


def primes_lower() -> Fraction:
    """At least this many primes in ``[2^61, 2^62)``: ``pi(2^62) - pi(2^61) >
    2^62 / ln(2^62) - 1.25506 2^61 / ln(2^61)``, with ``0.693147 < ln 2 < 0.693148``."""
    return (Fraction(1 << _QB) / (_QB * Fraction(693148, 10 ** 6))
            - Fraction(125506, 10 ** 5) * (1 << (_QB - 1)) / ((_QB - 1) * Fraction(693147, 10 ** 6)))


def error(s: int, t: int, m: int, L: int, LD: int) -> Fraction:
    """``2^-(s t) + e^m`` (module docstring)."""
    e = Fraction(L // (_QB - 1)) / (primes_lower() - LD // (_QB - 1))
    return Fraction(1, 1 << (s * t)) + e ** m


def _digits(M: np.ndarray, b: int) -> list[tuple[np.ndarray, int]]:
    """``[(D_t, b t)]``: float64 digits ``0 <= D_t < 2^b`` with ``M = sum_t D_t 2^(b t)``
    (int64 ``M >= 0``)."""
    top = max(int(M.max(initial=0)).bit_length(), 1)
    return [(((M >> s) & ((1 << b) - 1)).astype(np.float64), s) for s in range(0, top, b)]


def product(A: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``A X`` over Z (Python ints) for int64 ``A`` and nonnegative int64 ``X``:
    both split into digits small enough that each float64 product is exact
    (``k 2^a 2^b <= 2^52`` for inner dimension ``k``)."""
    room = 52 - max(A.shape[1], 1).bit_length()                         # k 2^room <= 2^52
    abits = max(int(A.max(initial=0)), -int(A.min(initial=0))).bit_length()
    xbits = int(X.max(initial=0)).bit_length()
    if abits + xbits <= room:                                            # one exact product
        return (A.astype(np.float64) @ X.astype(np.float64)).astype(np.int64).astype(object)
    b = min(xbits, max(room - abits, room // 2))                         # X's digits, A's: room - b
    xs = _digits(X, b)
    sign = np.where(A < 0, -1.0, 1.0)
    out = np.zeros((A.shape[0], X.shape[1]), dtype=object)
    for Pa, sa in _digits(np.abs(A), room - b):
        for Px, sb in xs:
            out += ((Pa * sign) @ Px).astype(np.int64).astype(object) * (1 << (sa + sb))
    return out


def test(A: np.ndarray, R: list[int], C: list[int], X: np.ndarray, candidates: Iterable[int],
         m: int) -> tuple[bool, list[int]]:
    """``(passed, qs)``: ``qs`` the first ``m`` primes of ``candidates`` at which
    ``M = A[R, C]`` is invertible (fewer when they run out; ``nmod_mat.solve`` raises exactly
    when ``M`` is singular mod ``q``), ``passed`` whether ``A[:, C] W = A X (mod q)`` with
    ``W = M^-1 (A X)[R] mod q`` for each (module docstring). False proves ``rank A > len(C)``
    exactly (a nonzero residue of the Schur complement)."""
    import flint
    MZ = fmpz_matrix(A[np.ix_(R, C)])
    Y = product(A, X)                                                       # A X over Z
    AC = np.ascontiguousarray(A[:, C])
    YR = fmpz_matrix(Y[R])
    Ws: list[np.ndarray] = []
    qs: list[int] = []
    for q in candidates:
        try:
            W = flint.nmod_mat(MZ, q).solve(flint.nmod_mat(YR, q))          # M W = Y[R] mod q
        except ZeroDivisionError:
            continue
        Ws.append(np.array([int(v) for v in W.entries()], dtype=np.int64).reshape(len(C), -1))
        qs = qs + [q]
        if len(qs) == m:
            break
    if not Ws:
        return True, qs
    t = X.shape[1]
    D = product(AC, np.hstack(Ws)) - np.tile(Y, len(Ws))                    # A[:, C] W - Y, each q
    residues = (D[:, k * t:(k + 1) * t].ravel().tolist() for k in range(len(qs)))
    return all(not any(int(v) % q for v in res) for res, q in zip(residues, qs)), qs
