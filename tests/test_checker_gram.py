"""certify.checkers.gram: exact Grams of float features by limb-split float64 products,
against Fractions (an oracle sharing no code), on entries whose exponents span
hundreds of bits, signed, with zeros, subnormals and both float widths."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from certify.checkers import gram
from certify.checkers.kernel import gram as kgram


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
    X = np.ldexp(rng.integers(-(1 << 52), 1 << 52, (3 * kgram.BLOCK + 17, 3)).astype(np.float64), -60)
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


def test_all_products_and_quadratic_summaries():
    """Every product re-derived (a planted negative pair is found); the lemma's
    summaries: equal minima and upper bounds at least the exact maxima."""
    rng = np.random.default_rng(11)
    Q, K = np.abs(rng.standard_normal((300, 5))), np.abs(rng.standard_normal((200, 5)))
    ev = {"num_checked": 300 * 200}
    assert gram.all_products_problems(ev, {"phi_q": Q, "phi_k": K}, rows=64) == []
    K[17, 2] = -40.0
    assert "negative product" in gram.all_products_problems(ev, {"phi_q": Q, "phi_k": K}, rows=64)[0]
    # quadratic layout of d = 2: [1, v0, v1, w00, w01, w11]
    v = rng.standard_normal((100, 2))
    X = np.concatenate([np.ones((100, 1)), v, v[:, :1] ** 2 * 0.5, v[:, :1] * v[:, 1:] * 0.75,
                        v[:, 1:] ** 2 * 0.5], axis=1)
    exact_v = max(sum(Fraction(float(x)) ** 2 for x in row) for row in v)
    exact_w = max(sum(Fraction(float(x)) ** 2 for x in row) for row in X[:, 3:])
    ev = {"r": 6, "constant": 0, "linear": [1, 2], "quadratic": [[3, 0, 0], [4, 0, 1], [5, 1, 1]],
          "g_diag": "1/2", "g_off": "3/4"}
    for side in ("q", "k"):
        ev.update({f"min_const_{side}": "1", f"max_linear_sq_{side}": str(exact_v * (1 + Fraction(1, 1 << 40))),
                   f"max_quadratic_sq_{side}": str(exact_w * (1 + Fraction(1, 1 << 40))),
                   f"max_residual_sq_{side}": "1/1000000000000"})
    assert gram.quadratic_problems(ev, {"phi_q": X, "phi_k": X}) == []
    ev["max_linear_sq_k"] = str(exact_v)          # the exact maximum: below any rigorous bound of the floats
    assert gram.quadratic_problems(ev, {"phi_q": X, "phi_k": X}) == \
        ["max_linear_sq_k is below a rigorous bound of the replayed features' maximum"]


def test_claims_of_one_features_file_read_and_hash_it_once_and_each_still_checks(tmp_path, monkeypatch):
    """Three claims on one replayed features file read it once and hash it once; each
    claim still compares the hashes with its own features_sha256 and checks its own
    summaries (a wrong Gram in the second claim is caught, a claim bound to other
    features is refused), and a file rewritten in place is read again."""
    rng = np.random.default_rng(21)
    q, k = rng.standard_normal((60, 3)), np.abs(rng.standard_normal((60, 3)))
    path = tmp_path / "f.npz"
    np.savez(path, phi_q=q, phi_k=k)
    reads = []
    real_read = gram.read_features
    monkeypatch.setattr(gram, "read_features", lambda p, *a: reads.append(p) or real_read(p, *a))
    Gq, eq = gram.exact_gram(q)
    Gk, ek = gram.exact_gram(k)
    fs = {"phi_q": gram._features_sha(q, "float64"), "phi_k": gram._features_sha(k, "float64"), "dtype": "float64"}

    def claim(gq, kind="exact_rank", sha=fs):
        return {"kind": kind, "evidence": {"features_sha256": sha, "trusted": ["gram_q", "gram_k", "num_tokens"],
                                           "num_tokens": 60, "gram_q": gq, "gram_q_exponent": eq,
                                           "gram_k": Gk, "gram_k_exponent": ek}}
    bad = [[v + (i == j == 1) for j, v in enumerate(r)] for i, r in enumerate(Gq)]
    assert gram.summary_problems(claim(Gq), str(path)) == []
    assert gram.summary_problems(claim(bad, "eps_rank"), str(path)) == \
        ["gram_q 2^gram_q_exponent is not PhiQ^T PhiQ of the replayed features"]
    assert gram.summary_problems(claim(Gq, sha={**fs, "phi_k": "0" * 64}), str(path)) == \
        ["the replayed features file does not hash to features_sha256"]
    assert len(reads) == 1
    q2 = q.copy()
    q2[0, 0] += 1.0
    np.savez(path, phi_q=q2, phi_k=k)
    import os
    os.utime(path, ns=(1, 1))                                    # a new stamp even within one clock tick
    assert gram.summary_problems(claim(Gq), str(path)) == \
        ["the replayed features file does not hash to features_sha256"]
    assert len(reads) == 2
