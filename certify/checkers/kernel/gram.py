"""A stated Gram of a large float feature matrix, checked by one random product (numpy only).

``gram_identity(X, W, we)`` decides ``X^T X = W 2^we`` for a finite float array ``X``
(``K x r``) and an ``r x r`` matrix ``W`` of Python ints (a certificate's ``gram_q`` /
``gram_q_exponent``). It draws ``x`` uniformly from ``[0, 2^128)^r`` (:mod:`secrets`: the
verifier's own coins, nothing a producer chooses) and compares ``W x 2^we`` with
``X^T (X x)`` exactly, in ``O(K r)`` instead of the Gram's ``O(K r^2)`` (replayed features).

Error. True when ``X^T X = W 2^we``. Else a row ``d`` of ``W 2^we - X^T X`` has some
``d_j != 0``; whatever the other coordinates, at most one value of ``x_j`` gives
``d . x = 0``: the test passes with probability at most ``2^-128``, the checker's fixed
floor for a randomized check.

Exactly, on every machine, in four steps.

(1) Scales (:func:`_column_scales`). A nonzero entry is ``m 2^E`` (``frexp``; ``|m| 2^53``
    an integer). Column ``j`` is ``N 2^e_j`` with ``e_j`` 53 below its least ``E``, so
    ``N`` is an integer matrix with ``|N| < 2^w``. Then ``X x = 2^e0 y`` with ``y = N x'``,
    ``x'_j = x_j 2^(e_j - e0)``, ``e0 = min e_j``, and
    ``(X^T X x)_j = 2^(e_j + e0) (N^T y)_j``.

(2) Limbs (:func:`_limb_products`). ``N = sum_t 2^(b t) L_t`` with limbs
    ``0 <= L_t < 2^b`` and a signed top ``|L_(T-1)| <= 2^(b-1)`` (``b T > w``), cut by
    exact float steps: ``F_t = floor(N 2^-(b t))`` is ``N`` itself (``X 2^-e_j``, when
    ``b T <= 847`` and ``2^-e_j`` is normal) or ``floor(m 2^s)`` with
    ``s = E - e_j - b t`` clipped to ``[-1, 900]``, recomputed every ``847 / b`` limbs
    (below the clip: 0 or -1, as unclipped; above it: a multiple of ``2^847``, the
    segment's limbs 0 as unclipped); ``F_(t+1) = floor(F_t 2^-b)`` and
    ``L_t = F_t - 2^b F_(t+1)``. ``x'`` is cut into digits ``0 <= D_k < 2^b``
    (:func:`_digits`).

(3) ``y``, per block of ``2^c`` rows: ``y = sum_u 2^(b u) sum_{t + k = u} L_t D_k``. Each
    float64 product is a sum of ``r`` terms below ``2^(2 b)``, an integer below ``2^53``
    (``r 2^(2 b) <= 2^53``) in any order, with or without FMA. The int64 sums are carried
    into digits ``0 <= y_u < 2^b`` and a top ``-1`` or ``0`` (anything else is refused).

(4) ``N^T y = sum_{t, u} 2^(b (t + u)) L_t^T y_u``: float64 products of sums of ``2^c``
    terms below ``2^(2 b)`` (``2^c 2^(2 b) <= 2^53``), summed in int64 512 blocks at a
    time, then in Python integers.
"""

from __future__ import annotations

import secrets

import numpy as np


class GramError(ValueError):
    """The features are not a finite 2-d float array."""


def gram_identity(X: np.ndarray, W: list[list[int]], we: int, bits: int = 128) -> bool:
    """Whether ``W x 2^we = X^T X x`` for one ``x`` uniform in ``[0, 2^bits)^r``: true when
    ``X^T X = W 2^we``, else with probability at most ``2^-bits`` (module docstring); false
    for a ``W`` of another shape."""
    X = np.asarray(X)
    if X.ndim != 2 or X.dtype not in (np.float32, np.float64):          # exactly float64 when cast
        raise GramError(f"expected a 2-d float array, got {X.dtype} of shape {X.shape}")
    r = X.shape[1]
    if len(W) != r or any(len(row) != r for row in W) or not r:
        return len(W) == r == 0                           # another shape, or nothing to check
    if not np.all(np.isfinite(X)):
        raise GramError("the features have NaN or Inf entries")
    ej, e0, w = _column_scales(X)
    b = min(21, (53 - r.bit_length()) // 2)               # r 2^(2b) <= 2^53
    T = -(-w // b)                                        # the number of limbs of N
    x = [secrets.randbits(bits) for _ in range(r)]
    D = _digits([v << int(e - e0) for v, e in zip(x, ej)], b)         # x'
    total = _limb_products(X, ej, b, T, D)
    if total is None:
        return False                                      # cannot happen (module docstring); never a pass
    U = total.shape[1]
    v = [sum(int(total[t, u, j]) << (b * (t + u)) for t in range(T) for u in range(U))
         for j in range(r)]                               # N^T y, exactly
    return all(_equal(sum(int(g) * xv for g, xv in zip(row, x)), we, p, int(e) + e0)
               for row, p, e in zip(W, v, ej))


def _column_scales(X: np.ndarray) -> tuple[np.ndarray, int, int]:
    """``(e_j, e0, w)`` of step 1 (module docstring): column ``j`` of ``X`` is ``N 2^e_j``
    with integers ``|N| < 2^w``, and ``e0 = min e_j`` (a zero column takes ``e0``)."""
    Z = 1 << 14                                           # the exponent given to a zero
    mantissas, exponents = np.frexp(X.astype(np.float64, copy=False))
    E = np.where(mantissas != 0, exponents, Z)
    lo = E.min(0, initial=Z).astype(np.int64)
    hi = np.where(E < Z, E, -Z).max(0, initial=-Z).astype(np.int64)
    e0 = int(lo.min(initial=Z)) - 53
    ej = np.where(lo < Z, lo - 53, e0)                    # a zero column: any exponent
    w = int((hi - ej).max(initial=1)) + 1
    return ej, e0, w


def _digits(xs: list[int], b: int) -> np.ndarray:
    """``D`` (``len(xs) x k`` float64): ``xs[j] = sum_k D[j, k] 2^(b k)``, ``0 <= D < 2^b``."""
    mask = (1 << b) - 1
    k = -(-max(xs).bit_length() // b) or 1
    rows = [[(v >> (b * i)) & mask for i in range(k)] for v in xs]
    return np.array(rows, dtype=np.float64).reshape(len(xs), -1)


def _limb_products(X: np.ndarray, ej: np.ndarray, b: int, T: int, D: np.ndarray) -> np.ndarray | None:
    """``total[t, u, j] = (L_t^T y_u)_j`` as Python ints, summed over every block of rows
    (steps 2-4 of the module docstring); None when a block's top digit of ``y`` is not
    ``-1`` or ``0``."""
    K, r = X.shape
    S = (900 - 53) // b                                   # limbs per exact rescaling
    mask = (1 << b) - 1
    U = T + D.shape[1] + 64 // b + 2                      # y's digits: carries end by then
    c = max(min(10, 53 - 2 * b, 22 - (T * r).bit_length()), 0)           # 2^c 2^(2b) <= 2^53
    block = 1 << c
    one_scale = T <= S and -1022 <= -ej.max(initial=0) <= -ej.min(initial=0) <= 1023
    P = np.ldexp(1.0, -ej) if one_scale else None         # N = X P exactly
    acc = np.zeros((T, U, r), dtype=np.int64)
    total = np.zeros((T, U, r), dtype=object)
    L = np.empty((T, block, r))
    for i, a in enumerate(range(0, K, block)):
        Xb = X[a:a + block].astype(np.float64, copy=False)
        n = len(Xb)
        Y = np.zeros((n, U), dtype=np.int64)
        for t in range(T):                                # limb t of N, its part of y by weight
            if t % S == 0:                                # F = floor(N 2^-(b t)), exactly
                if P is not None:
                    F = Xb * P
                else:
                    m, E = np.frexp(Xb)
                    F = np.floor(np.ldexp(m, np.clip(E - ej - b * t, -1, 900)))
            Fn = np.floor(F * 2.0 ** -b)
            Lt = L[t, :n]
            base = 2.0 ** b * (t < T - 1)                 # the top limb is F itself
            np.subtract(F, np.multiply(Fn, base, out=Lt), out=Lt)
            F = Fn
            Y[:, t:t + D.shape[1]] += (Lt @ D).astype(np.int64)
        for u in range(U - 1):                            # digits 0 <= y_u < 2^b, carried up
            carry = Y[:, u] >> b
            Y[:, u] &= mask
            Y[:, u + 1] += carry
        if np.any((Y[:, -1] != 0) & (Y[:, -1] != -1)):
            return None
        acc += (Y.T.astype(np.float64) @ L[:, :n]).astype(np.int64)
        if i % 512 == 511 or a + block >= K:              # int64 sums into Python ints
            total = total + acc.astype(object)
            acc[...] = 0
    return total


def _equal(p: int, a: int, q: int, b: int) -> bool:
    """``p 2^a == q 2^b``, shifting by no more than the two numbers' own sizes."""
    if not p or not q or (p < 0) != (q < 0) or p.bit_length() + a != q.bit_length() + b:
        return p == q == 0
    return p << (a - b) == q if a >= b else p == q << (b - a)
