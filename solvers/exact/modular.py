"""Ranks and minors modulo primes, and exact span checks.

Lower bound: ``rank_p(N) <= rank_Q(N)`` for every prime ``p``; a minor whose
determinant is nonzero mod ``p`` is nonzero over Z, so the evidence is the
prime and the minor's row and column indices. Upper bound (matrix form): with
``M = N[R, C]`` nonsingular, every column is in the span of the columns ``C``
iff ``N[:, C] Y = N[:, notC]`` for ``Y = M^-1 N[R, notC]``; checked exactly
(python-flint, or many word-size primes up to the Hadamard bound of the
``(r+1)``-minors with float64 products that stay exact).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from solvers.exact.integers import IntMatrix, nmod_matrix


def random_prime(rng: np.random.Generator, bits: int = 60) -> int:
    """A uniformly drawn ``bits``-bit start, then the next prime (deterministic test)."""
    import flint
    if not 8 <= bits <= 63:
        raise ValueError("prime size must be 8..63 bits")
    x = int(rng.integers(1 << (bits - 1), 1 << bits)) | 1
    while not flint.fmpz(x).is_prime():
        x += 2
    return x


def _pivots(R, rank: int, ncols: int) -> list[int]:
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


def float_minor(N: IntMatrix, *, seed: int = 0, oversample: int = 8
                ) -> tuple[list[int], list[int]] | None:
    """Propose ``r x r`` row and column indices of a well-conditioned minor from
    float64 sketches (only a proposal: the caller checks it exactly). Sketch
    ``A G`` and ``G^T A`` with ``k`` Gaussian columns, ``k`` doubled until the
    numerical rank is below ``k``; columns and rows by pivoted QR. O(n^2 k)."""
    from scipy.linalg import qr

    if N.values.dtype == object or N.max_bits() > 53:
        return None
    A = N.values.astype(np.float64)
    n1, n2 = A.shape
    rng = np.random.default_rng(seed)
    k = 32
    while True:
        k = min(k, min(n1, n2))
        G = rng.standard_normal((n1, k))
        Y = G.T @ A                                               # (k, n2)
        sv = np.linalg.svd(Y, compute_uv=False)
        tol = sv[0] * max(n1, n2) * np.finfo(np.float64).eps * 16 if sv.size else 0
        r = int((sv > tol).sum())
        if r < k or k == min(n1, n2):
            break
        k *= 2
    if r == 0:
        return None
    _, _, cp = qr(Y, mode="economic", pivoting=True)
    cols = sorted(int(c) for c in cp[:r])
    _, _, rp = qr(A[:, cols].T, mode="economic", pivoting=True)
    rows = sorted(int(i) for i in rp[:r])
    return rows, cols


def _float_exact_primes(r: int, bound: int) -> list[int]:
    """Primes ``p`` with ``r (p - 1)^2 < 2^53`` (a float64 product of residues with
    ``r`` terms is exact), largest first, until their product exceeds ``2 bound``."""
    import flint
    p = int(math.isqrt((1 << 53) // max(r, 1)))
    out, prod = [], 1
    while prod <= 2 * bound:
        p -= 1
        while not flint.fmpz(p).is_prime():
            p -= 1
        if p < 3:
            raise ValueError("no room for float-exact primes")
        out.append(p)
        prod *= p
    return out


def _fmod_exact(c: np.ndarray, p: int) -> np.ndarray:
    """Residues in [0, p) of nonnegative integer-valued float64 ``c < 2^53``:
    ``c - floor(c / p) p`` is exact (every term an integer below 2^53); the
    quotient may be off by one from rounding, corrected after."""
    d = c - np.floor(c / p) * p
    d[d < 0] += p
    d[d >= p] -= p
    return d


def _mod_f(a: np.ndarray, p: int) -> np.ndarray:
    """Residues in [0, p) as float64 (int64 input, |a| < 2^53)."""
    af = a.astype(np.float64)
    return _fmod_exact(af - np.floor(af / p) * p, p)


def _hadamard_cols(cols_sq: list[int]) -> int:
    """An integer upper bound of ``prod sqrt(c)`` for squared column norms ``c``."""
    out = 1
    for c in cols_sq:
        out *= math.isqrt(c) + 1
    return out


def span_check_multimodular(N: IntMatrix, rows: Sequence[int], cols: Sequence[int],
                            ) -> bool | None:
    """Exact: every column of ``N`` lies in the span of ``N[:, cols]``, given
    ``M = N[rows, cols]`` nonsingular (``D = det M != 0``). With
    ``Yn = adj(M) N[rows, :]`` (Cramer: ``Yn[i, j]`` is ``det M`` with column
    ``i`` replaced by ``N[rows, j]``, so ``|Yn[i, j]| <= H`` := the product of
    the ``r`` largest column norms of ``N[rows, :]``, Hadamard), the claim is the
    integer identity ``N[:, cols] Yn = D N``. Both sides are bounded by
    ``B = max(r max|N[:, cols]| H, |D| max|N|)``, so it holds iff it holds modulo
    primes whose product exceeds ``2 B``. Modulo ``p``:
    ``Yn = D M^-1 N[rows, :]`` (``p`` does not divide ``D``), and each product
    is a float64 product of residues, exact because ``r (p - 1)^2 < 2^53``.
    None: not applicable (entries beyond int64)."""
    import flint

    if N.values.dtype == object:
        return None
    r = len(cols)
    n2 = N.shape[1]
    cset = set(cols)
    other = np.array([j for j in range(n2) if j not in cset], dtype=np.int64)
    if other.size == 0:
        return True
    if r == 0:
        return not np.any(N.values)
    R = np.asarray(rows, dtype=np.int64)
    C = np.asarray(cols, dtype=np.int64)
    D = int(N.fmpz(rows, cols).det())
    if D == 0:
        return None
    NR = N.values[R]                                                   # (r, n2)
    csq = sorted((int(v) for v in (NR.astype(object) ** 2).sum(0)), reverse=True)[:r]
    H = _hadamard_cols(csq)
    NC = N.values[:, C]                                                # (n1, r)
    NO = N.values[:, other]                                            # (n1, n2 - r)
    B = max(r * int(np.abs(NC).max()) * H, abs(D) * int(np.abs(NO).max(initial=0)))
    NOf = NO.astype(np.float64)                                        # exact: |N| < 2^53
    NRO = NR[:, other]
    rblock = max(1, (1 << 15) // max(1, other.size))
    buf = np.empty((rblock, other.size))
    buf2 = np.empty((rblock, other.size))
    for p in _float_exact_primes(r, B):
        if D % p == 0:
            return None
        # mod p, multiplying by D^-1: N[:, C] (M^-1 N[R, other]) == N[:, other]
        Mi = flint.nmod_mat(N.nmod(p, rows, cols).inv())
        Mi = np.array([int(v) for v in Mi.entries()], dtype=np.float64).reshape(r, r)
        Yp = _fmod_exact(Mi @ _mod_f(NRO, p), p)                       # (r, n2 - r)
        NCp = _mod_f(NC, p)
        inv = 1.0 / p
        for a in range(0, NOf.shape[0], rblock):                       # rows in cache-sized blocks
            b = min(NOf.shape[0], a + rblock)
            diff = np.matmul(NCp[a:b], Yp, out=buf[:b - a])            # < r (p-1)^2 < 2^53
            diff -= NOf[a:b]                                           # exact integers
            q = np.multiply(diff, inv, out=buf2[:b - a])
            np.rint(q, out=q)
            q *= p
            q -= diff                                                  # 0 iff diff = 0 mod p
            if np.any(q):
                return False
    return True


def _small_prime(n1: int, rng: np.random.Generator) -> int:
    """A prime ``p`` with ``n1 (p - 1)^2 < 2^53`` (float-exact products over ``n1``
    terms), drawn at random from the upper half of that range."""
    import flint
    top = int(math.isqrt((1 << 53) // max(n1, 1)))
    x = int(rng.integers(top // 2, top)) | 1
    while not flint.fmpz(x).is_prime():
        x -= 2
    return x


def sketched_pivot_minor(N: IntMatrix, p: int, k: int, rng: np.random.Generator
                         ) -> tuple[int, list[int], list[int]] | None:
    """The canonical minor mod ``p`` (pivot columns of ``rref(N mod p)``, then the
    pivot rows of ``N[:, cols]``), computed from the ``k x n2`` sketch ``G N mod
    p``: row operations keep column dependencies, so when ``rank_p(G N) =
    rank_p(N)`` the pivot columns agree. Returns ``(rank_p(G N), rows, cols)``,
    or None when the sketch is full (``k`` too small). The caller proves
    ``rank(N) <= rank_p(G N)`` (span check), which gives the equality."""
    n1, n2 = N.shape
    G = rng.integers(0, p, (k, n1)).astype(np.float64)
    GN = _fmod_exact(G @ _mod_f(N.values, p), p)                    # exact: n1 (p-1)^2 < 2^53
    R, rk = nmod_matrix(GN.astype(np.int64), p).rref()
    if rk >= k and k < n1:
        return None
    if rk == 0:
        return 0, [], []
    cols = _pivots(R, rk, n2)
    sub = N.nmod(p, cols=cols).transpose()                            # (rk, n1)
    R2, rk2 = sub.rref()
    if rk2 != rk:
        return None
    return rk, _pivots(R2, rk2, n1), cols
