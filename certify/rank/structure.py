"""Nonnegativity from a feature map's structure, for token sets whose pairs
cannot be enumerated (``K^2`` products): the summaries one streaming pass
collects, and the two lemmas they feed (checked exactly by
:mod:`certify.checkers.rank.nonnegative`).

Quadratic kernel (Based's ``1 + s + s^2/2``). The features split into a
constant ``a``, a linear block ``v`` (``d`` entries) and a quadratic block ``w``
whose entry for the pair ``i <= j`` is close to ``g_ij v_i v_j`` (``g_diag`` on
the diagonal, ``g_off`` off it). With ``t = <v_q, v_k>``, ``c2 = g_off^2 / 2``,
``rho(v) = (g_ij v_i v_j)`` and ``e = w - rho(v)`` (the float rounding of the
model's own map):

    alpha = a_q a_k + t + <w_q, w_k>,
    <w_q, w_k> = <rho_q, rho_k> + <rho_q, e_k> + <e_q, w_k>,
    <rho_q, rho_k> = c2 t^2 + (g_diag^2 - c2) sum_i v_qi^2 v_ki^2,

so with ``a_q >= A_q > 0``, ``a_k >= A_k > 0``, ``||v||^2 <= V``, ``||w||^2 <= W``,
``||e||^2 <= E`` on every token (and ``||rho(v)||^2 <= max(g_diag^2, c2) ||v||^4``):

    alpha >= A_q A_k - 1 / (4 c2) - max(c2 - g_diag^2, 0) V_q V_k
             - sqrt(max(g_diag^2, c2) V_q^2 E_k) - sqrt(E_q W_k),

since ``t + c2 t^2 >= -1/(4 c2)`` for every real ``t`` (the quadratic
``c0 + c1 t + c2 t^2`` with ``c1 = 1`` is positive when ``c1^2 < 4 c0 c2``).
A positive right-hand side proves ``alpha > 0`` on every pair. The summaries are
per-token upper bounds computed in float64 with a rigorous rounding margin
(and the exact minima of ``a``).

Key box (any signed features). With ``lo_c <= phi_k(z)_c <= hi_c`` for every
key, ``<phi_q(x), phi_k(z)> >= sum_c min(q_c lo_c, q_c hi_c) =: L(x)``; a
nonnegative lower bound of ``min_x L(x)`` proves ``alpha >= 0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

U = 2.0 ** -53
INFL = 1.0 + 2.0 ** -40          # covers the relative rounding of a sum of up to 2^12 terms
TINY = 2.0 ** -1000              # absolute slack for underflow


@dataclass(frozen=True)
class QuadraticLayout:
    """Which feature is the constant, which the linear block, and which the
    quadratic entry of each pair ``i <= j`` of linear positions."""

    constant: int
    linear: tuple[int, ...]
    pairs: tuple[tuple[int, int, int], ...]        # (feature index, i, j), i <= j

    def to_json(self) -> dict[str, Any]:
        return {"constant": self.constant, "linear": list(self.linear),
                "quadratic": [list(p) for p in self.pairs]}


def taylor_layout(r: int) -> QuadraticLayout | None:
    """fla's ``TaylorFeatureMap`` (Based; zoology's keys go through the same map):
    ``[1, u / d^1/4, u_i^2 / (sqrt2 sqrt d), u_i u_j / sqrt d (i < j, row-major)]``."""
    d = 0
    while 1 + d + d * (d + 1) // 2 < r:
        d += 1
    if d == 0 or 1 + d + d * (d + 1) // 2 != r:
        return None
    diag = [(1 + d + i, i, i) for i in range(d)]
    iu = [(i, j) for i in range(d) for j in range(i + 1, d)]
    off = [(1 + 2 * d + n, i, j) for n, (i, j) in enumerate(iu)]
    return QuadraticLayout(0, tuple(range(1, d + 1)), tuple(diag + off))


#: feature maps (the ``feature_map`` a layout records) with a quadratic-kernel layout
LAYOUTS = {"based-taylor_exp": taylor_layout}


def quadratic_layout(kernel) -> QuadraticLayout | None:
    """The layout the kernel's feature map proposes (checked, not trusted: the
    lemma's summaries are measured on the features themselves)."""
    details = getattr(kernel.provenance, "details", None) or {}
    make = LAYOUTS.get(str(details.get("feature_map", "")))
    if make is None or kernel.rank is None:
        return None
    return make(kernel.feature_rank)


def _dyadic_round(x: float, bits: int = 24) -> float:
    """``x`` rounded to ``bits`` significant bits (a short exact dyadic)."""
    if x == 0 or not np.isfinite(x):
        return 0.0
    m, e = np.frexp(x)
    return float(np.ldexp(np.round(np.ldexp(m, bits)), int(e) - bits))


class QuadraticSummary:
    """Streaming summaries of one side's features (queries or keys) for the
    quadratic-kernel lemma; the coefficients ``g`` come from the first batch."""

    def __init__(self, layout: QuadraticLayout) -> None:
        self.layout = layout
        L = np.array(layout.linear, dtype=np.int64)
        self.lin = L
        self.widx = np.array([p[0] for p in layout.pairs], dtype=np.int64)
        self.pi = L[np.array([p[1] for p in layout.pairs], dtype=np.int64)]
        self.pj = L[np.array([p[2] for p in layout.pairs], dtype=np.int64)]
        self.diag = np.array([p[1] == p[2] for p in layout.pairs])
        self.g: tuple[float, float] | None = None           # (g_diag, g_off)
        self.min_const = np.inf
        self.v = self.w = self.e = 0.0

    def fix_coefficients(self, X: np.ndarray) -> tuple[float, float]:
        """``g_diag``, ``g_off``: medians of ``w / (v_i v_j)`` on a batch, to 24 bits
        (kept in ``self.g``)."""
        X = X.astype(np.float64)
        pp = X[:, self.pi] * X[:, self.pj]
        w = X[:, self.widx]
        out = []
        for sel in (self.diag, ~self.diag):
            a, b = w[:, sel].ravel(), pp[:, sel].ravel()
            ok = np.abs(b) > 0
            out.append(_dyadic_round(float(np.median(a[ok] / b[ok]))) if ok.any() else 0.0)
        self.g = (out[0], out[1])
        return self.g

    def add(self, X: np.ndarray) -> None:
        g = self.g if self.g is not None else self.fix_coefficients(X)
        X = X.astype(np.float64)
        self.min_const = min(self.min_const, float(X[:, self.layout.constant].min()))
        v = X[:, self.lin]
        w = X[:, self.widx]
        gvec = np.where(self.diag, g[0], g[1])
        gp = gvec * (X[:, self.pi] * X[:, self.pj])           # v_i v_j: exact for float32 features
        e = w - gp
        # |e_true| <= |e| + 8u (|e| + |g p|): the rounding of v_i v_j, g (v_i v_j) and w - g p
        b = np.abs(e) + 8 * U * (np.abs(e) + np.abs(gp)) + TINY
        self.v = max(self.v, float(((v * v).sum(1) * INFL).max(initial=0.0)))
        self.w = max(self.w, float(((w * w).sum(1) * INFL).max(initial=0.0)))
        self.e = max(self.e, float(((b * b).sum(1) * INFL).max(initial=0.0)))

    def result(self) -> dict[str, Fraction]:
        return {"min_const": Fraction(self.min_const), "max_linear_sq": Fraction(self.v),
                "max_quadratic_sq": Fraction(self.w), "max_residual_sq": Fraction(self.e)}


def sqrt_up(x: Fraction, bits: int = 64) -> Fraction:
    """An exact rational upper bound of ``sqrt(x)`` (``x >= 0``), within ``2^-bits``:
    ``sqrt(n/d) = sqrt(n d s^2) / (d s) <= ceil(sqrt(n d s^2)) / (d s)`` (exact on squares)."""
    n, d = x.numerator, x.denominator
    s = 1 << bits
    N = n * d * s * s
    r = math.isqrt(N)
    return Fraction(r if r * r == N else r + 1, d * s)


def quadratic_margin(gd: Fraction, go: Fraction, q: dict[str, Fraction], k: dict[str, Fraction]) -> Fraction:
    """The lemma's lower bound of ``alpha`` (module docstring), exactly."""
    c2 = go * go / 2
    c0 = q["min_const"] * k["min_const"]
    gmax = max(gd * gd, c2)
    drift = max(c2 - gd * gd, Fraction(0)) * q["max_linear_sq"] * k["max_linear_sq"]
    s1 = sqrt_up(gmax * q["max_linear_sq"] ** 2 * k["max_residual_sq"])
    s2 = sqrt_up(q["max_residual_sq"] * k["max_quadratic_sq"])
    return c0 - 1 / (4 * c2) - drift - s1 - s2


class KeyBox:
    """Per-coordinate minima and maxima of the key features (exact)."""

    def __init__(self, r: int) -> None:
        self.lo = np.full(r, np.inf)
        self.hi = np.full(r, -np.inf)

    def add(self, K: np.ndarray) -> None:
        K = K.astype(np.float64)
        self.lo = np.minimum(self.lo, K.min(0))
        self.hi = np.maximum(self.hi, K.max(0))


def box_lower_bound(Q: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    """A rigorous lower bound (float64) of ``min_x sum_c min(q_c lo_c, q_c hi_c)``
    over the query rows ``Q``: each product is exact or rounded by ``u``, the sum
    of ``r`` terms errs by at most ``(r + 1) u sum |terms|``, and the final
    subtraction by ``u`` of its operands (the ``2 |s|`` term)."""
    Q = Q.astype(np.float64)
    t = np.minimum(Q * lo, Q * hi)                         # (B, r)
    s = t.sum(1)
    err = ((Q.shape[1] + 2) * np.abs(t).sum(1) + 2 * np.abs(s)) * U * INFL + TINY
    return float((s - err).min(initial=np.inf))
