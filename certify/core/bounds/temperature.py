"""Thm 1: the softmin temperature that solves Min-IP at exact length n.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from certify.core.bounds.exact import HALF, as_fraction, as_int
from certify.core.errors import InputError

# ------------------------------------------------------------------ Thm 1

@dataclass(frozen=True)
class Temperature:
    """Thm 1's softmin temperature ``tau = log(n/eps)``, kept exact as the
    rational ``ratio = n/eps``; :meth:`value` is for display only."""

    n: int
    eps: Fraction
    ratio: Fraction

    def value(self, dps: int = 30) -> Any:
        import mpmath
        with mpmath.workdps(dps):
            return mpmath.log(mpmath.mpf(self.ratio.numerator) / self.ratio.denominator)


def thm1_temperature(n: Any, eps: Any = HALF) -> Temperature:
    """``tau = log(n/eps)`` suffices for ``0 <= t_hat - t < eps`` on lengths ``<= n``.

    >>> thm1_temperature(3).ratio
    Fraction(6, 1)
    """
    n = as_int(n, "n", minimum=1)
    e = as_fraction(eps, "eps")
    if e <= 0:
        raise InputError(f"eps must be > 0, got {e}")
    return Temperature(n=n, eps=e, ratio=n / e)
