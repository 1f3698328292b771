"""Fast exact rank: the canonical minor by blocked elimination + the multimodular span
check (solvers/exact/rank.py, elimination.py, span.py)."""

import copy
import json

import numpy as np
import pytest

from solvers.exact import (
    IntMatrix,
    exact_rank,
    exact_rank_fast,
    minor_mod_p,
    span_check,
    span_check_multimodular,
)


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


def _cube_kernel(m=12, r=16):
    from certify.core.kernel import Provenance, from_feature_fn
    W = (np.random.default_rng(0).standard_normal((r, m)) * 0.5).astype(np.float32)

    def fn(t):
        u = t.astype(np.float32) @ W.T
        return np.exp(u), np.exp(-u)
    return from_feature_fn(fn, f"cube:{m}", Provenance("memory", None, "memory", "float32"), rank=r)


def test_sharded_gram_pass_equals_the_single_pass_exactly():
    from certify.rank.summary import summarize_features
    k = _cube_kernel()
    a = summarize_features(k, batch_size=256, keep_limit=0)
    for shards in (2, 7):
        b = summarize_features(k, batch_size=256, keep_limit=0, shards=shards)
        assert (a.eq, a.ek, a.sha_q, a.sha_k, a.min_q, a.min_k) == \
            (b.eq, b.ek, b.sha_q, b.sha_k, b.min_q, b.min_k)
        assert (a.gram_q == b.gram_q).all() and (a.gram_k == b.gram_k).all()


# ------------------------------------------------ the fused multimodular span check

def _bordered_minors(V, rows, cols):
    """Every bordered minor det V[R + {i}, C + {j}] exactly (small matrices)."""
    import flint
    out = []
    for i in range(V.shape[0]):
        for j in range(V.shape[1]):
            if i in rows or j in cols:
                continue
            sub = [[int(V[a, b]) for b in list(cols) + [j]] for a in list(rows) + [i]]
            out.append(int(flint.fmpz_mat(sub).det()))
    return out


@pytest.mark.parametrize("seed,bits", [(0, 12), (1, 20), (2, 3)])
def test_bordered_minor_bound_holds_and_the_checker_derives_the_same(seed, bits):
    from certify.checkers.kernel.span import bound_sq as checker_bound
    from solvers.exact.span import bordered_minor_bound_sq
    rng = np.random.default_rng(seed)
    V = rng.integers(-(1 << bits), 1 << bits, (9, 8))          # full rank: minors are not all zero
    rows, cols = [0, 2, 5], [1, 3, 4]
    b2 = bordered_minor_bound_sq(V, rows, cols)
    assert b2 == checker_bound(V, rows, cols)
    worst = max(abs(d) for d in _bordered_minors(V, rows, cols))
    assert 0 < worst * worst <= b2


def test_a_minor_divisible_by_some_of_the_primes_is_still_caught():
    """beta = c - a b equal to a product of the largest primes the check uses: each
    of those primes alone sees 0, the product of all of them does not."""
    from certify.checkers.rank.span import column_span
    from solvers.exact.span import span_check_multimodular, span_primes
    a, b = 3, 5
    for k in (1, 2):
        V0 = np.array([[1, a], [b, a * b + 1]], dtype=np.int64)     # placeholder entries for the primes
        primes = span_primes(1, 1 << 40, 4, 1)[:k]
        beta = int(np.prod([int(p) for p in primes], dtype=object))
        V = V0.copy()
        V[1, 1] = a * b + beta
        N = IntMatrix(V)
        assert span_check_multimodular(N, [0], [0]) is False
        assert span_check_multimodular(N, [0], [0], compiled=False) is False
        assert column_span(V, [0], [0]) is False
        V[1, 1] = a * b                                            # rank 1 exactly
        assert span_check_multimodular(IntMatrix(V), [0], [0]) is True
        assert column_span(V, [0], [0]) is True


@pytest.mark.parametrize("n1,n2,r,bits,seed", [(300, 260, 17, 10, 0), (200, 200, 1, 12, 1),
                                               (150, 400, 40, 4, 2), (130, 120, 5, 24, 3)])
def test_compiled_numpy_and_checker_span_checks_agree(n1, n2, r, bits, seed):
    """Planted rank r (entries up to r 2^(2 bits), the last case near 2^51), then one
    changed entry anywhere off the minor's columns: the producer's compiled and numpy
    reductions and the checker's independent code give the same answer."""
    from certify.checkers.rank.span import column_span
    from solvers.exact.span import span_check_multimodular
    rng = np.random.default_rng(seed)
    U = rng.integers(-(1 << bits), 1 << bits, (n1, r))
    W = rng.integers(-(1 << bits), 1 << bits, (r, n2))
    V = U @ W
    N = IntMatrix(V)
    res = exact_rank(N)
    assert (res.lower, res.upper) == (r, r)
    R, C = list(res.minor_rows), list(res.minor_cols)
    for compiled in (True, False):
        assert span_check_multimodular(N, R, C, compiled=compiled, tile_rows=64, tile_cols=96) is True
    assert column_span(V, R, C) is True
    for _ in range(3):
        i, j = int(rng.integers(0, n1)), int(rng.integers(0, n2))
        if j in C:
            continue
        bad = V.copy()
        bad[i, j] += int(rng.choice([-1, 1]))
        B = IntMatrix(bad)
        want = False                            # rank r + 1 now (a row of R breaks the span elsewhere)
        assert span_check_multimodular(B, R, C) is want
        assert span_check_multimodular(B, R, C, compiled=False) is want
        assert column_span(bad, R, C) is want


def test_dyadic_vectorized_matches_the_exact_per_entry_conversion():
    from fractions import Fraction

    from solvers.exact import dyadic
    rng = np.random.default_rng(7)
    cases = [rng.integers(-999, 999, (40, 30)) * 2.0 ** -33, rng.integers(-5, 5, (5, 5)) * 2.0 ** 70,
             (rng.standard_normal((20, 20)) * 1e3).astype(np.float32), np.array([[2.0 ** -1074, 6.0]]),
             np.array([[1.0, 2.0 ** 61]]), np.array([[5e-324, 1e300]]), np.array([[0.0, -0.0]]),
             rng.standard_normal((8, 8))]
    for a in cases:
        d = dyadic(a)
        x = np.asarray(a, dtype=np.float64)
        assert all(Fraction(int(v)) * Fraction(2) ** d.exponent == Fraction(float(f))
                   for v, f in zip(d.values.ravel().tolist(), x.ravel().tolist()))
        vals = [int(v) for v in d.values.ravel().tolist()]
        assert not any(vals) or any(v % 2 for v in vals)            # canonical: not all even


def test_verify_re_derives_a_large_matrix_rank_from_the_file_and_rejects_a_forged_one(tmp_path):
    """A 300 x 280 float matrix of planted rank 9 (84,000 entries: not embedded) in a
    .npy file: verify re-reads it with numpy and re-derives the column-span witness.
    The same certificate beside a file with one entry changed by 2^-20, its hashes
    rewritten to match, is rejected: the witness no longer spans."""
    import copy
    import hashlib
    import json

    from certify.checkers.verify import verify_certificate
    from certify.rank.options import RankOptions
    from certify.rank.run import certify_rank
    from certify.sources.load import load_kernel
    rng = np.random.default_rng(11)
    A = (rng.integers(-4096, 4096, (300, 9)) @ rng.integers(-4096, 4096, (9, 280))) * 2.0 ** -20
    path = tmp_path / "m.npy"
    np.save(path, A)
    rep = certify_rank(load_kernel(str(path)), RankOptions())
    cert = json.loads(rep.certificate.dumps())
    ev = cert["claims"][0]["evidence"]
    assert (ev["rank_lower"], ev["rank_upper"], ev["upper_witness"]) == (9, 9, "column_span")
    assert "matrix" not in ev
    good = verify_certificate(cert, base=tmp_path)
    assert good.claims[0].holds and not good.claims[0].assumptions
    i = next(i for i in range(300) if i not in ev["minor_rows"])
    j = next(j for j in range(280) if j not in ev["minor_cols"])
    B = A.copy()
    B[i, j] += 2.0 ** -20
    np.save(path, B)
    forged = copy.deepcopy(cert)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    forged["inputs"] = {k: sha for k in forged["inputs"]}
    forged["claims"][0]["parameters"]["source_sha256"] = sha
    from certify.checkers.kernel import array_sha256
    forged["claims"][0]["evidence"]["matrix_sha256"] = array_sha256(
        (B * 2.0 ** 20).astype(np.int64), ev["scale"])
    bad = verify_certificate(forged, base=tmp_path)
    assert not bad.claims[0].holds
    assert any("span" in p for p in bad.claims[0].problems)


@pytest.mark.parametrize("upper", ["exact", "freivalds"])
def test_a_recorded_minor_other_than_the_pivot_minor_is_refused(tmp_path, upper):
    """The checker's row elimination (certify.checkers.kernel.span.pivot_rows) decides the lower
    bound and the minor before the upper bound: a nonsingular minor that is not the first rows
    outside the span of those before them with their pivot columns, a singular one, rows out of
    order: refused with the reason; the producer's own minor holds."""
    from certify.checkers.verify import verify_certificate
    from certify.rank.options import RankOptions
    from certify.rank.run import certify_rank
    from certify.sources.load import load_kernel
    rng = np.random.default_rng(12)
    A = rng.integers(-6, 7, (300, 7)) @ rng.integers(-6, 7, (7, 280))     # not embedded: read from the file
    A[:, 279] = 2 * A[:, 0]                              # a last column in the span of the first
    path = tmp_path / "m.npy"
    np.save(path, A.astype(np.float64))
    cert = json.loads(certify_rank(load_kernel(str(path)), RankOptions(upper_bound=upper)).certificate.dumps())
    ev = cert["claims"][0]["evidence"]
    R, C = ev["minor_rows"], ev["minor_cols"]
    assert (len(R), ev["upper_witness"]) == (7, "column_span" if upper == "exact" else "freivalds")
    assert "matrix" not in ev
    assert verify_certificate(cert, base=tmp_path).claims[0].holds
    later = next(j for j in range(C[-1] + 1, 279) if j not in C)
    assert C[0] == 0
    forgeries = {"not the pivot minor": [(R, sorted(C[:-2] + C[-1:] + [later])),      # a later column
                                         (R[:-1] + [next(i for i in range(R[-1] + 1, 300))], C),   # a later row
                                         (R[::-1], C)],                                  # out of order
                 "singular": [(R, C[:-1] + [279])]}                                     # columns 0 and 279
    import flint
    p = ev["prime"]
    for why, cases in forgeries.items():
        for R2, C2 in cases:
            if why != "singular":
                assert int(flint.nmod_mat(7, 7, [int(A[i, j]) % p for i in R2 for j in C2], p).det())
            forged = copy.deepcopy(cert)
            forged["claims"][0]["evidence"].update(minor_rows=R2, minor_cols=C2)
            res = verify_certificate(forged, base=tmp_path).claims[0]
            assert not res.holds and any(why in q for q in res.problems), (R2, C2, res.problems)
