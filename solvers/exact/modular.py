"""Ranks and minors modulo primes, and the exact span check by python-flint.

Lower bound: ``rank_p(N) <= rank_Q(N)`` for every prime ``p``; a minor whose
determinant is nonzero mod ``p`` is nonzero over Z, so the evidence is the
prime and the minor's row and column indices. Upper bound (matrix form): with
``M = N[R, C]`` nonsingular, every column is in the span of the columns ``C``
iff ``N[:, C] Y = N[:, notC]`` for ``Y = M^-1 N[R, notC]``; :func:`span_check`
solves it exactly with python-flint (any entry size); the float64 multimodular
check of large int64 matrices is :mod:`solvers.exact.span`.
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


def _fmod_exact(c: np.ndarray, p: int) -> np.ndarray:
    """Residues in [0, p) of integer-valued float64 ``|c| < 2^53``:
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


def _small_prime(n1: int, rng: np.random.Generator) -> int:
    """A prime ``p`` with ``n1 (p - 1)^2 < 2^53`` (float-exact products over ``n1``
    terms), drawn at random from the upper half of that range."""
    import flint
    top = int(math.isqrt((1 << 53) // max(n1, 1)))
    x = int(rng.integers(top // 2, top)) | 1
    while not flint.fmpz(x).is_prime():
        x -= 2
    return x


def sketched_pivot_minor(N: IntMatrix, p: int, k: int, rng: np.random.Generator,
                         Nf: np.ndarray | None = None) -> tuple[int, list[int], list[int]] | None:
    """The canonical minor mod ``p`` (pivot columns of ``rref(N mod p)``, then the
    pivot rows of ``N[:, cols]``), computed from the ``k x n2`` sketch ``G N mod
    p``: row operations keep column dependencies, so when ``rank_p(G N) =
    rank_p(N)`` the pivot columns agree. Returns ``(rank_p(G N), rows, cols)``,
    or None when the sketch is full (``k`` too small). The caller proves
    ``rank(N) <= rank_p(G N)`` (span check), which gives the equality. ``Nf`` is
    ``N`` as float64 when the caller has it (``|N| < 2^53``)."""
    n1, n2 = N.shape
    small = 52 - N.max_bits() - max(n1, 1).bit_length()             # bits of G for an exact G @ N
    if Nf is not None and small >= 10:
        # G with entries below 2^small: |G N| < n1 2^small 2^bits <= 2^52, exact without
        # reducing the n1 x n2 matrix; only the k x n2 product is reduced mod p
        G = rng.integers(0, 1 << small, (k, n1)).astype(np.float64)
        GN = _fmod_exact(G @ Nf, p)
    else:
        G = rng.integers(0, p, (k, n1)).astype(np.float64)
        GN = _fmod_exact(G @ _mod_f(N.values, p), p)                 # exact: n1 (p-1)^2 < 2^53
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
