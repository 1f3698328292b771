"""certify.checkers.gram: stated Grams of float features checked by the kernel's random-product
identity (:func:`certify.checkers.kernel.gram.gram_identity`), and the tests' reference exact Gram
(``gram_reference``, limb-split float64 products), against Fractions and integer arithmetic (oracles
sharing no code), on entries whose exponents span hundreds of bits, signed, with zeros, subnormals and
both float widths."""

from __future__ import annotations

from fractions import Fraction

import gram_reference as kgram
import numpy as np
import pytest

from certify.checkers import gram
from certify.checkers.kernel.gram import gram_identity


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
    G, e = kgram.exact_gram(X)
    want = _fraction_gram(X)
    assert [[Fraction(v) * Fraction(2) ** e for v in row] for row in G] == want
    assert any(v % 2 for row in G for v in row)             # normalized


def test_exact_gram_over_many_blocks_and_zero():
    rng = np.random.default_rng(5)
    X = np.ldexp(rng.integers(-(1 << 52), 1 << 52, (3 * 1024 + 17, 3)).astype(np.float64), -60)
    G, e = kgram.exact_gram(X)
    N = [[int(v) for v in row] for row in np.ldexp(X, 60).astype(np.int64).tolist()]
    want = [[sum(r[i] * r[j] for r in N) for j in range(3)] for i in range(3)]
    assert [[Fraction(v) * Fraction(2) ** e for v in row] for row in G] == \
        [[Fraction(v) * Fraction(2) ** -120 for v in row] for row in want]
    assert kgram.exact_gram(np.zeros((5, 2))) == ([[0, 0], [0, 0]], 0)


def _integer_gram(X):
    """``(G, e)`` with ``X^T X = G 2^e`` normalized, by Python integers (``as_integer_ratio``) and
    python-flint: no limbs, no floats."""
    import flint
    fr = [[float(v).as_integer_ratio() for v in row] for row in X.tolist()]
    den = max((d for row in fr for _, d in row), default=1)             # a power of two
    N = flint.fmpz_mat([[n * (den // d) for n, d in row] for row in fr])
    G = [[int(v) for v in row] for row in (N.transpose() * N).tolist()]
    e = -2 * (den.bit_length() - 1)
    k = min((((abs(v) & -abs(v)).bit_length() - 1) for row in G for v in row if v), default=None)
    return ([[v >> k for v in row] for row in G], e + k) if k is not None else ([[0] * len(X[0])] * len(X[0]), 0)


def _random_features(rng, dtype):
    """Entries of a random exponent window anywhere from the least subnormal to 2^960 (float32:
    its own range), signs, zeros (both signs), exact powers of two and all-ones mantissas (bits
    on limb boundaries)."""
    K, r = int(rng.integers(1, 40)), int(rng.integers(1, 7))
    lo_e, hi_e = (-1074, 960) if dtype == np.float64 else (-149, 120)
    a = int(rng.integers(lo_e, hi_e))
    b = min(hi_e, a + int(rng.choice([0, 1, 13, 30, 66, 120, 400, 2100])))
    X = rng.standard_normal((K, r)) * np.exp2(rng.integers(a, b + 1, (K, r)).astype(np.float64))
    u = rng.random((K, r))
    X[u < 0.1] = 0.0
    X[(u >= 0.1) & (u < 0.15)] = -0.0
    X[(u >= 0.15) & (u < 0.2)] = np.exp2(rng.integers(a, b + 1, int(((u >= 0.15) & (u < 0.2)).sum())))
    X[(u >= 0.2) & (u < 0.25)] = (2.0 - 2.0 ** -52) * np.exp2(rng.integers(max(a, -1022), max(b, -1022) + 1,
                                                                           int(((u >= 0.2) & (u < 0.25)).sum())))
    with np.errstate(over="ignore", under="ignore"):
        X = X.astype(dtype)
    return np.where(np.isfinite(X), X, 0.0).astype(dtype)


def test_exact_gram_equals_integer_arithmetic_on_many_random_matrices():
    """The adaptive limbs (width and block rows chosen from the data's exponent range) give the exact
    Gram on 400 random matrices of both float widths, exponents from -1074 to 960 (one to a hundred
    limbs), subnormals, signed zeros and all-ones mantissas, against integer arithmetic."""
    rng = np.random.default_rng(35)
    widths = set()
    for n in range(400):
        X = _random_features(rng, np.float32 if n % 3 == 0 else np.float64)
        assert kgram.exact_gram(X) == _integer_gram(X), n
        ends = [int(v) for v in np.frexp(X[X != 0].astype(np.float64))[1]]
        if ends:
            widths.add(kgram.plan(max(ends) - min(ends) + 53)[2])
    assert min(widths) <= 3 and max(widths) >= 80                       # one limb ... about a hundred


def test_limb_plan_keeps_every_partial_sum_exact():
    """``2 b + c <= 53`` with ``b T >= w`` and the fewest limbs of at most 23 bits for every width."""
    for w in range(1, 2200):
        b, c, T = kgram.plan(w)
        assert b * T >= w and 2 * b + c <= 53 and 7 <= c <= 10 and b <= 23 and T == -(-w // 23)
    assert kgram.plan(66) == (22, 9, 3)                                  # a softmax head's 66 bits


def test_rows_of_tiny_entries_go_in_their_own_group(monkeypatch):
    """A few rows with entries far below the others are summed at their own limbs (a group of two rows
    70 bits lower, one of the row that holds the least subnormal), and the sum of the groups is the
    exact Gram."""
    rng = np.random.default_rng(37)
    X = rng.standard_normal((600, 5))
    X[[3, 300, 599]] *= 2.0 ** -70                                       # three rows 70 bits lower
    X[3, 0] = 5e-324
    calls = []
    real = kgram._gram
    monkeypatch.setattr(kgram, "_gram", lambda A, rows, E: calls.append(len(rows)) or real(A, rows, E))
    assert kgram.exact_gram(X) == _integer_gram(X)
    assert sorted(calls) == [1, 2, 597]


@pytest.mark.slow
def test_exact_gram_over_more_blocks_than_the_fold_interval():
    """Twice 2^10 blocks (the int64 block sums must move into Python ints every 2^10 blocks) on
    values whose limbs are nearly all ones (block sums near 2^52: 2^11 of them overflow int64),
    against integer arithmetic."""
    rng = np.random.default_rng(36)
    rows = 2 * 1024 * (1 << kgram.plan(66)[1]) + 300
    X = np.empty((rows, 2))
    X[:, 0] = (2.0 ** 53 - 1) * 2.0 ** -40                             # 53 ones, 13 bits above e0
    X[0, 0] = 0.5                                                     # e0 = -53: 66 bits
    X[:, 1] = np.ldexp(rng.integers(1 << 52, 1 << 53, rows).astype(np.float64), rng.integers(-53, -39, rows))
    X[::7, 1] *= -1
    assert kgram.plan(int(np.frexp(X)[1].max()) + 53) == kgram.plan(66)
    N = [[int(v) for v in row] for row in np.ldexp(X, 53).astype(object).tolist()]   # exact integers
    want = [[sum(row[i] * row[j] for row in N) for j in range(2)] for i in range(2)]
    G, e = kgram.exact_gram(X)
    assert [[v << (e + 106) for v in row] for row in G] == want


def test_bad_features_are_refused():
    with pytest.raises(gram.GramError):
        gram_identity(np.array([[1.0, np.nan]]), [[0, 0], [0, 0]], 0)
    with pytest.raises(gram.GramError):
        gram_identity(np.zeros((2, 2), dtype=np.int64), [[0, 0], [0, 0]], 0)
    for dtype in (np.float16, np.longdouble):                            # not float64 when cast
        with pytest.raises(gram.GramError):
            gram_identity(np.ones((2, 2), dtype=dtype), [[2, 2], [2, 2]], 0)
    assert not gram_identity(np.zeros((3, 2)), [[0, 0]], 0)                  # W of the wrong shape
    assert not gram_identity(np.zeros((3, 2)), [[0, 0], [0]], 0)
    assert gram_identity(np.zeros((3, 2)), [[0, 0], [0, 0]], 7)


def test_the_identity_holds_for_the_exact_gram_and_fails_for_any_other_on_random_matrices(request):
    """On 100 random matrices (1,000 with ``--runslow``) of both float widths, exponents from -1074 to 960 (one to a hundred
    limbs), subnormals, signed zeros and all-ones mantissas: the exact Gram (integer arithmetic)
    passes, in its normalized form and scaled by 2^5; one unit off in one entry, in the least bit
    of a wide entry, the exponent off by one, a transposed asymmetric change and a sign flip fail."""
    rng = np.random.default_rng(38)
    for n in range(1000 if request.config.getoption("--runslow") else 100):
        X = _random_features(rng, np.float32 if n % 3 == 0 else np.float64)
        G, e = _integer_gram(X)
        assert gram_identity(X, G, e), n
        assert gram_identity(X, [[v << 5 for v in row] for row in G], e - 5), n
        r = len(G)
        i, j = int(rng.integers(0, r)), int(rng.integers(0, r))
        off = [row[:] for row in G]
        off[i][j] += 1
        assert not gram_identity(X, off, e), n
        if any(v for row in G for v in row):
            assert not gram_identity(X, G, e + 1) and not gram_identity(X, G, e - 1), n
            assert not gram_identity(X, [[-v for v in row] for row in G], e), n
            wide = [[v << 90 for v in row] for row in G]
            wide[i][j] += 1                                              # 90 bits below every entry
            assert not gram_identity(X, wide, e - 90), n
        if i != j:
            swap = [row[:] for row in G]
            swap[i][j], swap[j][i] = swap[i][j] + 1, swap[j][i] - 1      # same sums of rows and columns
            assert not gram_identity(X, swap, e), n


def test_the_identity_over_more_blocks_than_the_fold_interval():
    """More than 512 blocks of 2^10 rows (the int64 sums move into Python ints every 512 blocks, each
    block adding up to 2^52) of 53-bit values 13 bits above the column's least exponent (four limbs),
    against integer arithmetic: every block counted once across the fold; one unit off fails."""
    rows = 600 * 1024
    X = np.full((rows, 1), (2.0 ** 53 - 1) * 2.0 ** -40)
    X[0, 0] = 0.5                                                        # 66 bits: all-ones limbs
    N = int(2 ** 53 - 1) << 13
    want = (rows - 1) * N * N + (1 << 104)                               # X^T X 2^106
    assert gram_identity(X, [[want]], -106)
    assert not gram_identity(X, [[want + 1]], -106)


def test_gram_problems_catch_a_wrong_summary(tmp_path):
    """The replayed features recompute the evidence's Grams; one unit changed is caught."""
    rng = np.random.default_rng(9)
    q, k = rng.standard_normal((50, 4)), np.abs(rng.standard_normal((50, 4)))
    gram.write_features(str(tmp_path / "f.features"), [q], [k])
    feats = gram.read_features(str(tmp_path / "f.features"), (50, 4))
    Gq, eq = kgram.exact_gram(q)
    Gk, ek = kgram.exact_gram(k)
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
    path = tmp_path / "f.features"
    gram.write_features(str(path), [q], [k])
    reads = []
    real_read = gram.read_features
    monkeypatch.setattr(gram, "read_features", lambda p, *a: reads.append(p) or real_read(p, *a))
    Gq, eq = kgram.exact_gram(q)
    Gk, ek = kgram.exact_gram(k)
    fs = {"phi_q": gram._features_sha(q, "float64"), "phi_k": gram._features_sha(k, "float64"), "dtype": "float64"}

    def claim(gq, kind="exact_rank", sha=fs):
        return {"kind": kind, "evidence": {"features_sha256": sha, "trusted": ["gram_q", "gram_k", "num_tokens"],
                                           "num_tokens": 60, "gram_q": gq, "gram_q_exponent": eq,
                                           "gram_k": Gk, "gram_k_exponent": ek}}
    bad = [[v + (i == j == 1) for j, v in enumerate(r)] for i, r in enumerate(Gq)]
    from certify.checkers import scratch
    with scratch.session():                                      # the claims of one certificate
        assert gram.summary_problems(claim(Gq), str(path)) == []
        assert gram.summary_problems(claim(bad, "eps_rank"), str(path)) == \
            ["gram_q 2^gram_q_exponent is not PhiQ^T PhiQ of the replayed features"]
        assert gram.summary_problems(claim(Gq, sha={**fs, "phi_k": "0" * 64}), str(path)) == \
            ["the replayed features file does not hash to features_sha256"]
        assert len(reads) == 1
        q2 = q.copy()
        q2[0, 0] += 1.0
        gram.write_features(str(path), [q2], [k])
        import os
        os.utime(path, ns=(1, 1))                                # a new stamp even within one clock tick
        assert gram.summary_problems(claim(Gq), str(path)) == \
            ["the replayed features file does not hash to features_sha256"]
        assert len(reads) == 2
    # outside a check's scratch nothing is kept: every call reads the file again
    gram.summary_problems(claim(Gq), str(path))
    gram.summary_problems(claim(Gq), str(path))
    assert len(reads) == 4


def test_a_stated_gram_is_compared_by_value_at_any_exponent():
    """``p 2^a == q 2^b`` by value: equal at a lower exponent, unequal when the value differs, the
    sign differs or one side is zero; an exponent of a billion is refused without a billion-bit
    shift, and a stated Gram at that exponent fails quickly."""
    from certify.checkers.kernel.gram import _equal
    assert _equal(3, -5, 3, -5) and _equal(12, -7, 3, -5) and _equal(-3, -5, -48, -9) and _equal(0, 9, 0, -9)
    assert not _equal(13, -7, 3, -5) and not _equal(3, -4, 3, -5) and not _equal(-3, -5, 3, -5)
    assert not _equal(0, -5, 3, -5) and not _equal(3, -5, 0, -5)
    assert not _equal(1, 10 ** 9, 1, 0) and not _equal(1, 0, 1, -10 ** 9)
    X = np.array([[1.0, 2.0], [3.0, 0.5]])
    assert gram_identity(X, [[40, 14], [14, 17]], -2) and not gram_identity(X, [[40, 14], [14, 17]], 10 ** 9)


def test_the_features_file_round_trips_and_refuses_what_it_is_not(tmp_path):
    # batches are stacked in order, both float widths; a truncated file, trailing bytes, a pickled
    # object array or an npz are refused with a GramError, never read
    rng = np.random.default_rng(3)
    q = [rng.standard_normal((5, 3)), rng.standard_normal((2, 3))]
    k = [rng.standard_normal((7, 3)).astype(np.float32)]
    path = tmp_path / "f.features"
    gram.write_features(str(path), q, k)
    got = gram.read_features(str(path), (7, 3))
    assert np.array_equal(got["phi_q"], np.concatenate(q)) and got["phi_q"].dtype == np.float64
    assert np.array_equal(got["phi_k"], k[0]) and got["phi_k"].dtype == np.float32
    raw = path.read_bytes()
    for bad in (raw[:-1], raw + b"\0", raw[: len(raw) // 2]):
        path.write_bytes(bad)
        with pytest.raises(gram.GramError):
            gram.read_features(str(path))
    np.savez(path.with_suffix(".npz"), phi_q=q[0], phi_k=k[0])
    with pytest.raises(gram.GramError):
        gram.read_features(str(path.with_suffix(".npz")))
    with open(path, "wb") as f:
        np.save(f, np.array([object()], dtype=object), allow_pickle=True)
        np.save(f, q[0])
    with pytest.raises(gram.GramError):
        gram.read_features(str(path))
