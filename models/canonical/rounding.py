"""Correct rounding of python-flint ``arb`` balls to doubles: the definition of
every correctly rounded value of :mod:`models.canonical` (the arb path of
:mod:`.arith`, and the tables of the compiled kernel, :mod:`.crtables`)."""

from __future__ import annotations

import math
from typing import Callable

#: starting working precision (bits) of the ball computations; doubled until the ball rounds uniquely
START_PREC = 96
MAX_PREC = 1 << 14


def nearest(v) -> float:
    """The double nearest to an exact arb point (ties to even): Python's int
    true division is correctly rounded. Far outside the double range the result
    is read from the exponent alone (a value of at least 2^1024 rounds to an
    infinity, one below 2^-1080 to a zero of its sign), so that no huge shift
    is attempted."""
    man, exp = v.man_exp()
    man, exp = int(man), int(exp)
    if man == 0:
        return 0.0
    top = exp + man.bit_length()                   # 2^(top-1) <= |v| < 2^top
    if top > 1025:
        return float("inf") if man > 0 else float("-inf")
    if top < -1080:
        return 0.0 if man > 0 else -0.0
    try:
        return float(man << exp) if exp >= 0 else man / (1 << -exp)
    except OverflowError:
        return float("inf") if man > 0 else float("-inf")


def round_ball(ball, sign: float = 0.0) -> float | None:
    """The double every point of ``ball`` rounds to, or None when its two
    endpoints round differently (more precision is needed). A ball around zero
    whose ends round to zeros of both signs fixes only ``|value| < 2^-1075``;
    ``sign`` (+1 or -1: the sign the value is known to have) gives the zero's
    sign, and without it (0) the ball is undecided."""
    if not ball.is_finite():
        return None
    lo, hi = nearest(ball.lower()), nearest(ball.upper())
    if lo != hi:
        return None
    if lo == 0 and math.copysign(1.0, lo) != math.copysign(1.0, hi):
        return math.copysign(0.0, sign) if sign else None
    return lo


def correctly_rounded(fn: Callable, *args: float, sign: float = 0.0) -> float:
    """``fn(arb(a), ...)`` rounded to the nearest double, raising the precision
    until the enclosure rounds uniquely (exact inputs: every double is an arb);
    ``sign`` as in :func:`round_ball`."""
    from flint import arb, ctx
    prec = START_PREC
    old = ctx.prec
    try:
        while prec <= MAX_PREC:
            ctx.prec = prec
            got = round_ball(fn(*(arb(a) for a in args)), sign)
            if got is not None:
                return got
            prec *= 2
    finally:
        ctx.prec = old
    raise ArithmeticError(f"no unique rounding of {fn} at {args} within {MAX_PREC} bits")
