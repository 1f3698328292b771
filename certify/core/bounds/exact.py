"""Exact helpers and constants of the bound modules: integers and rationals only.
"""

from __future__ import annotations

import operator
from fractions import Fraction
from typing import Any

from certify.core.errors import InputError, UncertifiableError

#: Largest token dimension evaluated exactly: keeps every recorded integer below
#: Python's 4300-digit int/str conversion limit and the run well under a second.
MAX_EXACT_M = 4096
#: Largest exact length accepted by :func:`bounds_table` (Eq. 8 powers stay small).
MAX_TABLE_N = 10**6
#: Largest q * bitlength(s+1) for which (s+1)^q is formed exactly.
MAX_POWER_BITS = 1 << 24
THM6_MIN_M = 168
#: Smallest m where Thm 6's chain has Delta = floor(M/8) >= g = 5.
THM6_EXTENDED_MIN_M = 40
#: A rational upper bound of Euler's number (e = 2.718281...), used to bound
#: Prop. 10's expression from below with integers.
E_UPPER = Fraction(27183, 10000)

HALF = Fraction(1, 2)




# ------------------------------------------------------------------ exact helpers

def as_int(x: Any, name: str, *, minimum: int | None = None) -> int:
    """An exact integer (int or integral Fraction / string), at least ``minimum``."""
    if isinstance(x, bool) or isinstance(x, float):
        raise InputError(f"{name} must be an exact integer, got {x!r}")
    if isinstance(x, str):
        if len(x.strip()) > 4000:
            raise InputError(f"{name} has more than 4000 digits")
        try:
            x = int(x.strip())
        except ValueError:
            raise InputError(f"{name} must be an integer, got {x!r}") from None
    if isinstance(x, Fraction):
        if x.denominator != 1:
            raise InputError(f"{name} must be an integer, got {x}")
        x = x.numerator
    try:
        x = operator.index(x)
    except TypeError:
        raise InputError(f"{name} must be an integer, got {x!r}") from None
    if minimum is not None and x < minimum:
        raise InputError(f"{name} must be >= {minimum}, got {x}")
    return int(x)


def as_fraction(x: Any, name: str) -> Fraction:
    """An exact rational from an int, Fraction or string ("p/q" or a decimal).
    Floats are rejected: they are not exact input."""
    if isinstance(x, bool) or isinstance(x, float):
        raise InputError(f"{name} must be exact (int, Fraction or 'p/q'), got {x!r}")
    if isinstance(x, Fraction):
        return x
    if isinstance(x, str):
        from certify.core.limits import parse_exact
        return parse_exact(x, name)
    try:
        return Fraction(operator.index(x))
    except TypeError:
        raise InputError(f"{name} must be exact (int, Fraction or 'p/q'), got {x!r}") from None


def check_eps(eps: Any) -> Fraction:
    """The error level: exact and ``0 < eps <= 1/2`` (the main regime)."""
    e = as_fraction(eps, "eps")
    if not 0 < e <= HALF:
        raise InputError(f"eps must satisfy 0 < eps <= 1/2, got {e}")
    return e


def floor_q(x: Fraction) -> int:
    return x.numerator // x.denominator


def ceil_q(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


def floor_log2(x: int) -> int:
    """floor(log2 x) for an integer x >= 1."""
    if x < 1:
        raise InputError(f"log2 of a non-positive integer {x}")
    return x.bit_length() - 1


def ceil_log2(x: int) -> int:
    """ceil(log2 x) for an integer x >= 1: the least b with 2^b >= x."""
    if x < 1:
        raise InputError(f"log2 of a non-positive integer {x}")
    return (x - 1).bit_length()


def _qs(x: Fraction | int) -> str:
    x = Fraction(x)
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def _check_m(m: Any, *, minimum: int = 1) -> int:
    m = as_int(m, "m", minimum=minimum)
    if m > MAX_EXACT_M:
        raise UncertifiableError(
            f"m = {m} exceeds {MAX_EXACT_M}, the largest m evaluated exactly here")
    return m
