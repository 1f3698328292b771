"""Heads and feature maps: Eq. 3-4 against a direct evaluation, the feature
matrices the certificate uses are the ones the forward pass uses, declared
guarantees hold, causal position-dependent keys (Thm 8)."""

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from certify.core.cube import all_tokens, min_ip_targets
from certify.core.errors import InputError, UncertifiableError
from models.feature_maps import REGISTRY, Guarantee, MapKind
from models.heads import (
    DenseSoftmaxHead,
    KernelHead,
    LookupHead,
    NonpositiveDenominator,
    PositionalKernelHead,
)

PROJECTION_MAPS = sorted(n for n, s in REGISTRY.items() if s.kind is MapKind.PROJECTION)


def gen(seed):
    return torch.Generator().manual_seed(seed)


def _rank(name):
    return 9 if name == "tensor_square" else 6


def direct_eq34(model, X):
    """Eq. 3-4 with the N x N kernel matrix, float64, from the model's own pieces."""
    B, N, m = X.shape
    flat = X.reshape(-1, m)
    PQ, PK = model.feature_matrices(flat)
    V = model.values(flat)
    beta, w = model.readout(flat)
    PQ, PK, V, beta, w = (t.double().reshape(B, N, -1) for t in (PQ, PK, V, beta, w))
    alpha = PQ @ PK.transpose(1, 2)                                    # (B, N, N)
    a = (alpha @ V) / alpha.sum(-1, keepdim=True)
    return beta[..., 0] + (w * a).sum(-1)


@pytest.mark.parametrize("name", [n for n in PROJECTION_MAPS
                                  if n not in ("identity", "tensor_square", "relu")])
@pytest.mark.parametrize("N,dv", [(4, 7), (12, 2)])      # kernel-matrix order / sketch order
def test_kernel_head_matches_direct_eq34(name, N, dv):
    m = 5
    model = KernelHead(m, _rank(name), dv, name, generator=gen(1), dtype=torch.float64)
    X = torch.randint(0, 2, (20, N, m), generator=gen(2))
    got = model(X)
    assert got.shape == (20, N)
    assert torch.allclose(got, direct_eq34(model, X), rtol=1e-10, atol=1e-10)
    model.train()                                      # batched token tables
    assert torch.allclose(model(X), got, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", PROJECTION_MAPS)
def test_feature_rows_do_not_depend_on_the_batch(name):
    # The certified kernel is built from feature_matrices(cube); the eval-mode
    # forward pass evaluates the distinct tokens of its batch. Rows must agree
    # bitwise, which batched float kernels do not promise (the training path
    # is only close).
    m = 6
    model = KernelHead(m, _rank(name), 4, name, generator=gen(3))
    cube = all_tokens(m)
    PQ, PK = model.feature_matrices(cube)
    for i in (0, 5, 17, 63):
        q1, k1 = model.feature_matrices(cube[i:i + 1])
        assert torch.equal(q1[0], PQ[i]) and torch.equal(k1[0], PK[i])
    sub = [3, 40, 41, 9, 62]
    tabs = model.token_tables(cube[sub])
    assert torch.equal(tabs[0], PQ[sub]) and torch.equal(tabs[1], PK[sub])
    assert torch.equal(tabs[2], model.values(cube)[sub])
    fast = model.token_tables(cube[sub], canonical=False)
    for a, b in zip(tabs, fast):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)


def test_forward_uses_the_certified_feature_tables():
    m = 4
    model = KernelHead(m, 5, 3, "exp", generator=gen(4), dtype=torch.float64)
    cube = all_tokens(m)
    PQ, PK = model.feature_matrices(cube)
    G = model.value_table(cube, cube)                                 # (16, 16)
    A = PQ @ PK.T
    X = torch.randint(0, 2, (30, 3, m), generator=gen(5))
    idx = (X.long() << torch.arange(m)).sum(-1)                       # cube indices (30, 3)
    Ai = A[idx[:, :, None], idx[:, None, :]]                          # (30, 3, 3)
    Gi = G[idx[:, :, None], idx[:, None, :]]
    eq5 = (Ai * Gi).sum(-1) / Ai.sum(-1)
    assert torch.allclose(model(X), eq5, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", PROJECTION_MAPS)
def test_declared_guarantees_hold_on_the_cube(name):
    m = 6
    for seed in range(3):
        model = KernelHead(m, _rank(name), 2, name, generator=gen(seed), dtype=torch.float64)
        PQ, PK = model.feature_matrices(all_tokens(m))
        g = REGISTRY[name].guarantee
        if g is Guarantee.FEATURES_NONNEGATIVE:
            assert (PQ >= 0).all() and (PK >= 0).all()
        if g in (Guarantee.FEATURES_NONNEGATIVE, Guarantee.KERNEL_NONNEGATIVE):
            assert (PQ @ PK.T >= 0).all()
    if name in ("identity", "tensor_square"):       # signed features really occur
        assert (PQ < 0).any()
    if name == "identity":
        assert (PQ @ PK.T < 0).any()


def test_signed_kernel_denominator_is_checked():
    model = KernelHead(3, 2, 2, "identity", generator=gen(0), dtype=torch.float64)
    with torch.no_grad():
        model.query_map.proj.weight.zero_()
        model.query_map.proj.bias.copy_(torch.tensor([1.0, 0.0]))
        model.key_map.proj.weight.zero_()
        model.key_map.proj.bias.copy_(torch.tensor([-1.0, 0.0]))     # alpha = -1 everywhere
    with pytest.raises(NonpositiveDenominator):
        model(torch.ones(1, 2, 3))


def test_favor_projection_is_fixed_and_shared_seeded():
    a = KernelHead(4, 8, 2, "favor", proj_dim=3, omega_seed=7, generator=gen(0))
    b = KernelHead(4, 8, 2, "favor", proj_dim=3, omega_seed=7, generator=gen(1))
    assert a.query_map.omega.shape == (8, 3)
    assert torch.equal(a.query_map.omega, b.key_map.omega)
    assert "query_map.omega" in a.state_dict()                       # stored with the weights
    assert not a.query_map.omega.requires_grad


def test_lookup_head_indices_tokens_and_tables():
    tokens = all_tokens(3)[[1, 2, 4, 7, 0]]
    model = LookupHead(tokens, 2, generator=gen(0), dtype=torch.float64)
    with torch.no_grad():
        model.g.copy_(torch.randn(5, 5, generator=gen(1), dtype=torch.float64))
    idx = torch.tensor([[0, 1, 3], [4, 4, 2]])
    assert torch.equal(model(idx), model(torch.from_numpy(tokens)[idx]))
    PQ, PK = model.feature_matrices(tokens)
    assert (PQ > 0).all() and (PK > 0).all()                         # softplus tables
    alpha = PQ[idx] @ PK[idx].transpose(1, 2)
    g = model.g[idx[:, :, None], idx[:, None, :]]
    assert torch.allclose(model(idx), (alpha * g).sum(-1) / alpha.sum(-1), rtol=1e-12)
    assert torch.equal(model.value_table(tokens[[3, 0]], tokens[[2, 4]]), model.g[[3, 0]][:, [2, 4]])
    # the generic Eq. 5 pieces agree with the table
    beta, w = model.readout(tokens)
    assert torch.allclose(beta[:, None] + w @ model.values(tokens).T, model.g)
    with pytest.raises(InputError):
        model.index_of(np.array([[1, 1, 0]]))                        # not in the table


def test_dense_softmax_head_matches_direct_softmax():
    m = 4
    model = DenseSoftmaxHead(m, 3, 5, generator=gen(0), dtype=torch.float64)
    X = torch.randint(0, 2, (6, 3, m), generator=gen(1)).double()
    s = model.query(X) @ model.key(X).transpose(1, 2)
    p = torch.exp(s) / torch.exp(s).sum(-1, keepdim=True)
    y = p @ model.value(X)
    want = model.beta(X)[..., 0] + (model.w(X) * y).sum(-1)
    assert torch.allclose(model(X), want, rtol=1e-12)


@settings(max_examples=15, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), N=st.integers(1, 5))
def test_positional_head_final_query_equals_shared_head(seed, N):
    # With every key map equal to one shared map, the causal final query attends
    # to the whole sequence: it must equal the position-free head there.
    m = 4
    shared = KernelHead(m, 3, 2, "softplus", generator=gen(seed), dtype=torch.float64)
    pos = PositionalKernelHead(m, 3, 2, positions=5, feature_map="softplus", dtype=torch.float64)
    with torch.no_grad():
        pos.query_map.load_state_dict(shared.query_map.state_dict())
        for km in pos.key_maps:
            km.load_state_dict(shared.key_map.state_dict())
        for name in ("value", "beta", "w"):
            getattr(pos, name).load_state_dict(getattr(shared, name).state_dict())
    X = torch.randint(0, 2, (4, N, m), generator=gen(seed + 1))
    assert torch.allclose(pos(X)[:, -1], shared(X)[:, -1], rtol=1e-10, atol=1e-12)


def test_positional_head_is_causal_and_position_dependent():
    m = 4
    pos = PositionalKernelHead(m, 3, 2, positions=4, feature_map="exp", generator=gen(0),
                               dtype=torch.float64)
    X = torch.randint(0, 2, (3, 4, m), generator=gen(1))
    Y = X.clone()
    Y[:, 3] = 1 - Y[:, 3]                                            # change only the last token
    a, b = pos(X), pos(Y)
    assert torch.equal(a[:, :3], b[:, :3])
    assert not torch.equal(a[:, 3], b[:, 3])
    # keys at different positions see different kernels
    q0, k0 = pos.feature_matrices_at(all_tokens(m), 0)
    _, k1 = pos.feature_matrices_at(all_tokens(m), 1)
    assert not torch.equal(k0, k1)
    assert pos.key_feature_stack(all_tokens(m)).shape == (4, 16, 3)
    with pytest.raises(UncertifiableError):
        pos.feature_matrices(all_tokens(m))
    with pytest.raises(InputError):
        pos(torch.zeros(1, 5, m))                                    # longer than its positions


def test_bad_tokens_are_rejected():
    model = KernelHead(3, 2, 2, "elu1", generator=gen(0))
    with pytest.raises(InputError):
        model(torch.full((1, 2, 3), 2))
    with pytest.raises(InputError):
        model(torch.zeros(1, 2, 4))


def test_global_torch_state_untouched():
    rng = torch.random.get_rng_state()
    dtype = torch.get_default_dtype()
    KernelHead(5, 4, 3, "favor", generator=gen(0), dtype=torch.float64)
    LookupHead(all_tokens(3), 2, generator=gen(0))
    DenseSoftmaxHead(3, 2, 2, generator=gen(0))
    assert torch.equal(rng, torch.random.get_rng_state())
    assert torch.get_default_dtype() == dtype


def test_seeded_initialisation_is_reproducible():
    a = KernelHead(5, 4, 3, "exp", generator=gen(11))
    b = KernelHead(5, 4, 3, "exp", generator=gen(11))
    c = KernelHead(5, 4, 3, "exp", generator=gen(12))
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["query_map.proj.weight"], sc["query_map.proj.weight"])


def test_min_ip_targets_reachable_by_rank_one_at_length_two():
    # sanity link between heads and the task: Thm 6's head reproduces targets
    from models.constructions import thm6_rank_one_head
    X = np.array([[[1, 1, 0], [0, 1, 1]], [[1, 0, 1], [1, 0, 1]]], dtype=np.uint8)
    with torch.no_grad():
        out = thm6_rank_one_head(3)(torch.from_numpy(X)).numpy()
    assert [[Fraction(v) for v in r] for r in out] == min_ip_targets(X).tolist()


@pytest.mark.parametrize("name", PROJECTION_MAPS)
def test_canonical_features_are_the_torch_maps_in_float64(name):
    """The certified features (float64, models.canonical) are the maps the torch
    forward computes: equal to a float64 torch head up to rounding, and, where the
    map is exact on dyadic inputs (relu, identity, tensor_square of 0/1 tokens with
    dyadic weights), equal bit for bit."""
    model = KernelHead(m=4, rank=_rank(name), dv=3, feature_map=name, generator=gen(3),
                       dtype=torch.float64)
    X = all_tokens(4)
    q, k = model.canonical_features(X)
    assert q.dtype == np.float64 and q.shape == (16, model.rank) and k.shape == q.shape
    with torch.no_grad():
        tq, tk = (t.numpy() for t in model.feature_matrices(X))
    np.testing.assert_allclose(q, tq, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(k, tk, rtol=1e-13, atol=1e-14)
    v, (beta, w) = model.canonical_values(X), model.canonical_readout(X)
    with torch.no_grad():
        np.testing.assert_allclose(v, model.values(X).numpy(), rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(w, model.readout(X)[1].numpy(), rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(beta, model.readout(X)[0].numpy(), rtol=1e-14, atol=1e-15)
    if name in ("relu", "identity", "tensor_square"):
        with torch.no_grad():        # dyadic weights on a grid of 2^-8: every sum and product exact
            for p in (model.query_map.proj.weight, model.query_map.proj.bias):
                p.copy_(torch.round(p * 256) / 256)
            tq = model.feature_matrices(X)[0].numpy()
        assert np.array_equal(model.canonical_features(X)[0], tq)


def test_canonical_elu1_is_exp_rounded_once_not_float32_cancellation():
    """``elu(u) + 1`` for ``u < 0`` is ``exp(u)`` correctly rounded: for u = -13 the
    float32 ``expm1(u) + 1`` of the torch forward loses most digits, the certified
    feature does not."""
    import math

    from flint import arb
    model = KernelHead(m=1, rank=1, dv=1, feature_map="elu1", generator=gen(0))
    with torch.no_grad():
        model.query_map.proj.weight.fill_(-13.0)
        model.query_map.proj.bias.fill_(0.0)
    q = model.canonical_features(np.array([[1]]))[0][0, 0]
    ball = arb(-13).exp()
    assert abs(q - math.exp(-13)) <= 1e-16 * q and float(ball.lower()) <= q <= float(ball.upper()) + 1e-300
    with torch.no_grad():
        tq = float(model.feature_matrices(np.array([[1]]))[0][0, 0])
    assert abs(tq - q) > 1e-3 * q                                    # float32 cancellation


def test_lookup_canonical_features_are_the_tables_correctly_rounded():
    tokens = all_tokens(3)[[1, 2, 4, 7, 0]]
    for fm in ("lookup_softplus", "lookup_exp", "lookup_relu", "lookup_signed"):
        model = LookupHead(tokens, 3, feature_map=fm, generator=gen(0))          # float32 tables
        q, k = model.canonical_features(tokens[[4, 0, 0]])
        assert q.dtype == np.float64 and q.shape == (3, 3)
        raw = model.query_map.raw.detach().double().numpy()[[4, 0, 0]]
        with torch.no_grad():
            tq = model.feature_matrices(tokens[[4, 0, 0]])[0].double().numpy()
        np.testing.assert_allclose(q, tq, rtol=2e-7, atol=1e-7)                  # torch: float32
        if fm in ("lookup_relu", "lookup_signed"):
            assert np.array_equal(q, np.maximum(raw, 0.0) if fm == "lookup_relu" else raw)
        if fm == "lookup_exp":
            from flint import arb
            for x, y in zip(raw.reshape(-1).tolist(), q.reshape(-1).tolist()):
                ball = arb(x).exp()
                assert float(ball.lower()) <= y <= float(ball.upper()) or abs(y - float(ball.mid())) <= 1e-16 * y


def test_exact_head_uses_the_certified_features():
    """The correctness claims' exact head is built from the canonical (float64) tables."""
    from certify import audit
    from certify.core.families import load_family
    from certify.sources.checkpoint import load_model
    fam = load_family("paper-5.1")
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    _, model = load_model(root / "models" / "checkpoints" / "paper51-lookup-r8-s0.json")
    head = audit.head_from_model(model, fam)
    q, k = model.canonical_features(fam.tokens)
    assert all(Fraction(a) == b for a, b in zip(k.reshape(-1).tolist(), head.phi_k.reshape(-1)))
    with torch.no_grad():
        tk = model.feature_matrices(fam.tokens)[1].double().numpy()
    assert not np.array_equal(k, tk)                     # the float32 torch tables are not those
