"""Exact correctness of a kernel head on a family, and the Lemma 3 audit along its chains.

A normalized kernel head on a family is, exactly, three rational tables over
the family's tokens (:class:`ExactHead`): query features ``phi_q`` for the
tokens that are queried, key features ``phi_k`` for every token, and the
scalarized values ``g_x(z) = beta(x) + w(x)^T v(z)`` (Eq. 5). A model's float
tables are converted losslessly (every float is a dyadic rational) and
combined in exact arithmetic: the kernel is the exact product
``phi_q phi_k^T`` of the feature matrices the model computes.

* :func:`check_correctness` evaluates every scored position of every input
  in rationals, ``t_hat = sum_j alpha g / sum_j alpha`` (self term included),
  and decides ``|t_hat - t| < eps`` strictly: ``proved``, or ``refuted`` with
  the first failing input.
* :func:`audit_gap_domination` checks Lemma 3 on every jump ``t -> u`` of the
  family's chains: ``alpha(x,y) > (n-2)(d-2eps)/(2eps) alpha(x,z)``. Where it
  fails, one of the jump's inputs ``Y, Z, M`` must be wrong (Lemma 3's
  identity ``N_M = N_Y/L + (K/L) N_Z`` cancels the values); the audit finds
  it and confirms it by exact evaluation.

:func:`correctness_claim` and :func:`gap_domination_claim` wrap the results
as certificate claims whose evidence :mod:`certify.checkers.audit` re-derives.
"""

from __future__ import annotations

from fractions import Fraction

from certify.audit.correctness import Correctness, check_correctness
from certify.audit.head import HALF, ExactHead
from certify.audit.lemma3 import GapAudit, audit_gap_domination
from certify.core.certificate import Claim, ClaimKind
from certify.core.errors import InputError
from certify.core.families import Family
from certify.core.numbers import q_to_str
from certify.core.verdict import Verdict


def _common(head: ExactHead, family: Family, eps: Fraction) -> tuple[dict, dict]:
    """Parameters and evidence both kinds share. The head is named by the hash of
    its exact tables; a producer that read it from weights adds the weights file
    (``source``, ``source_sha256``, ``adapter``) and their canonical hash
    (``weights_sha256``), which verify binds."""
    params = {"family": family.name, "family_sha256": family.sha256,
              "head_sha256": head.sha256, "rank": head.rank, "eps": q_to_str(eps)}
    evidence = {"family": family.to_json(), "head": head.to_json()}
    return params, evidence


def correctness_claim(head: ExactHead, family: Family, result: Correctness,
                      model: str | None = None) -> Claim:
    params, evidence = _common(head, family, result.eps)
    evidence.update({
        "scored_positions": result.scored, "failures": result.failures,
        "max_error": None if result.max_error is None else q_to_str(result.max_error),
        "counterexample": None if result.counterexample is None
        else result.counterexample.to_json(family)})
    reason = None
    if result.verdict is Verdict.REFUTED:
        c = result.counterexample
        assert c is not None                # a refutation carries its counterexample
        t = "undefined (denominator <= 0)" if c.t_hat is None else f"{q_to_str(c.t_hat)}"
        reason = (f"{result.failures} of {result.scored} scored positions fail; input {c.input} "
                  f"position {c.position}: t_hat = {t}, target {c.target}")
    return Claim(kind=ClaimKind.CORRECTNESS, statement=None, verdict=result.verdict,
                 parameters=params, evidence=evidence, reason=reason,
                 method="every scored position evaluated in exact rational arithmetic "
                        "(certify.audit)")


def gap_domination_claim(head: ExactHead, family: Family, audit: GapAudit,
                         model: str | None = None) -> Claim:
    params, evidence = _common(head, family, audit.eps)
    params["n"] = audit.n
    v = audit.first
    evidence.update({
        "jumps": audit.jumps, "applicable": audit.applicable,
        "violated_jumps": list(audit.violated),
        "violation": None if v is None else {
            "jump": v.jump, "factor": q_to_str(v.factor), "alpha_xy": q_to_str(v.alpha_xy),
            "alpha_xz": q_to_str(v.alpha_xz), "role": v.role,
            "failing_input": None if v.failing is None else v.failing.to_json(family)}})
    reason = audit.reason
    if audit.verdict is Verdict.REFUTED:
        assert v is not None and v.failing is not None     # refuted: a failing input was found
        f = v.failing
        reason = (f"gap domination fails on {len(audit.violated)} of {audit.applicable} jumps; at jump "
                  f"{v.jump} alpha(x,y) = {q_to_str(v.alpha_xy)} <= {q_to_str(v.factor)} * "
                  f"{q_to_str(v.alpha_xz)}, and its input {v.role} (input {f.input}) is wrong: "
                  f"t_hat = {'undefined' if f.t_hat is None else q_to_str(f.t_hat)}, "
                  f"target {f.target}")
    return Claim(kind=ClaimKind.GAP_DOMINATION, statement=None, verdict=audit.verdict,
                 parameters=params, evidence=evidence, reason=reason,
                 method="Lemma 3 inequality per jump in exact rationals; failing input "
                        "confirmed by exact evaluation (certify.audit)")


def family_eps(family: Family) -> Fraction:
    """The family's error level (``params["eps"]``), 1/2 by default."""
    e = family.params.get("eps", "1/2") if family.params else "1/2"
    from certify.core.limits import parse_exact
    eps = parse_exact(str(e), "family eps")
    if not 0 < eps <= HALF:
        raise InputError(f"family eps must lie in (0, 1/2], got {eps}")
    return eps


def audit_claims(head: ExactHead, family: Family, model: str | None = None) -> list[Claim]:
    """CORRECTNESS, and GAP_DOMINATION when the family has Lemma 3 chains. ``model`` (a
    label for people) is not a parameter: a sentence names the head by content."""
    eps = family_eps(family)
    claims = [correctness_claim(head, family, check_correctness(head, family, eps), model)]
    if family.jumps is not None and family.n >= 3:
        claims.append(gap_domination_claim(head, family, audit_gap_domination(head, family, eps),
                                           model))
    return claims
