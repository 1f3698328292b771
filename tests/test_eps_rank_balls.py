"""eps-rank where binary64 cannot decide: the congruence test in arb balls at 106, 212 and
424 bits (producer :func:`solvers.congruence.count_above_balls`, checker
:mod:`certify.checkers.kernel.balls`, no shared code), then the exact characteristic
polynomial. A singular value within 1e-20 and 1e-30 relative of eps is decided by balls on
both sides, and the exact count agrees; within 2^-450 relative, or equal to eps, no precision
decides and the exact fallback gives the right two-sided answer; random small cases compare
the two ball implementations with the exact count (the plain twin)."""

from __future__ import annotations

import copy
from fractions import Fraction

import numpy as np
import pytest

from certify.checkers.kernel import balls, inertia, roots
from certify.checkers.kernel.matrices import fmpz_matrix, product
from certify.checkers.rank import check
from certify.core.kernel import Provenance, from_features
from certify.rank.eps import eps_rank_factor_claim
from certify.rank.options import RankOptions
from certify.rank.summary import summarize_features
from solvers import congruence
from solvers import spectral as sp
from tests.packed_grams import as_rows

PROV = Provenance("memory", None, "memory", "float64")
#: singular values of the factor pair below (exact dyadics); one of them is exactly 1
SIGMA = np.array([8, 6, 5, 4, 3.5, 1, 3, 2.5, 2, 1.75, 1.5, 0.75, 0.5, 0.25, 0.125, 0.0625])


def _orthogonal(r: int, seed: int) -> np.ndarray:
    """A Sylvester Hadamard matrix over sqrt(r) (exactly orthogonal, dyadic), rows permuted."""
    H = np.ones((1, 1))
    while H.shape[0] < r:
        H = np.block([[H, H], [H, -H]])
    rng = np.random.default_rng(seed)
    return (H[rng.permutation(r)] * rng.choice([-1.0, 1.0], r)[:, None]) / np.sqrt(r)


def _features() -> tuple[np.ndarray, np.ndarray]:
    """``PhiQ = O1 diag(SIGMA) O3``, ``PhiK = O2 O3``: ``PhiQ PhiK^T`` has the singular values SIGMA."""
    O1, O2, O3 = (_orthogonal(16, 3 + i) for i in range(3))
    return (O1 * SIGMA) @ O3, O2 @ O3


def _grams():
    s = summarize_features(from_features(*_features(), PROV))
    rows = lambda G: [[int(v) for v in row] for row in G.tolist()]      # noqa: E731
    return rows(s.gram_q), s.eq, rows(s.gram_k), s.ek


def _exact(gq, eq, gk, ek, eps: Fraction) -> int:
    P = roots.charpoly(product(fmpz_matrix(gq), fmpz_matrix(gk)))
    return roots.count_above(P, eps * eps / Fraction(2) ** (eq + ek))


def _no_charpoly(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("the exact characteristic polynomial was computed")
    monkeypatch.setattr(roots, "charpoly", boom)
    monkeypatch.setattr(sp, "characteristic_polynomial", boom)


def _claim(eps: Fraction) -> dict:
    kern = from_features(*_features(), PROV)
    return eps_rank_factor_claim(kern, summarize_features(kern), eps, RankOptions(eps=eps, embed_limit=0)).to_json()


def _neighbours_refuted(claim: dict) -> None:
    for wrong in (claim["evidence"]["k"] - 1, claim["evidence"]["k"] + 1):
        bad = copy.deepcopy(claim)
        bad["evidence"]["k"] = wrong
        assert any("singular values > eps" in p for p in check(bad, {"claims": [bad]}))


@pytest.mark.parametrize("rel", [Fraction(1, 10 ** 20), Fraction(-1, 10 ** 20), Fraction(1, 10 ** 30),
                                 Fraction(-1, 10 ** 30)])
def test_a_singular_value_within_1e20_and_1e30_of_eps_is_decided_by_balls(rel, monkeypatch):
    eps = 1 + rel                                              # sigma = 1 within |rel| relative of eps
    want = int(sum(Fraction(float(s)) > eps for s in SIGMA))
    assert want == (10 if rel > 0 else 11)
    gq, eq, gk, ek = _grams()
    assert inertia.count_above(gq, eq, gk, ek, eps * eps) is None                # binary64 cannot
    assert congruence.count_above(gq, eq, gk, ek, eps * eps) is None
    assert _exact(gq, eq, gk, ek, eps) == want                                  # the exact path agrees
    _no_charpoly(monkeypatch)
    assert balls.count_above(gq, eq, gk, ek, eps * eps) == want
    assert congruence.count_above_balls(gq, eq, gk, ek, eps * eps) == want
    claim = _claim(eps)
    assert (claim["evidence"]["k"], claim["method"], claim["verdict"]) == (want, "inertia_balls_core", "proved")
    assert check(claim, {"claims": [claim]}) == []
    _neighbours_refuted(claim)


@pytest.mark.parametrize("eps", [1 + Fraction(1, 1 << 450), 1 - Fraction(1, 1 << 450), Fraction(1)])
def test_within_2_to_the_450_or_at_eps_the_exact_fallback_decides(eps):
    """Beyond 424 bits (or ``Z`` singular: eps a singular value) no ball decides; the exact count
    gives the strict two-sided answer (sigma = eps is not counted)."""
    want = int(sum(Fraction(float(s)) > eps for s in SIGMA))
    gq, eq, gk, ek = _grams()
    assert balls.count_above(gq, eq, gk, ek, eps * eps) is None
    assert congruence.count_above_balls(gq, eq, gk, ek, eps * eps) is None
    claim = _claim(eps)
    assert (claim["evidence"]["k"], claim["method"]) == (want, "descartes_charpoly_core")
    assert check(claim, {"claims": [claim]}) == []
    _neighbours_refuted(claim)


def test_balls_decide_a_rank_deficient_head_that_floats_cannot():
    """Features of rank 10 < r = 24 (singular Grams, zero singular values): at eps = 1e-9 a zero
    eigenvalue of the rounded float matrices is indistinguishable from eps^2, the balls decide."""
    rng = np.random.default_rng(4)
    q = rng.integers(-20, 20, (60, 10)) @ rng.integers(-3, 4, (10, 24))
    k = rng.standard_normal((60, 24))
    s = summarize_features(from_features(q.astype(np.float64), k, PROV))
    gq, gk = ([[int(v) for v in row] for row in G.tolist()] for G in (s.gram_q, s.gram_k))
    eps = Fraction(1, 10 ** 9)
    want = _exact(gq, s.eq, gk, s.ek, eps)
    assert want == 10 and inertia.count_above(gq, s.eq, gk, s.ek, eps * eps) is None
    assert balls.count_above(gq, s.eq, gk, s.ek, eps * eps) == want
    assert congruence.count_above_balls(gq, s.eq, gk, s.ek, eps * eps) == want


@pytest.mark.parametrize("seed", range(2))
def test_ball_counts_never_differ_from_the_exact_count(seed):
    """Random small integer Grams (full rank and rank-deficient) with thresholds within 2^-40 to
    2^-200 relative of an eigenvalue, at an eigenvalue and at zero-like ones: whenever either
    ball implementation decides, it is the exact count, and both decide the same cases."""
    import flint
    rng = np.random.default_rng(seed)
    decided = 0
    for _ in range(12):
        r, n = int(rng.integers(2, 9)), int(rng.integers(1, 14))
        A, B = rng.integers(-9, 10, (n, r)), rng.integers(-9, 10, (n, r))
        gq, gk = ([[int(v) for v in row] for row in (M.T @ M).tolist()] for M in (A, B))
        P = roots.charpoly(product(fmpz_matrix(gq), fmpz_matrix(gk)))
        old = flint.ctx.prec
        flint.ctx.prec = 1200
        try:
            lams = [z.real.mid().man_exp() for z, _ in P.complex_roots()]
        finally:
            flint.ctx.prec = old
        cands = [Fraction(1, 3)]
        for m, e in lams:
            lam = Fraction(int(m)) * Fraction(2) ** int(e)
            if lam > 0:
                cands += [lam * (1 + Fraction(int(rng.choice([-1, 1])), 1 << int(rng.integers(40, 200))))]
        cands += [Fraction(int(rng.integers(1, 4)))]           # integer Grams: often an eigenvalue
        for c in cands:
            want = roots.count_above(P, c)
            got = balls.count_above(gq, 0, gk, 0, c), congruence.count_above_balls(gq, 0, gk, 0, c)
            assert got[0] in (None, want) and got[1] in (None, want), (r, n, c, got, want)
            assert (got[0] is None) == (got[1] is None), (r, n, c, got)
            decided += got[0] is not None
    assert decided >= 30


def test_a_present_factor_file_discharges_the_trusted_grams(tmp_path):
    """A factor file too large to embed: with the file present, verify re-derives the stated Grams
    from it (the kernel's random-product identity) and exits 0 with no ``trusted:`` assumption; a
    stated Gram one unit off fails; without the file nothing re-derives them, nor the size that
    would allow them as an assumption (exit 1)."""
    import json
    import shutil

    from certify.checkers import verify
    from certify.cli import rank as rank_cli
    rng = np.random.default_rng(11)
    E = rng.integers(-3, 4, (3000, 8))                             # exact features of rank 8
    q, k = E @ rng.integers(-2, 3, (8, 24)), E @ rng.integers(-2, 3, (8, 24))
    np.savez(tmp_path / "f.npz", phi_q=q.astype(np.float32), phi_k=k.astype(np.float32))
    assert rank_cli.main([str(tmp_path / "f.npz"), "--eps", "1/1000", "--out", str(tmp_path / "c.json")]) == 0
    cert = json.loads((tmp_path / "c.json").read_text())
    claims = {c["kind"]: c for c in cert["claims"]}
    assert claims["eps_rank"]["evidence"]["trusted"] == ["gram_q", "gram_k", "num_tokens"]
    assert claims["eps_rank"]["evidence"]["k"] == 8                 # rank 8: 16 zero singular values
    got = verify.verify_certificate(cert, tmp_path)
    assert got.exit_code() == 0, got
    assert not any(c.trusted or c.assumptions for c in got.claims)
    bad = as_rows(copy.deepcopy(cert))
    for c in bad["claims"]:
        c["evidence"]["gram_q"][0][0] += 1
    assert verify.verify_certificate(bad, tmp_path).exit_code() == 1
    away = tmp_path / "away"
    away.mkdir()
    shutil.move(str(tmp_path / "c.json"), away / "c.json")
    (tmp_path / "f.npz").unlink()
    got = verify.verify_certificate(cert, away)                    # nothing re-derives the Grams
    assert got.exit_code() == 1 and all("trusted summaries" in c.problems[0] for c in got.claims)
