"""Exact Gram matrices of huge float factors, accumulated in batches
(:class:`GramAccumulator`): integer limbs multiplied in float64 while every
partial sum stays below 2^53, so the ``K x K`` kernel is never formed.

The limb width ``b`` and the rows per float64 product ``2^c`` are chosen per
batch (:func:`limb_plan`) under ``2 b + c <= 52``: fewer, wider limbs over
shorter row chunks when that saves limb products (features spread over 66 bits:
three 22-bit limbs over 256 rows, six products, instead of four 20-bit limbs,
ten). Every choice gives the same exact integer Gram.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from certify.core.errors import InputError
from solvers.exact.integers import IntMatrix, _mantissas, _obj, fmpz_matrix

_LIMB = 20                 # bits per limb where 20 suffice (then 2^12 rows per product)
_CHUNK = 1 << 12           # rows per BLAS product at 20-bit limbs: 2^12 * 2^40 = 2^52 < 2^53 stays exact
_MIN_ROWS_LOG2 = 6         # shortest row chunk a plan uses (2^6 rows per product)
_OUT_BYTES = 32 << 20      # float64 products held at once (chunks are multiplied in groups)


def limb_plan(top: int) -> tuple[int, int]:
    """``(b, c)``: limb bits and log2 rows per float64 product for integers below
    ``2^top``, with ``2 b + c <= 52`` (each limb below ``2^b``, each product of two
    below ``2^(2b)``, a sum of ``2^c`` of them below ``2^52``: exact in float64 in
    any summation order). Minimizes the limb products ``L (L + 1) / 2`` (``L =
    ceil(top / b)``), with a small charge for the per-chunk int64 sums of short
    chunks.

    >>> limb_plan(66), limb_plan(40), limb_plan(53)
    ((22, 8), (20, 12), (18, 12))
    """
    best = None
    for L in range(1, max(1, top) + 1):
        b = max(1, -(-top // L))
        c = min(12, 52 - 2 * b)
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

    Each batch is written as ``N D`` with integer ``N`` and a power of two per
    column; ``N`` is split into 20-bit limbs and the limb products are float64
    BLAS products over at most 2^12 rows: every partial sum is an integer below
    2^52, so each product is exact. The total is kept as Python ints with one
    exponent: ``gram = G * 2^exponent``.

    >>> acc = GramAccumulator(2)
    >>> acc.add(np.array([[0.5, 1.0], [0.25, -3.0]]))
    >>> G, e = acc.result(); (G.tolist(), e)
    ([[5, -4], [-4, 160]], -4)
    """

    def __init__(self, r: int) -> None:
        self.r = int(r)
        self._total: np.ndarray | None = None        # object (r, r)
        self._exp = 0
        self.rows = 0

    def add(self, X: np.ndarray) -> None:
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.r:
            raise ValueError(f"batch must have shape (B, {self.r}), got {X.shape}")
        if X.dtype.kind == "f" and not np.all(np.isfinite(X)):
            raise InputError("features contain NaN or Inf")
        self.rows += X.shape[0]
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


def _chunk_grams(Y: np.ndarray, Z: np.ndarray | None = None, rows: int = _CHUNK) -> np.ndarray:
    """``sum_c Y_c^T Z_c`` over chunks of ``rows`` rows (``Z`` None: ``Y_c^T Y_c`` by the
    BLAS's symmetric rank-k update, half the multiplications, made symmetric here), each
    product in float64 and exact (integer-valued inputs with every partial sum below
    2^52 over ``rows`` rows, in any summation order: the caller's plan), summed as
    Python ints (object array) from int64 partial sums of at most 2^10 chunks. One BLAS
    thread (torch's, scoped and restored, for the products): small products are much
    faster there than with a contended multi-threaded BLAS. At most about 32 MB of
    products are held at once."""
    sym = Z is None
    B = Y.shape[0]
    pad = (-B) % rows
    if pad:
        Y = np.concatenate([Y, np.zeros((pad, Y.shape[1]))])
        if Z is not None:
            Z = np.concatenate([Z, np.zeros((pad, Z.shape[1]))])
    n = Y.shape[0] // rows
    m_cols = Y.shape[1] if Z is None else Z.shape[1]
    Yb = np.ascontiguousarray(Y.reshape(n, rows, Y.shape[1]))     # (nchunks, rows, .)
    Zb = np.empty((0, 0, 0)) if Z is None else np.ascontiguousarray(Z.reshape(n, rows, m_cols))
    per = max(1, min(1 << 10, _OUT_BYTES // (8 * Y.shape[1] * m_cols)))   # chunks per product group
    total = np.zeros((Y.shape[1], m_cols), dtype=object)
    if sym:
        from scipy.linalg.blas import dsyrk
    torch: Any
    try:
        import torch
    except ImportError:          # pragma: no cover - torch is a dependency; numpy is the fallback
        torch = None
    if torch is not None:
        old = torch.get_num_threads()
        torch.set_num_threads(1)
    try:
        acc, in_acc = None, 0
        for a in range(0, n, per):
            m = min(per, n - a)
            if sym:                                   # upper triangles, exact like the products
                part = dsyrk(1.0, Yb[a], trans=1).astype(np.int64)
                for i in range(a + 1, a + m):
                    part += dsyrk(1.0, Yb[i], trans=1).astype(np.int64)
            elif torch is not None:
                part = torch.bmm(torch.from_numpy(Yb[a:a + m]).transpose(1, 2),
                                 torch.from_numpy(Zb[a:a + m])).to(torch.int64).sum(0).numpy()
            else:
                part = np.matmul(Yb[a:a + m].transpose(0, 2, 1), Zb[a:a + m]).astype(np.int64).sum(0)
            if acc is not None and in_acc + m > (1 << 10):      # int64 holds 2^10 sums below 2^52
                total = total + acc.astype(object)
                acc, in_acc = None, 0
            acc = part if acc is None else acc + part
            in_acc += m
        if acc is not None:
            total = total + acc.astype(object)
    finally:
        if torch is not None:
            torch.set_num_threads(old)
    if sym:
        up = np.triu(total)
        total = up + np.triu(total, 1).T
    return total


def batch_gram(X: np.ndarray) -> tuple[np.ndarray | None, int]:
    """Exact ``X^T X = G * 2^e`` for one float (or integer) batch; ``(None, 0)`` if X = 0.

    Column ``j`` is ``Y_j 2^(E_j)`` with integer-valued float64 ``Y_j`` (power-of-two
    scaling is exact). ``|Y|`` is cut into ``b``-bit limbs by exact float steps
    (``floor`` of a power-of-two scaling, and a subtraction whose exact result is
    a representable integer below 2^b). Limb products summed over at most 2^c
    rows stay below 2^52 (:func:`limb_plan`), so each float64 product ``Z^T Z`` is exact.
    """
    X = np.asarray(X)
    B, r = X.shape
    if X.dtype.kind in "biu":
        if np.abs(X).max(initial=0) >= (1 << 53):
            F = fmpz_matrix(X.astype(object))
            return _obj(F.transpose() * F), 0
        X = X.astype(np.float64)
    p = {np.dtype(np.float16): 11, np.dtype(np.float32): 24}.get(X.dtype, 53)   # significand bits
    x = np.asarray(X, dtype=np.float64)             # exact (a float16/32 value is a float64 value)
    ax = np.abs(x)
    if not np.all(np.isfinite(ax.max(axis=0, initial=0.0))):
        raise InputError("features contain NaN or Inf")
    least = np.where(ax != 0, ax, np.inf).min(axis=0, initial=np.inf)   # (r,) least nonzero |x| per column
    if not np.isfinite(least).any():
        return None, 0
    # x = f 2^e with |f| in [1/2, 1) is a multiple of 2^(e - p); e grows with |x|, so the least
    # exponent of a column is the exponent of its least nonzero |x|
    colE = np.where(np.isfinite(least), np.frexp(np.where(np.isfinite(least), least, 1.0))[1] - p, 0)
    colE = colE.astype(np.int64)                   # (r,) per-column exponent
    y = np.ldexp(ax, (-colE)[None, :].astype(np.int32))   # exact integers (B, r)
    ymax = y.max(axis=0)
    top = int(np.frexp(ymax)[1].max())
    if top > 1000 or not np.all(np.isfinite(ymax)):    # huge spread: exact integer fallback
        mant, exp = _mantissas(X)
        F = fmpz_matrix(_dyadic_cols(mant, exp, colE))
        G = _obj(F.transpose() * F)
    else:
        b, c = limb_plan(top)
        L = max(1, -(-top // b))
        sign = np.sign(x)
        Z = np.empty((B, L * r), dtype=np.float64)  # (B, L r): limb k of column j at k r + j
        t = y
        down, up = 2.0 ** -b, 2.0 ** b              # scalings by powers of two: exact on these integers
        for k in range(L):
            nxt = np.floor(t * down)
            Zk = Z[:, k * r:(k + 1) * r]
            np.multiply(nxt, up, out=Zk)
            np.subtract(t, Zk, out=Zk)              # the low b bits: an integer below 2^b, exact
            np.multiply(Zk, sign, out=Zk)
            t = nxt
        # X^T X = sum_{k,l} 2^(b (k+l)) Z_k^T Z_l with Z_l^T Z_k = (Z_k^T Z_l)^T: the
        # products with k <= l only: Z_k^T Z_k by a symmetric update, Z_k^T [Z_(k+1) ..
        # Z_(L-1)] in one product per k
        G = np.zeros((r, r), dtype=object)
        for k in range(L):
            G = G + _chunk_grams(Z[:, k * r:(k + 1) * r], None, 1 << c) * (1 << (2 * b * k))
            if k + 1 < L:
                Pk = _chunk_grams(Z[:, k * r:(k + 1) * r], Z[:, (k + 1) * r:], 1 << c)   # (r, (L-k-1) r)
                for l in range(k + 1, L):
                    blk = Pk[:, (l - k - 1) * r:(l - k) * r]
                    G = G + (blk + blk.T) * (1 << (b * (k + l)))
    # undo the per-column powers of two: entry (i, j) carries 2^(E_i + E_j)
    e0 = int(colE.min())
    Dv = np.array([(1 << int(c - e0)) for c in colE.tolist()], dtype=object)
    G = G * Dv[:, None] * Dv[None, :]
    return G, 2 * e0


def _dyadic_cols(mant: np.ndarray, exp: np.ndarray, colE: np.ndarray) -> np.ndarray:
    out = np.empty(mant.shape, dtype=object)
    sh = exp - colE[None, :]
    for idx, (m_, s_) in enumerate(zip(mant.ravel().tolist(), sh.ravel().tolist())):
        out.flat[idx] = int(m_) << int(s_) if m_ else 0
    return out


def exact_products(Q: IntMatrix, K: IntMatrix) -> list[list[int]]:
    """``Q K^T`` exactly (small matrices: code-rank blocks, counterexamples)."""
    return (Q.fmpz() * K.fmpz().transpose()).tolist()
