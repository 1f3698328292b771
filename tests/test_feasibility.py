import copy
import json
from dataclasses import replace
from fractions import Fraction
from itertools import product

import numpy as np
import pytest

from certify.checkers import feasibility as checker
from certify.cli.feasibility import main
from certify.core.certificate import Certificate
from certify.core.errors import run_command
from certify.core.families import chain_family, paper51_family
from certify.core.numbers import q_to_str
from certify.feasibility.chain_bounds import chain_bound, gd_edges
from certify.feasibility.decide import cube_brackets, decide, sweep
from certify.feasibility.model import (
    Features,
    ModelClass,
    Witness,
    build_problem,
    exact_check,
    lookup_witness,
    paper_alpha,
    with_extension,
)
from certify.feasibility.result import Outcome

PAPER, USED = ModelClass.PAPER, ModelClass.USED_PAIRS


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
    assert res.outcome is Outcome.FEASIBLE and res.model_class is PAPER
    # the paper's class: alpha >= 0 on all 15 x 41 (query, token) pairs, exactly
    alpha = paper_alpha(build_problem(paper, PAPER), res.witness)
    assert len(alpha) == 615 and min(alpha.values()) >= 0
    assert any(v < 0 for row in res.witness.phi_k.values() for v in row)     # signed features
    claim = res.to_claim()
    assert claim.parameters["class"] == "paper"
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
    return replace(w, g=g)


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
    assert doc["class"] == "paper" and doc["scope"] == "family"
    cert = json.loads(out.read_text())
    assert all(checker.check(c, cert) == [] for c in cert["claims"])
    assert [c["parameters"]["class"] for c in cert["claims"]] == ["paper"]


def test_command_class_flag_and_human_line(capsys):
    code = main(["--rank", "15", "--json", "--no-progress", "--class", "used-pairs"])
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert code == 0 and doc["class"] == "used-pairs" and doc["verdict"] == "feasible"
    assert doc["cube_rank"] is None and doc["scope"] == "family"
    assert "[class used-pairs]" in cap.err
    code = main(["--rank", "15", "--json", "--no-progress"])
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    # the construction has alpha > 0 on all 615 pairs: copy-query, whole cube at rank 15
    assert doc["class"] == "paper" and doc["scope"] == "cube" and doc["cube_rank"] == 15
    assert doc["extension"]["rule"] == "copy-query"
    assert "[class paper]" in cap.err and "whole cube: rank 15" in cap.err


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


# ---------------------------------------------------------------- the paper's class

def test_paper_class_sizes(paper):
    p = build_problem(paper, PAPER)
    u = build_problem(paper, USED)
    # 15 queries x 41 tokens = 615 pairs in the paper class; 257 of them are used
    assert (p.num_rows, p.num_cols, p.num_entries, p.used) == (15, 41, 615, 257)
    assert (u.num_rows, u.num_cols, u.num_entries, u.used) == (15, 41, 257, 257)
    used = {(int(u.queries[a]), int(u.keys[b])) for a, b in u.entries}
    assert used == {(int(p.queries[a]), int(p.keys[b])) for a, b in p.entries[:p.used]}


def _unused_pair(problem):
    """(query row, query token, key token) of a pair of Q x T no scored position uses,
    whose key is a key of the used-pairs problem too, and not the query itself."""
    used = {(int(problem.queries[a]), int(problem.keys[b])) for a, b in problem.entries}
    for a, q in enumerate(problem.queries):
        for z in problem.keys:
            if (int(q), int(z)) not in used and int(z) != int(q):
                return a, int(q), int(z)
    return None


def _set_phi_k(claim: dict, token: int, col: int, value: str) -> dict:
    c = json.loads(json.dumps(claim))
    for t, row in c["evidence"]["witness"]["phi_k"]:
        if t == token:
            row[col] = value
    return c


def test_negative_on_one_unused_pair_rejected_in_paper_accepted_in_used_pairs(paper):
    """PhiQ = I in the construction, so phi_k[z][row of q] is alpha(q, z) alone: a
    negative value there touches no scored position."""
    a, q, z = _unused_pair(build_problem(paper, USED))
    for cls, ok in ((USED, True), (PAPER, False)):
        claim = decide(paper, 15, Features.REAL, time_limit=1, model_class=cls).to_claim().to_json()
        assert claim["parameters"]["class"] == cls.value
        assert checker.check(claim, {"claims": [claim]}) == []
        bad = _set_phi_k(claim, z, a, "-1/1000")
        problems = checker.check(bad, {"claims": [bad]})
        if ok:
            assert problems == []
        else:
            assert problems and "< 0" in problems[0] and "1 of the 615" in problems[0], problems
    # the producer's exact check agrees
    prob = build_problem(paper, PAPER)
    w, chk = lookup_witness(prob, 15, Features.REAL)
    k = dict(w.phi_k)
    k[z] = tuple(Fraction(-1, 1000) if i == a else v for i, v in enumerate(k[z]))
    bad = replace(w, phi_k=k)
    assert not exact_check(prob, bad).ok
    assert exact_check(build_problem(paper, USED),
                       replace(bad, model_class=USED, extension=None)).ok


def test_copy_query_rule_with_a_zero_in_its_row_is_rejected(paper):
    res = decide(paper, 15, Features.NONNEGATIVE, time_limit=1)
    claim = res.to_claim().to_json()
    ext = claim["evidence"]["witness"]["extension"]
    assert ext["rule"] == "copy-query" and claim["parameters"]["scope"] == "cube"
    prob = build_problem(paper, PAPER)
    qstar = ext["query"]
    a = [int(t) for t in prob.queries].index(qstar)
    used = {(int(prob.queries[i]), int(prob.keys[j])) for i, j in prob.entries[:prob.used]}
    z = next(int(t) for t in prob.keys if (qstar, int(t)) not in used)
    bad = _set_phi_k(claim, z, a, "0")          # alpha(q*, z) = 0, still >= 0
    problems = checker.check(bad, {"claims": [bad]})
    assert problems and "copy-query" in problems[0] and f"alpha({qstar}, {z}) = 0" in problems[0]
    # the plus-one rule is valid for the same kernel, but only for the family's rank
    bad["evidence"]["witness"]["extension"] = {"rule": "plus-one"}
    assert "scope must be 'family'" in checker.check(bad, {"claims": [bad]})[0]
    bad["parameters"]["scope"] = "family"
    assert checker.check(bad, {"claims": [bad]}) == []
    # a zero self term is rejected whatever the rule
    selfz = _set_phi_k(bad, qstar, a, "0")
    assert any("self term" in p for p in checker.check(selfz, {"claims": [selfz]}))
    # an unknown rule, a non-query q*, a missing token row
    nonq = next(t for t in range(len(paper.tokens)) if t not in set(int(v) for v in prob.queries))
    for ext2 in ({"rule": "copy-query", "query": nonq}, {"rule": "zero"}, None,
                 {"rule": "plus-one", "query": qstar}):
        c = json.loads(json.dumps(bad))
        c["evidence"]["witness"]["extension"] = ext2
        assert checker.check(c, {"claims": [c]}), ext2
    c = json.loads(json.dumps(bad))
    c["evidence"]["witness"]["phi_k"] = [e for e in c["evidence"]["witness"]["phi_k"] if e[0] != z]
    assert any("41 family tokens" in p for p in checker.check(c, {"claims": [c]}))


def test_class_parameter_is_checked(paper):
    claim = decide(paper, 15, Features.REAL, time_limit=1).to_claim().to_json()
    for cls in ("paperish", None):
        c = json.loads(json.dumps(claim))
        c["parameters"]["class"] = cls
        assert any("model class" in p for p in checker.check(c, {"claims": [c]}))
    c = json.loads(json.dumps(claim))
    del c["parameters"]["class"]
    assert checker.check(c, {"claims": [c]})
    c = json.loads(json.dumps(claim))           # class differs from the witness's
    c["parameters"]["class"] = "used-pairs"
    c["parameters"]["scope"] = "family"
    assert checker.check(c, {"claims": [c]})
    # lower bounds are class-free; scope cube is not for them
    for cls in ("paper", "used-pairs"):
        inf = decide(paper, 11, Features.REAL, time_limit=1, model_class=cls).to_claim().to_json()
        assert inf["parameters"]["class"] == cls
        assert checker.check(inf, {"claims": [inf]}) == []
        inf["parameters"]["scope"] = "cube"
        assert checker.check(inf, {"claims": [inf]})


def _tiny():
    # two weight-3 words of {0,1}^6: a cube of 64 tokens, small enough to enumerate
    return chain_family(_words(range(0, 3), range(3, 6), M=6), n=3, g=3, name="tiny-6")


def _cube_head(fam, problem, w: Witness):
    """The whole-cube head of the stored rule, built here from the rule's text:
    (phi_q, phi_k) over all 2^m tokens as dicts bit-tuple -> features."""
    toks = [tuple(int(v) for v in t) for t in fam.tokens]
    Q = {toks[int(q)]: int(q) for q in problem.queries}
    T = {t: i for i, t in enumerate(toks)}
    ext, r = w.extension, w.rank
    one, zero = Fraction(1), Fraction(0)
    e = tuple(zero for _ in range(r)) + (one,)
    pq, pk = {}, {}
    for x in product((0, 1), repeat=fam.m):
        if ext["rule"] == "plus-one":
            pq[x] = w.phi_q[Q[x]] + (zero,) if x in Q else e
            pk[x] = w.phi_k[T[x]] + (one,) if x in T else e
        else:
            pq[x] = w.phi_q[Q[x]] if x in Q else w.phi_q[ext["query"]]
            pk[x] = w.phi_k[T[x]] if x in T else w.phi_k[ext["query"]]
    return pq, pk, toks


def _dot(u, v):
    return sum((a * b for a, b in zip(u, v)), Fraction(0))


@pytest.mark.parametrize("rule", ["copy-query", "plus-one"])
def test_extension_lemma_on_the_whole_cube(rule):
    """Brute force over {0,1}^6: the rule gives alpha >= 0 on all 64 x 64 pairs,
    alpha(x, x) > 0 for all x, and the same kernel on the family's Q x T."""
    fam = _tiny()
    prob = build_problem(fam, PAPER)
    w, chk = lookup_witness(prob, prob.num_rows, Features.REAL)
    assert chk.ok and w.extension["rule"] == "copy-query"
    # signed features with the same kernel: PhiQ M, PhiK M^-T
    M = [[Fraction(2), Fraction(-3)], [Fraction(1), Fraction(-1)]]     # det 1, inverse [[-1,3],[-1,2]]
    Minv_t = [[Fraction(-1), Fraction(-1)], [Fraction(3), Fraction(2)]]
    mul = lambda row, A: tuple(_dot(row, [A[i][j] for i in range(2)]) for j in range(2))  # noqa: E731
    w = replace(w, phi_q={q: mul(v, M) for q, v in w.phi_q.items()},
                phi_k={z: mul(v, Minv_t) for z, v in w.phi_k.items()})
    assert any(v < 0 for row in w.phi_q.values() for v in row)
    w = with_extension(prob, w)
    assert w.extension == {"rule": "copy-query", "query": int(prob.queries[0])}
    if rule == "plus-one":             # always valid (every pair of tiny-6 is used)
        w = replace(w, extension={"rule": "plus-one"})
    assert w.extension["rule"] == rule and w.cube_rank == w.rank + (rule == "plus-one")
    chk = exact_check(prob, w)
    assert chk.ok, chk.problems
    pq, pk, toks = _cube_head(fam, prob, w)
    cube = list(pq)
    assert len(cube) == 64
    alpha = {(x, z): _dot(pq[x], pk[z]) for x in cube for z in cube}
    assert min(alpha.values()) >= 0
    assert all(alpha[x, x] > 0 for x in cube)
    fam_alpha = paper_alpha(prob, w)
    assert all(alpha[toks[q], toks[z]] == a for (q, z), a in fam_alpha.items())
    # and the claim verifies
    res = decide(fam, prob.num_rows, Features.REAL, time_limit=1)
    claim = res.to_claim().to_json()
    claim["evidence"]["witness"] = w.to_json()
    claim["evidence"]["margin"] = q_to_str(chk.margin)
    claim["parameters"]["scope"] = "cube" if rule == "copy-query" else "family"
    assert checker.check(claim, {"claims": [claim]}) == []


def test_cube_brackets_use_the_rule_cost(small):
    results, brackets = sweep(small, 3, 4, [Features.NONNEGATIVE], time_limit=5, seed=0)
    assert brackets == {"nonnegative": (3, 3)}
    cube = cube_brackets(results, brackets)
    ranks = {r.rank: r.cube_rank for r in results}
    assert cube == {"nonnegative": (3, min(ranks.values()))}
    assert all(r.to_claim().parameters["class"] == "paper" for r in results)


def test_plus_one_is_chosen_when_no_query_row_is_positive(paper):
    """Zero alpha(q, z) on one unused pair of every query (PhiQ = I): the kernel
    still solves the family, no copy-query rule applies, and plus-one (rank + 1
    on the cube) is stored; the claim's scope is then the family."""
    prob = build_problem(paper, PAPER)
    base, _ = lookup_witness(prob, 15, Features.NONNEGATIVE)
    used = {(int(prob.queries[a]), int(prob.keys[b])) for a, b in prob.entries[:prob.used]}
    k = dict(base.phi_k)
    for a, q in enumerate(prob.queries):
        z = next(int(t) for t in prob.keys if (int(q), int(t)) not in used)
        k[z] = tuple(Fraction(0) if i == a else v for i, v in enumerate(k[z]))
    w = with_extension(prob, replace(base, phi_k=k))
    assert w.extension == {"rule": "plus-one"} and w.cube_rank == 16
    chk = exact_check(prob, w)
    assert chk.ok
    res = decide(paper, 15, Features.NONNEGATIVE, time_limit=1)
    res = replace(res, witness=w, margin=chk.margin)
    claim = res.to_claim()
    assert claim.parameters["scope"] == "family" and claim.info["cube_rank"] == 16
    assert checker.check(claim.to_json(), _cert(claim)) == []


def test_committed_paper51_sweep_verifies_in_the_papers_class(monkeypatch):
    """reports/feasibility/paper51_sweep.json: every claim in the paper's class,
    verify holds, and the brackets it proves are real [12, 13], nonnegative exactly 15
    (the packing lemma excludes nonnegative ranks 12-14; real rank 12 stays unknown)."""
    from pathlib import Path

    from certify.checkers import verify
    root = Path(__file__).resolve().parent.parent
    path = root / "reports" / "feasibility" / "paper51_sweep.json"
    monkeypatch.chdir(root)
    assert verify.verify_file(path).holds
    claims = json.loads(path.read_text())["claims"]
    assert {c["parameters"]["class"] for c in claims} == {"paper"}
    got = {(c["parameters"]["features"], c["parameters"]["rank"]): (c["kind"], c["verdict"])
           for c in claims}
    for feats, excluded, feasible in (("real", 11, {13, 14, 15}), ("nonnegative", 14, {15})):
        for r in range(8, 16):
            want = ("infeasible", "proved") if r <= excluded else \
                ("feasible", "proved") if r in feasible else ("feasible", "unknown")
            assert got[feats, r] == want, (feats, r)
    packing = {c["parameters"]["rank"]: c["method"] for c in claims
               if c["parameters"]["features"] == "nonnegative" and c["kind"] == "infeasible"}
    assert all("packing lemma" in packing[r] for r in (12, 13, 14))
    for c in claims:
        if c["kind"] == "feasible" and c["verdict"] == "proved":
            # copy-query: the whole-cube head has the same rank
            assert c["parameters"]["scope"] == "cube"
            assert c["evidence"]["witness"]["extension"]["rule"] == "copy-query"


def test_paper51_nonnegative_rank_is_exactly_15_by_the_packing_lemma(tmp_path):
    """Nonnegative features: the 15 feature-share vectors of a head have pairwise
    products < 1/(4 * 4) = 1/16, and n > d nonnegative vectors in R^d with
    coordinate sum 1 have a pair with product >= 1/d: every rank <= 14 is excluded
    (re-derived by the checker), and the construction solves the family at 15."""
    from certify.checkers import verify as _verify
    from certify.core.certificate import Certificate
    from certify.feasibility.chain_bounds import chain_bound
    from certify.feasibility.decide import decide
    from certify.feasibility.model import Features
    from certify.feasibility.result import Outcome

    fam = paper51_family()
    b = chain_bound(fam)
    assert (b.max_infeasible_rank, b.kappa_sq, b.packing_rank) == (11, Fraction(1, 16), 14)
    assert b.max_infeasible_rank_for(Features.REAL) == 11
    res = {r: decide(fam, r, Features.NONNEGATIVE, time_limit=5, bound=b) for r in (14, 15)}
    assert res[14].outcome is Outcome.INFEASIBLE and "packing lemma" in res[14].method
    assert res[15].outcome is Outcome.FEASIBLE
    real = decide(fam, 12, Features.REAL, time_limit=1, bound=b)
    assert real.outcome is not Outcome.INFEASIBLE                 # real rank 12 stays open
    cert = Certificate(claims=[res[14].to_claim(), res[15].to_claim()],
                       inputs={f"family:{fam.name}": fam.sha256}).to_json()
    assert _verify.verify_certificate(cert).exit_code() == 0
    # the packing bound is for nonnegative features only, and its numbers are re-derived
    forged = copy.deepcopy(cert)
    forged["claims"][0]["parameters"]["features"] = "real"
    forged["claims"][0]["statement"] = forged["claims"][0]["statement"].replace(
        "nonnegative-feature", "real-feature")
    r = _verify.verify_certificate(forged)
    assert any("exceeds 11" in p for p in r.claims[0].problems)
    forged = copy.deepcopy(cert)
    forged["claims"][0]["evidence"]["derivation"]["packing"]["kappa_sq"] = "1/17"
    assert not _verify.verify_certificate(forged).claims[0].holds
