"""Exact Gram matrices of huge float factors, accumulated in batches
(:class:`GramAccumulator`): integer limbs multiplied in float64 while every
partial sum stays below 2^53, so the ``K x K`` kernel is never formed.

The rows of a batch go in groups by the limbs they need (a few rows of tiny
entries do not widen the others); the limb width ``b`` and the rows per float64
product ``2^c`` are chosen per group (:func:`limb_plan`) under ``2 b + c <= 53``:
fewer, wider limbs over shorter row chunks when that saves limb products
(features spread over 66 bits: three 22-bit limbs over 256 rows, six products,
instead of four 20-bit limbs, ten). Every choice gives the same exact integer Gram.
"""

from __future__ import annotations

import numpy as np

from certify.core.errors import InputError
from solvers.exact.integers import IntMatrix, _mantissas, _obj, fmpz_matrix, int_max_abs

_LIMB = 20                 # bits per limb where 20 suffice (then 2^12 rows per product)
_MIN_ROWS_LOG2 = 6         # shortest row chunk a plan uses (2^6 rows per product)


def limb_plan(top: int) -> tuple[int, int]:
    """``(b, c)``: limb bits and log2 rows per float64 product for integers below
    ``2^top``, with ``2 b + c <= 53`` (each limb below ``2^b``, each product of two
    below ``2^(2b)``, every partial sum of ``2^c`` of them an integer below ``2^53`` in
    magnitude: representable, so exact in float64 in any summation order, fused or not). Minimizes the limb products ``L (L + 1) / 2`` (``L =
    ceil(top / b)``), with a small charge for the per-chunk int64 sums of short
    chunks.

    >>> limb_plan(66), limb_plan(69), limb_plan(40), limb_plan(53)
    ((22, 9), (23, 7), (20, 12), (18, 12))
    """
    best = None
    for L in range(1, max(1, top) + 1):
        b = max(1, -(-top // L))
        c = min(12, 53 - 2 * b)
        if c >= _MIN_ROWS_LOG2:
            cost = L * (L + 1) / 2 * (1 + 8 / (1 << c))
            if best is None or cost < best[0]:
                best = (cost, b, c)
        if b <= _LIMB:                  # narrower limbs only add products
            break
    assert best is not None
    return best[1], best[2]


class GramAccumulator:
    """Exact ``X^T X`` over row batches of a float matrix ``X (K, r)``.

    Each batch's rows are exact integers times a power of two per group of rows
    (:func:`batch_gram`), split into limbs whose float64 products over short row
    chunks have every partial sum an integer below 2^53, so each product is exact.
    The total is kept as Python ints with one exponent: ``gram = G * 2^exponent``.
    Batches are gathered up to ``gather`` rows before their Gram is computed (one
    pass of limb products for a vocabulary of 20,000 tokens fed in batches of
    2^14: the per-batch conversions into Python ints are paid once); a batch is
    copied when it is kept for later. By default ``gather`` holds 32 MB of float64
    (2^15 rows up to r = 128, 2^13 at r = 512): the limb products' temporaries are
    a few times the gathered block, so a wide head's would otherwise be a GB.

    >>> acc = GramAccumulator(2)
    >>> acc.add(np.array([[0.5, 1.0], [0.25, -3.0]]))
    >>> G, e = acc.result(); (G.tolist(), e)
    ([[5, -4], [-4, 160]], -4)
    """

    def __init__(self, r: int, gather: int | None = None) -> None:
        self.r = int(r)
        self.gather = int(gather) if gather is not None else \
            max(1 << 10, min(1 << 15, (1 << 22) // max(1, self.r)))
        self._total: np.ndarray | None = None        # object (r, r)
        self._exp = 0
        self._kept: list[np.ndarray] = []            # batches not yet in the total
        self.rows = 0

    def add(self, X: np.ndarray) -> None:
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.r:
            raise ValueError(f"batch must have shape (B, {self.r}), got {X.shape}")
        if X.dtype.kind == "f" and not np.all(np.isfinite(X)):
            raise InputError("features contain NaN or Inf")
        self.rows += X.shape[0]
        kept = sum(len(b) for b in self._kept) + X.shape[0]
        if kept < self.gather:
            self._kept.append(np.array(X, copy=True))
            return
        self._add(np.concatenate([*self._kept, X]) if self._kept else X)
        self._kept = []

    def _add(self, X: np.ndarray) -> None:
        G, e = batch_gram(X)
        if G is None:
            return
        if self._total is None:
            self._total, self._exp = G, e
        elif e >= self._exp:
            self._total = self._total + _shift_obj(G, e - self._exp)
        else:
            self._total = _shift_obj(self._total, self._exp - e) + G
            self._exp = e

    def result(self) -> tuple[np.ndarray, int]:
        """``(G, e)`` with ``X^T X = G 2^e``, ``G`` not all even (canonical)."""
        if self._kept:
            self._add(np.concatenate(self._kept))
            self._kept = []
        if self._total is None:
            return np.zeros((self.r, self.r), dtype=object) * 0, 0
        return normalize_pow2(self._total, self._exp)


def normalize_pow2(G: np.ndarray, e: int) -> tuple[np.ndarray, int]:
    """Strip the common power of two of an integer object array: ``G 2^e``."""
    g = int(np.bitwise_or.reduce(np.abs(G.ravel().astype(object)), initial=0))   # |entries| or-ed
    if not g:
        return G, 0
    s = (g & -g).bit_length() - 1                  # the least trailing-zero count of a nonzero entry
    if s == 0:
        return G, e
    out = np.empty(G.shape, dtype=object)
    for idx, v in enumerate(G.ravel().tolist()):
        out.flat[idx] = int(v) >> s
    return out, e + s


def _shift_obj(G: np.ndarray, s: int) -> np.ndarray:
    return G * (1 << s) if s else G


def batch_gram(X: np.ndarray) -> tuple[np.ndarray | None, int]:
    """Exact ``X^T X = G * 2^e`` for one float (or integer) batch; ``(None, 0)`` if X = 0.

    A Gram is a sum over rows, so the rows are taken in groups by the limbs they
    need below their columns' largest exponents (:func:`_group_gram`): a few rows
    of tiny entries do not widen every row. The groups' exact Grams are summed at
    the least exponent.
    """
    X = np.asarray(X)
    B, r = X.shape
    if X.dtype.kind in "biu":
        if int_max_abs(X) >= (1 << 53):
            F = fmpz_matrix(X.astype(object))
            return _obj(F.transpose() * F), 0
        X = X.astype(np.float64)
    p = {np.dtype(np.float16): 11, np.dtype(np.float32): 24}.get(X.dtype, 53)   # significand bits
    x = np.asarray(X, dtype=np.float64)             # exact (a float16/32 value is a float64 value)
    if not np.all(np.isfinite(np.abs(x).max(axis=0, initial=0.0))):
        raise InputError("features contain NaN or Inf")
    m, E = np.frexp(x)                              # x = m 2^E, 1/2 <= |m| < 1: a multiple of 2^(E - p)
    E = np.where(m != 0, E, -(1 << 20))             # a zero: far below every exponent
    top = E.max(axis=0)                             # (r,) each column's largest exponent
    need = np.where(m != 0, top[None, :] - E, -1).max(axis=1, initial=-1)   # (B,) a row's bits - p; -1: zero row
    if not (need >= 0).any():
        return None, 0
    limbs = -(-(need + p) // 23)                    # limbs of at most 23 bits, below the columns' tops
    parts = [_group_gram(x if g.all() else x[g], E if g.all() else E[g], p, X[g])
             for g in ((need >= 0) & (limbs == t) for t in np.unique(limbs[need >= 0]))]
    e0 = min(e for _, e in parts)
    G = np.zeros((r, r), dtype=object)
    for Gg, e in parts:
        G = G + _shift_obj(Gg, e - e0)
    return G, e0


def _group_gram(x: np.ndarray, E: np.ndarray, p: int, X: np.ndarray) -> tuple[np.ndarray, int]:
    """``(G, 2 e0)`` with ``x^T x = G 2^(2 e0)`` for float64 rows with a nonzero entry,
    ``E`` their exponents (``frexp``; far below for a zero), ``p`` the significand bits
    (``X``: the same rows as given, for the exact integer fallback of a spread over
    more than 1000 bits).

    Column ``j`` is ``2^e_j`` times exact integers below ``2^w`` (``e_j = p`` below its
    least exponent, ``w`` the largest ``top_j - e_j``); ``|x| 2^-e_j`` is cut into
    ``b``-bit limbs by exact float steps (``floor`` of a power-of-two scaling, and a
    subtraction whose exact result is a representable integer below 2^b); all limb
    products ``Z_k^T Z_l`` come from one symmetric product of the limbs side by side
    per chunk of 2^c rows (numpy's ``A.T @ A``, a BLAS ``syrk``), every partial sum an
    integer below ``2^(2b + c) <= 2^53`` (:func:`limb_plan`), so each is exact; the chunks'
    int64 sums are gathered ``2^(62 - 2b - c) / L`` chunks at a time and summed by weight
    ``2^(b (k + l))`` in int64 (below ``2^62``) before Python ints; entry ``(i, j)`` then
    carries ``2^(e_i + e_j)``.
    """
    r = x.shape[1]
    nz = E > -(1 << 20)
    e0 = int(E[nz].min()) - p
    ej = np.where(nz, E, e0 + p).min(axis=0) - p    # (r,) each column's exponent (a zero column's: e0)
    w = int((np.where(nz, E, -(1 << 20)).max(axis=0) - ej).max())   # |x| < 2^E: |x| 2^-e_j < 2^w
    if w > 1000:                                    # huge spread: exact integer fallback
        mant, exp = _mantissas(X)
        F = fmpz_matrix(_dyadic_cols(mant, exp, np.full(r, e0, dtype=np.int64)))
        return _obj(F.transpose() * F), 2 * e0
    b, c = limb_plan(w)
    L = max(1, -(-w // b))
    down, up = 2.0 ** -b, 2.0 ** b                  # scalings by powers of two: exact on these integers
    Z = np.empty((1 << c, L * r), dtype=np.float64)  # one chunk's limbs: limb k of column j at k r + j
    P = np.zeros((2 * L - 1, r, r), dtype=object)   # sum_{k+l=u} Z_k^T Z_l, exact (Python ints)
    acc = np.zeros((L * r, L * r), dtype=np.int64)
    flush = max(1, (1 << (62 - 2 * b - c)) // L)     # chunks whose int64 sums stay below 2^62
    scale = (-ej).astype(np.int32)[None, :]
    for i, a in enumerate(range(0, x.shape[0], 1 << c)):
        xc = x[a:a + (1 << c)]
        t, sign, Zc = np.ldexp(np.abs(xc), scale), np.sign(xc), Z[:len(xc)]   # exact integers below 2^w
        for k in range(L):
            nxt = np.floor(t * down)
            Zk = Zc[:, k * r:(k + 1) * r]
            np.multiply(nxt, up, out=Zk)
            np.subtract(t, Zk, out=Zk)              # the low b bits: an integer below 2^b, exact
            np.multiply(Zk, sign, out=Zk)
            t = nxt
        acc += (Zc.T @ Zc).astype(np.int64)         # a symmetric product (BLAS syrk): integers below 2^(2b+c)
        if i % flush == flush - 1 or a + (1 << c) >= x.shape[0]:
            # `flush` such sums stay below 2^62 / L: the at most L products of one weight
            # 2^(b u) (k + l = u) add up below 2^62 in int64, then into Python ints
            P += np.array([sum(acc[k * r:(k + 1) * r, (u - k) * r:(u - k + 1) * r] for k in range(L)
                               if 0 <= u - k < L) for u in range(2 * L - 1)]).astype(object)
            acc[:] = 0
    G = np.zeros((r, r), dtype=object)
    for u in range(2 * L - 1):
        G = G + P[u] * (1 << (b * u))
    D = np.array([1 << int(v - e0) for v in ej], dtype=object)      # 2^(e_j - e0)
    return G * D[:, None] * D[None, :], 2 * e0


def _dyadic_cols(mant: np.ndarray, exp: np.ndarray, colE: np.ndarray) -> np.ndarray:
    out = np.empty(mant.shape, dtype=object)
    sh = exp - colE[None, :]
    for idx, (m_, s_) in enumerate(zip(mant.ravel().tolist(), sh.ravel().tolist())):
        out.flat[idx] = int(m_) << int(s_) if m_ else 0
    return out


def exact_products(Q: IntMatrix, K: IntMatrix) -> list[list[int]]:
    """``Q K^T`` exactly (small matrices: code-rank blocks, counterexamples)."""
    return (Q.fmpz() * K.fmpz().transpose()).tolist()
