"""A normalized head on a family, exactly: its outputs, and the paper's Lemmas 3 and 4.

Outputs. At a position with query ``x`` of the sequence ``(z_1..z_N)`` (self term included) a head with
kernel values ``alpha`` and values ``g`` outputs ``t_hat = N / D``, ``N = sum_j alpha(x, z_j) g(x, z_j)``,
``D = sum_j alpha(x, z_j)``, defined when ``D > 0`` (:func:`output`: ints or Fractions, exact). With
``alpha`` times a positive constant (it cancels) and integer values ``G = b g`` (``b > 0``), ``t_hat = N /
(b D)`` and ``|t_hat - t| < eps`` iff ``D > 0`` and ``eps_den |N - t b D| < eps_num b D`` (:func:`within`).

Lemma 3: for ``n >= 3``, ``eps`` and a jump of overlap gap ``d = u - t >= 2 eps (n-1)/(n-2)``, a head
within ``eps`` on ``(x, y^(n-1))``, ``(x, z^(n-1))`` and ``(x, y, z^(n-2))`` has ``alpha(x, y) > (n-2)(d -
2 eps)/(2 eps) alpha(x, z)`` (:func:`lemma3`; proof in :func:`certify.core.bounds.lemmas.lemma3`).

Lemma 4: for a real matrix ``B`` with ``t`` nonzero diagonal entries (indices ``kept``) and ``C_ij = B_ij /
B_ii`` on ``kept x kept``, ``rank B >= rank C >= t^2 / ||C||_F^2`` (``C = D^-1 B[kept, kept]``, ``D``
invertible; ``t = <C, I> <= ||C||_* <= sqrt(rank C) ||C||_F``); with ``F >= ||C||_F^2`` (``|C_ij| <= 1 /
Lambda_ij``: ``F = t + sum Lambda_ij^-2``) the rank is ``>= t^2 / F``, ``> t^2 / F`` when some bound is
strict (:func:`lemma4_rank`).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Sequence


def kernel_value(u: Sequence[Any], v: Sequence[Any]) -> Fraction:
    """``alpha = <u, v> = sum_i u_i v_i`` of two rational (or float) feature rows, exactly."""
    return sum((Fraction(a) * Fraction(b) for a, b in zip(u, v, strict=True)), Fraction(0))

def output(alpha: Any, g: Any, seq: Sequence[int]) -> tuple[Any, Any]:
    """``(N, D) = (sum_j alpha[z_j] g[z_j], sum_j alpha[z_j])`` over the sequence ``seq`` (``alpha``, ``g``:
    the query's row, indexed by token)."""
    return sum(alpha[z] * g[z] for z in seq), sum(alpha[z] for z in seq)

def error(N: Any, D: Any, t: Any, b: int = 1) -> Fraction | None:
    """``|t_hat - t|`` with ``t_hat = N / (b D)``; ``None`` when ``D <= 0`` (no output)."""
    return None if D <= 0 else abs(Fraction(N) / (b * Fraction(D)) - t)

def within(N: Any, D: Any, t: Any, eps: Fraction, b: int = 1) -> bool:
    """``D > 0`` and ``|N / (b D) - t| < eps``, decided exactly (module docstring)."""
    return D > 0 and eps.denominator * abs(N - t * b * D) < eps.numerator * b * D

def lemma3(n: int, eps: Fraction, d: Any) -> tuple[Fraction, Fraction]:
    """``(2 eps (n-1)/(n-2), (n-2)(d - 2 eps)/(2 eps))``: Lemma 3's gap threshold and factor."""
    return Fraction(2 * (n - 1), n - 2) * eps, (n - 2) * (d - 2 * eps) / (2 * eps)

def lemma4_rank(t: int, frob_sq: Fraction, strict: bool) -> tuple[Fraction, int]:
    """``(t^2 / F, the least rank Lemma 4 allows)``: ``floor + 1`` when strict, else ``ceil``."""
    b = Fraction(t * t) / frob_sq
    return b, (b.numerator // b.denominator + 1 if strict else -(-b.numerator // b.denominator))

def trace_rank_bound(B: list[list[Any]]) -> tuple[list[int], Fraction, Fraction | None, Fraction]:
    """``(kept, ||C||_F^2, lambda or None, t^2 / ||C||_F^2)`` of ``B`` (Lemma 4 above; ``lambda = min |1 /
    C_ij|`` over the nonzero off-diagonal entries); with ``t = 0`` the Frobenius norm and the bound are 0.
    """
    B = [[Fraction(v) for v in row] for row in B]
    kept = [i for i in range(len(B)) if B[i][i] != 0]
    cs = [B[i][j] / B[i][i] for i in kept for j in kept if i != j and B[i][j] != 0]    # the C_ij != 0
    if not kept:
        return kept, Fraction(0), None, Fraction(0)
    frob = len(kept) + sum((c * c for c in cs), Fraction(0))
    return kept, frob, min((1 / abs(c) for c in cs), default=None), lemma4_rank(len(kept), frob, False)[0]
