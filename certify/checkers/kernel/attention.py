"""A normalized head on a family, exactly: its outputs, the paper's Lemmas 3 and 4 with their refinements,
and the quadratic-kernel lemma.

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
strict (:func:`lemma4_rank`). Refinements for ``t`` queries whose ordered pairs have chain factors
``Lambda_ij >= 1`` (``0 <= C_ij <= 1 / Lambda_ij``; proofs in
:func:`certify.core.bounds.lemmas.perron_discriminant` and :mod:`certify.feasibility.chain_bounds`): with
``rho = max 1 / Lambda_ij < 1``, ``Delta(r) = t^2 (2 + (r-1) rho)^2 - 4 r (t^2 - (r-1) t (1 - rho)) < 0``
excludes every rank ``<= r``; with nonnegative features and ``kappa^2 = max_{i != j} 1 / (Lambda_ij
Lambda_ji)`` every rank ``r < t`` with ``r kappa^2 <= 1`` is excluded (:func:`chain_ranks`).

Quadratic-kernel lemma (the argument in ``certify.rank.structure``): features ``(a, v, w)``, a constant
``a``, linear ``v`` and ``w_ij`` for the pairs ``i <= j`` with coefficients ``g_ij`` (``g_diag`` if ``i =
j``, else ``g_off != 0``); with ``c2 = g_off^2 / 2`` and per side (``_q``, ``_k``) ``0 < A <= min a``, ``V
>= max ||v||^2``, ``W >= max ||w||^2``, ``E >= max ||w - (g_ij v_i v_j)||^2``
(:func:`inertia.quadratic_summaries`), every ``alpha = a_q a_k + t + <w_q, w_k>`` (``t = <v_q, v_k>``,
``t + c2 t^2 >= -1/(4 c2)``) is at least

    A_q A_k - 1/(4 c2) - max(c2 - g_diag^2, 0) V_q V_k - sqrt(max(g_diag^2, c2) V_q^2 E_k) - sqrt(E_q W_k),

evaluated exactly, the square roots bounded above by integer square roots (:func:`quadratic_margin`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Sequence


def kernel_value(u: Sequence[Any], v: Sequence[Any]) -> Fraction:
    """``alpha = <u, v> = sum_i u_i v_i`` of two rational (or float) feature rows, exactly.

    The products are summed as integers over the least common multiple of their
    denominators, reduced once at the end: the same number as a sum of Fractions, which
    reduces after every term (``tests/test_checker_kernel.py`` compares the two)."""
    num, den = 0, 1
    for a, b in zip(u, v, strict=True):
        a = a if type(a) is Fraction else Fraction(a)
        b = b if type(b) is Fraction else Fraction(b)
        n, d = a.numerator * b.numerator, a.denominator * b.denominator
        if d == den:
            num += n
        else:
            m = math.lcm(den, d)
            num, den = num * (m // den) + n * (m // d), m
    return Fraction(num, den)


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


def chain_ranks(t: int, lam: dict[tuple[int, int], Any]) -> dict[str, Any]:
    """The rank bounds of ``t`` queries from their chain factors ``lam[i, j] >= 1`` (every ordered pair;
    module docstring): ``s = sum Lambda^-2``, Lemma 4's strict ``bound = t^2 / (t + s)`` and the largest
    rank it excludes, ``rho``, the largest ``r <= t`` with ``Delta(r) < 0`` (0 when none or ``rho >= 1``)
    and ``Delta`` there, ``kappa^2`` and the packing rank ``min(t - 1, floor(1 / kappa^2))``."""
    s = sum((Fraction(1, v * v) for v in lam.values()), Fraction(0))
    bound, least = lemma4_rank(t, t + s, True)
    rho = max(Fraction(1, v) for v in lam.values())
    delta = lambda r: t * t * (2 + (r - 1) * rho) ** 2 - 4 * r * (t * t - (r - 1) * t * (1 - rho))
    perron = max([r for r in range(1, t + 1) if delta(r) < 0], default=0) if rho < 1 else 0
    k = max(Fraction(1, lam[i, j] * lam[j, i]) for i, j in lam)
    return {"sum_inverse_lambda_sq": s, "bound": bound, "lemma4": least - 1, "rho": rho, "perron": perron,
            "discriminant": delta(perron) if perron else None, "kappa_sq": k,
            "packing": min(t - 1, k.denominator // k.numerator)}


def quadratic_margin(gd: Fraction, go: Fraction, S: dict[str, Fraction]) -> Fraction:
    """The lemma's lower bound of every ``alpha`` from the summaries ``S`` (``min_const_q``, ...,
    ``max_residual_sq_k``), exactly; ValueError unless ``g_off != 0`` and ``A_q, A_k > 0``."""
    if go == 0 or not (S["min_const_q"] > 0 and S["min_const_k"] > 0):
        raise ValueError("the quadratic-kernel lemma needs g_off != 0 and positive constant features")
    c2 = go * go / 2
    return (S["min_const_q"] * S["min_const_k"] - 1 / (4 * c2)
            - max(c2 - gd * gd, Fraction(0)) * S["max_linear_sq_q"] * S["max_linear_sq_k"]
            - _sqrt_up(max(gd * gd, c2) * S["max_linear_sq_q"] ** 2 * S["max_residual_sq_k"])
            - _sqrt_up(S["max_residual_sq_q"] * S["max_quadratic_sq_k"]))


def _sqrt_up(x: Fraction) -> Fraction:
    """A rational ``>= sqrt(x)`` for ``x = n / d >= 0``: ``ceil(sqrt(n d 4^64)) / (d 2^64)``,
    with ``ceil(sqrt(N)) = isqrt(N - 1) + 1`` for ``N >= 1`` (0 for ``x = 0``)."""
    if not x:
        return Fraction(0, x.denominator << 64)
    return Fraction(math.isqrt((x.numerator * x.denominator << 128) - 1) + 1, x.denominator << 64)
