"""A float estimate of the numerical rank (how many singular values exceed a tolerance): the
proposal of ``certify rank``'s ``numerical_rank`` claim, which the checker's rigorous bounds then
decide (:mod:`certify.checkers.kernel.singular`). Nothing here is trusted.

A randomized range finder with one power step sees the singular values of ``A`` above the
``l``-th; when fewer than ``l - 8`` of the sketch's exceed the tolerance, the count is read off the
sketch, else the sketch grows (4x) and, past a quarter of the smaller side, numpy's SVD counts.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

#: float64's machine epsilon, as numpy's matrix_rank uses it
EPS64 = float(np.finfo(np.float64).eps)


def estimate_count(A: np.ndarray, tol: Fraction | None, seed: int = 0) -> int:
    """The number of singular values of ``A`` above ``tol`` (None: numpy's default,
    ``sigma_1 max(A.shape) eps``), estimated in floats."""
    m, n = A.shape
    N, mn = max(m, n), min(m, n)
    rng = np.random.default_rng(seed)
    width = 32
    while 4 * width < mn:
        Q = np.linalg.qr(A @ rng.standard_normal((n, width)))[0]
        Q = np.linalg.qr(A @ (A.T @ Q))[0]
        s = np.linalg.svd(Q.T @ A, compute_uv=False)
        t = float(s[0]) * N * EPS64 if tol is None else float(tol)
        count = int(np.sum(s > t))
        if count < width - 8:
            return count
        width *= 4
    s = np.linalg.svd(A, compute_uv=False)
    t = float(s[0]) * N * EPS64 if tol is None else float(tol)
    return int(np.sum(s > t))
