"""Exact rank: lossless conversion, modular lower bounds, exact witnesses, soundness."""

from fractions import Fraction
from math import comb

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from certify.core.errors import InputError
from certify.core.verdict import Verdict
from solvers import exact as ex


def _frac(a):
    return [[Fraction(float(v)) for v in row] for row in np.asarray(a)]


# ---------------------------------------------------------------- conversion

@settings(derandomize=True, max_examples=60, deadline=None)
@given(arrays(np.float64, (3, 4), elements=st.floats(allow_nan=False, allow_infinity=False, width=64)))
def test_dyadic_is_lossless(a):
    d = ex.dyadic(a)
    scale = Fraction(2) ** d.exponent
    assert [[Fraction(int(v)) * scale for v in row] for row in d.values.tolist()] == _frac(a)


def test_dyadic_float32_subnormal_and_huge():
    a = np.array([[np.finfo(np.float32).smallest_subnormal, 3.0e38], [-1.5, 0.0]], dtype=np.float32)
    d = ex.dyadic(a)
    assert d.values.dtype == object                      # does not fit int64: kept exact
    scale = Fraction(2) ** d.exponent
    assert [[Fraction(int(v)) * scale for v in row] for row in d.values.tolist()] == _frac(a)


@pytest.mark.parametrize("bad", [np.array([[1.0, np.nan]]), np.array([[np.inf]]),
                                 np.zeros((0, 3)), [[1.0, 2.0], [3.0]], np.ones(3)])
def test_bad_matrices_are_input_errors(bad):
    with pytest.raises(InputError):
        ex.dyadic(bad)


def test_gram_accumulator_exact_over_batches():
    rng = np.random.default_rng(3)
    X = (rng.standard_normal((700, 4)) * np.exp(rng.standard_normal((700, 4)) * 6)).astype(np.float32)
    acc = ex.GramAccumulator(4)
    for s in range(0, 700, 256):
        acc.add(X[s:s + 256])
    G, e = acc.result()
    F = _frac(X)
    want = [[sum(F[t][i] * F[t][j] for t in range(700)) for j in range(4)] for i in range(4)]
    assert [[Fraction(int(v)) * Fraction(2) ** e for v in row] for row in G.tolist()] == want


# ---------------------------------------------------------------- exact rank

def test_hilbert_exact_rank_where_float_rank_fails():
    n = 14
    H = [[Fraction(1, i + j + 1) for j in range(n)] for i in range(n)]
    res = ex.exact_rank(ex.rational_rows(H), seed=0)
    assert np.linalg.matrix_rank(scipy.linalg.hilbert(n)) < n
    assert (res.lower, res.upper, res.verdict) == (n, n, Verdict.PROVED)


def test_planted_rank_from_integer_factors():
    rng = np.random.default_rng(7)
    U, V = rng.integers(-40, 40, (70, 9)), rng.integers(-40, 40, (9, 55))
    A = (U @ V).astype(np.float64) * 2.0 ** -30          # exact dyadic floats, rank 9
    res = ex.exact_rank(ex.dyadic(A), seed=1)
    assert (res.lower, res.upper, res.verdict, res.upper_witness) == (9, 9, Verdict.PROVED, "column_span")
    sub = ex.dyadic(A).fmpz(res.minor_rows, res.minor_cols)
    assert sub.det() != 0


def _first_prime(seed):
    from solvers.exact.draws import Draws  # the draws exact_rank(seed=...) makes
    return ex.random_prime(Draws(seed))


def test_minor_vanishing_mod_first_prime_is_caught():
    p = _first_prime(0)
    U = np.array([[1, 2, 0], [0, 1, 3], [1, 0, 1]], dtype=object)   # det 7: unimodular mixing not needed
    D = np.diag(np.array([1, 1, p], dtype=object))
    A = U.dot(D).dot(U.T)                                # rank 3 over Q, rank 2 mod p
    N = ex.IntMatrix(A)
    res = ex.exact_rank(N, seed=0)
    assert res.attempts[0].prime == p and res.attempts[0].rank_mod_p == 2
    assert (res.lower, res.upper, res.verdict) == (3, 3, Verdict.PROVED)


def test_rank_deficient_and_first_prime_lies():
    p = _first_prime(5)
    N = ex.IntMatrix(np.array([[1, 0, 0], [0, p, 0], [0, 0, 0], [1, p, 0]], dtype=object))  # rank 2
    one = ex.exact_rank(N, seed=5, max_primes=1)
    assert one.verdict is Verdict.UNKNOWN and (one.lower, one.upper) == (1, 3)   # honest interval
    res = ex.exact_rank(N, seed=5)
    assert (res.lower, res.upper, res.verdict) == (2, 2, Verdict.PROVED)


def _overlap_rank_oracle(f, m):
    """A[x, z] = f(<x, z>) on the cube equals U diag(a) U^T with U[x, S] = [S in x]
    (invertible) and a_j the j-th finite difference of f at 0: rank = sum of
    C(m, j) over the j with a_j != 0."""
    a = [sum((-1) ** (j - i) * comb(j, i) * f[i] for i in range(j + 1)) for j in range(m + 1)]
    return sum(comb(m, j) for j in range(m + 1) if a[j] != 0)


@pytest.mark.parametrize("tau", [2e-3, pytest.param(1e-3, marks=pytest.mark.slow)])
def test_thm2_cube_kernel_float64(tau):
    m = 10
    K = np.array([[1.0, 1.0], [1.0, np.exp(-tau)]])
    A = K
    for _ in range(m - 1):
        A = np.kron(A, K)                                 # (1024, 1024) float64
    f = [Fraction(float(A[(1 << k) - 1, (1 << k) - 1])) for k in range(m + 1)]  # value at overlap k
    oracle = _overlap_rank_oracle(f, m)
    float_rank = np.linalg.matrix_rank(A)
    res = ex.exact_rank(ex.dyadic(A), seed=0)
    assert float_rank < 700                               # float SVD: far fewer than 1024
    assert res.verdict is Verdict.PROVED and res.lower == oracle
    if tau == 2e-3:
        assert oracle == 1024


def test_core_rank_matches_full_product():
    rng = np.random.default_rng(11)
    PQ = rng.integers(-5, 6, (40, 6)).astype(np.float64)
    PK = (rng.integers(-5, 6, (40, 3)) @ rng.integers(-3, 4, (3, 6))).astype(np.float64)  # rank 3
    gq, eq = ex.batch_gram(PQ)
    gk, ek = ex.batch_gram(PK)
    res = ex.core_rank(ex.IntMatrix(ex.compact(gq)), ex.IntMatrix(ex.compact(gk)))
    full = ex.fmpz_matrix(PQ.astype(np.int64)) * ex.fmpz_matrix(PK.astype(np.int64)).transpose()
    assert full.rank() == 3
    assert (res.lower, res.upper, res.verdict, res.upper_witness) == (3, 3, Verdict.PROVED, "null_space")


def test_batch_gram_equals_the_reference_exact_gram_across_limbs():
    """The producer's exact Gram (limb products, only the blocks k <= l computed and the
    others read as their transposes) equals the tests' reference exact Gram on features
    whose exponents spread over about 35 bits (five 20-bit limbs), on signed data with
    a per-entry exponent, and on a float32 batch."""
    from gram_reference import exact_gram
    rng = np.random.default_rng(12)
    cases = [np.exp(rng.normal(0, 3, (5000, 30))),
             np.ldexp(rng.integers(-2 ** 52, 2 ** 52, (700, 9)).astype(float), rng.integers(-60, 60, (700, 9))),
             rng.normal(0, 1, (300, 6)).astype(np.float32)]
    for X in cases:
        G, e = ex.normalize_pow2(*ex.batch_gram(X))
        assert (G.tolist(), e) == exact_gram(X)


def test_batch_gram_wide_limb_plans_equal_the_reference_exact_gram():
    """Features spread over 66 and 67 bits take the wider limbs over shorter row chunks
    (22 bits over 512 rows, 23 over 128: three limbs where 20-bit limbs need four), and
    a batch of more chunks than one int64 gathering holds flushes its sums: the Gram is
    the same exact integer matrix as the tests' reference."""
    from gram_reference import exact_gram

    from solvers.exact.gram import limb_plan
    assert (limb_plan(66), limb_plan(67), limb_plan(40)) == ((22, 9), (23, 7), (20, 12))
    rng = np.random.default_rng(13)
    for spread, rows in ((13, 3000), (14, 3000), (14, 70000)):
        X = np.ldexp(rng.uniform(0.5, 1.0, (rows, 5)), rng.integers(0, spread + 1, (rows, 5)))
        X[0, :] = 0.5                                        # the least exponent in every column
        X[1, :] = np.nextafter(2.0 ** spread, 0)             # the greatest: 53 + spread bits in all
        G, e = ex.normalize_pow2(*ex.batch_gram(X))
        assert (G.tolist(), e) == exact_gram(X)


def test_batch_gram_equals_integer_arithmetic_on_random_rows_of_any_spread():
    """The producer's exact Gram (rows grouped by the limbs they need, one symmetric limb
    product per chunk, the integer fallback past 1000 bits) against integer arithmetic
    (``as_integer_ratio`` and python-flint) on 200 random batches: both float widths,
    exponents from the least subnormal to 2^960, zeros, a few rows far below the rest."""
    import flint
    rng = np.random.default_rng(14)
    for n in range(200):
        dtype = np.float32 if n % 4 == 0 else np.float64
        K, r = int(rng.integers(1, 60)), int(rng.integers(1, 6))
        lo_e, hi_e = (-149, 120) if dtype == np.float32 else (-1074, 960)
        a = int(rng.integers(lo_e, hi_e))
        b = min(hi_e, a + int(rng.choice([0, 20, 66, 150, 900, 2100])))
        X = rng.standard_normal((K, r)) * np.exp2(rng.integers(a, b + 1, (K, r)).astype(np.float64))
        X[rng.random((K, r)) < 0.15] = 0.0
        X[rng.random(K) < 0.1] *= 2.0 ** -80
        with np.errstate(over="ignore", under="ignore"):
            X = X.astype(dtype)
        X = np.where(np.isfinite(X), X, 0.0).astype(dtype)
        fr = [[float(v).as_integer_ratio() for v in row] for row in X.tolist()]
        den = max((d for row in fr for _, d in row), default=1)
        N = flint.fmpz_mat([[p * (den // d) for p, d in row] for row in fr])
        want = [[int(v) for v in row] for row in (N.transpose() * N).tolist()]
        G, e = ex.batch_gram(X)
        got = [[Fraction(0)] * r for _ in range(r)] if G is None else \
            [[Fraction(int(v)) * Fraction(2) ** e for v in row] for row in G.tolist()]
        assert got == [[Fraction(v, den * den) for v in row] for row in want], n


def test_gram_accumulator_gathers_batches_to_the_same_exact_gram():
    """Batches gathered before their Gram (the default) or taken one by one give the same
    exact Gram as the whole matrix at once; a batch added is copied, so changing it later
    changes nothing."""
    rng = np.random.default_rng(15)
    X = np.ldexp(rng.standard_normal((3000, 7)), rng.integers(-30, 5, (3000, 7)))
    whole = ex.normalize_pow2(*ex.batch_gram(X))
    for gather in (1, 1000, 1 << 15):
        acc = ex.GramAccumulator(7, gather=gather)
        for a in range(0, 3000, 700):
            batch = X[a:a + 700].copy()
            acc.add(batch)
            batch[:] = 1.0
        G, e = acc.result()
        assert (G.tolist(), e) == (whole[0].tolist(), whole[1]) and acc.rows == 3000


def test_batch_gram_sums_by_weight_within_int64_over_many_chunks():
    """More than 2^10 chunks whose limbs are nearly all ones (chunk sums near 2^53, three
    limb products of one weight): the int64 sums must move into Python ints often enough;
    the Gram equals integer arithmetic."""
    from solvers.exact.gram import limb_plan
    rng = np.random.default_rng(16)
    rows = 1100 * (1 << limb_plan(66)[1])
    X = np.empty((rows, 2))
    X[:, 0] = (2.0 ** 53 - 1) * 2.0 ** -40                             # 53 ones, 13 bits above e_0
    X[0, 0] = 0.5                                                     # e_0 = -53: 66 bits
    X[:, 1] = np.ldexp(rng.integers(1 << 52, 1 << 53, rows).astype(np.float64), rng.integers(-53, -39, rows))
    N = [[int(v) for v in row] for row in np.ldexp(X, 53).astype(object).tolist()]
    want = [[sum(row[i] * row[j] for row in N) for j in range(2)] for i in range(2)]
    G, e = ex.batch_gram(X)
    assert [[int(v) * 2 ** (e + 106) for v in row] for row in G.tolist()] == want


def test_exact_product_is_the_object_array_product():
    """certify.core.numbers.exact_product (flint's fmpq_mat) against np.dot of object arrays
    of Fractions and ints, and its refusal of shapes that do not multiply."""
    import random

    from certify.core.numbers import exact_product
    rng = random.Random(5)
    for _ in range(40):
        n, k, m = (rng.randint(1, 6) for _ in range(3))
        A = np.array([Fraction(rng.randint(-2 ** 70, 2 ** 70), rng.randint(1, 2 ** 40))
                      for _ in range(n * k)], dtype=object).reshape(n, k)
        B = np.array([rng.randint(-9, 9) for _ in range(k * m)], dtype=object).reshape(k, m)
        assert (exact_product(A, B) == np.dot(A, B)).all()
    assert exact_product(np.empty((2, 0), dtype=object), np.empty((0, 3), dtype=object)).tolist() == \
        [[Fraction(0)] * 3] * 2
    with pytest.raises(ValueError, match="do not multiply"):
        exact_product(np.ones((2, 3), dtype=object), np.ones((2, 3), dtype=object))
