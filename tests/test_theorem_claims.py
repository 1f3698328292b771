"""The paper's theorems about concrete objects as ``theorem`` claims (Thm 1, Thm 6 part 1, Thm 8).

The committed ``reports/reference/theorems.json`` verifies at exit 0 with both checkers (``certify
verify`` and ``certify verify --reference``), and every forged variant of it -- a parameter, a
re-derived value or the object edited, the sentence rendered again so that only the checker can
object -- is refused by both. The verdicts are the exact ones a wrong implementation would miss:
the boundary ``|t_hat - t| = eps`` fails (strict), the self term counts, a temperature within
``10^-39`` of ``log 2`` is decided by balls only at a refined precision, Thm 6's rank-1 head
fails at length 3 with the error computed here by hand, and Thm 8's bound on ``paper-5.1``
is the bound the feasibility derivation reaches by its own code.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from committed import ROOT

from certify.audit import theorems as producer
from certify.audit.theorems import cube_claim
from certify.checkers import theorems as checker
from certify.checkers import verify
from certify.checkers.kernel.hashing import canonical_sha256
from certify.checkers.statements import render
from certify.core.certificate import Certificate
from certify.reference import check as ref

REF = ROOT / "reports" / "reference" / "theorems.json"
#: ln 2 truncated to 39 decimals (the next digits are 5001...): LOG2_LOW < ln 2 < LOG2_LOW + 10^-39
LOG2_LOW = Fraction(693147180559945309417232121458176568075, 10 ** 39)


def _exits(cert: dict, base: Path = REF.parent) -> tuple[int, int]:
    """(``certify verify``, ``certify verify --reference``) exit codes of a parsed certificate."""
    fast = verify.verify_certificate(cert, base=base).exit_code()
    return fast, ref.check_many([("c", cert, base)])[0].exit_code()


def _forged(i: int, edit) -> dict:
    """The committed certificate with claim ``i`` alone, edited, its sentence rendered again."""
    cert = json.loads(REF.read_text())
    c = cert["claims"][i]
    edit(c)
    c["statement"] = render("theorem", c["parameters"], c["evidence"]).text
    return {**cert, "claims": [c]}


def _claim(cert: dict, theorem: str, **match) -> int:
    return next(i for i, c in enumerate(cert["claims"]) if c["parameters"]["theorem"] == theorem
                and all(c["parameters"].get(k) == v for k, v in match.items()))


def test_the_committed_theorem_claims_verify_with_both_checkers(monkeypatch):
    monkeypatch.chdir(ROOT)
    cert = json.loads(REF.read_text())
    assert [c["parameters"]["theorem"] for c in cert["claims"]] == ["thm1", "thm1", "thm6", "thm8"]
    assert all(c["verdict"] == "proved" for c in cert["claims"])
    assert _exits(cert) == (0, 0)
    thm1 = cert["claims"][_claim(cert, "thm1", tau="log(6)")]["evidence"]
    # m = 3, lengths <= 3: 8 + 64 + 512 sequences; the largest error is two keys one above the
    # minimum, 2c / (1 + 2c) at c = 1/6 (without the self term it would be 1/7)
    assert (thm1["sequences"], thm1["positions"], thm1["max_error"]) == (584, 8 + 128 + 1536, "1/4")
    assert cert["claims"][_claim(cert, "thm1", tau="2")]["evidence"]["max_error"] is None   # balls
    assert cert["claims"][_claim(cert, "thm6")]["evidence"]["max_error"] == "0"            # exact


@pytest.mark.parametrize("theorem, edit", [
    ("thm1", lambda c: c["parameters"].update(tau="log(2)")),             # below Thm 1's temperature
    ("thm1", lambda c: c["evidence"].update(max_error="1/5")),
    ("thm1", lambda c: c["parameters"].update(m=2)),
    ("thm6", lambda c: c["parameters"].update(n=3) or c["evidence"].update(
        sequences=584, positions=1672, classes=360)),                      # counts consistent, verdict false
    ("thm6", lambda c: c["evidence"].update(counterexample={"query": "110", "others": ["000"]})),
], ids=["thm1-tau-log2", "thm1-max-error", "thm1-m", "thm6-length-3", "thm6-counterexample"])
def test_a_forged_cube_claim_is_refused_by_both_checkers(theorem, edit):
    cert = json.loads(REF.read_text())
    assert _exits(_forged(_claim(cert, theorem), edit)) == (1, 1)


def test_a_forged_ball_claim_is_refused_by_both_checkers():
    cert = json.loads(REF.read_text())
    i = _claim(cert, "thm1", tau="2")
    assert _exits(_forged(i, lambda c: c["parameters"].update(tau="1/2"))) == (1, 1)
    assert _exits(_forged(i, lambda c: c["evidence"].update(max_error="1/4"))) == (1, 1)


def test_a_forged_positional_claim_is_refused_by_both_checkers(monkeypatch):
    monkeypatch.chdir(ROOT)
    cert = json.loads(REF.read_text())
    i = _claim(cert, "thm8")
    for key, value in (("rank_bound", 16), ("effective_rank", 14), ("lemma4_bound", "9")):
        assert _exits(_forged(i, lambda c: c["evidence"].update({key: value}))) == (1, 1), key
    # the head nudged (alpha_0 of the first query on the chain's first z made dominant), rehashed
    nudged = _forged(i, lambda c: None)
    c = nudged["claims"][0]
    head, jump = c["evidence"]["head"], c["evidence"]["family"]["jumps"][0]
    z = jump[5]
    head["phi_k"][z][0] = str(Fraction(head["phi_k"][z][0]) + 10 ** 9)
    c["parameters"]["head_sha256"] = canonical_sha256(head)
    c["statement"] = render("theorem", c["parameters"], c["evidence"]).text
    assert _exits(nudged) == (1, 1)


def test_a_family_without_the_mixed_inputs_of_thm8_s_proof_is_refused():
    """Thm 8's proof sums the mixed inputs M_l (y at each source position l): a family with
    positions that lacks M_1 = (z, y, x) gives no bound, whatever the producer computed on it."""
    import numpy as np

    from certify.core.families import Family, chain_family
    from certify.core.families.positional import causal_family
    from models.constructions import thm8_positional_lookup
    from tests.oracle.genuine import small_chain_code
    full = causal_family(chain_family(small_chain_code(), name="greedy-10-5-3"))
    mixed = {(j[5], j[4], j[3]) for j in full.jumps.tolist()}
    keep = [k for k, s in enumerate(full.inputs.tolist()) if tuple(s) not in mixed]
    new_index = {k: i for i, k in enumerate(keep)}
    jumps = full.jumps.copy()
    jumps[:, 8:] = np.vectorize(new_index.__getitem__)(full.jumps[:, 8:])
    cut = Family(name="cut-causal", tokens=full.tokens, inputs=full.inputs[keep], scored=full.scored[keep],
                 targets=full.targets[keep], params=full.params, words=full.words, jumps=jumps)
    c = producer.positional_claim(cut, thm8_positional_lookup(cut))
    assert c.verdict.value == "proved"                  # the producer does not look for M_l
    cert = Certificate(claims=[c], command=["test"], inputs={f"family:{cut.name}": cut.sha256}).to_json()
    assert _exits(cert, base=None) == (1, 1)
    whole = producer.positional_claim(full, thm8_positional_lookup(full))
    cert = Certificate(claims=[whole], command=["test"],
                       inputs={f"family:{full.name}": full.sha256}).to_json()
    assert _exits(cert, base=None) == (0, 0)


def test_the_rank_one_head_fails_at_length_three_with_the_hand_computed_error():
    """Thm 6's rank-1 head on (11; 00, 00): overlaps (2, 0, 0), t_hat = 2 * 2/3 - 2 = -2/3, target 0;
    the first failing class, and the largest error 2/3."""
    c = cube_claim("thm6", 2, 3)
    assert c.verdict.value == "refuted"
    assert c.evidence["counterexample"] == {"query": "11", "others": ["00", "00"]}
    assert c.evidence["max_error"] == "2/3"
    cert = Certificate(claims=[c, cube_claim("thm6", 2, 2)], command=["test"]).to_json()
    assert _exits(cert, base=None) == (0, 0)


def test_an_error_equal_to_eps_fails():
    """tau = log 2 at (query 10; 00, 10): overlaps (1, 0, 1), weights (1/2, 1, 1/2), t_hat = 1/2,
    target 0: the error is eps exactly, and the criterion is strict."""
    c = cube_claim("thm1", 2, 3, tau="log(2)")
    assert c.verdict.value == "refuted"
    assert c.evidence["counterexample"] == {"query": "10", "others": ["00", "10"]}
    assert _exits(Certificate(claims=[c], command=["test"]).to_json(), base=None) == (0, 0)


def test_balls_decide_a_temperature_within_1e_39_of_log_2_only_at_a_refined_precision(monkeypatch):
    """At m = 1, lengths <= 3, the class (1; 0, 1) has error 2q / (1 + 2q), q = e^-tau: below 1/2
    exactly when tau > ln 2. The two temperatures around ln 2 get opposite verdicts from both
    checkers; 64 bits do not decide them, so a producer held to 64 bits says unknown, which the
    checker, refining its precision, refuses."""
    above, below = producer.q_to_str(LOG2_LOW + Fraction(1, 10 ** 39)), producer.q_to_str(LOG2_LOW)
    up, down = cube_claim("thm1", 1, 3, tau=above), cube_claim("thm1", 1, 3, tau=below)
    assert (up.verdict.value, down.verdict.value) == ("proved", "refuted")
    assert down.evidence["counterexample"] == {"query": "1", "others": ["0", "1"]}
    assert _exits(Certificate(claims=[up, down], command=["test"]).to_json(), base=None) == (0, 0)
    monkeypatch.setattr(producer, "PRECISIONS", (64,))
    coarse = cube_claim("thm1", 1, 3, tau=above)
    assert coarse.verdict.value == "unknown"
    assert _exits(Certificate(claims=[coarse], command=["test"]).to_json(), base=None) == (1, 1)
    monkeypatch.setattr(checker, "PRECISIONS", (64,))           # the checker at 64 bits agrees: unknown
    assert verify.verify_certificate(Certificate(claims=[coarse], command=["test"]).to_json()).holds


def test_thm8_s_bound_on_paper51_is_the_feasibility_derivation_s():
    """The Lemma 4 bound of the family's chains, reached by the theorem checker from the jumps of
    paper-5.1 with positions and by the infeasibility derivation (its own pairs) on paper-5.1."""
    thm8 = json.loads(REF.read_text())["claims"][3]["evidence"]
    r8 = json.loads((REF.parent / "feasibility-r8-real.json").read_text())["claims"][0]
    assert thm8["lemma4_bound"] == r8["evidence"]["derivation"]["bound"] == "1920/239"
    assert thm8["rank_bound"] == 9 and thm8["effective_rank"] == 15


def test_bounds_constructions_from_the_command_line(tmp_path):
    from certify.cli import run
    out = tmp_path / "c.json"
    assert run("bounds", ["--m", "2", "--constructions", "--tau", "1/2", "--out", str(out)]) == 1
    cert = json.loads(out.read_text())
    kinds = [(c["kind"], c["parameters"].get("theorem"), c["verdict"]) for c in cert["claims"]]
    assert ("theorem", "thm1", "refuted") in kinds and ("theorem", "thm6", "proved") in kinds
    assert _exits(cert, base=tmp_path) == (0, 0)
    assert run("bounds", ["--m", "2", "--tau", "2"]) == 2             # --tau needs --constructions


def test_the_family_with_positions_holds_every_mixed_input():
    """The family with positions holds every mixed input (y at each source position), a position-
    free chain family only one: the causal builder adds (z, y, x) beside (y, z, x)."""
    from certify.core.families import load_family
    from certify.core.families.positional import causal_family
    chain = load_family("paper-5.1")
    fam = causal_family(chain)
    rows = {tuple(r) for r in fam.inputs.tolist()}
    for j in fam.jumps.tolist()[:20]:
        x, y, z = j[3], j[4], j[5]
        assert {(y, y, x), (z, z, x), (y, z, x), (z, y, x)} <= rows
    assert fam.scored[:, -1].all() and not fam.scored[:, :-1].any()
    assert fam.counts()["jumps"] == 424 and fam.counts()["inputs"] == 702
