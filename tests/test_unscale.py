"""The integer matrix of a source under the evidence's scale, read in integers by both
checkers (numerator times what multiplies it over denominator times what divides it),
against the plain reading in Fractions: the same matrix, and the same refusal when an
entry is not an integer under the scale."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from certify.checkers.sources import NotTheMatrix, _integer_rows
from certify.reference import kernels
from certify.reference.exact import Fails, integer_form


def _plain(values, scale):
    """``values / scale`` in Fractions, or None when an entry is not an integer."""
    if scale["kind"] == "dyadic":
        out = [[v * Fraction(2) ** -scale["exponent"] for v in r] for r in values]
    else:
        out = [[v * d for v in r] for r, d in zip(values, scale["row_den"])]
    if any(x.denominator != 1 for r in out for x in r):
        return None
    return [[int(x) for x in r] for r in out]


def _cases(seed: int):
    rng = random.Random(seed)
    for _ in range(400):
        n, m = rng.randint(1, 4), rng.randint(1, 4)
        if rng.random() < 0.5:
            scale = {"kind": "dyadic", "exponent": rng.randint(-70, 70)}
            f = Fraction(2) ** scale["exponent"]
            N = [[rng.randint(-2 ** 70, 2 ** 70) for _ in range(m)] for _ in range(n)]
            values = [[v * f for v in r] for r in N]
        else:
            scale = {"kind": "row_denominators", "row_den": [rng.randint(1, 10 ** 6) for _ in range(n)]}
            values = [[Fraction(rng.randint(-2 ** 64, 2 ** 64), d) for _ in range(m)]
                      for d in scale["row_den"]]
        if rng.random() < 0.3:                      # one entry off the scale's lattice (or not)
            i, j = rng.randrange(n), rng.randrange(m)
            values[i][j] += Fraction(1, rng.choice([2, 3, 2 ** 80, 7 * 2 ** 71]))
        yield values, scale


@pytest.mark.parametrize("seed", [0, 1])
def test_both_checkers_unscale_as_fractions_do(seed):
    refused = 0
    for values, scale in _cases(seed):
        want = _plain(values, scale)
        refused += want is None
        if want is None:
            with pytest.raises(Fails, match="not integers"):
                kernels.unscaled(values, scale)
            with pytest.raises(NotTheMatrix, match="scale differs"):
                _integer_rows(values, scale)
        else:
            assert kernels.unscaled(values, scale) == want
            assert _integer_rows(values, scale) == want
            # and back: the reference's scaled() is the values, integer_form their lcm form
            assert kernels.scaled(want, scale) == values
            N, s = integer_form(values)
            assert [[x * s for x in r] for r in N] == values
    assert 40 < refused < 200                       # both branches are exercised
