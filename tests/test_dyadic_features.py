"""The checker's embedded features as a float array (certify/checkers/rank/evidence.py
``_dyadic_array``): integers ``v`` times ``2^exponent`` must be exact floats of the stated
dtype. Numerators beyond 2^53 take the odd-part path (``v = m 2^t``, exact iff ``|m| < 2^53``
and the scaled value neither overflows nor rounds below the normal range); it must agree
with exact rational arithmetic, value, dtype and sign, and refuse exactly what it refuses."""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

from certify.checkers.common import Bad
from certify.checkers.rank.evidence import _dyadic_array


def _by_fractions(rows, e, dtype):
    flat = [v for r in rows for v in r]
    try:
        with np.errstate(over="ignore"):
            out = np.array([float(Fraction(v) * Fraction(2) ** e) for v in flat], dtype=np.float64).astype(dtype)
        exact = all(Fraction(float(b)) == Fraction(v) * Fraction(2) ** e for b, v in zip(out.tolist(), flat))
    except OverflowError:
        return None
    return out.reshape(len(rows), -1) if exact else None


def _value(rng):
    kind = rng.randint(0, 4)
    if kind == 0:
        return 0
    if kind == 1:
        return rng.randint(-(1 << 60), 1 << 60)                               # up to 61 significant bits
    if kind == 2:
        return rng.choice([-1, 1]) * rng.randint(1, 1 << rng.randint(1, 53)) << rng.randint(0, 200)
    if kind == 3:
        return rng.choice([-1, 1]) * rng.randint(1, 1 << 24) << rng.randint(50, 100)   # a float32 numerator
    return 1 << 60


def test_big_numerators_agree_with_exact_rational_arithmetic():
    rng = random.Random(1)
    outcomes = set()
    for _ in range(800):
        dtype = rng.choice(["float64", "float32"])
        e = rng.choice([rng.randint(-1200, 1100), rng.randint(-80, 80), -1074 - rng.randint(0, 100), 0,
                        -rng.randint(50, 260)])
        cols = rng.randint(1, 4)
        rows = [[_value(rng) for _ in range(cols)] for _ in range(rng.randint(1, 3))]
        rows[0][0] = rng.choice([1, -1]) * (1 << 53) << rng.randint(0, 10)       # one numerator >= 2^53
        want = _by_fractions(rows, e, dtype)
        try:
            got = _dyadic_array(rows, e, dtype)
        except Bad:
            got = None
        outcomes.add(want is None)
        assert (want is None) == (got is None), (rows, e, dtype)
        if want is not None:
            assert got.dtype == want.dtype and np.array_equal(got, want)
            assert np.array_equal(np.signbit(got), np.signbit(want))
    assert outcomes == {True, False}


@pytest.mark.parametrize("rows,e,dtype", [
    ([[(1 << 53) + 1, 0]], 0, "float64"),               # 54 significant bits
    ([[(1 << 24) + 1 << 40]], -40, "float32"),          # 25 significant bits in float32
    ([[1 << 60]], 1000, "float64"),                     # overflows
    ([[3 << 60]], -1200, "float64"),                    # below the subnormals
    ([[1 << 60]], 10 ** 30, "float64"),                 # an exponent no float reaches
])
def test_what_is_not_an_exact_float_is_refused(rows, e, dtype):
    with pytest.raises(Bad):
        _dyadic_array(rows, e, dtype)
