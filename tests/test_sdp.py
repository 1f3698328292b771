"""PSD-lift witness search (solvers.sdp, certify.sdp_search) and `feasibility --method`."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from certify.checkers import verify
from certify.cli import feasibility as feasibility_cli
from certify.core.certificate import Certificate
from certify.core.codes import greedy_packing
from certify.core.families import chain_family
from certify.feasibility.chain_bounds import chain_bound
from certify.feasibility.decide import decide
from certify.feasibility.model import Features, build_problem, exact_check
from certify.feasibility.result import Outcome
from solvers.factor import FactorProblem
from solvers.sdp import SDPStatus, lift_solve, max_margin, reweighted_lift, round_to_rank, status_of


@pytest.fixture(scope="module")
def g12():
    """The Thm 5 chain family of the greedy weight-6 code at m = 12 (directed
    distance >= 3): 10 words, 10 queries, 270 scored positions."""
    return chain_family(greedy_packing(12, 6, 3), name="greedy-12-6-3")


def _canned() -> FactorProblem:
    """One row, two entries, constraints alpha_1 >= delta, alpha_2 >= delta (no H):
    with alpha_1 + alpha_2 = 1 the best margin is 1/2, attained only at
    K = [1/2, 1/2], whose nuclear norm is 1/sqrt(2)."""
    Ga = sp.csr_matrix(np.eye(2))
    Gh = sp.csr_matrix((2, 2))
    return FactorProblem(1, 2, np.array([[0, 0], [0, 1]]), Ga, Gh)


def test_status_map_defaults_to_unknown():
    assert status_of("optimal") is SDPStatus.OPTIMAL
    assert status_of("infeasible") is SDPStatus.INFEASIBLE
    assert status_of("unbounded") is SDPStatus.UNKNOWN
    assert status_of("user_limit") is SDPStatus.UNKNOWN


@pytest.mark.parametrize("solver", ["CLARABEL", "SCS"])
def test_canned_problem_known_optimum(solver):
    prob = _canned()
    d = max_margin(prob, nonneg=False, solver=solver)
    assert abs(d - 0.5) < 1e-4
    res = lift_solve(prob, 0.5 - 1e-6, nonneg=False, solver=solver)
    assert res.status is SDPStatus.OPTIMAL
    assert np.abs(res.K - 0.5).max() < 1e-3
    assert abs(res.singular_values.sum() - 2 ** -0.5) < 1e-3              # nuclear norm
    # the lift's trace objective equals the nuclear norm at the optimum
    assert abs((np.trace(res.X) + np.trace(res.Y)) / 2 - 2 ** -0.5) < 1e-3


def test_canned_problem_infeasible_margin():
    res = lift_solve(_canned(), 0.6, nonneg=False)                        # > best margin 1/2
    assert res.status is SDPStatus.INFEASIBLE and res.K is None


def test_round_to_rank_exact_on_low_rank():
    rng = np.random.default_rng(0)
    A, B = rng.random((5, 2)), rng.random((7, 2))
    P, Q = round_to_rank(A @ B.T, 2, nonneg=False)
    assert np.abs(P @ Q.T - A @ B.T).max() < 1e-10
    P, Q = round_to_rank(A @ B.T, 4, nonneg=True)                         # padded with zeros
    assert P.shape == (5, 4) and Q.shape == (7, 4) and (P >= 0).all() and (Q >= 0).all()


def test_truncated_nuclear_norm_drives_rank_down(g12):
    pb = build_problem(g12)
    Ga, Gh = pb.constraint_matrices()
    fp = FactorProblem(pb.num_rows, pb.num_cols, pb.entries, Ga, Gh)
    tails = []
    for res in reweighted_lift(fp, nonneg=False, iterations=3, rank=6):
        sv = res.singular_values
        tails.append(sv[6:].sum() / sv[0])
    assert len(tails) == 3 and tails[-1] < tails[0]


@pytest.fixture(scope="module")
def g10():
    """The chain family of the greedy weight-5 code at m = 10 (directed distance >= 3):
    6 words; Lemma 3 and the nonnegative refinement exclude rank <= 3."""
    return chain_family(greedy_packing(10, 5, 3), name="greedy-10-5-3")


def test_sdp_finds_and_exactly_verifies_witness(g10):
    """The SDP search proposes a rank-5 kernel on greedy-10-5-3 (one feature per query
    token would need 6) and the exact check accepts it with the margin it states."""
    assert chain_bound(g10).perron_rank == 3
    res = decide(g10, 5, Features.REAL, method="sdp", time_limit=120)
    assert res.outcome is Outcome.FEASIBLE, res.reason
    assert res.method.startswith("SDP")
    chk = exact_check(build_problem(g10), res.witness)
    assert chk.ok and chk.margin == res.margin and len(next(iter(res.witness.phi_q.values()))) == 5
    doc = Certificate(claims=[res.to_claim()], command=["test"],
                      inputs={f"family:{g10.name}": g10.sha256}).to_json()
    assert all(not c.problems for c in verify.verify_certificate(doc).claims)


def test_g12_rank_5_is_excluded_by_a_convex_dual_certificate(g12):
    """greedy-12-6-3, real features (used pairs): Lemma 4 per pair gives 3, the nonnegative
    refinement 4, and a convex dual certificate excludes rank 5 (the SDP witness at rank 6
    that pins the minimal rank: the test below, ``--runslow``; the committed bracket
    certificate reports/feasibility/bracket-greedy-12-6-3-*.json verifies in the default suite)."""
    b = chain_bound(g12)
    assert (b.lemma4_rank, b.perron_rank) == (3, 4)
    low = decide(g12, 5, Features.REAL, method="auto", bound=b)
    assert low.outcome is Outcome.INFEASIBLE and low.convex.rank == 5
    doc = Certificate(claims=[low.to_claim()], command=["test"],
                      inputs={f"family:{g12.name}": g12.sha256}).to_json()
    assert all(not c.problems for c in verify.verify_certificate(doc).claims)
    assert doc["claims"][0]["evidence"]["derivation"]["method"] == "convex-dual"


@pytest.mark.slow  # the SDP search at rank 6 on greedy-12-6-3: 14 Clarabel solves, 225 LPs (9 CPU s)
def test_g12_bracket_pinned_by_sdp_both_sides(g12, tmp_path):
    """greedy-12-6-3, real features (used pairs): rank <= 5 is excluded by a convex
    dual certificate, and an SDP witness verifies at rank 6: the minimal rank is exactly 6."""
    b = chain_bound(g12)
    low = decide(g12, 5, Features.REAL, method="auto", bound=b)
    six = decide(g12, 6, Features.REAL, method="sdp", time_limit=120)
    assert low.outcome is Outcome.INFEASIBLE and six.outcome is Outcome.FEASIBLE, six.reason
    assert six.method.startswith("SDP")
    chk = exact_check(build_problem(g12), six.witness)
    assert chk.ok and chk.margin == six.margin and len(next(iter(six.witness.phi_q.values()))) == 6
    doc = Certificate(claims=[low.to_claim(), six.to_claim()], command=["test"],
                      inputs={f"family:{g12.name}": g12.sha256}).to_json()
    res = verify.verify_certificate(doc)
    assert all(not c.problems for c in res.claims), [c.problems for c in res.claims]


@pytest.mark.slow  # two SDP commands end to end (2.6 CPU s)
def test_command_method_choice_and_bad_method(g12, tmp_path, capsys):
    from certify.core.errors import InputError
    fam = tmp_path / "g12.json"
    g12.save(fam)
    rc = feasibility_cli.main(["--family", str(fam), "--rank", "7", "--method", "sdp", "--json",
                           "--no-progress", "--time-limit", "60"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "feasible" and doc["method"].startswith("SDP")
    with pytest.raises(SystemExit):
        feasibility_cli.main(["--rank", "7", "--method", "simplex"])
    with pytest.raises(InputError):
        decide(g12, 7, Features.REAL, method="simplex")


@pytest.mark.slow
def test_paper51_rank13_sdp_witness():
    """paper-5.1 at rank 13 (real features): the SDP proposal verifies exactly."""
    from certify.core.families import load_family
    fam = load_family("paper-5.1")
    res = decide(fam, 13, Features.REAL, method="sdp", time_limit=900)
    assert res.outcome is Outcome.FEASIBLE, res.reason
