"""Certified singular values: exact eps-rank, enclosures, projection, Lemma 4."""

from fractions import Fraction

import numpy as np
import pytest

from certify.core.bounds import lemma4_bound
from certify.core.verdict import Verdict
from solvers import exact as ex
from solvers import spectral as sp


def _core(PQ, PK):
    gq, eq = ex.batch_gram(np.asarray(PQ, dtype=np.float64))
    gk, ek = ex.batch_gram(np.asarray(PK, dtype=np.float64))
    return ex.fmpz_matrix(gq), ex.fmpz_matrix(gk), eq + ek


@pytest.mark.parametrize("eps,k", [(Fraction(1), 2), (Fraction(99, 100), 3), (Fraction(1, 2), 3),
                                   (Fraction(49, 100), 4), (Fraction(3), 0)])
def test_eps_rank_exact_on_known_singular_values(eps, k):
    PQ = np.diag([3.0, 2.0, 1.0, 0.5])            # singular values 3, 2, 1, 1/2 (strict >)
    GQ, GK, e = _core(PQ, np.eye(4))
    res = sp.eps_rank_core(GQ * GK, e, eps)
    assert res.k == k and res.verdict is Verdict.PROVED


def test_eps_rank_agrees_with_float_svd_away_from_ties():
    rng = np.random.default_rng(0)
    PQ, PK = rng.integers(-9, 10, (30, 7)), rng.integers(-9, 10, (30, 7))
    s = np.linalg.svd((PQ @ PK.T).astype(float), compute_uv=False)
    eps = Fraction((s[3] + s[4]) / 2)
    GQ, GK, e = _core(PQ, PK)
    assert sp.eps_rank_core(GQ * GK, e, eps).k == 4


def test_enclosures_contain_the_singular_values():
    rng = np.random.default_rng(2)
    PQ, PK = rng.standard_normal((20, 5)), rng.standard_normal((20, 5))
    s = np.linalg.svd(PQ @ PK.T, compute_uv=False)[:5]
    GQ, GK, e = _core(PQ, PK)
    enc = sp.eps_rank_core(GQ * GK, e, Fraction(0), enclosures=True).sigma_sq_enclosures
    assert len(enc) == 5
    for (lo, hi), sv in zip(enc, s):
        assert lo <= hi and float(lo) <= sv * sv * (1 + 1e-9) and sv * sv <= float(hi) * (1 + 1e-9)
        assert float(hi - lo) < 1e-6 * max(1.0, sv * sv)


def test_is_psd_exact():
    assert sp.is_psd([[1, 1], [1, 1]]) and sp.is_psd([[0, 0], [0, 2]])
    assert not sp.is_psd([[1, 2], [2, 1]]) and not sp.is_psd([[0, 1], [1, 0]])
    assert not sp.is_psd([[1, 0], [1, 1]])           # not symmetric


def test_projection_certifies_a_large_gap():
    rng = np.random.default_rng(4)
    n = 180
    Q1, _ = np.linalg.qr(rng.standard_normal((n, n)))
    Q2, _ = np.linalg.qr(rng.standard_normal((n, n)))
    s = np.r_[np.full(20, 10.0), np.full(n - 20, 1e-3)]
    A = (Q1 * s) @ Q2.T
    d = ex.dyadic(A)
    res, Y = sp.eps_rank_projection(np.asarray(d.values), d.exponent, Fraction(1))
    assert res.k == 20 and res.verdict is Verdict.PROVED
    bad, _ = sp.eps_rank_projection(np.asarray(d.values), d.exponent, Fraction(1), k=21)
    assert bad.verdict is Verdict.UNKNOWN                 # sigma_21 ~ 1e-3 < 1: must not prove


@pytest.mark.parametrize("t,lam", [(15, 4), (8, 2), (5, Fraction(3, 2))])
def test_unit_diagonal_bound_matches_lemma4(t, lam):
    lam = Fraction(lam)
    B = [[Fraction(7) if i == j else Fraction(7) / lam * (-1) ** (i + j) for j in range(t)] for i in range(t)]
    b = sp.unit_diagonal_rank_bound(B)
    assert b.bound == lemma4_bound(t, lam) and b.min_lambda == lam


def test_unit_diagonal_bound_zero_diagonal_rows_are_dropped():
    B = [[Fraction(1), Fraction(0), Fraction(5)], [Fraction(0), Fraction(2), Fraction(0)],
         [Fraction(9), Fraction(9), Fraction(0)]]
    b = sp.unit_diagonal_rank_bound(B)
    assert b.kept == (0, 1) and b.t == 2 and b.rank_lower == 2
