"""Two-sided bounds on the singular values of a float64 matrix, in floating point with rigorous error
bounds (numpy and fractions only): the numerical rank's count, decided without forming ``A^T A``.

The statements. ``A`` is an exact ``m x n`` matrix of float64 values (dyadic rationals). For any ``k``
and any float matrices ``Z`` (``n x k``) and ``Y`` (``m x k``) taken as exact, let ``W = fl(A Z)`` (any
float matrix: it is a proposal, taken as exact) and ``B = W Z^T`` (rank ``<= k``). Then

(1) ``sigma_{k+1}(A) <= ||A - B||_2 <= ||A - B||_F =: delta`` (Eckart-Young: no matrix of rank ``<= k``
    is closer to ``A`` than ``sigma_{k+1}``);
(2) ``sigma_i(A) >= sigma_i(B) - delta`` for ``i <= k`` (Weyl), and ``sigma_i(B) >= sigma_i(Y^T W)
    sigma_min(Z) / ||Y||_2`` (``sigma_i(Y^T W) <= ||Y|| sigma_i(W)``; ``B B^T = W Z^T Z W^T >=
    sigma_min(Z)^2 W W^T`` in the Loewner order); with ``M = Y^T W = D + F`` (``D`` its diagonal),
    ``sigma_i(M) >= d_i - ||F||_F`` (Weyl; ``d_i`` the i-th largest ``|M_jj|``);
(3) ``sigma_1(A) <= ||W||_2 ||Z||_2 + delta``, ``||X||_2^2 = lambda_max(X^T X) <= max_i sum_j |(X^T
    X)_ij|`` and ``sigma_min(Z)^2 >= min_i ((Z^T Z)_ii - sum_{j != i} |(Z^T Z)_ij|)`` (Gershgorin).

``Y`` and ``Z`` are the verifier's own proposal (a seeded randomized range finder with one power step
and the SVD of the projected matrix, numpy's LAPACK): a poor proposal can only make the bounds weak,
never wrong.

The error bounds. Binary64, round to nearest, ``u = 2^-53``, ``gamma_n = n u / (1 - n u)``; any
summation order, with or without fused multiply-adds (so BLAS may be used; a classical product, not
a fast-multiplication algorithm); ``2^-1000`` (``TINY``) added wherever an underflow could lose
less than that (every count here is below ``2^20``, so ``n 2^-1022 <= 2^-1000``).

* ``A`` is first scaled by an exact power of two (largest entry in ``[1/2, 1)``); singular values
  scale with it, and the bounds are scaled back exactly.
* Error-free products (``X Y^T``, inner dimension ``r``): each row ``i`` of ``X`` is rounded to the grid
  ``2^a_i`` (``X1 = 2^a rint(X 2^-a)``, ``|X| < 2^(a_i + b)``, ``b = floor((53 - ceil(log2 r)) / 2)``,
  ``a_i >= -500``), ``X2 = X - X1`` exactly (``|X2| <= 2^(a_i - 1)``); the same for ``Y`` (``2^c_j``).
  Every partial sum of ``X1 Y1^T`` is an integer multiple of ``2^(a_i + c_j) >= 2^-1000`` below
  ``r 2^(2b) <= 2^53`` of them, hence exact in any order. ``X Y^T = X1 Y1^T + [X1 X2] [Y2 Y]^T``, the
  second product computed with an error at most ``gamma_2r r 2^(a_i + c_j) (2^(b - 1) + 2^(b - 1))
  + TINY`` (``|X1| < 2^(a_i + b)``, ``|Y2| <= 2^(c_j - 1)``, ``|X2| <= 2^(a_i - 1)``, ``|Y| < 2^(c_j +
  b)``).
* A sum or difference ``fl(x - y)`` is within ``u |fl(x - y)| + 2^-1074`` of ``x - y``.
* Every bound is evaluated one IEEE operation at a time, moved one ulp the safe way (``nextafter``);
  constants such as ``gamma_n`` are computed in Fractions and rounded up; the last steps (the
  Frobenius norm's sum of squares, whose exact value is at most ``(s + N 2^-1022) / (1 - gamma_N+1)``
  for ``N`` terms and the computed sum ``s``) are Fractions.
* Any non-finite value, or a grid exponent outside ``[-500, 900]``, makes the function answer None.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np

U = Fraction(1, 1 << 53)
TINY = 2.0 ** -1000
#: the sizes the bounds are stated for (counts of terms below 2^20 per sum, entries below 2^40)
MAX_SIDE = 1 << 20

_up = lambda x: np.nextafter(x, np.inf)                 # the next float up
_down = lambda x: np.nextafter(x, -np.inf)


def _ceil(q: Fraction) -> float:
    """The least float ``>= q``."""
    f = float(q)
    return f if Fraction(f) >= q else float(np.nextafter(f, np.inf))


def _gamma(n: int) -> float:
    """The least float ``>= gamma_n = n u / (1 - n u)``."""
    return _ceil(n * U / (1 - n * U))


class Bounds(NamedTuple):
    """What :func:`singular_bounds` proves about ``A`` (exact rationals)."""

    #: ``lower[i] <= sigma_{i+1}(A)`` for ``i < k`` (may be negative: nothing proved)
    lower: list[Fraction]
    #: ``sigma_{k+1}(A)^2 <= delta_sq`` (every singular value after the k-th)
    delta_sq: Fraction
    #: ``sigma_1(A) <= sigma1_upper``
    sigma1_upper: Fraction


def _split(X: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(X1, X2, a)``: each row of ``X`` rounded to the grid ``2^a_i`` (module docstring)."""
    top = np.max(np.abs(X), axis=1) if X.shape[1] else np.zeros(X.shape[0])
    a = np.maximum(np.frexp(top)[1].astype(np.int64) - bits, -500)       # |X_i.| < 2^(a_i + bits)
    if a.size and a.max() > 900:
        return None
    X1 = np.ldexp(np.rint(np.ldexp(X, -a[:, None])), a[:, None])
    return X1, X - X1, a


def _product(X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(P, R)``: the exact ``X Y^T`` is within ``R`` of ``P`` entrywise (error-free split, module
    docstring), or None."""
    r = X.shape[1]
    bits = (53 - max(r - 1, 1).bit_length()) // 2
    sx, sy = _split(X, bits), _split(Y, bits)
    if sx is None or sy is None:
        return None
    (X1, X2, a), (Y1, Y2, c) = sx, sy
    P1 = X1 @ Y1.T                                                       # exact
    P2 = np.hstack([X1, X2]) @ np.hstack([Y2, Y]).T
    scale = np.ldexp(1.0, np.add.outer(a, c))                           # 2^(a_i + c_j), exact
    err = _up(_up(scale * _ceil(Fraction(_gamma(2 * r)) * r * 2 ** bits)) + TINY)
    P = P1 + P2
    R = _up(_up(err + _up(np.abs(P) * float(U))) + 2.0 ** -1074)
    if not (np.all(np.isfinite(P)) and np.all(np.isfinite(R))):
        return None
    return P, R


def _frobenius_sq(T: np.ndarray) -> Fraction:
    """An upper bound of the exact ``sum T_ij^2`` for a nonnegative float array (module docstring)."""
    flat = np.ascontiguousarray(T, dtype=np.float64).ravel()
    s = Fraction(float(np.dot(flat, flat)))
    N = flat.size
    return (s + Fraction(N, 1 << 1022)) / (1 - (N + 1) * U / (1 - (N + 1) * U))


def _norm_sq_upper(P: np.ndarray, R: np.ndarray) -> float:
    """An upper bound of ``lambda_max`` of the exact symmetric matrix within ``R`` of ``P``."""
    rows = np.sum(_up(np.abs(P) + R), axis=1)                           # any order: gamma bound
    return float(_up(_up(rows.max(initial=0.0)) * _ceil(1 + 2 * Fraction(_gamma(P.shape[1] + 1)))))


def _gershgorin_lower(P: np.ndarray, R: np.ndarray) -> float:
    """A lower bound of ``lambda_min`` of the exact symmetric matrix within ``R`` of ``P``."""
    off = _up(np.abs(P) + R)
    np.fill_diagonal(off, 0.0)
    radius = _up(np.sum(off, axis=1) * _ceil(1 + 2 * Fraction(_gamma(P.shape[1] + 1))))
    low = _down(_down(np.diag(P) - np.diag(R)) - radius)
    return float(low.min(initial=np.inf))


def propose(A: np.ndarray, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(Y, Z)``: approximate top-``k`` left and right singular vectors of ``A`` (the verifier's own
    proposal, module docstring; seeded, so the same on every run of one machine)."""
    m, n = A.shape
    if k == 0:
        return np.zeros((m, 0)), np.zeros((n, 0))
    if 2 * (k + 10) >= min(m, n):
        Uf, _, Vt = np.linalg.svd(A, full_matrices=False)
        return Uf[:, :k], Vt[:k].T
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(A @ rng.standard_normal((n, k + 10)))[0]
    Q = np.linalg.qr(A @ (A.T @ Q))[0]
    Uc, _, Vt = np.linalg.svd(Q.T @ A, full_matrices=False)
    return Q @ Uc[:, :k], Vt[:k].T


def _residual_sq(A: np.ndarray, W: np.ndarray, Z: np.ndarray) -> Fraction | None:
    """An upper bound of ``||A - W Z^T||_F^2`` (module docstring), or None."""
    if W.shape[1] == 0:
        return _frobenius_sq(np.abs(A))
    pr = _product(W, Z)
    if pr is None:
        return None
    P, R = pr
    E = A - P
    R = _up(_up(R + _up(np.abs(E) * float(U))) + 2.0 ** -1074)
    T = _up(np.abs(E) + R)
    return _frobenius_sq(T) if np.all(np.isfinite(T)) else None


def _sqrt_down(q: Fraction) -> Fraction:
    """A rational ``<= sqrt(q)`` (``q >= 0``), within a relative 2^-60."""
    s = math.isqrt(q.numerator * q.denominator * (1 << 120))
    return Fraction(s, q.denominator << 60)


def _sqrt_up(q: Fraction) -> Fraction:
    """A rational ``>= sqrt(q)`` (``q >= 0``), within a relative 2^-60."""
    s = math.isqrt(q.numerator * q.denominator * (1 << 120)) + 1
    return Fraction(s, q.denominator << 60)


def singular_bounds(A: np.ndarray, k: int, seed: int = 0) -> Bounds | None:
    """Rigorous bounds on the singular values of the float64 matrix ``A`` from a rank-``k``
    approximation (module docstring): ``lower[i] <= sigma_{i+1}`` for ``i < k``, ``sigma_{k+1}^2 <=
    delta_sq`` and ``sigma_1 <= sigma1_upper``; None when floats cannot bound them (a non-finite
    value, an exponent out of range, or a side above :data:`MAX_SIDE`)."""
    A = np.asarray(A)
    if A.dtype != np.float64 or A.ndim != 2 or not 0 <= k <= min(A.shape) or max(A.shape) > MAX_SIDE \
            or not np.all(np.isfinite(A)):
        return None
    top = float(np.abs(A).max(initial=0.0))
    if top == 0.0:
        return Bounds([Fraction(0)] * k, Fraction(0), Fraction(0))
    s = int(np.frexp(top)[1])                                           # A 2^-s: largest in [1/2, 1)
    A = np.ldexp(A, -s)
    Y, Z = propose(A, k, seed)
    W = A @ Z
    delta_sq = _residual_sq(A, W, Z)
    if delta_sq is None:
        return None
    delta = _sqrt_up(delta_sq)
    if k == 0:
        return Bounds([], delta_sq * Fraction(4) ** s, delta * Fraction(2) ** s)
    got = [_product(Y.T, W.T), _product(Z.T, Z.T), _product(W.T, W.T), _product(Y.T, Y.T)]
    if any(g is None for g in got):
        return None
    (M, RM), (GZ, RZ), (GW, RW), (GY, RY) = got                           # type: ignore[misc]
    F = _up(np.abs(M) + RM)
    np.fill_diagonal(F, np.diag(RM))
    f = _sqrt_up(_frobenius_sq(F))                                       # >= ||M - diag(M)||_2
    zmin_sq = _gershgorin_lower(GZ, RZ)
    if not zmin_sq > 0:
        return None
    ymax = _sqrt_up(Fraction(_norm_sq_upper(GY, RY)))
    factor = _sqrt_down(Fraction(zmin_sq)) / ymax
    d = sorted((Fraction(float(v)) for v in np.abs(np.diag(M))), reverse=True)
    lower = [((v - f) * factor - delta) * Fraction(2) ** s for v in d]
    s1 = (_sqrt_up(Fraction(_norm_sq_upper(GW, RW))) * _sqrt_up(Fraction(_norm_sq_upper(GZ, RZ))) + delta)
    return Bounds(lower, delta_sq * Fraction(4) ** s, s1 * Fraction(2) ** s)
