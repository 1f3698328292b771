"""Exact Gram matrices of large float feature matrices (numpy only).

``exact_gram(X)`` returns ``(G, e)`` with ``X^T X = G 2^e`` exactly, for a finite float64 (or float32)
array ``X`` of shape ``(K, r)``; ``G`` is an ``r x r`` list of Python ints, normalized so that some entry
is odd (or ``e = 0`` when ``G = 0``), the form of the certificates' ``gram_q`` / ``gram_q_exponent``. It
is how the checker recomputes a kernel's Grams from replayed features that are too large to embed (``K =
65,536``, ``r = 153``).

How, exactly: (1) every entry is ``M 2^E`` with an integer ``|M| < 2^53`` (``frexp``, exact), so ``X = N
2^e0`` (``e0`` the least ``E`` of a nonzero entry) with integers ``N = M 2^(E - e0)``; (2) ``|N|`` is split
into limbs of :data:`LIMB` bits, ``N = S sum_t L_t 2^(LIMB t)`` with ``0 <= L_t < 2^LIMB`` and ``S`` the
signs (uint64 shifts and masks, exact); (3) ``N^T N = sum_{s,t} 2^(LIMB (s+t)) (S L_s)^T (S L_t)``, each
block product over :data:`BLOCK` rows in float64 by numpy's ``@`` (the limbs stacked side by side: one
product per block): every term is an integer below ``2^(2 LIMB)`` and every partial sum, in whatever order
the BLAS adds (with or without FMA), an integer below ``BLOCK 2^(2 LIMB) <= 2^52``, so each is exact, on
every machine; (4) the block results (int64, exact; 2^10 at a time) are summed, weighted in Python ints.
"""

from __future__ import annotations

import numpy as np

#: bits per limb and rows per block: BLOCK * 2^(2 LIMB) <= 2^52 keeps every float64 partial sum exact
#: (22-bit limbs: three cover the 66 bits a softmax-kernel head's features span, where 20-bit need four)
LIMB = 22
BLOCK = 1 << 8
if BLOCK * (1 << (2 * LIMB)) > 1 << 52:
    raise ImportError("BLOCK * 2^(2 LIMB) must be at most 2^52")

class GramError(ValueError):
    """The features are not a finite 2-d float array."""

def limbs(X: np.ndarray) -> tuple[list[np.ndarray], int]:
    """``([S L_0, S L_1, ...], e0)``: float64 arrays of signed limbs with ``X = sum_t (S L_t) 2^(LIMB t +
    e0)`` exactly (module docstring): with ``X = M 2^E`` (``|M| < 2^53`` integers), ``L_t`` holds the bits
    ``LIMB t - (E - e0) .. + LIMB - 1`` of ``|M|`` (none below bit 0): unsigned shifts, exact modulo 2^64."""
    if X.ndim != 2 or X.dtype.kind != "f":
        raise GramError(f"expected a 2-d float array, got {X.dtype} of shape {X.shape}")
    m, E = np.frexp(X.astype(np.float64))                # X = m 2^E, 0.5 <= |m| < 1 (exact)
    if not np.all(np.isfinite(m)):
        raise GramError("the features have NaN or Inf entries")
    nz = m != 0
    if not nz.any():
        return [], 0
    E = E.astype(np.int64) - 53
    e0 = int(E[nz].min())
    shift, A = np.where(nz, E - e0, 0), np.ldexp(np.abs(m), 53).astype(np.uint64)     # |M| = |m| 2^53
    out = []
    for t in range(-(-int((shift + 53).max()) // LIMB)):
        lo = LIMB * t - shift                            # limb t holds bits lo .. lo + LIMB - 1 of |M|
        part = (A >> np.clip(lo, 0, 63).astype(np.uint64)) << np.clip(-lo, 0, LIMB).astype(np.uint64)
        out.append((part & ((1 << LIMB) - 1)).astype(np.float64) * np.sign(m))
    return out, e0

def exact_gram(X: np.ndarray) -> tuple[list[list[int]], int]:
    """``(G, e)`` with ``X^T X = G 2^e`` exactly (module docstring); ``G`` normalized (some entry odd) or all
    zero with ``e = 0``."""
    L, e0 = limbs(np.asarray(X))
    r = X.shape[1]
    if not L:
        return [[0] * r for _ in range(r)], 0
    T, A = len(L), np.concatenate(L, axis=1)             # (K, T r), exact small integers
    acc, big = np.zeros((T * r, T * r), dtype=np.int64), np.zeros((T * r, T * r), dtype=object)
    for i, a in enumerate(range(0, A.shape[0], BLOCK)):  # exact integers < 2^52; 2^10 of them < 2^62
        acc += (A[a:a + BLOCK].T @ A[a:a + BLOCK]).astype(np.int64)
        if i % 1024 == 1023 or a + BLOCK >= A.shape[0]:  # then into Python ints: the sums are exact
            big, acc = big + acc.astype(object), np.zeros_like(acc)
    G = sum((big[s * r:(s + 1) * r, t * r:(t + 1) * r] * (1 << (LIMB * (s + t)))
             for s in range(T) for t in range(T)), np.zeros((r, r), dtype=object))
    return _normalize(G.tolist(), 2 * e0)

def _normalize(G: list[list[int]], e: int) -> tuple[list[list[int]], int]:
    k = min(((abs(v) & -abs(v)).bit_length() - 1 for row in G for v in row if v), default=None)  # common 2^k
    return ([[v >> k for v in row] for row in G], e + k) if k is not None else ([[0] * len(r) for r in G], 0)
