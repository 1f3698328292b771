"""The column-span upper bound of a large int64 matrix modulo word-size primes, and the
canonical minor modulo p by two products, apart from the producer's :mod:`solvers.exact.span`
(the steps over residues compiled, ``_spankernel.c``; without it no decision).

Column span. ``M = N[R, C]`` (``r x r``, nonsingular); ``C'``, ``R'`` the other columns and
rows. An integer ``d != 0`` and an integer ``F`` (``r x n``) with ``N[:, C] F = d N`` give
``N = N[:, C] (F / d)``: rank at most ``r``. Take ``F[:, C] = d I`` (the identity holds on
``C`` by itself) and ``X = F[:, C']`` the integer ``|X| < P/2`` congruent to
``d M^-1 N[R, C']`` modulo ``P = p_1 ... p_K``. Per prime, residues are held as
integer-valued float64 and every product is exact (partial sums at most
``r max|N| (p-1)/2 + max|N|`` with ``N`` unreduced, or ``r ((p-1)/2)^2 + max|N|``, both
``<= 2^53 - 2^27``):

(1) ``W = M^-1 mod p``, and ``M W = I mod p`` is checked;
(2) ``Y_p = W N[R, C'] mod p``;
(3) ``N[R', C] Y_p = N[R', C'] mod p``, tile by tile; a failure proves ``rank N > r`` (the
    Schur complement is not 0 mod p);
(4) with ``c_k = (P/p_k)^-1 mod p_k``, ``sum_k (d c_k Y_pk mod p_k) / p_k = X / P (mod 1)``
    (CRT), summed in float64 and reduced to ``[-1/2, 1/2]`` after each term (at most
    ``2^-52`` of rounding per term); ``|sum| <= 2^-s - K 2^-50`` proves ``|X| <= P 2^-s``.

With ``2^s > 2 (r + 1) max|N|`` and ``P >= 2^s |d|``, ``E = N[:, C] X - d N[:, C']`` is
``0 mod P`` (rows ``R'`` by (3), rows ``R`` by (1)-(2)) and
``|E| <= (r + 1) max|N| P 2^-s < P/2``, so ``E = 0``. Any ``d`` is sound (a poor one fails
step 4).

Without ``d``, steps 1-3 with ``P^2 > bound_sq`` suffice: the bordered minors
``beta_ij = det N[R + {i}, C + {j}] = det M (N_ij - N[i, C] M^-1 N[R, j])`` are ``0 mod P``
and, by Hadamard, ``|beta| < P``. :func:`bound_sq` is the smaller of the row-wise
``prod_{k in R} (a_k + m_k) max_i (a_i + m_i)`` (``a_k = ||N[k, C]||^2``,
``m_k = max_j N_kj^2``) and the column-wise ``prod_{c in C} (b_c + w_c) max_j (b_j + w_j)``
(``b_j = ||N[R, j]||^2``, ``w_j = max_i N_ij^2``).

Canonical minor. When ``rank_p N <= r`` (once ``rank_Q N = r`` is proved), the first ``r``
rows outside the span of the rows before them are a basis of the row space of ``N mod p``:
the pivot rows of ``rref(N^T)``, which are those of ``rref(N[:, C]^T)`` (``N = N[:, C] F``,
``F`` of full row rank: the same row dependencies); and the pivot columns of
``rref(N[R, :])`` are those of ``rref(N)``."""

from __future__ import annotations

import math
import os
import random
from typing import Any, Callable

import numpy as np

from certify.checkers.kernel.matrices import is_prime

LIMIT = (1 << 53) - (1 << 27)


def _compiled() -> Any:
    """The compiled steps, or None: not built, or switched off with ``CERTIFY_NO_COMPILED=1``."""
    if os.environ.get("CERTIFY_NO_COMPILED", "") not in ("", "0"):
        return None
    try:
        from certify.checkers.kernel import _spankernel  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _spankernel


_K = _compiled()                        # without it span_mod_primes returns None


def _others(n: int, idx: list[int]) -> np.ndarray:
    """The indices in ``range(n)`` outside ``idx``, increasing (``setdiff1d`` without its
    import of numpy.ma)."""
    return np.flatnonzero(np.bincount(np.asarray(idx, dtype=np.int64), minlength=n) == 0)


def _max_abs(A: np.ndarray) -> int:
    """``max |A|`` of an int64 array (0 when it is empty), as a Python int."""
    return max(int(A.max(initial=0)), -int(A.min(initial=0)))


def sq_norms(X: np.ndarray) -> list[int]:
    """Exact squared norms of the rows of an int64 array (Python ints)."""
    n = X.shape[1]
    if not n:
        return [0] * len(X)
    m = _max_abs(X)
    if m ** 2 * n < 1 << 63:                              # int64 sums exact
        return [int(v) for v in np.einsum("ij,ij->i", X, X).tolist()]
    w = max(16, -(-m.bit_length() // 2))
    if 2 * w + n.bit_length() <= 62:
        # X = 2^w h + l with 0 <= l < 2^w and |h| <= 2^w: every sum below 2^62
        lo, hi = X & ((1 << w) - 1), X >> w
        hh, hl, ll = ((hi * hi).sum(1).tolist(), (hi * lo).sum(1).tolist(), (lo * lo).sum(1).tolist())
        return [(int(a) << 2 * w) + (int(b) << w + 1) + int(c) for a, b, c in zip(hh, hl, ll)]
    return [int(v) for v in (X.astype(object) ** 2).sum(1).tolist()]


def bound_sq(A: np.ndarray, R: list[int], C: list[int]) -> int:
    """The square of the bordered-minor bound (module docstring), exactly."""
    m = [max(int(h), -int(lo)) ** 2 for h, lo in zip(A.max(1).tolist(), A.min(1).tolist())]   # rows
    w = [max(int(h), -int(lo)) ** 2 for h, lo in zip(A.max(0).tolist(), A.min(0).tolist())]   # columns
    a, b = sq_norms(A[:, C]), sq_norms(A[R].T)
    rows = math.prod(a[k] + m[k] for k in R) * max(x + y for x, y in zip(a, m))
    cols = math.prod(b[c] + w[c] for c in C) * max(x + y for x, y in zip(b, w))
    return min(rows, cols)


def span_limits(r: int, max_abs: int) -> tuple[int, bool, int]:
    """``(top, raw, s)``: the largest prime for exact products (``raw``: ``N`` unreduced),
    and ``s`` with ``2^s > 2 (r + 1) max|N|``."""
    raw_top = 2 * ((LIMIT - max_abs) // (r * max(max_abs, 1))) + 1
    bal_top = 2 * math.isqrt((LIMIT - max_abs) // r) + 1
    top = min(max(raw_top, bal_top), (1 << 26) - 1)
    return top, raw_top > bal_top, (2 * (r + 1) * max_abs).bit_length()


def minor_denominators(A: np.ndarray, R: list[int], C: list[int], k: int) -> tuple[int, int, float]:
    """``(D, d, y)`` for the int64 ``A``: ``D = det A[R, C]``, the least common denominator
    ``d`` of ``A[R, C]^-1 A[R, :] G`` (``G``: ``k`` seeded columns in ``[-2^10, 2^10)``;
    ``d`` divides ``D``; ``D`` when ``k = 0``), exactly, and a float estimate ``y`` of
    ``max|A[R, C]^-1 A[R, :]|``."""
    import flint
    MZ = flint.fmpz_mat(len(R), len(C), A[np.ix_(R, C)].ravel().tolist())
    D = int(MZ.det())
    try:
        y = float(np.abs(np.linalg.solve(A[np.ix_(R, C)].astype(float), A[R].astype(float))).max())
    except np.linalg.LinAlgError:
        y = math.inf
    if D == 0 or not k:
        return D, D, y
    coins = random.Random(0).randbytes(2 * A.shape[1] * k)             # the same G on every run
    G = (np.frombuffer(coins, "<u2") & 2047).astype(np.int64).reshape(-1, k) - 1024
    if _max_abs(A) * A.shape[1] < 1 << 52:
        B = A[R] @ G
    else:
        B = A[R].astype(object) @ G.astype(object)
    Y = MZ.solve(flint.fmpz_mat(len(R), k, [int(v) for v in B.ravel().tolist()]))
    return D, int(Y.numer_denom()[1]), y  # type: ignore[attr-defined]  # fmpq_mat


def span_mod_primes(A: np.ndarray, R: list[int], C: list[int], primes: list[int], d: int | None,
                    tile: tuple[int, int] = (512, 2048)) -> bool | None:
    """Steps 1-4 (module docstring) for the int64 ``A`` (``|A| < 2^51``) over ``primes``:
    False proves a column outside the span of ``A[:, C]``, True that all lie in it; None when
    steps 1 or 4 fail, a condition on ``primes`` or ``d`` does not hold (no ``d``:
    ``P^2 > bound_sq``), or there is no ``_K``."""
    r, max_abs = len(C), _max_abs(A)
    top, raw, s = span_limits(r, max_abs)
    P = math.prod(primes)
    if _K is None or len(set(primes)) < len(primes):
        return None
    if not all(5 <= p <= top and is_prime(p) for p in primes):
        return None
    if d is not None and (d == 0 or P < abs(d) << s):                   # step 4 needs P >= 2^s |d|
        return None
    if d is None and P * P <= bound_sq(A, R, C):                        # Hadamard's bound instead
        return None
    oR, oC = _others(A.shape[0], R), _others(A.shape[1], C)
    Ri, Ci = np.asarray(R, dtype=np.int64), np.asarray(C, dtype=np.int64)
    Af = A.astype(float)
    Mf = Af[np.ix_(Ri, Ci)]                                             # M = N[R, C]
    NR = Af[np.ix_(Ri, oC)]                                             # N[R, C']
    NC = Af[np.ix_(oR, Ci)]                                             # N[R', C]
    No = Af[np.ix_(oR, oC)]                                             # N[R', C']
    if max_abs < 1 << 31:
        No = No.astype(np.int32)                                        # half the memory traffic
    F = np.zeros(NR.shape)                                              # step 4's sum
    T = np.empty(tile[0] * min(tile[1], len(oC)))                       # one tile's product
    eye = np.eye(r)
    for p in primes:
        W = Mf.copy()
        if raw:
            Mp, NRp, NCp = Mf, NR, NC
        else:
            Mp, NRp, NCp = (_K.reduce(X.copy(), float(p)) for X in (Mf, NR, NC))
        if not _K.inverse(W, float(p)):                                 # step 1
            return None
        if not np.array_equal(_K.reduce(Mp @ W, float(p)), eye):
            return None
        Y = _K.reduce(W @ NRp, float(p))                                # step 2
        if d is not None:                                               # step 4
            w = d * pow(P // p % p, -1, p) % p
            _K.crt_add(Y, F, float(w - p if w > p // 2 else w), float(p))
        for c0 in range(0, len(oC), tile[1]):                           # step 3, tile by tile
            Yc = np.ascontiguousarray(Y[:, c0:c0 + tile[1]])
            for a in range(0, len(oR), tile[0]):
                rows = min(tile[0], len(oR) - a)
                out = T[:rows * Yc.shape[1]].reshape(rows, -1)
                if _K.nonzero(np.matmul(NCp[a:a + rows], Yc, out=out), No, a, c0, float(p)):
                    return False
    if d is None:
        return True
    return True if float(np.abs(F).max(initial=0)) <= 2.0 ** -s - len(primes) * 2.0 ** -50 else None


def pivot_rows(A: np.ndarray, p: int, r: int, more: Callable[[int, Callable], bool] | None = None,
               b: int = 64) -> tuple[list[int], list[int]] | None:
    """``(R, C)``: the first ``r`` rows of the int64 ``A`` (fewer when the rows run out)
    outside the span mod ``p`` of the rows before them, and the pivot columns (increasing) of
    ``rref(A[R] mod p)``. ``A[R, C]`` is nonsingular mod ``p`` (``A[R] = A[R, C] rref(A[R])``),
    and when ``rank_p A <= r`` these are ``pivot_minor_mod_p(A, p)`` (module docstring).

    Rows in blocks of ``b``: ``V - V[:, piv] B`` (``B`` the reduced echelon basis so far,
    ``B[:, piv] = I``; exact as ``n ((p-1)/2)^2 + p <= 2^53 - 2^27``, else None), whose rows
    outside the span of those before them are the pivots of ``rref(V^T)``. ``V``'s rref
    ``W`` has new pivots ``q``: ``B <- B - B[:, q] W``, then ``W`` joins ``B`` (compiled;
    without it None). ``more(i, reduce)``, asked after a block that adds no row (``reduce``:
    a block against the basis), False stops before row ``i``: the rows and pivots found
    before ``i`` do not depend on later rows."""
    n, h, fp = A.shape[1], (p - 1) // 2, float(p)
    if _K is None or not 5 <= p < 1 << 26 or n * h * h + p > LIMIT or _max_abs(A) > LIMIT:
        return None
    B = np.empty((min(r, *A.shape), n))                 # the reduced echelon basis, B[:, piv] = I
    piv: list[int] = []
    R: list[int] = []
    a = 0

    def reduce(V: np.ndarray) -> np.ndarray:
        V = _K.reduce(np.array(V, dtype=np.float64, order="C"), fp)      # the compiled steps read rows
        if piv:
            V = _K.reduce(V - V[:, piv] @ B[:len(piv)], fp)
            V[:, piv] = 0.0
        return V

    while a < A.shape[0] and len(R) < r:
        a0, a = a, min(a + b, A.shape[0])
        V = reduce(A[a0:a])
        new = _K.rref(np.ascontiguousarray(V.T), fp)[:r - len(R)]       # rows outside the span
        if new:
            V, k = V[:new[-1] + 1], len(piv)
            q = _K.rref(V, fp)                                          # V is now W
            B[:k] = _K.reduce(B[:k] - B[:k, q] @ V[:len(q)], fp)
            B[:k, q] = 0.0
            B[k:k + len(q)] = V[:len(q)]
            piv = piv + q
            R = R + [a0 + i for i in new]
        elif more is not None and not more(a, reduce):
            break
    return R, sorted(piv)
