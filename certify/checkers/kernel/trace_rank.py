"""The trace bound on rank (the paper's Lemma 4), exactly.

Statement. For a real ``W x W`` matrix ``B``, let ``kept`` be the indices of its
nonzero diagonal entries (``t`` of them) and ``C_ij = B_ij / B_ii`` on
``kept x kept``, so ``C_ii = 1``. Then ``rank B >= rank C >= t^2 / ||C||_F^2``.
Proof: ``C`` is ``D^-1 B[kept, kept]`` with ``D`` the invertible diagonal, so
``rank C <= rank B``; and ``t = |<C, I>| <= ||C||_* <= sqrt(rank C) ||C||_F``
(the trace against the identity is at most the nuclear norm, which is at most
``sqrt(rank)`` times the Frobenius norm by Cauchy-Schwarz on the singular
values). ``lambda = min |1 / C_ij|`` over the nonzero off-diagonal entries is the
amplification of the paper's form ``t / (1 + (t - 1) / lambda^2)``. Exact (``Fraction``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any


def trace_rank_bound(B: list[list[Any]]) -> tuple[list[int], Fraction, Fraction | None, Fraction]:
    """``(kept, ||C||_F^2, lambda or None, t^2 / ||C||_F^2)`` of ``B`` (module
    docstring); with ``t = 0`` the Frobenius norm and the bound are 0."""
    W = len(B)
    B = [[Fraction(v) for v in row] for row in B]
    kept = [i for i in range(W) if B[i][i] != 0]
    t = len(kept)
    frob, lam = Fraction(t), None
    for i in kept:
        for j in kept:
            if i != j and B[i][j] != 0:
                cij = B[i][j] / B[i][i]
                frob += cij * cij
                lam = 1 / abs(cij) if lam is None or 1 / abs(cij) < lam else lam
    if t == 0:
        return kept, Fraction(0), None, Fraction(0)
    return kept, frob, lam, Fraction(t * t) / frob
