"""The exact constructions of Thm 1, Thm 2, Thm 6 and the lookup construction,
checked at every position of every sequence (m <= 4, n <= 3) with the strict
criterion, in exact arithmetic; planted broken constructions must fail."""

import math
from fractions import Fraction

import flint
import numpy as np
import pytest
import torch

from certify.core.cube import all_tokens, enumerate_sequences, min_ip_targets, token_index
from certify.core.families import Family, paper51_family
from models.constructions import (
    KernelConstruction,
    exhaustive_float_predictions,
    lookup_construction,
    softmin_base,
    thm1_softmin,
    thm1_softmin_head,
    thm2_exact_features,
    thm6_rank_one,
    thm6_rank_one_head,
)

HALF = Fraction(1, 2)


@pytest.fixture(scope="module")
def paper51():
    return paper51_family()


# ---------------------------------------------------------------- Thm 1

@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_thm1_exact_on_every_sequence(m):
    res = thm1_softmin(m, 3).check_exhaustive(3)                   # tau = log 6, c = 1/6
    assert res.ok and res.failures == 0
    assert res.checked == sum(N * 2 ** (m * N) for N in (1, 2, 3))
    assert res.min_signed_error >= 0                                # t_hat - t >= 0
    # worst input (x, x, y), <x,x> = 1, <x,y> = 0: 2c / (2c + 1) = 1/4 at c = 1/6
    assert res.max_error == Fraction(1, 4)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_thm1_at_each_length_bound(n):
    res = thm1_softmin(3, n).check_exhaustive(n)
    assert res.ok and res.min_signed_error >= 0 and res.max_error < HALF


@pytest.mark.parametrize("m", [2, 3, 4])
def test_thm1_broken_tau_below_the_theorem_fails(m):
    # tau = log 2 < log 6: (x, x, y) with <x, x> = 2 gives error 4c^2/(2c^2+1) = 2/3
    res = thm1_softmin(m, 3, base=Fraction(1, 2)).check_exhaustive(3)
    assert not res.ok and res.failures > 0
    assert res.max_error == Fraction(2, 3)
    # tau = 0 (uniform attention) fails too
    assert not thm1_softmin(m, 3, base=Fraction(1)).check_exhaustive(3).ok


def test_thm1_torch_head_matches_exact_on_every_sequence():
    m, n = 4, 3
    model = thm1_softmin_head(m, n)                                 # float64, tau = log 6
    con = thm1_softmin(m, n)
    _A, _G = con.kernel(), con.g
    worst = 0.0
    for X, pred in exhaustive_float_predictions(model, m, n):
        t = min_ip_targets(X)
        assert (pred - t >= -1e-12).all()                          # error >= 0
        worst = max(worst, float(np.max(pred - t)))
        if X.shape[1] == 3:                                        # spot-compare with exact
            exact, _ = con.predictions(token_index(X[:200]))
            assert np.allclose(pred[:200], exact.astype(float), rtol=0, atol=1e-12)
    assert worst == pytest.approx(0.25, abs=1e-12)


def test_thm1_torch_head_with_small_tau_fails():
    m, n = 3, 3
    model = thm1_softmin_head(m, n, tau=math.log(2))
    worst = max(float(np.max(np.abs(p - min_ip_targets(X))))
                for X, p in exhaustive_float_predictions(model, m, n))
    assert worst >= 0.5 + 0.1                                       # 2/3 up to rounding


# ---------------------------------------------------------------- Thm 2

@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_thm2_exact_features_rank_and_correctness(m):
    con = thm2_exact_features(m, 3)
    assert con.rank == 2 ** m
    assert softmin_base(3, HALF, dyadic=True) == Fraction(1, 8)    # tau = log 8 >= log 6
    A = con.kernel()
    B = np.array([[1, 1], [1, Fraction(1, 8)]], dtype=object)
    kron = np.array([[Fraction(1)]], dtype=object)
    for _ in range(m):
        kron = np.kron(kron, B)
    assert (A == kron).all()                                        # [[1,1],[1,e^-tau]]^{(x) m}
    assert flint.fmpq_mat([[flint.fmpq(v.numerator, v.denominator) for v in r] for r in A]).rank() == 2 ** m
    assert all(v >= 0 for v in con.phi_q.ravel()) and all(v >= 0 for v in con.phi_k.ravel())
    res = con.check_exhaustive(3)
    assert res.ok and res.min_signed_error >= 0


def test_thm2_torch_model_computes_the_exact_tables():
    m = 4
    con = thm2_exact_features(m, 3)
    head = con.to_lookup_head()                                     # float64, dyadic: exact
    assert head.feature_map == "lookup_relu" and head.rank == 16
    PQ, PK = head.feature_matrices(all_tokens(m))
    assert [[Fraction(float(v)) for v in r] for r in PQ.detach()] == con.phi_q.tolist()
    assert [[Fraction(float(v)) for v in r] for r in PK.detach()] == con.phi_k.tolist()
    G = head.value_table(all_tokens(m), all_tokens(m))
    assert [[Fraction(float(v)) for v in r] for r in G.detach()] == con.g.tolist()
    for X, pred in exhaustive_float_predictions(head, m, 3):
        err = np.abs(pred - min_ip_targets(X))
        assert err.max() < 0.5


# ---------------------------------------------------------------- Thm 6

@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_thm6_rank_one_exact_for_lengths_up_to_two(m):
    con = thm6_rank_one(m)
    assert con.rank == 1
    res = con.check_exhaustive(2)
    assert res.ok and res.max_error == 0


@pytest.mark.parametrize("m", [2, 3, 4])
def test_thm6_rank_one_fails_at_length_three(m):
    # outside the theorem's range the same check must catch it
    assert not thm6_rank_one(m).check_exhaustive(3, min_length=3).ok


def test_thm6_torch_head_is_exact_and_matches_tables():
    m = 4
    head = thm6_rank_one_head(m)
    con = thm6_rank_one(m)
    PQ, PK = head.feature_matrices(all_tokens(m))
    assert torch.equal(PQ, torch.ones(16, 1, dtype=torch.float64)) and torch.equal(PK, PQ)
    G = head.value_table(all_tokens(m), all_tokens(m)).detach()
    assert [[Fraction(float(v)) for v in r] for r in G] == con.g.tolist()
    for X, pred in exhaustive_float_predictions(head, m, 2):
        assert np.array_equal(pred, min_ip_targets(X).astype(float))   # error exactly 0


# ---------------------------------------------------------------- lookup construction

def _cube_family(m, n):
    seqs = np.concatenate([token_index(X) for X in enumerate_sequences(m, n, min_length=n)])
    toks = all_tokens(m)
    from certify.core.cube import targets_from_indices
    return Family(name=f"cube-{m}-{n}", tokens=toks, inputs=seqs,
                  scored=np.ones(seqs.shape, dtype=bool), targets=targets_from_indices(toks, seqs))


@pytest.mark.parametrize("m,n", [(2, 3), (3, 3), (4, 2), (3, 1)])
def test_lookup_construction_on_every_sequence(m, n):
    fam = _cube_family(m, n)
    con = lookup_construction(fam)
    assert con.rank == 2 ** m                                       # every token is a query
    res = con.check_family(fam)
    assert res.ok and res.checked == fam.scored.sum()


def test_lookup_construction_solves_paper51_at_rank_15(paper51):
    con = lookup_construction(paper51)
    assert con.rank == 15 == len(paper51.query_tokens())
    res = con.check_family(paper51)
    assert res.ok and res.checked == 1272 and res.max_error < HALF
    # the torch model holds the same tables exactly and agrees numerically
    head = con.to_lookup_head()
    PQ, PK = head.feature_matrices(paper51.tokens)
    assert [[Fraction(float(v)) for v in r] for r in PQ.detach()] == con.phi_q.tolist()
    assert [[Fraction(float(v)) for v in r] for r in PK.detach()] == con.phi_k.tolist()
    with torch.no_grad():
        pred = head(torch.from_numpy(paper51.inputs.copy())).numpy()
    err = np.abs(pred - paper51.targets)[paper51.scored]
    assert err.max() == pytest.approx(float(res.max_error), abs=1e-12)


def test_broken_lookup_constructions_fail(paper51):
    # uniform attention (tau = 0)
    assert not lookup_construction(paper51, base=Fraction(1)).check_family(paper51).ok
    # drop one query's own feature (its row becomes the shared all-ones row): rank 14
    con = lookup_construction(paper51)
    q0 = paper51.query_tokens()[0]
    phi_q = con.phi_q[:, 1:].copy()
    phi_q[q0] = Fraction(1)
    broken = KernelConstruction("lookup-minus-one", con.tokens, phi_q, con.phi_k[:, 1:].copy(), con.g)
    res = broken.check_family(paper51)
    assert broken.rank == 14 and not res.ok and res.failures > 0


def test_nonpositive_denominator_is_a_failure():
    con = thm6_rank_one(2)
    zero = KernelConstruction("zero", con.tokens, con.phi_q * 0, con.phi_k, con.g)
    res = zero.check_exhaustive(2)
    assert not res.ok and res.nonpositive_denominator is not None and res.max_error is None


def test_exact_predictions_equal_the_plain_sums_of_fractions():
    """models.constructions.exact_predictions (each row over its common denominator, one
    Fraction per prediction) against Eq. 5 summed in Fractions, nonpositive denominators
    included; and the exact kernel product against np.dot of the object arrays."""
    from certify.core.numbers import exact_product
    from models.constructions import exact_predictions

    rng = np.random.default_rng(11)
    for trial in range(30):
        K, r = int(rng.integers(2, 9)), int(rng.integers(0, 5))
        q = lambda shape: np.array([Fraction(int(rng.integers(-40, 60)), int(rng.integers(1, 9)))  # noqa: E731
                                    for _ in range(int(np.prod(shape)))], dtype=object).reshape(shape)
        PQ, PK, G = q((K, r)), q((K, r)), q((K, K))
        A = exact_product(PQ, PK.T)
        plain_A = np.dot(PQ, PK.T) if r else np.full((K, K), Fraction(0), dtype=object)
        assert (A == plain_A).all() and all(type(v) is Fraction for v in A.ravel())
        inputs = rng.integers(0, K, (25, 3))
        pred, bad = exact_predictions(A, G, inputs)
        want, want_bad = np.empty(inputs.shape, dtype=object), None
        for b, seq in enumerate(inputs.tolist()):
            for i, x in enumerate(seq):
                den = sum(A[x][z] for z in seq)
                if den <= 0:
                    want_bad = want_bad or (b, i)
                    continue
                want[b, i] = sum(A[x][z] * G[x][z] for z in seq) / den
        assert bad == want_bad and all(p == w for p, w in zip(pred.ravel(), want.ravel())), trial
