"""certify.audit: exact correctness and the Lemma 3 audit, re-checked by certify.checkers.audit."""

from __future__ import annotations

import copy
from fractions import Fraction

import numpy as np
import pytest

from certify import audit
from certify.checkers import audit as checker
from certify.core.certificate import Certificate
from certify.core.families import chain_family, paper51_family

HALF = Fraction(1, 2)


def softmin(fam, base):
    T = fam.tokens.astype(np.int64)
    G = T @ T.T
    q = fam.query_tokens()
    K = len(T)
    phi_k = np.array([[Fraction(1, base ** int(G[u, z])) for u in range(K)] for z in range(K)], dtype=object)
    return audit.head_from_tables(np.eye(K, dtype=np.int64)[q], phi_k, G[q], q)


@pytest.fixture(scope="module")
def fam():
    return paper51_family()


def _json(claim):
    return Certificate(claims=[claim]).to_json()["claims"][0]


def test_softmin_base8_solves_paper51(fam):
    head = softmin(fam, 8)
    res = audit.check_correctness(head, fam)
    assert res.verdict.value == "proved" and res.scored == 1272 and res.failures == 0
    assert res.max_error < HALF
    gd = audit.audit_gap_domination(head, fam)
    assert gd.verdict.value == "proved" and gd.applicable == 424 and gd.violated == ()
    for c in audit.audit_claims(head, fam, "softmin-8"):
        assert checker.check(_json(c), {}) == []


def test_uniform_attention_fails_with_known_numbers(fam):
    head = softmin(fam, 1)                     # alpha = 1 everywhere
    res = audit.check_correctness(head, fam)
    c = res.counterexample
    # input 0 is Y = (x, y0, y0) with <x,x> = 12, <x,y0> = 0: t_hat = (12 + 0 + 0)/3 = 4
    assert (c.input, c.position, c.t_hat, c.target) == (0, 0, Fraction(4), 0)
    gd = audit.audit_gap_domination(head, fam)
    # every jump of paper-5.1 has d >= 3, factor (n-2)(d-1) >= 2 > 1 = alpha(x,y)/alpha(x,z)
    assert len(gd.violated) == 424 and gd.first.factor == 2
    assert gd.verdict.value == "refuted" and gd.first.role in ("Y", "Z", "M")
    for cl in audit.audit_claims(head, fam, "uniform"):
        assert checker.check(_json(cl), {}) == []


def test_single_planted_violation_is_found_and_confirmed(fam):
    head = softmin(fam, 8)
    jx, jz = int(fam.jumps[0][3]), int(fam.jumps[0][5])
    phi_k = head.phi_k.copy()
    phi_k[jz, jx] = Fraction(10**6)          # alpha(x, z) huge for this (x, z) only
    bad = audit.ExactHead(head.query_tokens, head.phi_q, phi_k, head.g)
    gd = audit.audit_gap_domination(bad, fam)
    pairs = {(int(j[3]), int(j[5])) for j in fam.jumps[list(gd.violated)]}
    assert pairs == {(jx, jz)} and gd.first.jump == 0
    f = gd.first.failing
    # the named input fails when evaluated independently here
    seq = fam.inputs[f.input]
    row = list(bad.query_tokens).index(int(seq[0]))
    a = [sum(bad.phi_q[row, k] * bad.phi_k[z, k] for k in range(bad.rank)) for z in seq]
    t_hat = sum(ai * bad.g[row, z] for ai, z in zip(a, seq)) / sum(a)
    assert t_hat == f.t_hat and abs(t_hat - fam.targets[f.input, 0]) >= HALF
    claim = _json(audit.gap_domination_claim(bad, fam, gd, "planted"))
    assert checker.check(claim, {}) == []
    forged = copy.deepcopy(claim)
    forged["evidence"]["violation"]["failing_input"]["t_hat"] = "1/3"
    assert checker.check(forged, {})


def test_lemma3_violation_always_breaks_an_input():
    """Lemma 3, exactly: on random nonnegative heads, every violated jump has a
    wrong input among its Y, Z, M, whatever the values."""
    words = np.array([[1, 1, 1, 1, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1, 1, 0], [1, 0, 0, 0, 0, 1, 1, 1]],
                     dtype=np.uint8)
    fam = chain_family(words, n=3)
    rng = np.random.default_rng(0)
    q = fam.query_tokens()
    seen = 0
    for _ in range(40):
        r = int(rng.integers(1, 4))
        head = audit.head_from_tables(rng.integers(0, 4, (len(q), r)), rng.integers(0, 4, (len(fam.tokens), r)),
                                      rng.integers(-2, 6, (len(q), len(fam.tokens))), q)
        alpha = head.alpha()
        rows = head.row_of()
        for j in fam.jumps:
            x, y, z, t, u = (int(v) for v in j[3:8])
            f = audit.lemma3_factor(3, HALF, u - t)
            if alpha[rows[x], x] > 0 and not alpha[rows[x], y] > f * alpha[rows[x], z]:
                outs = audit.evaluate(head, fam, [int(i) for i in j[8:11]], alpha)
                assert not all(o.correct(HALF) for o in outs)
                seen += 1
    assert seen > 10


def test_kernel_head_exact_tables_match_the_forward_pass():
    torch = pytest.importorskip("torch")
    heads = pytest.importorskip("models.heads")
    words = np.array([[1, 1, 1, 1, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1, 1, 0], [1, 0, 0, 0, 0, 1, 1, 1]],
                     dtype=np.uint8)
    fam = chain_family(words, n=3)
    model = heads.KernelHead(m=8, rank=4, dv=3, feature_map="elu1",
                             generator=torch.Generator().manual_seed(0))
    head = audit.head_from_model(model, fam)
    exact = {(o.input, o.position): o.t_hat for o in audit.evaluate(head, fam)}
    with torch.no_grad():
        y = model.forward_indexed(torch.as_tensor(np.array(fam.tokens)), torch.as_tensor(np.array(fam.inputs)))
    for (i, p), t in exact.items():
        assert abs(float(t) - float(y[i, p])) < 1e-4
