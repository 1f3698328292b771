"""A Freivalds-type test of the column-span upper bound, with its randomness drawn
from a challenge (Fiat-Shamir): O(n^2 t) for ``t`` vectors, error <= 2^-k.

Claim tested. ``M = N[R, C]`` (``r x r``) is nonsingular, ``D = det M``; the
bordered minors ``B_ij = det N[R + {i}, C + {j}] = D (N - N[:, C] M^-1 N[R, :])_ij``
all vanish iff ``rank N = r`` (:mod:`solvers.exact.span`). ``|B_ij| <= H``
(``H^2`` = :func:`solvers.exact.span.bordered_minor_bound_sq`).

Test. ``X`` (``n2 x t``) has entries uniform in ``{0, ..., 2^s - 1}``;
``Y = N X`` is computed exactly over Z (float64 products of ``h``-bit planes of
``N``, each exact below 2^53). For each of ``m`` primes ``q`` (uniform among
the primes in ``[2^61, 2^62)`` at which ``M`` is invertible), solve
``M W = Y[R] mod q`` and require ``N[:, C] W = Y mod q``; that is
``D^-1 B X = 0 mod q``.

Error (``rank N > r``, so ``B != 0``):

* vectors: a nonzero row ``b`` of ``B`` has some ``b_j != 0``; for any values of
  the other entries of a column ``x`` at most one value of ``x_j`` makes
  ``b . x = 0``, so ``Pr[b . x = 0] <= 2^-s``, and ``Pr[B X = 0] <= 2^-(s t)``
  over ``t`` independent columns;
* primes: otherwise some entry ``v`` of ``V = B X`` is a nonzero integer with
  ``|v| <= n2 (2^s - 1) H < 2^L``; it has at most ``floor(L / 61)`` prime
  factors ``>= 2^61``. The test misses it modulo ``q`` only when ``q | v``.
  ``q`` is uniform over the primes of ``[2^61, 2^62)`` not dividing ``D``;
  there are at least ``P - floor(L_D / 61)`` of them, ``2^L_D`` bounding
  ``|D|`` (Hadamard) and ``P >= 2^62 / ln 2^62 - 1.25506 * 2^61 / ln 2^61``
  (Rosser-Schoenfeld and Dusart: ``x / ln x < pi(x) < 1.25506 x / ln x`` for
  ``x >= 17``). So one prime misses with probability at most
  ``e = floor(L / 61) / (P - floor(L_D / 61))``, and all ``m`` with ``e^m``.

In total ``Pr[pass | rank > r] <= 2^-(s t) + e^m``; ``s, t, m`` are chosen so
that this is at most ``2^-k``. The probabilities are over the challenge: the
vectors and primes are read from SHAKE-256 of it (:func:`challenge_vectors`,
:func:`candidate_primes`), and the challenge is the hash of the claim's content
(matrix hash, minor, prime, ``k``), so they are reproducible from the
certificate and a producer cannot choose them (each changed claim gives fresh
ones; the hash is modelled as a random oracle).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Iterator, Sequence

import numpy as np

from solvers.exact.integers import int_max_abs
from solvers.exact.span import bordered_minor_bound_sq, row_sq

#: primes are drawn from [2^(QBITS-1), 2^QBITS): word size for nmod_mat
QBITS = 62
#: a lower bound on ln 2 and an upper one (ln 2 = 0.69314718...)
_LN2_LO, _LN2_HI = Fraction(693147, 10 ** 6), Fraction(693148, 10 ** 6)


def primes_in_range_lower() -> Fraction:
    """A lower bound on the number of primes in ``[2^(QBITS-1), 2^QBITS)``:
    ``pi(x) > x / ln x`` and ``pi(x) < 1.25506 x / ln x`` (``x >= 17``)."""
    hi, lo = 1 << QBITS, 1 << (QBITS - 1)
    return Fraction(hi) / (QBITS * _LN2_HI) - Fraction(125506, 10 ** 5) * lo / ((QBITS - 1) * _LN2_LO)


def miss_per_prime(L: int, LD: int) -> Fraction:
    """``e = floor(L / (QBITS-1)) / (P - floor(LD / (QBITS-1)))`` (module docstring)."""
    return Fraction(L // (QBITS - 1)) / (primes_in_range_lower() - LD // (QBITS - 1))


def error_bound(s: int, t: int, m: int, L: int, LD: int) -> Fraction:
    """``2^-(s t) + e^m``: the probability that a matrix of larger rank passes."""
    return Fraction(1, 1 << (s * t)) + miss_per_prime(L, LD) ** m


@dataclass(frozen=True)
class FreivaldsPlan:
    vector_bits: int         # s
    vectors: int             # t
    num_primes: int          # m
    L: int                   # |B X| < 2^L
    LD: int                  # |det M| < 2^LD
    error: Fraction          # 2^-(s t) + e^m <= 2^-k


@dataclass(frozen=True)
class FreivaldsResult:
    passed: bool             # False: some residue is nonzero, so rank N > r (exact)
    plan: FreivaldsPlan
    primes: tuple[int, ...]


def vector_bits(max_abs: int, n2: int) -> int:
    """``s`` with ``n2 2^s max|N| < 2^52`` when that leaves at least 8 bits (one
    float product), else 16 (planes of ``N``)."""
    s = 52 - max(max_abs, 1).bit_length() - n2.bit_length()
    return min(s, 20) if s >= 8 else 16


def hadamard_bits(M: np.ndarray) -> int:
    """``LD`` with ``|det M| < 2^LD`` (Hadamard: the product of the row norms; the
    squared norms exactly, :func:`solvers.exact.span.row_sq`)."""
    sq = math.prod(row_sq(np.asarray(M))) if M.shape[0] else 1
    return (math.isqrt(sq) + 1).bit_length()


def plan(V: np.ndarray, rows: Sequence[int], cols: Sequence[int], k: int,
         bound_sq: Callable[[np.ndarray, list, list], int] | None = None) -> FreivaldsPlan:
    """``s, t, m`` for error ``<= 2^-k``: ``2^-(s t) <= 2^-(k+1)`` and ``e^m <= 2^-(k+1)``.
    ``bound_sq(V, rows, cols)``: the bordered-minor bound squared, when the caller has one
    (default :func:`solvers.exact.span.bordered_minor_bound_sq`)."""
    n2 = V.shape[1]
    s = vector_bits(int_max_abs(V), n2)
    t = -(-(k + 1) // s)
    H = math.isqrt((bound_sq or bordered_minor_bound_sq)(V, list(rows), list(cols))) + 1
    L = (n2 * ((1 << s) - 1) * H).bit_length()
    LD = hadamard_bits(V[np.ix_(np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))])
    e, m = miss_per_prime(L, LD), 1
    while e ** m > Fraction(1, 1 << (k + 1)):
        m += 1
    return FreivaldsPlan(s, t, m, L, LD, error_bound(s, t, m, L, LD))


def challenge_vectors(challenge: bytes, n2: int, t: int, s: int) -> np.ndarray:
    """``X`` (``n2 x t``, float64, entries in ``[0, 2^s)``): SHAKE-256 of
    ``challenge + b"/vectors"``, read as little-endian uint32, vector after
    vector, each masked to ``s`` bits (uniform: ``2^s`` divides ``2^32``)."""
    raw = hashlib.shake_256(challenge + b"/vectors").digest(4 * n2 * t)
    U = np.frombuffer(raw, dtype="<u4").reshape(t, n2) & np.uint32((1 << s) - 1)
    return np.ascontiguousarray(U.T, dtype=np.float64)


def candidate_primes(challenge: bytes, max_tries: int = 1 << 16) -> Iterator[int]:
    """The candidates ``q = 2^61 + (w mod 2^61)`` that are prime, in order: ``w``
    the little-endian 8 bytes of SHAKE-256 of ``challenge + b"/primes/" + i``
    (``i`` as 8 little-endian bytes, i = 0, 1, ...). The caller skips those at
    which ``M`` is singular: uniform over the rest (rejection sampling)."""
    import flint
    low = (1 << (QBITS - 1)) - 1
    for i in range(max_tries):
        w = int.from_bytes(hashlib.shake_256(challenge + b"/primes/" + i.to_bytes(8, "little")).digest(8),
                           "little")
        q = (1 << (QBITS - 1)) | (w & low)
        if flint.fmpz(q).is_prime():
            yield q


def exact_product(V: np.ndarray, X: np.ndarray, s: int) -> np.ndarray:
    """``V X`` over Z (object array) for int64 ``V`` and ``X`` with entries below
    ``2^s``: ``V`` in planes of ``h`` bits with ``n2 2^h 2^s <= 2^52``, each plane's
    float64 product exact."""
    n2 = V.shape[1]
    h = 52 - n2.bit_length() - s
    if int_max_abs(V) < 1 << h:
        return (V.astype(np.float64) @ X).astype(np.int64).astype(object)
    out, rest, shift = 0, V.copy(), 0
    while True:
        if int_max_abs(rest) < 1 << h:
            return out + ((rest.astype(np.float64) @ X).astype(np.int64).astype(object) << shift)
        low = rest & ((1 << h) - 1)                          # the low h bits, >= 0
        out = out + ((low.astype(np.float64) @ X).astype(np.int64).astype(object) << shift)
        rest = rest >> h                                     # arithmetic: rest = low + 2^h (rest >> h)
        shift += h


def _planes(A: np.ndarray, h: int) -> list[tuple[np.ndarray, int]]:
    """``A = sum_d P_d 2^(h d)`` (int64 ``A``): float64 planes with ``|P_d| < 2^h``."""
    out, rest, shift = [], A, 0
    while int_max_abs(rest) >= 1 << h:
        out.append(((rest & ((1 << h) - 1)).astype(np.float64), shift))   # the low h bits, >= 0
        rest = rest >> h                                                  # arithmetic shift
        shift += h
    out.append((rest.astype(np.float64), shift))
    return out


def _digits_product(planes: Sequence[tuple[np.ndarray, int]], W: np.ndarray, n: int) -> np.ndarray:
    """``A W`` over Z (object, ``n x t``) from the planes of ``A`` (``n x r``, planes
    of ``h`` bits with ``r 2^h 2^20 <= 2^52``) and a nonnegative object array ``W``
    (``r x t``) in 20-bit digits: every float product exact."""
    out = np.zeros((n, W.shape[1]), dtype=object)
    shift = 0
    while W.any():
        D = (W & ((1 << 20) - 1)).astype(np.float64)
        for P, sh in planes:
            out += (P @ D).astype(np.int64).astype(object) << (sh + shift)
        W = W >> 20
        shift += 20
    return out


def freivalds_span_test(V: np.ndarray, rows: Sequence[int], cols: Sequence[int], challenge: bytes,
                        k: int = 128, Vf: np.ndarray | None = None) -> FreivaldsResult | None:
    """Run the test (module docstring) on the int64 matrix ``V`` with the minor
    ``V[rows, cols]`` (nonsingular): passed with error ``<= 2^-k``, or failed
    (then ``rank V > len(cols)``, exactly). None when ``V[rows, cols]`` is
    singular or ``V`` is not int64 below 2^51."""
    import flint
    if V.dtype != np.int64 or int_max_abs(V) > 1 << 51 or not len(cols):
        return None
    R = np.asarray(rows, dtype=np.int64)
    C = np.asarray(cols, dtype=np.int64)
    pl = plan(V, rows, cols, k)
    n1, n2 = V.shape
    MZ = flint.fmpz_mat(len(R), len(C), V[np.ix_(R, C)].ravel().tolist())
    X = challenge_vectors(challenge, n2, pl.vectors, pl.vector_bits)
    if Vf is not None and int_max_abs(V) < 1 << (52 - n2.bit_length() - pl.vector_bits):
        Y = (Vf @ X).astype(np.int64).astype(object)          # (n1, t), exact
    else:
        Y = exact_product(V, X, pl.vector_bits)
    VC = _planes(np.ascontiguousarray(V[:, C]), 52 - 20 - len(cols).bit_length())
    YR = Y[R]
    primes: list[int] = []
    for q in candidate_primes(challenge):
        try:
            W = flint.nmod_mat(MZ, q).solve(flint.nmod_mat([[v % q for v in row] for row in YR.tolist()], q))
        except ZeroDivisionError:                             # q | det M: not a candidate
            continue
        primes.append(q)
        Wo = np.array([[int(W[i, j]) for j in range(W.ncols())] for i in range(W.nrows())], dtype=object)
        if np.any((_digits_product(VC, Wo, n1) - Y) % q):
            return FreivaldsResult(False, pl, tuple(primes))
        if len(primes) == pl.num_primes:
            return FreivaldsResult(True, pl, tuple(primes))
    return None
