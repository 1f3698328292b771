"""The exact Gram of a large float feature matrix (numpy only): the tests' reference, an implementation
of its own beside the producer's (:mod:`solvers.exact.gram`) and the checker's identity test
(:func:`certify.checkers.kernel.gram.gram_identity`).

``exact_gram(X)`` returns ``(G, e)`` with ``X^T X = G 2^e`` exactly, for a finite float64 (or float32)
array ``X`` of shape ``(K, r)``; ``G`` is an ``r x r`` list of Python ints, normalized so that some entry
is odd (or ``e = 0`` when ``G = 0``), the form of the certificates' ``gram_q`` / ``gram_q_exponent``.

How, exactly: (1) a nonzero entry is ``m 2^E`` (``frexp``: ``1/2 <= |m| < 1``, ``|m| 2^53`` an integer;
exact); ``X^T X`` is the sum of the Grams of any partition of the rows, so rows go in groups by the bits
they need below their columns' largest exponents (a few rows of tiny entries do not widen the others); in a
group, column ``j`` is ``S N 2^e_j`` with the signs ``S``, ``e_j`` 53 below its least ``E`` and integers ``0
<= N < 2^w``, ``w`` its largest ``E`` minus ``e_j``, and ``(X^T X)_ij = 2^(e_i + e_j) (N^T N)_ij``; (2)
:func:`plan` takes the fewest limbs ``T`` of ``b <= 23`` bits for the group's largest ``w`` and blocks of
``2^c`` rows with ``2 b + c <= 53``; limb ``t`` is ``L_t = F - 2^b floor(F 2^-b)`` with ``F = floor(|m|
2^s)``, ``s = E - e_j - b t`` clipped to ``[-1, 53 + b]``: below, ``F = 0`` as unclipped; above, ``F`` stays
a multiple of ``2^b`` (limb 0) as unclipped; every step is exact (power-of-two scalings in range, ``floor``,
a difference that is an integer below ``2^b``); (3) ``N^T N = sum_{s,t} 2^(b (s+t)) (S L_s)^T (S L_t)``,
one float64 product per block by numpy's ``@`` (the limbs side by side): every term is an integer of
magnitude at most ``(2^b - 1)^2`` and every partial sum, in whatever order the BLAS adds (with or without
FMA), an integer below ``2^(2b + c) <= 2^53`` in magnitude, so each is exact, on every machine; (4) the
block results (int64, exact) are summed 2^10 / T at a time, then the at most ``T`` products of one weight
``2^(b u)`` (``s + t = u``), below ``2^63``, and moved into Python ints.
"""

from __future__ import annotations

import numpy as np


class GramError(ValueError):
    """The features are not a finite 2-d float array."""

def plan(w: int) -> tuple[int, int, int]:
    """``(b, c, T)``: the fewest limbs ``T`` of at most 23 bits covering ``w`` bits, ``b = ceil(w / T)`` bits
    each, blocks of ``2^c`` rows with ``2 b + c <= 53`` (``c >= 7``; at most 10: blocks of 1024 rows)."""
    T = -(-w // 23)
    return -(-w // T), min(53 - 2 * -(-w // T), 10), T

def exact_gram(X: np.ndarray) -> tuple[list[list[int]], int]:
    """``(G, e)`` with ``X^T X = G 2^e`` exactly (module docstring); ``G`` normalized (some entry odd) or all
    zero with ``e = 0``."""
    X = np.asarray(X)
    if X.ndim != 2 or X.dtype.kind != "f":
        raise GramError(f"expected a 2-d float array, got {X.dtype} of shape {X.shape}")
    E = np.empty(X.shape, dtype=np.int16)                # each entry's exponent, -2^15 for a zero
    for a in range(0, len(X), 1 << 12):
        m, Ea = np.frexp(X[a:a + (1 << 12)].astype(np.float64, copy=False))
        if not np.all(np.isfinite(m)):
            raise GramError("the features have NaN or Inf entries")
        E[a:a + len(m)] = np.where(m != 0, Ea, -(1 << 15))
    need = np.where(E > -(1 << 15), E.max(0, initial=-(1 << 15)).astype(np.int32) - E, -54).max(1, initial=-54) + 53
    parts = [_gram(X, np.flatnonzero(g), E[g])          # by a row's bits below its columns' tops (< 0: zero row)
             for g in ((need > 0) & (-(-need // 23) == t) for t in np.unique(-(-need[need > 0] // 23)))]
    e = min((p[1] for p in parts), default=0)
    return _normalize(sum((G * (1 << (eg - e)) for G, eg in parts), np.zeros((X.shape[1],) * 2, dtype=object)), e)

def _gram(X: np.ndarray, rows: np.ndarray, E: np.ndarray) -> tuple[np.ndarray, int]:
    """``(G, 2 e0)`` with ``X[rows]^T X[rows] = G 2^(2 e0)``, for rows with a nonzero entry, ``E`` their exponents."""
    e0 = int(E[E > -(1 << 15)].min()) - 53               # 53 below the least exponent
    ej = np.where(E > -(1 << 15), E, e0 + 53).min(0).astype(np.int32) - 53   # each column's (a zero one's: e0)
    (K, r), (b, c, T) = E.shape, plan(int((E.max(0) - ej).max()))
    acc, big = np.zeros((T * r,) * 2, dtype=np.int64), np.zeros((2 * T - 1, r, r), dtype=object)
    A = np.empty((1 << c, T * r))                        # one block's limbs, side by side
    for i, a in enumerate(range(0, K, 1 << c)):
        m, Eb = np.frexp(X[rows[a:a + (1 << c)]].astype(np.float64, copy=False))
        B, am, Eb = A[:len(m)], np.abs(m), Eb - ej
        for t in range(T):                               # limb t of |N|, signed (module docstring)
            F, Bt = np.floor(np.ldexp(am, np.clip(Eb - b * t, -1, 53 + b))), B[:, t * r:(t + 1) * r]
            np.multiply(np.floor(F * 2.0 ** -b), 2.0 ** b, out=Bt)
            np.multiply(np.subtract(F, Bt, out=Bt), np.sign(m), out=Bt)
        acc += (B.T @ B).astype(np.int64)                # exact integers below 2^53 (module docstring)
        if i % (1024 // T) == 1024 // T - 1 or a + (1 << c) >= K:    # weight by weight into Python ints
            big, acc = big + np.array([sum(acc[s * r:(s + 1) * r, (u - s) * r:(u - s + 1) * r] for s in range(T)
                                           if 0 <= u - s < T) for u in range(2 * T - 1)]).astype(object), 0 * acc
    D = np.array([1 << int(v - e0) for v in ej], dtype=object)      # 2^(e_j - e0)
    return sum((big[u] * (1 << (b * u)) for u in range(2 * T - 1)), np.zeros((r, r), dtype=object)) * D[:, None] * D, 2 * e0

def _normalize(G: np.ndarray | list[list[int]], e: int) -> tuple[list[list[int]], int]:
    """``(G / 2^k, e + k)`` for the largest ``k`` with ``2^k`` dividing every entry; ``(0, 0)`` for ``G = 0``."""
    G = np.array(G, dtype=object).reshape(len(G), -1) if len(G) else np.zeros((0, 0), dtype=object)
    g = int(np.bitwise_or.reduce(np.abs(G).ravel(), initial=0))     # the entries' bits, or-ed
    k = (g & -g).bit_length() - 1                        # the least trailing-zero count of an entry
    return ((G >> k).tolist(), e + k) if g else ([[0] * G.shape[1] for _ in G], 0)
