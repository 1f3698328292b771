"""certify.checkers.gram: exact Grams of float features by limb-split float64 products,
against Fractions (an oracle sharing no code), on entries whose exponents span
hundreds of bits, signed, with zeros, subnormals and both float widths."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from certify.checkers import gram


def _fraction_gram(X):
    F = [[Fraction(float(v)) for v in row] for row in X.tolist()]
    r = len(F[0])
    return [[sum((row[i] * row[j] for row in F), Fraction(0)) for j in range(r)] for i in range(r)]


@pytest.mark.parametrize("seed,spread,dtype", [(0, 4, np.float64), (1, 300, np.float64), (2, 60, np.float32),
                                               (3, 1000, np.float64)])
def test_exact_gram_equals_fractions(seed, spread, dtype):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((300, 7)) * np.exp2(rng.integers(-spread, spread // 2 + 1, (300, 7)))
    X[rng.random((300, 7)) < 0.1] = 0.0
    if seed == 3:
        X[0, 0] = 5e-324                                  # the smallest subnormal
        X[1, 1] = -2.0 ** 500
    X = X.astype(dtype)
    G, e = gram.exact_gram(X)
    want = _fraction_gram(X)
    assert [[Fraction(v) * Fraction(2) ** e for v in row] for row in G] == want
    assert any(v % 2 for row in G for v in row)             # normalized


def test_exact_gram_over_many_blocks_and_zero():
    rng = np.random.default_rng(5)
    X = np.ldexp(rng.integers(-(1 << 52), 1 << 52, (3 * gram.BLOCK + 17, 3)).astype(np.float64), -60)
    G, e = gram.exact_gram(X)
    N = [[int(v) for v in row] for row in np.ldexp(X, 60).astype(np.int64).tolist()]
    want = [[sum(r[i] * r[j] for r in N) for j in range(3)] for i in range(3)]
    assert [[Fraction(v) * Fraction(2) ** e for v in row] for row in G] == \
        [[Fraction(v) * Fraction(2) ** -120 for v in row] for row in want]
    assert gram.exact_gram(np.zeros((5, 2))) == ([[0, 0], [0, 0]], 0)


def test_bad_features_are_refused():
    with pytest.raises(gram.GramError):
        gram.exact_gram(np.array([[1.0, np.nan]]))
    with pytest.raises(gram.GramError):
        gram.exact_gram(np.zeros((2, 2), dtype=np.int64))


def test_gram_problems_catch_a_wrong_summary(tmp_path):
    """The replayed features recompute the evidence's Grams; one unit changed is caught."""
    rng = np.random.default_rng(9)
    q, k = rng.standard_normal((50, 4)), np.abs(rng.standard_normal((50, 4)))
    np.savez(tmp_path / "f.npz", phi_q=q, phi_k=k)
    feats = gram.read_features(str(tmp_path / "f.npz"), (50, 4))
    Gq, eq = gram.exact_gram(q)
    Gk, ek = gram.exact_gram(k)
    claim = {"evidence": {"num_tokens": 50, "gram_q": Gq, "gram_q_exponent": eq,
                          "gram_k": [[2 * v for v in r] for r in Gk], "gram_k_exponent": ek - 1}}
    assert gram.gram_problems(claim, feats) == []
    claim["evidence"]["gram_q"] = [[v + (i == j == 0) for j, v in enumerate(r)] for i, r in enumerate(Gq)]
    assert gram.gram_problems(claim, feats) == ["gram_q 2^gram_q_exponent is not PhiQ^T PhiQ of the replayed "
                                                "features"]
    claim["evidence"]["num_tokens"] = 49
    assert gram.gram_problems(claim, feats)
