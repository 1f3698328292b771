"""Nonnegativity from the feature map's structure (certify/rank/structure.py and
its checker): the quadratic-kernel lemma of Based (1 + s + s^2/2 with signed
features), the key box, and the PSD test by the characteristic polynomial."""

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from certify.checkers.verify import verify_certificate
from certify.core.certificate import Certificate
from certify.core.kernel import Provenance, from_features
from certify.core.verdict import Verdict
from certify.rank import nonnegative as nn
from certify.rank.options import RankOptions
from certify.rank.run import certify_rank
from certify.rank.structure import quadratic_margin, sqrt_up, taylor_layout


def taylor(u: np.ndarray) -> np.ndarray:
    """fla's TaylorFeatureMap in float32: [1, u/d^1/4, u_i^2/(sqrt2 sqrt d), u_i u_j/sqrt d]."""
    u = u.astype(np.float32)
    d = u.shape[1]
    rd, rrd = np.float32(math.sqrt(d)), np.float32(math.sqrt(math.sqrt(d)))
    iu = np.triu_indices(d, 1)
    outer = u[:, :, None] * u[:, None, :]
    diag = np.einsum("bii->bi", outer)
    return np.concatenate([np.ones((len(u), 1), np.float32), u / rrd, diag / (rd * np.float32(math.sqrt(2))),
                           outer[:, iu[0], iu[1]] / rd], axis=1)


def _cube(m):
    idx = np.arange(1 << m)
    return ((idx[:, None] >> np.arange(m)) & 1).astype(np.float32)


def based_kernel(m=6, d=3, seed=0, scale=0.7, fmap="based-taylor_exp", sign=1.0):
    rng = np.random.default_rng(seed)
    X = _cube(m)
    Wq, Wk = rng.normal(0, scale, (d, m)).astype(np.float32), rng.normal(0, scale, (d, m)).astype(np.float32)
    fq, fk = taylor(X @ Wq.T), taylor(X @ Wk.T)
    if sign != 1.0:                                   # a map that is NOT Based: negated quadratic block
        fq[:, 1 + d:] *= np.float32(sign)
    prov = Provenance("memory", None, "memory", "float32", details={"feature_map": fmap})
    return from_features(fq, fk, prov, token_set=f"cube:{m}")


def _claim(kernel, monkeypatch, limit=0):
    monkeypatch.setattr(nn, "SIGNED_PRODUCT_LIMIT", limit)     # force the structure path
    rep = certify_rank(kernel, RankOptions(require_nonnegative=False))
    from certify.rank.summary import summarize_features
    s = summarize_features(kernel, keep_limit=1 << 22)
    return nn.nonnegative_claim_factor(kernel, s, RankOptions()), rep


def _check(claim):
    cert = json.loads(Certificate(claims=[claim]).dumps())
    return cert, verify_certificate(cert)


def test_taylor_layout_is_fla_order():
    L = taylor_layout(10)                                   # d = 3: 1 + 3 + 6
    assert (L.constant, L.linear) == (0, (1, 2, 3))
    assert L.pairs == ((4, 0, 0), (5, 1, 1), (6, 2, 2), (7, 0, 1), (8, 0, 2), (9, 1, 2))
    assert taylor_layout(153).pairs[-1] == (152, 14, 15) and taylor_layout(11) is None


def test_based_head_is_proved_positive_by_the_quadratic_lemma_and_the_checker_re_derives_it(monkeypatch):
    k = based_kernel()
    claim, _ = _claim(k, monkeypatch)
    assert claim.verdict is Verdict.PROVED and claim.evidence["method"] == "quadratic_kernel"
    assert claim.evidence["g_off"] == "1" and "features" in claim.evidence       # embedded: re-derived
    assert 0.49 < claim.info["margin"] < 0.5                                     # 1 - 1/(4 c2) = 1/2, c2 = 1/2
    # the exact minimum over all pairs agrees: alpha >= 1/2 - (rounding), far from 0
    q, kk = k.phi_q.astype(np.float64), k.phi_k.astype(np.float64)
    assert (q @ kk.T).min() > 0.49
    cert, res = _check(claim)
    assert res.claims[0].holds, res.claims[0].problems


@pytest.mark.parametrize("field,change", [("max_residual_sq_k", Fraction(1, 10 ** 40)),
                                          ("max_linear_sq_q", Fraction(1, 100)),
                                          ("min_const_q", Fraction(2))])
def test_understated_summaries_are_caught_when_the_features_are_embedded(monkeypatch, field, change):
    claim, _ = _claim(based_kernel(seed=1), monkeypatch)
    cert, _ = _check(claim)
    cert["claims"][0]["evidence"][field] = str(change)
    res = verify_certificate(cert)
    assert not res.claims[0].holds
    assert any(field in p for p in res.claims[0].problems)


def test_a_layout_that_does_not_partition_the_features_is_rejected(monkeypatch):
    claim, _ = _claim(based_kernel(seed=2), monkeypatch)
    cert, _ = _check(claim)
    ev = cert["claims"][0]["evidence"]
    ev["quadratic"] = ev["quadratic"][:-1] + [[ev["linear"][0], 1, 2]]        # a linear feature twice
    assert not verify_certificate(cert).claims[0].holds
    cert, _ = _check(claim)
    cert["claims"][0]["evidence"]["r"] += 1                  # a feature the lemma would not account for
    assert not verify_certificate(cert).claims[0].holds


def test_a_negated_quadratic_block_is_not_proved_and_its_forged_claim_fails(monkeypatch):
    """1 + t - t^2/2 is negative for large t: the residuals w - g v_i v_j are then
    as large as w, the margin is negative, the producer does not claim it, and a
    forged claim with the Based coefficients and tiny residuals is rejected."""
    bad = based_kernel(seed=3, scale=1.5, sign=-1.0)
    q, kk = bad.phi_q.astype(np.float64), bad.phi_k.astype(np.float64)
    assert (q @ kk.T).min() < 0                                   # really signed
    claim, _ = _claim(bad, monkeypatch)
    assert claim.evidence["method"] != "quadratic_kernel"
    good, _ = _claim(based_kernel(seed=3, scale=1.5), monkeypatch)
    forged = json.loads(Certificate(claims=[good]).dumps())
    ev = forged["claims"][0]["evidence"]
    from certify.rank.evidence import feature_evidence
    from certify.rank.summary import summarize_features
    s = summarize_features(bad, keep_limit=1 << 22)
    ev.update(feature_evidence(s, 1 << 16, []))
    ev["features_sha256"] = {"phi_q": s.sha_q, "phi_k": s.sha_k, "dtype": s.dtype,
                             "layout": "row-major little-endian (K, r)"}
    res = verify_certificate(forged)
    assert not res.claims[0].holds


def test_margin_is_the_lemma_evaluated_exactly():
    one = Fraction(1)
    q = {"min_const": one, "max_linear_sq": Fraction(4), "max_quadratic_sq": Fraction(8),
         "max_residual_sq": Fraction(0)}
    assert quadratic_margin(Fraction(1, 2), one, q, q) == Fraction(1, 2) - Fraction(1, 4) * 16   # drift term
    assert quadratic_margin(Fraction(3, 4), one, q, q) == Fraction(1, 2)                         # g_d^2 >= c2
    x = Fraction(2, 7)
    assert sqrt_up(x) ** 2 >= x and sqrt_up(x) - Fraction(math.sqrt(2 / 7)) < Fraction(1, 10 ** 15)


def test_key_box_proves_a_signed_kernel_with_a_dominant_constant(monkeypatch):
    rng = np.random.default_rng(4)
    fq = np.concatenate([np.ones((64, 1)), rng.uniform(-0.1, 0.1, (64, 5))], 1)
    fk = np.concatenate([np.ones((64, 1)), rng.uniform(-0.1, 0.1, (64, 5))], 1)
    k = from_features(fq, fk, Provenance("memory", None, "memory", "float64"), token_set="cube:6")
    claim, _ = _claim(k, monkeypatch)
    assert claim.verdict is Verdict.PROVED and claim.evidence["method"] == "key_box"
    cert, res = _check(claim)
    assert res.claims[0].holds, res.claims[0].problems
    cert["claims"][0]["evidence"]["key_hi"][1] = "0"                  # the box no longer holds the keys
    assert not verify_certificate(cert).claims[0].holds


def test_a_signed_kernel_without_structure_stays_unknown_beyond_the_pair_limit(monkeypatch):
    rng = np.random.default_rng(5)
    f = rng.standard_normal((64, 4))
    k = from_features(f, f[::-1].copy(), Provenance("memory", None, "memory", "float64"), token_set="cube:6")
    claim, _ = _claim(k, monkeypatch)
    assert claim.verdict is Verdict.UNKNOWN and claim.evidence["method"] == "none"


def test_psd_by_the_characteristic_polynomial():
    """Exact PSD test (alternating charpoly coefficients) in the solver and the checker."""
    import flint

    from certify.checkers.kernel import is_psd as _is_psd
    from solvers import spectral as sp
    rng = np.random.default_rng(6)
    A = rng.integers(-50, 50, (12, 5))
    S = (A @ A.T).tolist()                          # PSD of rank 5 in 12 dimensions
    T = [row[:] for row in S]
    T[3][3] -= 1                                    # x^T T x = -x_3^2 on the null space of A^T: indefinite
    cases = [([[1, 2], [2, 4]], True), ([[1, 2], [2, 3]], False), ([[2, 1, 0], [1, 2, 1], [0, 1, 2]], True),
             ([[0, 0], [0, 0]], True), ([[0, 1], [1, 0]], False), (S, True), (T, False),
             ((A.T @ A).tolist(), True)]
    for M, want in cases:
        assert sp.is_psd(M) is want and _is_psd(flint.fmpz_mat(M)) is want
    assert not sp.is_psd([[1, 0], [1, 1]])          # not symmetric
    assert sp.is_psd([[Fraction(1, 3), Fraction(1, 3)], [Fraction(1, 3), Fraction(1, 3)]])


def _fla_based(folder, hidden, feature_dim, seed=0):
    """A BasedLinearAttention layer built by fla's own constructor, saved as its users do."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("fla")
    from fla.layers import BasedLinearAttention
    from safetensors.torch import save_file
    torch.manual_seed(seed)
    layer = BasedLinearAttention(hidden_size=hidden, feature_dim=feature_dim, num_heads=1,
                                 num_key_value_heads=1)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 0.5)                                     # weights of a trained scale
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in layer.state_dict().items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"class": "BasedLinearAttention",      # keys alone fit
                                                    "feature_dim": feature_dim,        # ReBased too
                                                    "num_heads": 1, "num_key_value_heads": 1}))
    return folder


def _certify_checkpoint(folder):
    """``certify checkpoint`` then ``certify verify``: both completed processes, the
    certificate, and the CPU seconds of each (tests/waits.py: the load does not move them).
    One BLAS / OpenMP thread each, as in benchmarks/bench_based.py: idle threads that
    spin while they wait would count as CPU time, more of it the busier the machine."""
    import os
    import sys

    from waits import cpu_run
    out = folder.parent / (folder.name + "-out")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    p, made = cpu_run([sys.executable, "-m", "certify", "checkpoint", str(folder), "--out", str(out)],
                      env=env)
    v, checked = cpu_run([sys.executable, "-m", "certify", "verify", str(out / "certificate.json")],
                         env=env)
    return p, v, json.loads((out / "certificate.json").read_text()), made, checked


def _zoology_based(folder, hidden, feature_dim, seed=0):
    """A Based layer in zoology's key layout (fla's port reads the same weights),
    written with torch tensors only: no fla import, so the test stays fast."""
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file
    g = torch.Generator().manual_seed(seed)
    sd = {f"backbone.layers.0.sequence_mixer.{n}.weight": torch.randn(rows, hidden, generator=g) * 0.5
          for n, rows in (("proj_q", feature_dim), ("proj_k", feature_dim), ("proj_v", hidden),
                          ("proj_o", hidden))}
    folder.mkdir(parents=True, exist_ok=True)
    save_file(sd, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"feature_dim": feature_dim, "num_heads": 1,
                                                    "num_key_value_heads": 1, "feature_name": "taylor_exp"}))
    return folder


def test_based_head_on_a_cube_beyond_the_pair_limit_is_proved_nonnegative(tmp_path):
    """cube:14 has 2^28 pairs (over the 2^26 exact-product limit): a Based head
    (feature_dim 4, 15 features) is proved nonnegative by the quadratic lemma,
    end to end through `certify checkpoint` and `certify verify`."""
    from certify.cli import main  # in process: the subprocess adds nothing here
    folder = _zoology_based(tmp_path / "based14", 14, 4)
    out = tmp_path / "based14-out"
    assert main(["checkpoint", str(folder), "--out", str(out), "--no-progress"]) == 0
    cert = json.loads((out / "certificate.json").read_text())
    kinds = {c["kind"]: c for c in cert["claims"]}
    assert {c["verdict"] for c in cert["claims"]} == {"proved"}
    assert kinds["nonnegative"]["evidence"]["method"] == "quadratic_kernel"
    assert kinds["exact_rank"]["parameters"]["token_set"] == "cube:14"
    assert main(["verify", str(out / "certificate.json")]) == 4   # holds, assuming extraction and summaries


@pytest.mark.slow
def test_fla_based_head_with_153_features_on_cube_16_within_the_time_bars(tmp_path):
    """The bar: 153 features (feature_dim 16), 65,536 tokens; exact rank, eps-rank and
    nonnegativity all proved in under 2 CPU minutes, the certificate verified in under 1."""
    p, v, cert, made, checked = _certify_checkpoint(_fla_based(tmp_path / "based16", 16, 16))
    assert p.returncode == 0, p.stderr[-2000:]
    kinds = {c["kind"]: c for c in cert["claims"]}
    assert set(kinds) == {"exact_rank", "eps_rank", "nonnegative"}
    assert all(c["verdict"] == "proved" for c in cert["claims"])
    assert kinds["exact_rank"]["evidence"]["rank_lower"] == 153
    assert kinds["exact_rank"]["parameters"]["token_set"] == "cube:16"
    assert made < 120 and checked < 60, (made, checked)          # CPU seconds of each process tree
    print(f"\ncertify checkpoint {made:.1f} CPU s, certify verify {checked:.1f} CPU s")
    assert v.returncode == 4
