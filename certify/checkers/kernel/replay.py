"""Exact numbers for replaying a model (the transcript replay's number system).

Balls. python-flint's ``arb`` returns for ``+ - * /`` and ``exp`` a ball containing the exact result for
every point of its operands' balls, so a ball computed from exact inputs contains the exact value ``v``
(arb's containment guarantee, the one statement the replay rests on): ``lo <= v <= hi`` for its exact
dyadic ends. So a nondecreasing step function (a quantizer's cell, rounding to a float format) equal at
both ends has that value at ``v`` (:meth:`Numbers.cell`); ``v >= c`` is decided when both ends agree
(:meth:`Numbers.at_least`); a ball meeting a cell boundary, the threshold or 0 (a denominator) decides
nothing (:class:`Undecided`, never a pass); a caller may then retry at a higher working precision
(:func:`working_precision`). ``elu(x) + 1`` is nondecreasing: on a ball, the union of its
values at the two ends. With ``Fraction`` (feature maps identity, relu) every step is exact.

Integer arrays. numpy's int64 ``matmul`` and ``+ - * //`` are exact while no intermediate reaches ``2^63``;
:func:`product`, :func:`cells` and :func:`sum_at_least` prove that bound from the operands' largest entries
before using int64, and use Python integers otherwise.
"""

from __future__ import annotations

import contextlib
from fractions import Fraction
from typing import Any, Callable, Iterator, Sequence

import numpy as np

_LIM = 1 << 63


class Undecided(Exception):
    """A ball meets a cell boundary, a threshold or 0: the exact value is not decided."""


class Numbers:
    """Fractions (feature maps ``identity``, ``relu``) or arb balls (``exp``, ``elu1``)."""

    def __init__(self, fmap: str) -> None:
        if fmap not in ("identity", "relu", "exp", "elu1"):
            raise ValueError(f"unknown feature map {fmap!r}")
        self.fmap, self.balls = fmap, fmap in ("exp", "elu1")

    def num(self, x: Fraction) -> Any:
        if not self.balls:
            return x
        import flint
        return flint.arb(flint.fmpq(x.numerator, x.denominator))

    def f(self, x: Any) -> Any:
        """The feature map: exactly, or a ball containing it (module docstring)."""
        if not self.balls:
            return x if self.fmap == "identity" or x > 0 else Fraction(0)
        if self.fmap == "exp":
            return x.exp()
        g = lambda v: v + 1 if v >= 0 else v.exp()
        return g(x) if x.is_exact() else g(x.lower()).union(g(x.upper()))

    def ends(self, x: Any) -> tuple[Fraction, Fraction]:
        if not self.balls:
            return x, x
        if not x.is_finite():
            raise Undecided("infinite ball")
        (m0, e0), (m1, e1) = x.lower().man_exp(), x.upper().man_exp()
        return Fraction(int(m0)) * Fraction(2) ** int(e0), Fraction(int(m1)) * Fraction(2) ** int(e1)

    def cell(self, x: Any, symbol: Callable[[Fraction], Any]) -> Any:
        """``symbol(v)`` of the exact value, for a nondecreasing step function ``symbol``."""
        lo, hi = self.ends(x)
        s = symbol(lo)
        if hi != lo and symbol(hi) != s:
            raise Undecided("a sketch coordinate straddles a cell boundary")
        return s

    def is_zero(self, x: Any) -> bool:
        if self.balls and x.contains(0) and not x.is_zero():
            raise Undecided("denominator ball contains 0")
        return bool(x.is_zero() if self.balls else x == 0)

    def at_least(self, x: Any, c: Fraction) -> bool:
        """``v >= c`` for the exact value ``v`` (an arb comparison holds only if it holds on the
        whole ball)."""
        if not self.balls:
            return bool(x >= c)
        if not (x >= self.num(c) or x < self.num(c)):
            raise Undecided("output ball touches the threshold")
        return bool(x >= self.num(c))


@contextlib.contextmanager
def working_precision(bits: int) -> Iterator[None]:
    """python-flint's working precision (global) set to ``bits`` for the block, restored after. A ball
    contains the exact value at any precision (the containment guarantee); more bits only narrow it, so
    a checker that doubles the precision until a comparison is decided decides more, never wrongly."""
    import flint
    old = flint.ctx.prec
    flint.ctx.prec = int(bits)
    try:
        yield
    finally:
        flint.ctx.prec = old


def _mx(A: np.ndarray) -> int:
    """``max |A|`` of an integer array (int dtypes, or objects that are Python ints: the callers' part)."""
    if A.dtype.kind not in "iuO":
        raise ValueError(f"an integer array is required, not {A.dtype}")
    return max(int(A.max()), -int(A.min())) if A.size else 0


def product(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A B`` (``np.matmul``, broadcasting) of integer arrays, exactly: int64 when ``max|A|``, ``max|B|``
    and ``k max|A| max|B|`` (``k`` the inner dimension: it bounds every partial sum) are below ``2^63``,
    else Python integers."""
    a, b = _mx(A), _mx(B)
    if max(a, b, A.shape[-1] * a * b) < _LIM:                  # numpy's own integer loops, no BLAS
        return np.einsum("...j,j->..." if B.ndim == 1 else "...ij,...jk->...ik",
                         A.astype(np.int64, copy=False), B.astype(np.int64, copy=False))
    return np.matmul(A.astype(object), B.astype(object))


def cells(A: np.ndarray, B: np.ndarray, g: int, top: int, a: int, b: int) -> np.ndarray:
    """``a + b clamp(floor((A + B) / g), 0, top)`` of integer arrays, ``g > 0`` (a uniform quantizer's
    dequantized values), exactly: int64 when ``max|A| + max|B|``, ``g``, ``|a| + top |b|`` are below 2^63."""
    if g <= 0:
        raise ValueError("cells: the divisor must be positive")
    dt = np.int64 if max(_mx(A) + _mx(B), g, abs(a) + top * abs(b)) < _LIM else object
    return a + np.clip((A.astype(dt, copy=False) + B.astype(dt, copy=False)) // g, 0, top) * b


def sum_at_least(terms: Sequence[tuple[int, np.ndarray, Any]], c: Fraction) -> np.ndarray:
    """Elementwise ``|sum_k a_k N_k / D_k| >= c >= 0`` (integers ``a_k``, integer arrays ``N_k``, ``D_k !=
    0``, broadcast) exactly: ``c_den |S| >= c_num |P|``, ``P = prod_k D_k``, ``S = sum_k a_k N_k prod_(l !=
    k) D_l``, in int64 when the bounds of every partial product and sum stay below ``2^63``."""
    Ds = [np.asarray(D) for _, _, D in terms]
    if not all(np.all(D != 0) for D in Ds):
        raise ValueError("sum_at_least: a zero denominator")
    dmax = [_mx(D) for D in Ds]
    pmax = int(np.prod(dmax, dtype=object))
    Ns = [np.asarray(N) for _, N, _ in terms]
    nmax = [_mx(N) for N in Ns]
    smax = sum(abs(a) * nmax[k] * pmax // dmax[k] for k, (a, _, _) in enumerate(terms))
    top = max(c.denominator * max(smax, 1), c.numerator * pmax, *nmax, *(abs(a) for a, _, _ in terms))
    dt = np.int64 if top < _LIM else object
    Ds = [D.astype(dt, copy=False) for D in Ds]
    S, P = np.zeros((), dtype=dt), np.ones((), dtype=dt)
    for k, (a, _, _) in enumerate(terms):
        t = Ns[k].astype(dt, copy=False) * a if a != 1 else Ns[k].astype(dt, copy=False)
        for j, D in enumerate(Ds):
            if j != k and not (D.ndim == 0 and D == 1):
                t = t * D
        S, P = S + t, P * Ds[k]
    return np.asarray(c.denominator * np.abs(S) >= c.numerator * np.abs(P))
