"""eps-rank by verified float congruences (producer :mod:`solvers.congruence`,
checker :mod:`certify.checkers.kernel.inertia`): exact counts on kernels whose
singular values are known exactly, the exact path at thresholds within 1e-12 of a
singular value, planted wrong counts and enclosures caught, and the rigorous
rounding-error bound of a product against exact rational products."""

from __future__ import annotations

import copy
import functools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certify.checkers.kernel import balls, inertia
from certify.checkers.rank import check
from certify.checkers.rank import eps as checker_eps
from certify.core.kernel import Provenance, from_features
from certify.core.verdict import Verdict
from certify.rank.eps import eps_rank_factor_claim
from certify.rank.options import RankOptions
from certify.rank.summary import summarize_features
from solvers import congruence
from solvers import exact as ex
from solvers import spectral as sp
from tests.packed_grams import claim_rows

PROV = Provenance("memory", None, "memory", "float64")


def _orthogonal(r: int, seed: int) -> np.ndarray:
    """An exactly orthogonal dyadic matrix: a Sylvester Hadamard matrix over
    sqrt(r) = 2^j (r = 4^j), rows permuted and signs flipped."""
    H = np.ones((1, 1))
    while H.shape[0] < r:
        H = np.block([[H, H], [H, -H]])
    rng = np.random.default_rng(seed)
    return (H[rng.permutation(r)] * rng.choice([-1.0, 1.0], r)[:, None]) / np.sqrt(r)


def _known(sigma_q, sigma_k, seed: int = 0):
    """Features ``PhiQ = O1 diag(sq) O3``, ``PhiK = O2 diag(sk) O3`` (dense, exact):
    ``PhiQ PhiK^T = O1 diag(sq sk) O2^T`` has singular values ``|sq_i sk_i|``."""
    r = len(sigma_q)
    O1, O2, O3 = (_orthogonal(r, seed + i) for i in range(3))
    q = O1 @ np.diag(sigma_q) @ O3
    k = O2 @ np.diag(sigma_k) @ O3
    assert np.array_equal(q, (O1 * sigma_q) @ O3)             # products of dyadics: exact here
    return q, k


def _grams(q, k):
    accq, acck = ex.GramAccumulator(q.shape[1]), ex.GramAccumulator(k.shape[1])
    accq.add(q)
    acck.add(k)
    (gq, eq), (gk, ek) = accq.result(), acck.result()
    return [[int(v) for v in row] for row in gq.tolist()], eq, [[int(v) for v in row] for row in gk.tolist()], ek


SQ = np.array([2.0 ** (8 - i // 2) * (1 + (i % 4) / 8) for i in range(16)])
SK = np.array([1.0, 0.5, 2.0, 4.0] * 4)
SIGMA = np.abs(SQ * SK)                 # exact dyadics: 704, 320, 256, 176, ..., 5, 4, 2.25


def _count(eps: Fraction) -> int:
    return int(sum(Fraction(float(s)) > eps for s in SIGMA))


@pytest.mark.parametrize("eps,want", [(Fraction(1, 1000), 16), (Fraction(9, 4) - Fraction(1, 10 ** 6), 16),
                                      (Fraction(100), 5), (Fraction(257), 2), (Fraction(705), 0),
                                      (Fraction(10 ** 6), 0)])
def test_float_count_equals_the_known_count(eps, want):
    gq, eq, gk, ek = _grams(*_known(SQ, SK))
    assert want == _count(eps)
    assert congruence.count_above(gq, eq, gk, ek, eps * eps) == want
    assert inertia.count_above(gq, eq, gk, ek, eps * eps) == want
    res = sp.eps_rank_grams(np.array(gq, dtype=object), eq, np.array(gk, dtype=object), ek, eps)
    assert (res.k, res.method, res.verdict) == (want, "inertia_congruence_core", Verdict.PROVED)


def test_zero_singular_values_float_count_and_its_limit():
    """Rank 13 (singular Grams): floats decide while eps^2 is well above the rounding
    of the Grams (about u sigma_max^2); at eps = 1e-6 a zero eigenvalue of the rounded
    Grams is indistinguishable from eps^2, so floats must decline and the exact path
    counts."""
    sq = SQ.copy()
    sq[[3, 7, 11]] = 0.0
    gq, eq, gk, ek = _grams(*_known(sq, SK))
    sig = np.abs(sq * SK)
    for eps in (Fraction(1, 10), Fraction(9, 2)):
        want = int(sum(Fraction(float(s)) > eps for s in sig))
        assert congruence.count_above(gq, eq, gk, ek, eps * eps) == want
        assert inertia.count_above(gq, eq, gk, ek, eps * eps) == want
    tiny = Fraction(1, 10 ** 6)
    assert congruence.count_above(gq, eq, gk, ek, tiny * tiny) is None
    assert inertia.count_above(gq, eq, gk, ek, tiny * tiny) is None
    res = sp.eps_rank_grams(np.array(gq, dtype=object), eq, np.array(gk, dtype=object), ek, tiny)
    assert (res.k, res.method) == (13, "inertia_balls_core")           # the ball rung decides
    assert balls.count_above(gq, eq, gk, ek, tiny * tiny) == 13 == _exact_count(gq, eq, gk, ek, tiny)
    assert not inertia.positive_definite(gq) and inertia.positive_definite(gk)


@pytest.mark.parametrize("eps,want", [(Fraction(1) + Fraction(1, 1 << 60), 10),
                                      (Fraction(1) - Fraction(1, 1 << 60), 11),
                                      (Fraction(1), 10),
                                      (Fraction(1) + Fraction(1, 10 ** 13), 10)])
def test_threshold_within_1e12_of_a_singular_value_is_decided_exactly(eps, want):
    """sigma = 1 is a singular value (once); eps within 1e-12 of it: floats cannot
    separate them, arb balls do (eps = 1 exactly makes Z singular: there the exact path
    decides), on both sides, and the checker refutes the neighbouring counts."""
    sq = np.array([8, 6, 5, 4, 3.5, 1, 3, 2.5, 2, 1.75, 1.5, 0.75, 0.5, 0.25, 0.125, 0.0625])
    sk = np.ones(16)                                           # one singular value is exactly 1
    assert want == int(sum(Fraction(float(s)) > eps for s in sq))
    assert abs(float(eps) - 1.0) <= 1e-12
    gq, eq, gk, ek = _grams(*_known(sq, sk, seed=3))
    if eps.denominator != 10 ** 13:                            # below any float resolution
        assert congruence.count_above(gq, eq, gk, ek, eps * eps) is None
        assert inertia.count_above(gq, eq, gk, ek, eps * eps) is None
    kern = from_features(*_known(sq, sk, seed=3), PROV)
    s = summarize_features(kern)
    opt = RankOptions(eps=eps, embed_limit=0)
    claim = eps_rank_factor_claim(kern, s, eps, opt).to_json()
    assert claim["evidence"]["k"] == want and claim["verdict"] == "proved"
    if eps == 1:                                               # Z singular: only the exact path decides
        assert claim["method"] == "descartes_charpoly_core"
        assert balls.count_above(gq, eq, gk, ek, eps * eps) is None
    elif eps.denominator != 10 ** 13:                          # within 2^-60: arb balls decide
        assert claim["method"] == "inertia_balls_core"
        assert balls.count_above(gq, eq, gk, ek, eps * eps) == want
    assert check(claim, {"claims": [claim]}) == []
    for wrong in (want - 1, want + 1):
        bad = copy.deepcopy(claim)
        bad["evidence"]["k"] = wrong
        assert any("singular values > eps" in p for p in check(bad, {"claims": [bad]}))


def _no_charpoly(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("the exact characteristic polynomial was computed")
    from certify.checkers.kernel import roots
    monkeypatch.setattr(roots, "charpoly", boom)
    monkeypatch.setattr(checker_eps, "is_psd", boom)        # the kernel's exact PSD test
    monkeypatch.setattr(sp, "characteristic_polynomial", boom)


@functools.lru_cache(maxsize=1)
def _head():
    """A performer-like head: ReLU random features (2000 tokens, r = 64), its
    kernel, exact summary and float singular values."""
    rng = np.random.default_rng(7)
    E = rng.standard_normal((2000, 24))
    q = np.maximum(E @ rng.standard_normal((24, 64)), 0) + 1e-3
    k = np.maximum(E @ rng.standard_normal((24, 64)), 0) + 1e-3
    kern = from_features(q, k, PROV)
    s = np.linalg.svd(np.linalg.qr(q)[1] @ np.linalg.qr(k)[1].T, compute_uv=False)
    return kern, summarize_features(kern), s


def _big_claim(eps=Fraction(1, 1000)):
    kern, summary, s = _head()
    opt = RankOptions(eps=eps, embed_limit=0)                  # Grams trusted: the PSD test runs too
    return eps_rank_factor_claim(kern, summary, eps, opt).to_json(), s


def test_float_path_decides_a_realistic_head_without_any_characteristic_polynomial(monkeypatch):
    _no_charpoly(monkeypatch)
    claim, s = _big_claim()
    assert claim["method"] == "inertia_congruence_core" and claim["evidence"]["trusted"]
    assert claim["evidence"]["k"] == int(np.sum(s > 1e-3)) == 64
    assert len(claim["evidence"]["sigma_sq_enclosures"]) == 64
    assert check(claim, {"claims": [claim]}) == []


@pytest.mark.parametrize("shift", [-1, 1, "zero"])
def test_planted_wrong_count_is_caught_by_the_float_path(monkeypatch, shift):
    claim, _ = _big_claim(eps=Fraction(10 ** 4))
    k = claim["evidence"]["k"]
    assert 0 < k < 64 and claim["method"] == "inertia_congruence_core"
    bad = copy.deepcopy(claim)
    bad["evidence"]["k"] = 0 if shift == "zero" else k + shift
    _no_charpoly(monkeypatch)                                  # the float count decides
    probs = check(bad, {"claims": [bad]})
    assert any(f"gives {claim['evidence']['k']} singular values > eps" in p for p in probs), probs


def test_mid_spectrum_threshold_on_a_realistic_head():
    s = _head()[2]
    gap = int(np.argmax(s[10:40] / s[11:41])) + 10                 # a clear gap in the middle
    eps = Fraction(float(np.sqrt(s[gap] * s[gap + 1])))
    claim2, _ = _big_claim(eps=eps)
    assert claim2["evidence"]["k"] == gap + 1 and claim2["method"] == "inertia_congruence_core"
    assert check(claim2, {"claims": [claim2]}) == []


def test_enclosures_hold_the_known_values_and_a_shifted_one_is_caught():
    gq, eq, gk, ek = _grams(*_known(SQ, SK))
    for impl in (congruence, inertia):
        enc = impl.enclosures(gq, eq, gk, ek)
        assert enc is not None and len(enc) == 16
        for (lo, hi), sv in zip(enc, sorted(SIGMA, reverse=True)):
            assert lo <= Fraction(float(sv)) ** 2 <= hi
            assert hi - lo <= Fraction(float(SIGMA.max())) ** 2 / 10 ** 9
    kern = from_features(*_known(SQ, SK), PROV)
    claim = eps_rank_factor_claim(kern, summarize_features(kern), Fraction(1, 1000),
                                  RankOptions(eps=Fraction(1, 1000), embed_limit=0)).to_json()
    assert check(claim, {"claims": [claim]}) == []
    bad = copy.deepcopy(claim)
    lo, hi = (Fraction(v) for v in bad["evidence"]["sigma_sq_enclosures"][2])
    w = hi - lo
    bad["evidence"]["sigma_sq_enclosures"][2] = [str(lo + 2 * w), str(hi + 2 * w)]   # misses lambda_3
    probs = check(bad, {"claims": [bad]})
    assert any("does not contain the 3-th eigenvalue" in p for p in probs), probs


def test_non_psd_trusted_gram_is_refused():
    kern = from_features(*_known(SQ, SK), PROV)
    claim = claim_rows(eps_rank_factor_claim(kern, summarize_features(kern), Fraction(1),
                                             RankOptions(eps=Fraction(1), embed_limit=0)).to_json())
    bad = copy.deepcopy(claim)
    g = bad["evidence"]["gram_q"]
    g[0][1] = g[1][0] = 4 * max(abs(v) for row in g for v in row)      # symmetric, not PSD
    assert any("not PSD" in p for p in check(bad, {"claims": [bad]}))


# ---------------------------------------------------------------- the rounding-error bound itself

_VAL = st.sampled_from([1.0, -1.0, 0.5, 3.0, 1.0 + 2.0 ** -52, -(1.0 + 2.0 ** -52), 2.0 ** -60,
                        -2.0 ** -60, 1e-300, 2.0 ** -1010, 1e30, -1e30, 0.0, 1.0 / 3.0, -2.0 / 3.0])


@st.composite
def _pair(draw):
    m, n, p = draw(st.integers(1, 4)), draw(st.integers(1, 6)), draw(st.integers(1, 4))
    A = np.array(draw(st.lists(_VAL, min_size=m * n, max_size=m * n))).reshape(m, n)
    B = np.array(draw(st.lists(_VAL, min_size=n * p, max_size=n * p))).reshape(n, p)
    return A, B


@settings(max_examples=150, derandomize=True, deadline=None)
@given(_pair())
@example((np.array([[1.0, 2.0 ** -60, -1.0]]), np.array([[1.0], [1.0], [1.0]])))
@example((np.array([[1e30, 1.0, -1e30]]), np.array([[1.0], [1.0], [1.0]])))
def test_product_radius_contains_the_exact_product(pair):
    """Cancellation (1 + 2^-60 - 1, 1e30 + 1 - 1e30) is where a bound without the
    gamma_n |A||B| term fails; both implementations must contain the exact value."""
    A, B = pair
    exact = [[sum((Fraction(float(A[i, t])) * Fraction(float(B[t, j])) for t in range(A.shape[1])),
                  Fraction(0)) for j in range(B.shape[1])] for i in range(A.shape[0])]
    ca = congruence.Ball.point(A) @ congruence.Ball.point(B)
    ka = inertia._mul(inertia._exact(A), inertia._exact(B))
    for mid, rad in ((ca.mid, ca.rad), (ka[0], ka[1])):
        for i in range(A.shape[0]):
            for j in range(B.shape[1]):
                assert abs(exact[i][j] - Fraction(float(mid[i, j]))) <= Fraction(float(rad[i, j]))


def _exact_count(gq, eq, gk, ek, eps: Fraction) -> int:
    import flint
    P = sp.characteristic_polynomial(flint.fmpz_mat(gq) * flint.fmpz_mat(gk))
    return sp.count_eigenvalues_above(None, eps * eps / Fraction(2) ** (eq + ek), charpoly=P)


@pytest.mark.parametrize("seed", range(2))
def test_float_counts_never_differ_from_the_exact_count(seed):
    """Small random kernels of every awkward kind (duplicate columns, columns scaled
    over 1e+-8, quarter-integer features, magnitudes near 1e+-150, fewer tokens
    than features) with thresholds at singular values, just above the largest and
    at clear gaps: whenever a float count decides, it is the exact count (a
    dropped radius term or a mis-signed bound shows up here as a wrong count)."""
    rng = np.random.default_rng(seed)
    decided = 0
    for _ in range(40):
        r, K = int(rng.integers(1, 12)), int(rng.integers(1, 24))
        q, k = rng.standard_normal((K, r)), rng.standard_normal((K, r))
        kind = int(rng.integers(0, 5))
        if kind == 1 and r > 1:
            q[:, -1], k[:, -1] = q[:, 0], k[:, 0]
        elif kind == 2:
            q, k = q * np.exp(rng.uniform(-18, 18, r)), k * np.exp(rng.uniform(-18, 18, r))
        elif kind == 3:
            q, k = np.round(q * 4) / 4, np.round(k * 4) / 4
        elif kind == 4:
            q, k = np.abs(q) ** 3 * 1e-150, np.abs(k) * 1e150
        gq, eq, gk, ek = _grams(q, k)
        s = np.linalg.svd(q @ k.T, compute_uv=False)
        cands = [Fraction(1, 1000), Fraction(float(s[0])) * (1 + Fraction(1, 10 ** 12)),
                 Fraction(float(s[min(r, len(s)) - 1]))]
        cands += [Fraction(float(np.sqrt(a * b))) for a, b in zip(s, s[1:]) if b > 0 and a > 1.01 * b][:2]
        for eps in cands:
            if eps <= 0:
                continue
            want = _exact_count(gq, eq, gk, ek, eps)
            for impl in (congruence, inertia):
                got = impl.count_above(gq, eq, gk, ek, eps * eps)
                if got is not None:
                    decided += 1
                    assert got == want, (impl.__name__, kind, r, K, eps)
    assert decided >= 100                                      # the float path is exercised


def test_a_gram_equal_to_replayed_features_skips_only_the_psd_test(monkeypatch):
    # once this certificate's check has the exact Gram of features with the claim's dtype, shape
    # and sha256 (a replay), a stated Gram equal to it is PSD by construction and its PSD test is
    # not run; a stated Gram one entry off is not that Gram, so it is tested and refused; other
    # features' Grams, and another check's, never count
    from certify.checkers import gram as cgram
    from certify.checkers import scratch
    q, k = _known(SQ, SK)
    kern = from_features(q, k, PROV)
    claim = claim_rows(eps_rank_factor_claim(kern, summarize_features(kern), Fraction(1),
                                             RankOptions(eps=Fraction(1), embed_limit=0)).to_json())
    fs = claim["evidence"]["features_sha256"]
    tested = []
    real_psd = checker_eps._psd
    monkeypatch.setattr(checker_eps, "_psd", lambda g, G: tested.append(1) or real_psd(g, G))
    with scratch.session():
        assert check(claim, {"claims": [claim]}) == [] and len(tested) == 2       # nothing replayed
        for arr, side in ((q, "q"), (k, "k")):
            assert cgram._features_sha(arr, fs["dtype"]) == fs[f"phi_{side}"]
            assert cgram._is_gram_of(np.asarray(arr, dtype=fs["dtype"]), claim["evidence"][f"gram_{side}"],
                                     claim["evidence"][f"gram_{side}_exponent"], fs[f"phi_{side}"])
        tested.clear()
        assert check(claim, {"claims": [claim]}) == [] and tested == []           # both replayed
        bad = copy.deepcopy(claim)
        g = bad["evidence"]["gram_q"]
        g[0][1] = g[1][0] = 4 * max(abs(v) for row in g for v in row)            # symmetric, not PSD
        assert any("not PSD" in p for p in check(bad, {"claims": [bad]})) and tested == [1]
        other = copy.deepcopy(claim)
        other["evidence"]["features_sha256"]["phi_k"] = "0" * 64
        shape = (claim["evidence"]["num_tokens"], len(claim["evidence"]["gram_k"]))
        assert not cgram.replayed_gram(other["evidence"]["features_sha256"], "k", other["evidence"]["gram_k"],
                                       other["evidence"]["gram_k_exponent"], shape)
        assert cgram.replayed_gram(fs, "k", claim["evidence"]["gram_k"], claim["evidence"]["gram_k_exponent"],
                                   shape)
    tested.clear()                                          # a new check: nothing replayed in it
    assert check(claim, {"claims": [claim]}) == [] and len(tested) == 2


def test_without_the_exact_fallback_an_ill_conditioned_head_publishes_no_enclosures(monkeypatch):
    """Singular values 2^0 .. 2^-90 (both Grams of condition 2^90): the float pencil bounds give
    no enclosures narrow enough to publish. By default the producer computes them from the characteristic polynomial; with
    ``enclosure_fallback`` off (a checkpoint's heads) it publishes none and computes no
    polynomial, and the count, the method and the check are the same (the plain twin)."""
    sq = np.array([2.0 ** (-3 * i) for i in range(16)])
    q, k = _known(sq, sq)
    gq, eq, gk, ek = _grams(q, k)
    for impl in (congruence, inertia):
        got = impl.enclosures(gq, eq, gk, ek)
        assert got is None or sp._published_enclosures(got) is None
    kern = from_features(q, k, PROV)
    eps = Fraction(1, 1000)
    plain = eps_rank_factor_claim(kern, summarize_features(kern), eps, RankOptions(eps=eps)).to_json()
    _no_charpoly(monkeypatch)
    fast = eps_rank_factor_claim(kern, summarize_features(kern), eps,
                                 RankOptions(eps=eps, enclosure_fallback=False)).to_json()
    want = int(sum(Fraction(float(s)) > eps for s in sq * sq))
    assert plain["evidence"]["k"] == fast["evidence"]["k"] == want == 2
    assert plain["method"] == fast["method"]
    assert len(plain["evidence"]["sigma_sq_enclosures"]) == 16 and fast["evidence"]["sigma_sq_enclosures"] == []
    assert {k: v for k, v in plain["evidence"].items() if k != "sigma_sq_enclosures"} == \
        {k: v for k, v in fast["evidence"].items() if k != "sigma_sq_enclosures"}
    assert check(fast, {"claims": [fast]}) == []
