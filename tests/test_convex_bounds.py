"""Convex lower bounds with exact dual certificates (certify.convex_bounds) and
their independent checker (certify.checkers.convex_dual)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from certify.checkers import convex_dual, verify
from certify.cli import feasibility as feasibility_cli
from certify.cli import verify as verify_cli
from certify.core.bounds import perron_max_excluded_rank
from certify.core.certificate import Certificate
from certify.core.families import load_family
from certify.feasibility.chain_bounds import ChainBound, chain_bound
from certify.feasibility.convex_bounds import (
    certify_rank,
    contraction_ok,
    exact_margin,
    max_certified_rank,
    psd_ldl,
    relaxation_value,
    rho_matrix,
)
from certify.feasibility.decide import decide
from certify.feasibility.result import Outcome

ROOT = Path(__file__).resolve().parents[1]


def _synthetic(t: int, lam) -> ChainBound:
    lambdas = {(i, j): lam(i, j) for i in range(t) for j in range(t) if i != j}
    s = sum(Fraction(1, L * L) for L in lambdas.values())
    return ChainBound(edges=(), queries=tuple(range(t)), diagonal=tuple(range(t)), paths={},
                      lambdas=lambdas, bound=Fraction(t * t) / (t + s), n=3)


@pytest.fixture(scope="module")
def paper():
    fam = load_family("paper-5.1")
    return fam, chain_bound(fam)


@pytest.fixture(scope="module")
def r11_cert(paper):
    fam, b = paper
    res = decide(fam, 11, "real", method="sdp", bound=b)
    assert res.outcome is Outcome.INFEASIBLE and res.convex is not None
    return Certificate(claims=[res.to_claim()], command=["test"],
                       inputs={f"family:{fam.name}": fam.sha256}).to_json()


# ---------------------------------------------------------------- exact pieces

def test_psd_ldl_exact():
    assert psd_ldl([[Fraction(0)] * 3 for _ in range(3)])                 # zero matrix: PSD
    assert psd_ldl([[1, 1], [1, 1]])                                      # singular PSD
    assert not psd_ldl([[1, 2], [2, 1]])                                  # eigenvalue -1
    assert not psd_ldl([[0, 1], [1, 5]])                                  # zero pivot, nonzero below
    eps = Fraction(1, 10 ** 12)
    assert not psd_ldl([[1, 1], [1, 1 - eps]])                            # barely indefinite
    from certify.checkers.kernel import is_psd  # the checker's own (its trusted kernel)
    assert is_psd([[1, 1], [1, 1]]) and not is_psd([[1, 2], [2, 1]])


def test_contraction_check_is_exact():
    c, s = Fraction(3, 5), Fraction(4, 5)
    assert contraction_ok([[c, -s], [s, c]])                              # a rotation: norm 1
    assert not contraction_ok([[c, -s], [s, c + Fraction(1, 10 ** 9)]])


def test_canned_program_with_known_optimum():
    """rho = 0 forces C = I: the program's value is t - sqrt(r t), and the dual W is I."""
    t, r = 6, 3
    rho = np.zeros((t, t))
    val, W, C = relaxation_value(rho, r, np.full(t, 1 / t), np.ones(t))
    assert abs(val - (t - np.sqrt(r * t))) < 1e-6
    assert np.abs(C - np.eye(t)).max() < 1e-6
    assert np.abs(W - np.eye(t)).max() < 1e-4
    # exact margins with W = I are lower bounds on that optimum, tight at lambda = 2, mu = 0
    t, r = 8, 2                                                           # t - sqrt(r t) = 4
    I = [[Fraction(int(i == j)) for j in range(t)] for i in range(t)]
    zero = [[Fraction(0)] * t for _ in range(t)]
    vals = {(lam, mu): exact_margin(zero, r, I, [Fraction(1, t)] * t, [Fraction(1)] * t,
                                    Fraction(lam), Fraction(mu))
            for lam in (1, 2, 4) for mu in (0, 1, 3)}
    assert max(vals.values()) == 4 == vals[2, 0]
    assert vals[4, 0] == 3 and vals[1, 1] == 8 + 1 - Fraction(1, 2) - 4 - 2


# ---------------------------------------------------------------- strength

def test_paper51_matches_the_nonnegative_refinement(paper):
    """On paper-5.1 the certificate excludes r <= 11 (as strong as
    perron_discriminant with rho = 1/4) and not r = 12."""
    _, b = paper
    assert b.perron_rank == 11 == perron_max_excluded_rank(15, Fraction(1, 4))
    cert, info = certify_rank(b, 11)
    assert cert is not None and cert.margin > 0
    assert abs(info["program_value"] - float(cert.margin)) < 1e-5       # dual matches primal
    cert12, info12 = certify_rank(b, 12)
    assert cert12 is None and info12["program_value"] < -0.1


@pytest.mark.parametrize("name,lam,expect", [
    ("ring", lambda i, j: 4 if j == (i + 1) % 12 else 16, 11),
    ("rows", lambda i, j: 4 if i < 3 else 16, 10),
])
def test_stronger_than_lemma4_and_refinement(name, lam, expect):
    """With unequal chain factors the per-pair polytope and the program beat both
    Lemma 4 per pair and the nonnegative refinement (which uses rho = max 1/Lambda)."""
    b = _synthetic(12, lam)
    r, cert = max_certified_rank(b)
    assert r == expect and r > b.max_infeasible_rank
    assert cert.margin > 0


def test_never_weaker_than_refinement_on_uniform_chains():
    for t, L in ((15, 4), (10, 4), (8, 3), (15, 5)):
        b = _synthetic(t, lambda i, j: L)
        r, _ = max_certified_rank(b)
        assert r is not None and r >= b.max_infeasible_rank


# ---------------------------------------------------------------- the certificate, verified

def test_infeasibility_proof_by_sdp_dual_verifies(r11_cert):
    claim = r11_cert["claims"][0]
    assert claim["kind"] == "infeasible" and claim["verdict"] == "proved"
    assert claim["evidence"]["derivation"]["method"] == "convex-dual"
    assert claim["parameters"]["rank"] == 11
    res = verify.verify_certificate(r11_cert)
    assert all(not c.problems for c in res.claims), [c.problems for c in res.claims]


def test_verify_command_without_cvxpy(r11_cert, tmp_path):
    """`certify verify` re-checks the dual certificate in a fresh process that never
    imports cvxpy (or any solver)."""
    p = tmp_path / "r11.json"
    p.write_text(json.dumps(r11_cert))
    code = ("import sys\n"
            "from certify.cli import main\n"
            f"rc = main(['verify', {str(p)!r}])\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('cvxpy', 'clarabel', 'scs', "
            "'scipy', 'highspy', 'torch', 'solvers')]\n"
            "print('RC', rc, 'BAD', ','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert "RC 0 BAD \n" in out.stdout + "\n", out.stdout + out.stderr


def _fails(cert, why: str):
    res = verify.verify_certificate(cert)
    probs = [p for c in res.claims for p in c.problems]
    assert probs, "the tampered certificate was accepted"
    assert any(why in p for p in probs), probs


def _dual(cert):
    return cert["claims"][0]["evidence"]["derivation"]["dual"]


def test_mutation_dual_not_psd_is_rejected(r11_cert):
    """Nudge W so that [[I, W], [W^T, I]] is no longer PSD (||W||_2 > 1): rejected,
    even with the margin recomputed to match."""
    bad = copy.deepcopy(r11_cert)
    d = _dual(bad)
    W = [[Fraction(v) for v in row] for row in d["W"]]
    W[0][0] += Fraction(1, 10 ** 6)
    d["W"] = [[str(v) for v in row] for row in W]
    b = chain_bound(load_family("paper-5.1"))
    d["margin"] = str(exact_margin(rho_matrix(b), d["rank"], W,
                                   [Fraction(v) for v in d["x"]], [Fraction(v) for v in d["y"]],
                                   Fraction(d["lambda"]), Fraction(d["mu"])))
    _fails(bad, "not positive semidefinite")


@pytest.mark.parametrize("mutate,why", [
    (lambda d: d.__setitem__("margin", str(Fraction(d["margin"]) + 1)), "margin is"),
    (lambda d: d.__setitem__("mu", "-1"), "multipliers out of range"),
    (lambda d: d.__setitem__("lambda", "0"), "multipliers out of range"),
    (lambda d: d.__setitem__("x", [str(Fraction(v) * 2) for v in d["x"]]), "|x|^2 |y|^2 > 1"),
    (lambda d: d.__setitem__("rank", 10), "margin is"),          # the margin depends on R
    (lambda d: d.__setitem__("W", d["W"][:-1]), "matrix"),
])
def test_mutations_of_the_dual_are_rejected(r11_cert, mutate, why):
    bad = copy.deepcopy(r11_cert)
    mutate(_dual(bad))
    _fails(bad, why)


def test_mutated_chain_factor_is_rejected(r11_cert):
    bad = copy.deepcopy(r11_cert)
    pairs = bad["claims"][0]["evidence"]["derivation"]["chains"]["pairs"]
    pairs[0][3] = pairs[0][3] * 2
    _fails(bad, "Lambda is")


def test_claimed_rank_above_certificate_is_rejected(r11_cert):
    bad = copy.deepcopy(r11_cert)
    bad["claims"][0]["parameters"]["rank"] = 12
    _fails(bad, "exceeds the certified rank")


def test_schema_keys_are_exact(r11_cert):
    bad = copy.deepcopy(r11_cert)
    bad["claims"][0]["evidence"]["derivation"]["extra"] = 1
    _fails(bad, "derivation")
    bad = copy.deepcopy(r11_cert)
    bad["claims"][0]["evidence"]["derivation"]["method"] = "convex-dual-v0"
    res = verify.verify_certificate(bad)
    assert any(c.problems for c in res.claims)                         # falls to the chain checker


def test_command_method_sdp_writes_a_verifying_certificate(tmp_path):
    out = tmp_path / "r11.json"
    rc = feasibility_cli.main(["--rank", "11", "--method", "sdp", "--out", str(out), "--no-progress"])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["claims"][0]["evidence"]["derivation"]["method"] == "convex-dual"
    assert verify_cli.main([str(out)]) == 0


def test_model_class_parameter(r11_cert):
    """The bound holds for both model classes: either name is accepted, others not."""
    for cls in ("paper", "used-pairs"):
        ok = copy.deepcopy(r11_cert)
        ok["claims"][0]["parameters"]["class"] = cls
        assert convex_dual.check_infeasible(ok["claims"][0]) == []
    bad = copy.deepcopy(r11_cert)
    bad["claims"][0]["parameters"]["class"] = "anything"
    _fails(bad, "is not one of ['paper', 'used-pairs']")     # the schema names the classes


@pytest.mark.slow  # the module run in a subprocess (5 CPU s)
def test_module_entry_point_prints_the_proof_line(tmp_path):
    """`python -m certify.feasibility` runs the library's own module (one copy of the
    result classes), so results of the lazily imported searches are printed as
    proved: a convex-dual infeasibility and an SDP witness."""
    from certify.core.codes import greedy_packing
    from certify.core.families import chain_family
    fam = tmp_path / "g12.json"
    chain_family(greedy_packing(12, 6, 3), name="greedy-12-6-3").save(fam)
    for rank, want in ((5, "infeasible (proved) every rank <= 5 excluded by a convex dual"),
                       (7, "feasible (proved) exact margin")):
        p = subprocess.run([sys.executable, "-m", "certify.feasibility", "--family", str(fam),
                            "--rank", str(rank), "--method", "sdp", "--no-progress"],
                           cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        assert want in p.stderr, p.stderr
