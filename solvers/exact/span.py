"""Exact column-span check by many word-size primes: the upper bound of the
exact rank of a large integer matrix, at the cost of float64 matrix products.

Claim. ``M = N[R, C]`` (``r x r``) is nonsingular, ``D = det M``. For a row ``i``
and a column ``j`` the bordered minor is
``beta_ij = det [[M, N[R, j]], [N[i, C], N[i, j]]] = D (N_ij - N[i, C] M^-1 N[R, j])``
(Schur complement). Every ``beta_ij`` is zero iff the Schur complement of
``M`` is zero iff ``rank N = r`` (every column lies in the span of the
columns ``C``).

Bound (the sharper one: the ``(r+1)``-minors' own rows and columns, not the
whole matrix). Hadamard's inequality on the rows of the bordered matrix gives
``beta_ij^2 <= prod_{k in R} (a_k + m_k) * max_i (a_i + m_i)`` with
``a_k = sum_{c in C} N_kc^2`` and ``m_k = max_j N_kj^2``; on its columns,
``beta_ij^2 <= prod_{c in C} (b_c + w_c) * max_j (b_j + w_j)`` with
``b_j = sum_{k in R} N_kj^2``, ``w_j = max_i N_ij^2``. ``bound_sq`` is the
smaller of the two (:func:`bordered_minor_bound_sq`, the checker derives the
same number). If ``beta_ij = 0 mod p`` for primes whose product ``P`` has
``P^2 > bound_sq``, then ``|beta_ij| < P`` and ``P | beta_ij``, so ``beta_ij = 0``.

Modulo one prime ``p`` (``p`` not dividing ``D``): ``beta_ij = 0 mod p`` iff
``N_ij = (N[:, C] Y)_ij mod p`` with ``Y = M^-1 N[R, :] mod p``. Residues are
balanced (``|x| <= (p-1)/2``), so the float64 product ``N[:, C]_p Y_p`` has
integer partial sums of at most ``r ((p-1)/2)^2`` and is exact in any
summation order; ``p`` is the largest prime with
``r ((p-1)/2)^2 + max|N| <= 2^53 - 2^27``, so the difference ``T - N`` is exact too.
One fused pass per tile (in cache): ``T = N_C,p Y_p`` (BLAS), ``T -= N``,
``q = rint(T / p)``, ``q p - T == 0`` everywhere iff ``T = 0 mod p``
(``|T| <= 2^53 - 2^27``: the quotient's float error is below ``2/p``, and
``q p`` is exact). About 24.5 bits of the bound per product (r = 64), against
23.5 with nonnegative residues.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence

import numpy as np

#: every integer a check handles stays at most this large: float64 is exact up to 2^53,
#: and the margin 2^27 > 2p covers ``q p`` in the divisibility test (primes below 2^26)
FLOAT_LIMIT = (1 << 53) - (1 << 27)
MAX_PRIME = (1 << 26) - 1


def bordered_minor_bound_sq(V: np.ndarray, rows: Sequence[int], cols: Sequence[int]) -> int:
    """``B^2`` with ``|det N[R + {i}, C + {j}]| <= B`` for every row ``i`` and column
    ``j`` (int64 ``V``): the smaller of the row-wise and the column-wise Hadamard
    bound of the bordered minors (module docstring)."""
    R = np.asarray(rows, dtype=np.int64)
    C = np.asarray(cols, dtype=np.int64)
    A = np.abs(V)
    m = [int(v) ** 2 for v in A.max(1).tolist()]                     # m_k = max_j N_kj^2
    w = [int(v) ** 2 for v in A.max(0).tolist()]                     # w_j = max_i N_ij^2
    a = _row_sq(V[:, C])                                             # a_k = ||N[k, C]||^2
    b = _row_sq(V[R].T)                                              # b_j = ||N[R, j]||^2
    by_rows = math.prod(a[k] + m[k] for k in rows) * max(x + y for x, y in zip(a, m))
    by_cols = math.prod(b[c] + w[c] for c in cols) * max(x + y for x, y in zip(b, w))
    return min(by_rows, by_cols)


def _row_sq(X: np.ndarray) -> list[int]:
    """Exact squared Euclidean norms of the rows of an int64 array (Python ints)."""
    if X.shape[1] == 0:
        return [0] * X.shape[0]
    big = int(np.abs(X).max(initial=0))
    if big < (1 << 26):                                          # squares and sums fit int64
        if X.shape[1] * (1 << 52) < (1 << 63):
            return [int(v) for v in (X * X).sum(1).tolist()]
    if big < (1 << 32) and X.shape[1] < (1 << 20):
        # X = hi 2^16 + lo, 0 <= lo < 2^16, |hi| <= 2^16: every product below 2^32, every
        # row sum below 2^52 in int64; X^2 = hi^2 2^32 + 2 hi lo 2^16 + lo^2
        lo, hi = X & 0xFFFF, X >> 16
        hh, hl, ll = ((hi * hi).sum(1).tolist(), (hi * lo).sum(1).tolist(), (lo * lo).sum(1).tolist())
        return [(int(a) << 32) + (int(b) << 17) + int(c) for a, b, c in zip(hh, hl, ll)]
    O = X.astype(object)
    return [int(v) for v in (O * O).sum(1).tolist()]


@lru_cache(maxsize=64)
def _primes_below(limit: int, count: int) -> tuple[int, ...]:
    """The ``count`` largest primes ``<= limit`` (deterministic), largest first."""
    import flint
    out, p = [], limit
    while len(out) < count and p > 2:
        if flint.fmpz(p).is_prime():
            out.append(p)
        p -= 1
    return tuple(out)


def prime_limit(r: int, max_abs: int) -> int:
    """Largest ``p <= MAX_PRIME`` with ``r ((p-1)/2)^2 + max_abs <= FLOAT_LIMIT``."""
    room = FLOAT_LIMIT - max_abs
    if room <= 0:
        return 0
    h = math.isqrt(room // max(r, 1))                      # (p - 1)/2 <= h
    return min(2 * h + 1, MAX_PRIME)


def span_primes(r: int, max_abs: int, bound_sq: int, D: int) -> list[int] | None:
    """Primes for the check: largest first below :func:`prime_limit`, skipping
    divisors of ``D``, until their product ``P`` has ``P^2 > bound_sq``. None when
    the entries are too large for float-exact residues."""
    top = prime_limit(r, max_abs)
    if top < 1 << 12:
        return None
    want = 64
    while want <= 1 << 16:
        chosen, prod = [], 1
        for p in _primes_below(top, want):
            if D % p:
                chosen.append(p)
                prod *= p
                if prod * prod > bound_sq:
                    return chosen
        want *= 2
    return None


def balanced(x: np.ndarray, p: int) -> np.ndarray:
    """Balanced residues ``|y| <= (p-1)/2``, ``y = x mod p``, of integer-valued
    float64 ``x`` (exact: the quotient's error is below 1,
    ``q p`` and ``x - q p`` are integers below 2^53; one correction step)."""
    y = x - np.rint(x * (1.0 / p)) * p
    h = (p - 1) // 2
    y[y > h] -= p
    y[y < -h] += p
    return y


def _inverse_mod(MZ, p: int) -> np.ndarray:
    """Balanced residues of ``M^-1 mod p`` (``MZ`` a flint ``fmpz_mat``, nonsingular mod ``p``)."""
    import flint
    r = MZ.nrows()
    Mi = flint.nmod_mat(MZ, p).inv()
    out = np.fromiter(map(int, Mi.entries()), dtype=np.float64, count=r * r).reshape(r, r)
    return balanced(out, p)


def _kernel():
    """The compiled fused reduction (``_modkernel.c``), or None (numpy then)."""
    try:
        from solvers.exact._modkernel import residue_nonzero
    except ImportError:          # built without a C compiler: the numpy passes below
        return None
    return residue_nonzero


def span_check_multimodular(N, rows: Sequence[int], cols: Sequence[int], *,
                            tile_rows: int = 128, tile_cols: int = 1024,
                            Nf: np.ndarray | None = None, stats: dict | None = None,
                            compiled: bool = True) -> bool | None:
    """Exact: every column of the integer matrix ``N`` (an ``IntMatrix``) lies in the
    span of ``N[:, cols]``, given ``N[rows, cols]`` nonsingular (module docstring).
    True proves ``rank N <= len(cols)``; False means some bordered minor is not zero
    (the rank is larger). None: not applicable (entries beyond 2^52, object dtype,
    or a singular ``N[rows, cols]``). ``Nf`` is ``N`` as float64 when the caller has
    it; ``stats`` receives the bound's bits and the primes used; ``compiled=False``
    runs the reduction in numpy even when the compiled kernel is built."""
    import flint

    V = N.values
    if V.dtype == object:
        return None
    n1, n2 = V.shape
    r = len(cols)
    if r == 0:
        return not np.any(V)
    if r == n2:
        return True
    max_abs = int(np.abs(V).max())
    if max_abs > 1 << 51:
        return None
    R = np.asarray(rows, dtype=np.int64)
    C = np.asarray(cols, dtype=np.int64)
    MZ = flint.fmpz_mat(r, r, [int(v) for v in V[np.ix_(R, C)].ravel().tolist()])
    D = int(MZ.det())
    if D == 0:
        return None
    bound_sq = bordered_minor_bound_sq(V, rows, cols)
    primes = span_primes(r, max_abs, bound_sq, D)
    if primes is None:
        return None
    if stats is not None:
        stats.update({"bound_bits": (math.isqrt(bound_sq) + 1).bit_length(), "primes": len(primes),
                      "prime_bits": primes[0].bit_length()})
    if Nf is None:
        Nf = V.astype(np.float64)                                 # exact: |N| <= 2^51
    NC = Nf[:, C]                                                 # (n1, r)
    NR = Nf[R]                                                    # (r, n2)
    tr, tc = min(tile_rows, n1), min(tile_cols, n2)
    T = np.empty(tr * tc)                                         # tile buffers, reused
    Q = np.empty(tr * tc)
    fused = _kernel() if compiled else None
    Nk = V.astype(np.int32) if fused is not None and max_abs < 1 << 31 else Nf   # half the traffic
    if fused is not None and not (Nk.flags.c_contiguous and Nk.dtype in (np.int32, np.float64)):
        Nk = np.ascontiguousarray(Nk, dtype=np.float64)
    for p in primes:
        inv = 1.0 / p
        Yp = balanced(_inverse_mod(MZ, p) @ balanced(NR, p), p)    # (r, n2), exact: r ((p-1)/2)^2
        NCp = balanced(NC, p)
        for c0 in range(0, n2, tc):
            c1 = min(n2, c0 + tc)
            Yc = np.ascontiguousarray(Yp[:, c0:c1])
            for a in range(0, n1, tr):
                b = min(n1, a + tr)
                shape = (b - a, c1 - c0)
                t = np.matmul(NCp[a:b], Yc, out=T[:shape[0] * shape[1]].reshape(shape))  # <= r h^2
                if fused is not None:                                   # the same test, one pass
                    if fused(t, Nk, a, c0, float(p)):
                        return False
                    continue
                t -= Nf[a:b, c0:c1]                                     # exact: |t| <= 2^53
                q = np.multiply(t, inv, out=Q[:t.size].reshape(shape))
                np.rint(q, out=q)
                q *= p
                q -= t                                                  # 0 iff t = 0 mod p
                if q.any():
                    return False
    return True
