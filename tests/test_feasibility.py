import json
from fractions import Fraction

import numpy as np
import pytest

from certify.certificate import Certificate, q_to_str
from certify.checkers import feasibility as checker
from certify.errors import run_command
from certify.families import Family, chain_family, paper51_family
from certify.feasibility import Outcome, decide, main, sweep
from certify.feasibility_bounds import chain_bound, gd_edges
from certify.feasibility_model import (Features, Witness, build_problem, exact_check,
                                       lookup_witness)


@pytest.fixture(scope="module")
def paper():
    return paper51_family()


def _words(*supports, M):
    w = np.zeros((len(supports), M), dtype=np.uint8)
    for i, s in enumerate(supports):
        w[i, list(s)] = 1
    return w


@pytest.fixture(scope="module")
def small():
    # S1, S2 disjoint (D = 6 both ways: two jumps of 3, Lambda = 2*2 = 4);
    # S3 meets each in 3 coordinates (D = 3: one jump, Lambda = 2).
    words = _words(range(0, 6), range(6, 12), (0, 1, 2, 6, 7, 8), M=12)
    return chain_family(words, n=3, g=3, name="small-3")


def _cert(claim):
    return Certificate(claims=[claim]).to_json()


# ---------------------------------------------------------------- lower side

def test_paper_rank8_infeasible_with_the_hand_bound(paper):
    b = chain_bound(paper)
    # 15 words; 208 ordered pairs at D = 6 (Lambda = 2*2), 2 at D = 12 (Lambda = 2^4)
    assert sorted(b.lambdas.values()).count(4) == 208
    assert sorted(b.lambdas.values()).count(16) == 2
    assert b.bound == Fraction(225) / (15 + Fraction(208, 16) + Fraction(2, 256))
    assert b.bound == Fraction(1920, 239) and b.lemma4_rank == 8
    for feats in Features:
        res = decide(paper, 8, feats, time_limit=1)
        assert res.outcome is Outcome.INFEASIBLE
        claim = res.to_claim()
        assert claim.verdict.value == "proved"
        assert checker.check(claim.to_json(), _cert(claim)) == []
    # rank 9 is not excluded by Lemma 4 alone
    assert not 9 <= b.bound


def test_paper_rank11_infeasible_by_the_nonnegative_refinement(paper):
    b = chain_bound(paper)
    # rho = 1/4, t = 15: Delta(11) = 225 (9/2)^2 - 44 (225 - 10*15*3/4) = -1575/4 < 0,
    # Delta(12) = 225 (19/4)^2 - 48 (225 - 11*15*3/4) = 3465/16 >= 0
    assert b.rho == Fraction(1, 4) and b.perron_rank == 11 and b.max_infeasible_rank == 11
    for feats in Features:
        res = decide(paper, 11, feats, time_limit=1)
        assert res.outcome is Outcome.INFEASIBLE
        claim = res.to_claim()
        assert claim.evidence["derivation"]["perron"] == {"rho": "1/4", "rank": 11,
                                                          "discriminant": "-1575/4"}
        assert checker.check(claim.to_json(), _cert(claim)) == []
        # the checker re-derives the refinement: an inflated rank is caught
        bad = claim.to_json()
        bad["evidence"]["derivation"]["perron"]["rank"] = 12
        bad["evidence"]["derivation"]["max_infeasible_rank"] = 12
        bad["parameters"]["rank"] = 12
        assert checker.check(bad, _cert(claim)) != []
    assert decide(paper, 12, Features.REAL, time_limit=0.5).outcome is not Outcome.INFEASIBLE


def test_small_family_bound_by_hand_and_closed_bracket(small):
    b = chain_bound(small)
    # Lambda = 4 for (S1,S2), (S2,S1); 2 for the four pairs with S3
    assert sorted(b.lambdas.values()) == [2, 2, 2, 2, 4, 4]
    hand = Fraction(9) / (3 + 2 * Fraction(1, 16) + 4 * Fraction(1, 4))
    assert b.bound == hand == Fraction(24, 11)
    results, brackets = sweep(small, 1, 4, [Features.REAL, Features.NONNEGATIVE],
                              time_limit=5, seed=0)
    assert brackets == {"real": (3, 3), "nonnegative": (3, 3)}
    for res in results:
        claim = res.to_claim()
        assert claim.verdict.value == "proved"
        assert checker.check(claim.to_json(), _cert(claim)) == []


def test_gd_edges_check_lemma3_hypotheses(small):
    edges = gd_edges(small)
    toks = small.tokens.astype(int)
    for e in edges:
        assert e.t == toks[e.x] @ toks[e.y] < e.u == toks[e.x] @ toks[e.z] <= toks[e.x] @ toks[e.x]
        assert e.mu == (small.n - 2) * (e.u - e.t - 1)
    # one edge per distinct (x, y, z): 2 disjoint pairs x 2 jumps (shared first jump per query)
    assert len(edges) == len({(e.x, e.y, e.z) for e in edges})


def test_infeasible_checker_rejects_tampering(paper):
    claim = decide(paper, 8, Features.REAL, time_limit=1).to_claim().to_json()
    cert = {"claims": [claim]}
    bad = json.loads(json.dumps(claim))
    bad["evidence"]["derivation"]["pairs"][0][3] = 8           # inflated Lambda
    assert checker.check(bad, cert)
    bad = json.loads(json.dumps(claim))
    bad["parameters"]["rank"] = 12                              # above both bounds (11)
    assert any("exceeds" in p for p in checker.check(bad, cert))
    bad = json.loads(json.dumps(claim))
    bad["evidence"]["family"]["targets"][0][0] += 1             # wrong target
    assert checker.check(bad, cert)


# ---------------------------------------------------------------- upper side

@pytest.mark.parametrize("rank,feats", [(15, Features.NONNEGATIVE), (32, Features.REAL),
                                        (32, Features.NONNEGATIVE)])
def test_paper_feasible_with_exact_witness(paper, rank, feats):
    res = decide(paper, rank, feats, time_limit=5)
    assert res.outcome is Outcome.FEASIBLE and res.margin > 0
    w = res.witness
    assert w.rank == rank and all(len(r) == rank for r in w.phi_k.values())
    claim = res.to_claim()
    assert checker.check(claim.to_json(), _cert(claim)) == []


def test_search_finds_rank14_real_witness(paper):
    res = decide(paper, 14, Features.REAL, time_limit=60, seed=0)
    assert res.outcome is Outcome.FEASIBLE
    claim = res.to_claim()
    assert checker.check(claim.to_json(), _cert(claim)) == []


def _nudge_to_boundary(problem, w: Witness) -> Witness:
    """Move one value so the worst scored position lands exactly on |t_hat - t| = 1/2."""
    fam = problem.family
    chk = exact_check(problem, w)
    i, j = chk.worst
    row = fam.inputs[i]
    x = int(row[j])
    alpha = {int(z): sum(p * q for p, q in zip(w.phi_q[x], w.phi_k[int(z)])) for z in row}
    D = sum(alpha[int(z)] for z in row)
    N = sum(alpha[int(z)] * w.g[x, int(z)] for z in row)
    t = int(fam.targets[i, j])
    z0 = max(set(int(z) for z in row), key=lambda z: alpha[z])
    c = sum(1 for z in row if int(z) == z0)
    sign = 1 if N / D >= t else -1
    # want N'/D = t + sign/2  ->  shift g(x, z0) by delta with c alpha delta = t D + sign D/2 - N
    delta = (t * D + sign * D / 2 - N) / (c * alpha[z0])
    g = dict(w.g)
    g[x, z0] = g[x, z0] + delta
    return Witness(w.features, w.rank, w.phi_q, w.phi_k, g)


def test_planted_wrong_witness_is_rejected(small):
    problem = build_problem(small)
    w, chk = lookup_witness(problem, 3, Features.NONNEGATIVE)
    assert chk.ok
    bad = _nudge_to_boundary(problem, w)
    bad_chk = exact_check(problem, bad)
    assert not bad_chk.ok and bad_chk.margin <= 0
    res = decide(small, 3, Features.NONNEGATIVE, time_limit=1)
    claim = res.to_claim().to_json()
    claim["evidence"]["witness"] = bad.to_json()
    problems = checker.check(claim, {"claims": [claim]})
    assert problems and ">= 1/2" in problems[0]
    # a negative feature in the nonnegative class, and a wrong claimed margin
    claim2 = res.to_claim().to_json()
    claim2["evidence"]["witness"]["phi_k"][0][1][0] = "-1/1000000"
    assert checker.check(claim2, {"claims": [claim2]})
    claim3 = res.to_claim().to_json()
    claim3["evidence"]["margin"] = q_to_str(Fraction(1, 2))
    assert any("margin" in p for p in checker.check(claim3, {"claims": [claim3]}))


def test_planted_wrong_witness_on_paper_family(paper):
    problem = build_problem(paper)
    w, chk = lookup_witness(problem, 15, Features.REAL)
    bad = _nudge_to_boundary(problem, w)
    assert not exact_check(problem, bad).ok
    claim = decide(paper, 15, Features.REAL, time_limit=1).to_claim().to_json()
    claim["evidence"]["witness"] = bad.to_json()
    assert checker.check(claim, {"claims": [claim]})


# ---------------------------------------------------------------- command

def test_command_json_and_certificate(tmp_path, capsys):
    out = tmp_path / "c.json"
    code = main(["--rank", "8", "--json", "--out", str(out), "--no-progress"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["verdict"] == "infeasible" and doc["rank"] == 8
    assert doc["features"] == "real" and doc["sha256"] == paper51_family().sha256
    cert = json.loads(out.read_text())
    assert all(checker.check(c, cert) == [] for c in cert["claims"])


def test_command_on_a_family_file(tmp_path, small, capsys):
    path = tmp_path / "small.json"
    small.save(path)
    code = main(["--family", str(path), "--sweep", "1:3", "--json", "--no-progress",
                 "--time-limit", "2"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["bracket"] == {"real": [3, 3], "nonnegative": [3, 3]}


def _one_line_exit2(argv, capsys):
    code = run_command("certify.feasibility", main, argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    return err


def test_bad_input_exits_2_with_one_line(tmp_path, small, capsys):
    assert "rank" in _one_line_exit2(["--rank", "0"], capsys)
    assert "unknown family" in _one_line_exit2(["--rank", "3", "--family", "nope"], capsys)
    obj = small.to_json()
    obj["targets"][0][0] += 1
    obj.pop("sha256")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(obj))
    assert "Min-IP" in _one_line_exit2(["--rank", "3", "--family", str(bad)], capsys)
    assert "sweep" in _one_line_exit2(["--sweep", "5:2"], capsys)
