"""Exact Gram matrices of large float feature matrices (numpy only).

``exact_gram(X)`` returns ``(G, e)`` with ``X^T X = G 2^e`` exactly, for a finite float64 (or float32)
array ``X`` of shape ``(K, r)``; ``G`` is an ``r x r`` list of Python ints, normalized so that some entry
is odd (or ``e = 0`` when ``G = 0``), the form of the certificates' ``gram_q`` / ``gram_q_exponent``. It
is how the checker recomputes a kernel's Grams from replayed features that are too large to embed (``K =
65,536``, ``r = 153``).

How, exactly: (1) a nonzero entry is ``m 2^E`` (``frexp``: ``1/2 <= |m| < 1``, ``|m| 2^53`` an integer;
exact), so ``X = S N 2^e0`` with the signs ``S``, ``e0`` 53 below the least ``E`` and integers ``0 <= N <
2^w``, ``w`` = the largest ``E`` minus ``e0``; (2) :func:`plan` takes the fewest limbs ``T = ceil(w / b)``
of ``b`` bits with ``2 b + c <= 52`` for blocks of ``2^c`` rows (``c >= 6``); limb ``t`` is ``L_t = F -
2^b floor(F 2^-b)`` with ``F = floor(|m| 2^s)``, ``s = E - e0 - b t`` clipped to ``[-1, 53 + b]``: below,
``F = 0`` as unclipped; above, ``F`` stays a multiple of ``2^b`` (limb 0) as unclipped; every step is exact
(power-of-two scalings in range, ``floor``, a difference that is an integer below ``2^b``); (3) ``N^T N =
sum_{s,t} 2^(b (s+t)) (S L_s)^T (S L_t)``, one float64 product per block by numpy's ``@`` (the limbs side by
side): every term is an integer below ``2^(2b)`` and every partial sum, in whatever order the BLAS adds
(with or without FMA), an integer below ``2^(2b + c) <= 2^52`` in magnitude, so each is exact, on every
machine; (4) the block results (int64, exact; 2^10 at a time, below 2^62) are summed, weighted, in Python ints.
"""

from __future__ import annotations

import numpy as np


class GramError(ValueError):
    """The features are not a finite 2-d float array."""

def plan(w: int) -> tuple[int, int, int]:
    """``(b, c, T)``: the fewest limbs ``T`` of ``b = ceil(w / T)`` bits covering ``w`` bits with ``2 b + c <=
    52`` for ``c >= 6`` (then ``c`` at most 10: blocks of at most 1024 rows)."""
    T = next(T for T in range(1, w + 2) if 2 * -(-w // T) <= 46)
    return -(-w // T), min(52 - 2 * -(-w // T), 10), T

def exact_gram(X: np.ndarray) -> tuple[list[list[int]], int]:
    """``(G, e)`` with ``X^T X = G 2^e`` exactly (module docstring); ``G`` normalized (some entry odd) or all
    zero with ``e = 0``."""
    X = np.asarray(X)
    if X.ndim != 2 or X.dtype.kind != "f":
        raise GramError(f"expected a 2-d float array, got {X.dtype} of shape {X.shape}")
    K, r, ends = X.shape[0], X.shape[1], []              # ends: the least and largest E of nonzeros
    for a in range(0, K, 1 << 12):                       # 2^12 rows at a time
        m, E = np.frexp(X[a:a + (1 << 12)].astype(np.float64))
        if not np.all(np.isfinite(m)):
            raise GramError("the features have NaN or Inf entries")
        ends += [int(E[m != 0].min()), int(E[m != 0].max())] if (m != 0).any() else []
    if not ends:
        return [[0] * r for _ in range(r)], 0
    e0 = min(ends) - 53
    b, c, T = plan(max(ends) - e0)
    acc, big = np.zeros((T * r,) * 2, dtype=np.int64), np.zeros((T * r,) * 2, dtype=object)
    A = np.empty((1 << c, T * r))                        # one block's limbs, side by side
    for i, a in enumerate(range(0, K, 1 << c)):
        m, E = np.frexp(X[a:a + (1 << c)].astype(np.float64))
        B, am, E = A[:len(m)], np.abs(m), E - e0
        for t in range(T):                               # limb t of |N|, signed (module docstring)
            F, Bt = np.floor(np.ldexp(am, np.clip(E - b * t, -1, 53 + b))), B[:, t * r:(t + 1) * r]
            np.multiply(np.floor(F * 2.0 ** -b), 2.0 ** b, out=Bt)
            np.multiply(np.subtract(F, Bt, out=Bt), np.sign(m), out=Bt)
        acc += (B.T @ B).astype(np.int64)                # exact integers below 2^52 (module docstring)
        if i % 1024 == 1023 or a + (1 << c) >= K:        # then into Python ints: the sums are exact
            big, acc = big + acc.astype(object), np.zeros_like(acc)
    G = sum((big[s * r:(s + 1) * r, t * r:(t + 1) * r] * (1 << (b * (s + t)))
             for s in range(T) for t in range(T)), np.zeros((r, r), dtype=object))
    return _normalize(G, 2 * e0)

def _normalize(G, e: int) -> tuple[list[list[int]], int]:
    """``(G / 2^k, e + k)`` for the largest ``k`` with ``2^k`` dividing every entry; ``(0, 0)`` for ``G = 0``."""
    G = np.array(G, dtype=object).reshape(len(G), -1) if len(G) else np.zeros((0, 0), dtype=object)
    g = int(np.bitwise_or.reduce(np.abs(G).ravel(), initial=0))     # the entries' bits, or-ed
    k = (g & -g).bit_length() - 1                        # the least trailing-zero count of an entry
    return ((G >> k).tolist(), e + k) if g else ([[0] * G.shape[1] for _ in G], 0)
