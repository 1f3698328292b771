"""Fast exact rank: sketched canonical minor + multimodular span check (solvers/exact.py)."""

import numpy as np
import pytest

from solvers.exact import (IntMatrix, exact_rank, exact_rank_fast, minor_mod_p, span_check,
                           span_check_multimodular)
from solvers.exact.modular import _fmod_exact, _mod_f


def _planted(n1, n2, r, seed, bits=12):
    rng = np.random.default_rng(seed)
    U = rng.integers(-(1 << bits), 1 << bits, (n1, r))
    V = rng.integers(-(1 << bits), 1 << bits, (r, n2))
    return IntMatrix(U @ V)


@pytest.mark.parametrize("n1,n2,r,seed", [(120, 90, 7, 0), (64, 200, 20, 1), (150, 150, 1, 2),
                                          (40, 30, 30, 3)])
def test_fast_path_gives_the_planted_rank_with_the_canonical_minor(n1, n2, r, seed):
    N = _planted(n1, n2, r, seed)
    res = exact_rank_fast(N, seed=seed)
    assert res is not None
    assert (res.lower, res.upper, res.verdict.value) == (r, r, "proved")
    # the recorded minor is the checker's canonical pivot minor mod the recorded prime
    rk, rows, cols = minor_mod_p(N, res.prime)
    assert (rk, rows, cols) == (r, list(res.minor_rows), list(res.minor_cols))


def test_one_changed_entry_breaks_the_span_and_the_rank_goes_up():
    N = _planted(80, 70, 5, 4)
    res = exact_rank_fast(N)
    rows, cols = list(res.minor_rows), list(res.minor_cols)
    assert span_check_multimodular(N, rows, cols) is True
    bad = N.values.copy()
    i = next(i for i in range(80) if i not in rows)
    j = next(j for j in range(70) if j not in cols)
    bad[i, j] += 1                                            # rank 6 now
    B = IntMatrix(bad)
    assert span_check_multimodular(B, rows, cols) is False
    assert span_check(B, rows, cols) is False                 # the plain exact check agrees
    r2 = exact_rank(B)
    assert (r2.lower, r2.upper) == (6, 6)


def test_residues_are_exact_near_the_float_limit():
    rng = np.random.default_rng(5)
    p = 94906249                                              # r (p-1)^2 < 2^53 for r = 1
    c = rng.integers(0, 1 << 53, 100000).astype(np.float64)
    got = _fmod_exact(c.copy(), p)
    want = np.array([int(v) % p for v in c.astype(np.int64)], dtype=np.float64)
    assert np.array_equal(got, want)
    a = rng.integers(-(1 << 40), 1 << 40, 1000)
    assert np.array_equal(_mod_f(a, p), np.array([int(v) % p for v in a], dtype=np.float64))


def _cube_kernel(m=12, r=16):
    from certify.core.kernel import Provenance, from_feature_fn
    W = (np.random.default_rng(0).standard_normal((r, m)) * 0.5).astype(np.float32)

    def fn(t):
        u = t.astype(np.float32) @ W.T
        return np.exp(u), np.exp(-u)
    return from_feature_fn(fn, f"cube:{m}", Provenance("test", None, "test", "float32"), rank=r)


def test_sharded_gram_pass_equals_the_single_pass_exactly():
    from certify.rank.summary import summarize_features
    k = _cube_kernel()
    a = summarize_features(k, batch_size=256, keep_limit=0)
    for shards in (2, 7):
        b = summarize_features(k, batch_size=256, keep_limit=0, shards=shards)
        assert (a.eq, a.ek, a.sha_q, a.sha_k, a.min_q, a.min_k) == \
            (b.eq, b.ek, b.sha_q, b.sha_k, b.min_q, b.min_k)
        assert (a.gram_q == b.gram_q).all() and (a.gram_k == b.gram_k).all()
