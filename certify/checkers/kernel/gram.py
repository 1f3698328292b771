"""A stated Gram of a large float feature matrix, checked by one random product (numpy only).

``gram_identity(X, W, we)`` decides ``X^T X = W 2^we`` for a finite float array ``X`` (``K x r``) and an ``r x r``
matrix ``W`` of Python ints (a certificate's ``gram_q`` / ``gram_q_exponent``): it draws ``x`` uniformly from
``[0, 2^128)^r`` (:mod:`secrets`: the verifier's own coins, nothing a producer chooses) and compares ``W x 2^we``
with ``X^T (X x)`` exactly, in ``O(K r)`` instead of the Gram's ``O(K r^2)`` (replayed features).

Error. True when ``X^T X = W 2^we``. Else a row ``d`` of ``W 2^we - X^T X`` has some ``d_j != 0``; whatever the
other coordinates, at most one value of ``x_j`` gives ``d . x = 0``: the test passes with probability at most
``2^-128``, the checker's fixed floor for a randomized check.

Exactly, on every machine: (1) a nonzero entry is ``m 2^E`` (``frexp``, ``|m| 2^53`` an integer); column ``j`` is
``N 2^e_j``, ``e_j`` 53 below its least ``E``, integers ``|N| < 2^w``; so ``X x = 2^e0 y``, ``y = N x'``, ``x'_j =
x_j 2^(e_j - e0)``, ``e0 = min e_j``, ``(X^T X x)_j = 2^(e_j + e0) (N^T y)_j``; (2) ``N = sum_t 2^(b t) L_t``,
limbs ``0 <= L_t < 2^b`` and a signed top ``|L_(T-1)| <= 2^(b-1)`` (``b T > w``), by exact float steps: ``F_t =
floor(N 2^-(b t))`` is ``N`` itself (``X 2^-e_j``, when ``b T <= 847`` and ``2^-e_j`` is normal) or ``floor(m
2^s)``, ``s = E - e_j - b t`` clipped to ``[-1, 900]`` every ``847 / b`` limbs (below: 0 or -1 as unclipped;
above: a multiple of ``2^847``, the segment's limbs 0 as unclipped); ``F_(t+1) = floor(F_t 2^-b)``, ``L_t = F_t -
2^b F_(t+1)``; ``x'`` in digits ``0 <= D_k < 2^b``; (3) per block of ``2^c`` rows, ``y = sum_u 2^(b u) sum_{t + k
= u} L_t D_k``, each float64 product a sum of ``r`` terms below ``2^(2 b)``, an integer below ``2^53`` (``r 2^(2
b) <= 2^53``) in any order, with or without FMA; int64 sums carried into digits ``0 <= y_u < 2^b`` and a top
``-1`` or ``0`` (else refused); (4) ``N^T y = sum_{t, u} 2^(b (t + u)) L_t^T y_u``, float64 products of sums of
``2^c`` terms below ``2^(2 b)`` (``2^c 2^(2 b) <= 2^53``), summed in int64 512 blocks at a time.
"""

from __future__ import annotations

import secrets

import numpy as np


class GramError(ValueError):
    """The features are not a finite 2-d float array."""

def gram_identity(X: np.ndarray, W: list[list[int]], we: int, bits: int = 128) -> bool:
    """Whether ``W x 2^we = X^T X x`` for one ``x`` uniform in ``[0, 2^bits)^r``: true when ``X^T X = W
    2^we``, else with probability at most ``2^-bits`` (module docstring); false for a ``W`` of another shape."""
    X = np.asarray(X)
    if X.ndim != 2 or X.dtype not in (np.float32, np.float64):          # exactly float64 when cast
        raise GramError(f"expected a 2-d float array, got {X.dtype} of shape {X.shape}")
    (K, r), Z = X.shape, 1 << 14                          # Z: the exponent of a zero
    if len(W) != r or any(len(row) != r for row in W) or not r:
        return len(W) == r == 0                           # another shape, or nothing to check
    if not np.all(np.isfinite(X)):
        raise GramError("the features have NaN or Inf entries")
    E = np.where((mE := np.frexp(X.astype(np.float64, copy=False)))[0] != 0, mE[1], Z)
    lo, hi = E.min(0, initial=Z).astype(np.int64), np.where(E < Z, E, -Z).max(0, initial=-Z).astype(np.int64)
    ej = np.where(lo < Z, lo - 53, e0 := int(lo.min(initial=Z)) - 53)       # a zero column: any exponent
    b, w = min(21, (53 - r.bit_length()) // 2), int((hi - ej).max(initial=1)) + 1    # r 2^(2b) <= 2^53
    T, S, mask = -(-w // b), (900 - 53) // b, (1 << b) - 1
    c = max(min(10, 53 - 2 * b, 22 - (T * r).bit_length()), 0)           # 2^c 2^(2b) <= 2^53
    P = np.ldexp(1.0, -ej) if T <= S and -1022 <= -ej.max(initial=0) <= -ej.min(initial=0) <= 1023 else None
    x = [secrets.randbits(bits) for _ in range(r)]
    xs = [v << int(e - e0) for v, e in zip(x, ej)]
    U = T + (D := np.array([[(v >> (b * k)) & mask for k in range(-(-max(xs).bit_length() // b) or 1)] for v in xs],
                           dtype=np.float64).reshape(r, -1)).shape[1] + 64 // b + 2    # y's digits: carries end by then
    acc, total, L = np.zeros((T, U, r), dtype=np.int64), np.zeros((T, U, r), dtype=object), np.empty((T, 1 << c, r))
    for i, a in enumerate(range(0, K, 1 << c)):
        Xb, Y = X[a:a + (1 << c)].astype(np.float64, copy=False), np.zeros((min(K - a, 1 << c), U), dtype=np.int64)
        for t in range(T):                                # limb t of N, its part of y by weight
            if t % S == 0:                                # F = floor(N 2^-(b t)), exactly
                mb = np.frexp(Xb) if P is None else (Xb, Xb)
                F = Xb * P if P is not None else np.floor(np.ldexp(mb[0], np.clip(mb[1] - ej - b * t, -1, 900)))
            Fn, Bt = np.floor(F * 2.0 ** -b), L[t, :len(Xb)]
            np.subtract(F, np.multiply(Fn, 2.0 ** b * (t < T - 1), out=Bt), out=Bt)    # the top limb: F
            F = Fn
            Y[:, t:t + D.shape[1]] += (Bt @ D).astype(np.int64)
        for u in range(U - 1):
            Y[:, u], Y[:, u + 1] = Y[:, u] & mask, Y[:, u + 1] + (Y[:, u] >> b)
        if np.any((Y[:, -1] != 0) & (Y[:, -1] != -1)):
            return False                                  # cannot happen (module docstring); never a pass
        acc += (Y.T.astype(np.float64) @ L[:, :len(Xb)]).astype(np.int64)
        if i % 512 == 511 or a + (1 << c) >= K:          # int64 sums into Python ints
            total, acc = total + acc.astype(object), 0 * acc
    v = [sum(int(total[t, u, j]) << (b * (t + u)) for t in range(T) for u in range(U)) for j in range(r)]
    return all(_equal(sum(int(g) * xv for g, xv in zip(row, x)), we, p, int(e) + e0)
               for row, p, e in zip(W, v, ej))

def _equal(p: int, a: int, q: int, b: int) -> bool:
    """``p 2^a == q 2^b``, shifting by no more than the two numbers' own sizes."""
    if not p or not q or (p < 0) != (q < 0) or p.bit_length() + a != q.bit_length() + b:
        return p == q == 0
    return p << (a - b) == q if a >= b else p == q << (b - a)
