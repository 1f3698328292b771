"""The exact minimum of a linear function over a box (the dual side of a bound).

Statement: for rationals ``c_i`` and ``lo_i <= hi_i``,
``min { sum_i c_i v_i : lo_i <= v_i <= hi_i } = sum_i min(c_i lo_i, c_i hi_i)``:
the objective separates, and each term is linear in ``v_i``, so its minimum over
``[lo_i, hi_i]`` sits at an end point. A lower bound certificate that minimizes a
Lagrangian over a box (a dual-feasible point gives a bound on every primal
point of the box) reduces to this value; computed in ``Fraction``, exactly. The
statement needs ``lo_i <= hi_i``: for an empty box the sum is still returned
(the caller's containment check of its points fails first), it is no minimum.
"""
from fractions import Fraction
from typing import Iterable


def box_minimum(c: Iterable, lo: Iterable, hi: Iterable) -> Fraction:
    """``sum_i min(c_i lo_i, c_i hi_i)`` exactly (equal lengths required)."""
    c, lo, hi = list(c), list(lo), list(hi)
    if not len(c) == len(lo) == len(hi):
        raise ValueError("box_minimum: c, lo and hi differ in length")
    total = Fraction(0)
    for a, l, h in zip(c, lo, hi):
        total += min(Fraction(a) * l, Fraction(a) * h)
    return total
