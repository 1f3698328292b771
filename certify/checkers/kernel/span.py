"""The column-span upper bound of a large int64 matrix by many word-size primes,
and the canonical minor modulo p by two products (written apart from the
producer's :mod:`solvers.exact.span`).

Statement. :func:`column_span` is True exactly when every column of ``A`` lies
in the span of the columns ``A[:, C]`` over Q, given ``A[R, C]`` nonsingular:
then ``rank_Q A <= |C|`` (with the lower bound's minor, ``= |C|``). Proof below.

Upper bound. ``M = N[R, C]`` nonsingular, ``D = det M``; the bordered minors
``beta_ij = det N[R + {i}, C + {j}] = D (N_ij - N[i, C] M^-1 N[R, j])`` all
vanish iff ``rank N = |C|``. Hadamard on the rows of a bordered minor:
``beta^2 <= prod_{k in R} (a_k + m_k) max_i (a_i + m_i)``, ``a_k = ||N[k, C]||^2``,
``m_k = max_j N_kj^2``; on its columns:
``beta^2 <= prod_{c in C} (b_c + w_c) max_j (b_j + w_j)``, ``b_j = ||N[R, j]||^2``,
``w_j = max_i N_ij^2``; the bound is the smaller. Primes ``p`` (not dividing
``D``) whose product ``P`` has ``P^2 > bound`` make ``beta = 0 mod P`` imply
``beta = 0``. Modulo ``p``, ``beta_ij = 0`` iff ``N_ij = (N[:, C] Y)_ij`` with
``Y = M^-1 N[R, :]``; balanced residues keep the float64 product exact
(``r ((p-1)/2)^2 + max|N| <= 2^53 - 2^27``), and ``t = 0 mod p`` is tested as
``rint(t / p) p == t`` (exact for ``|t| <= 2^53 - 2^27``).

Canonical minor. Once ``rank_Q N = r`` is proved (and so ``rank_p N <= r``),
``M`` nonsingular mod p makes the rows ``R`` a basis of the row space of
``N mod p``: the pivot columns of ``rref(N mod p)`` are those of
``rref(N[R, :] mod p)`` (rref depends on the row space only), and the pivot rows
are the pivot columns of ``rref(N[:, C]^T mod p)``; both are ``r x n``.
"""

from __future__ import annotations

import math

import numpy as np

from certify.checkers.kernel.matrices import fmpz_matrix, is_prime
from certify.checkers.kernel.modular import pivot_minor_mod_p

_LIMIT = (1 << 53) - (1 << 27)
_PMAX = (1 << 26) - 1


def _sq_norms(X: np.ndarray) -> list[int]:
    """Exact squared norms of the rows of an int64 array (Python ints)."""
    if not X.shape[1]:
        return [0] * X.shape[0]
    if int(np.abs(X).max()) < 1 << 31 and X.shape[1] < 1 << 20:
        # X = 2^16 h + l, 0 <= l < 2^16, -2^15 <= h < 2^15: X^2 = 2^32 h^2 + 2^17 h l + l^2,
        # every product below 2^32 and every row sum below 2^52 in int64
        lo, hi = X % 65536, X // 65536
        return [(int(a) << 32) + (int(b) << 17) + int(c) for a, b, c in
                zip((hi * hi).sum(1).tolist(), (hi * lo).sum(1).tolist(), (lo * lo).sum(1).tolist())]
    O = X.astype(object)
    return [int(v) for v in (O * O).sum(1).tolist()]


def bound_sq(A: np.ndarray, R: list[int], C: list[int]) -> int:
    """The square of the bordered-minor bound (module docstring), exactly."""
    absA = np.abs(A)
    m = [int(v) * int(v) for v in absA.max(1).tolist()]
    w = [int(v) * int(v) for v in absA.max(0).tolist()]
    a = _sq_norms(A[:, C])
    b = _sq_norms(A[R].T)
    rows = 1
    for k in R:
        rows *= a[k] + m[k]
    rows *= max(x + y for x, y in zip(a, m))
    cols = 1
    for c in C:
        cols *= b[c] + w[c]
    cols *= max(x + y for x, y in zip(b, w))
    return min(rows, cols)


def _primes(r: int, max_abs: int, bsq: int, D: int) -> list[int] | None:
    room = _LIMIT - max_abs
    if room <= 0:
        return None
    p = min(2 * math.isqrt(room // max(r, 1)) + 1, _PMAX)
    out, prod = [], 1
    while prod * prod <= bsq:
        if p < 1 << 12:
            return None
        if D % p and is_prime(p):
            out.append(p)
            prod *= p
        p -= 1
    return out


def _balanced(x: np.ndarray, p: int) -> np.ndarray:
    y = x - np.rint(x / p) * p
    h = (p - 1) // 2
    y[y > h] -= p
    y[y < -h] += p
    return y


def column_span(A: np.ndarray, R: list[int], C: list[int], rows_per_pass: int = 64) -> bool | None:
    """True iff every column of the int64 matrix ``A`` lies in the span of ``A[:, C]``
    (``A[R, C]`` nonsingular). None when the entries are too large for this method
    (beyond 2^51) or ``A[R, C]`` is singular."""
    import flint
    n1, n2 = A.shape
    r = len(C)
    if r == 0:
        return not A.any()
    max_abs = int(np.abs(A).max())
    if max_abs > 1 << 51:
        return None
    MZ = flint.fmpz_mat([[int(A[i, j]) for j in C] for i in R])
    D = int(MZ.det())
    if D == 0:
        return None
    primes = _primes(r, max_abs, bound_sq(A, R, C), D)
    if primes is None:
        return None
    Af = A.astype(np.float64)
    AC, AR = Af[:, C], Af[R]
    buf = np.empty((min(rows_per_pass, n1), n2))
    q = np.empty_like(buf)
    for p in primes:
        Mp = flint.nmod_mat(MZ, p).inv()
        Mi = _balanced(np.array([int(v) for v in Mp.entries()], dtype=np.float64).reshape(r, r), p)
        Y = _balanced(Mi @ _balanced(AR, p), p)
        ACp = _balanced(AC, p)
        for s in range(0, n1, rows_per_pass):
            e = min(n1, s + rows_per_pass)
            t = np.matmul(ACp[s:e], Y, out=buf[:e - s])
            t -= Af[s:e]
            u = np.divide(t, p, out=q[:e - s])
            np.rint(u, out=u)
            u *= p
            if not np.array_equal(u, t):
                return False
    return True


def is_pivot_minor(A: np.ndarray, p: int, R: list[int], C: list[int]) -> bool:
    """``(R, C) == pivot_minor(A, p, R, C)``, given ``A[R, C]`` nonsingular mod ``p``,
    with two products instead of two eliminations. With ``M = A[R, C]``, the
    column ``j`` of ``A[R]`` has coordinates ``y_j = M^-1 A[R, j]`` in the basis of
    the columns ``C``; by induction over ``j``, ``span A[R, :j] = span A[R, C_<j]``
    when every earlier column outside ``C`` has its coordinates on ``C_<j``, so the
    pivot columns of ``rref(A[R] mod p)`` are ``C`` iff ``C`` is increasing and every
    column ``j`` outside ``C`` has ``y_j`` supported on ``{k : C_k < j}``. Rows
    likewise: ``z_i = A[i, C] M^-1``, supported on ``{k : R_k < i}`` for ``i`` outside
    ``R``. Products of residues in ``[0, p)`` are exact in float64 when
    ``r (p-1)^2 < 2^53``; otherwise the canonical minor by elimination."""
    import flint
    r = len(C)
    if r == 0 or r * (p - 1) ** 2 >= 1 << 53:
        return pivot_minor_mod_p(fmpz_matrix(A.tolist()), p) == (R, C)
    if any(b <= a for a, b in zip(R, R[1:])) or any(b <= a for a, b in zip(C, C[1:])):
        return False
    M = flint.nmod_mat(r, r, (A[np.ix_(R, C)] % p).ravel().tolist(), p)
    Mi = np.array([int(v) for v in M.inv().entries()], dtype=np.float64).reshape(r, r)
    Y = np.fmod(Mi @ (A[R] % p).astype(np.float64), p)                  # (r, n2), exact
    Z = np.fmod((A[:, C] % p).astype(np.float64) @ Mi, p)               # (n1, r), exact

    def supported_before(W: np.ndarray, basis: list[int]) -> bool:
        # W: (r, n) coordinates of the n vectors; basis: the r indices, increasing
        nz = W != 0
        last = r - 1 - np.argmax(nz[::-1], axis=0)                       # last nonzero coordinate
        last_index = np.asarray(basis, dtype=np.int64)[last]
        j = np.arange(W.shape[1])
        outside = np.ones(W.shape[1], dtype=bool)
        outside[basis] = False
        return bool(np.all(~outside | ~nz.any(axis=0) | (last_index < j)))

    return supported_before(Y, C) and supported_before(Z.T, R)
