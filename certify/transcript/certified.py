"""Thm 9 claims from the certified enumeration (:mod:`certify.transcript.enumerate`).

Every assignment's transcript and correctness are exact, so:

* two assignments with one exact transcript are a certified collision
  (``refuted``, evidence ``collision``: both replayed by the checker);
* an assignment whose exact output errs by >= 1/2 refutes (evidence ``error``);
* otherwise every query output of every assignment is within < 1/2 of its
  target: ``proved`` (evidence ``all``). The checker re-checks that by an
  exact integer replay in numpy (one-layer rational models, see
  :func:`certify.checkers.transcript.integer_replayable`) or, for families
  above its Fraction-replay limit with deeper models, the evidence names the
  step it cannot replay, ``"replay:transcript-enumeration"``, in
  ``evidence["assumptions"]``.
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any

from certify.core.certificate import Claim, ClaimKind
from certify.core.files import sha256_json
from certify.core.verdict import Verdict
from certify.transcript.capacity import bound_claim, capacity
from certify.transcript.replay import collision_refutation, error_refutation, family_evidence, replay
from certify.transcript.result import REPLAY_ASSUMPTION, TranscriptResult
from certify.transcript.search import SearchResult


def transcript_params(spec, model) -> dict:
    """The claim's parameters (its statement is rendered from them): the family,
    the model's shape, its quantizer and the hash of its exact weights, by which
    the sentence names the model (the checker recomputes it from the weights)."""
    return {"M": spec.M, "s": spec.s, "h": spec.h, "q": spec.q,
            "layers": model.cfg.layers, "heads": model.cfg.heads, "rank": model.cfg.rank,
            "dv": model.cfg.dv, "feature_map": model.cfg.feature_map,
            "quantizer": model.quantizer.to_json(),
            "weights_sha256": sha256_json(model.weights_json())}


def _first_error(spec, model, index, EW):
    """``(replay, position, output, target)`` of the first query output off by
    >= 1/2 in the exact replay of assignment ``index``, or None."""
    r = replay(spec, model, index, EW)
    for i, (y, t) in enumerate(zip(r.outputs, r.kappa)):
        if abs(y - t) >= Fraction(1, 2):
            return r, i, y, t
    return None


def check_certified(spec, model, n: int, *, time_limit=None, progress=True,
                    engine=None) -> TranscriptResult:
    from certify.checkers.transcript import integer_replayable
    from certify.core.budget import CpuBudget
    from certify.transcript import enumerate as transcript_enum

    t0 = time.perf_counter()
    budget = None if time_limit is None else CpuBudget(time_limit)
    cap = capacity(model, spec.s, spec.q)
    er, done, enum = transcript_enum.enumerate_all(spec, model, time_limit=time_limit,
                                                   progress=progress, engine=engine)
    t1 = time.perf_counter()
    N = spec.num_assignments
    params = transcript_params(spec, model)
    verdict, reason, collision, ev = Verdict.UNKNOWN, None, None, None
    if er is None:
        reason = (f"{budget.describe() if budget else 'time limit'} exhausted: {done} of {N} "
                  "assignments certified, no decision")
        res = SearchResult(N, done, False, None, (), 0, float("nan"), 0, t1 - t0)
    else:
        res = SearchResult(N, N, True, er.distinct, er.collisions, er.correct,
                           er.float_max_error, er.errors[0] if er.errors else 0, t1 - t0)
        EW = enum.exact_weights()
        if er.collisions:
            a, b = er.collisions[0]
            ra, rb = replay(spec, model, a, EW), replay(spec, model, b, EW)
            ev, reason, collision = collision_refutation(spec, model, ra, rb, n)
            verdict = Verdict.REFUTED
        elif er.errors and (bad := _first_error(spec, model, er.errors[0], EW)) is None:
            reason = (f"assignment index {er.errors[0]}: the float64 ball said error >= 1/2, "
                      "the exact replay does not confirm it")
        elif er.errors:
            r, i, y, t = bad
            verdict = Verdict.REFUTED
            ev, reason = error_refutation(spec, model, r, i, y, t, n)
        elif er.correct == N:
            verdict = Verdict.PROVED
            ev = {"type": "all", "family": family_evidence(spec, n), "model": model.evidence(),
                  "exact_checked": N}
            if not integer_replayable(model.cfg.to_json(), N):
                ev["assumptions"] = [REPLAY_ASSUMPTION]
        else:                        # not reachable: every assignment is decided exactly
            reason = f"{N - er.correct} assignments undecided"
    t2 = time.perf_counter()
    evidence: dict[str, Any] = {"capacity": cap.to_json()}
    evidence.update(ev if ev is not None else {"type": "none", "family": family_evidence(spec, n),
                                              "model": model.evidence()})
    info = {**cap.display(), "context_length": n, "assignments_certified": res.checked,
            "distinct_transcripts": er.distinct if er else None,
            "injective": er.injective if er else None,
            "replayed_exactly": er.replayed if er else None,
            "exact_accuracy": (er.correct / N) if er else None,
            "float64_max_error": er.float_max_error if er else None,
            "shards": er.shards if er else None}
    if budget is not None:
        info["budget"] = budget.record()
    method = ("certified float64 enumeration (ball arithmetic with a rigorous rounding bound, "
              "per-slot partial sums); assignments near a cell boundary replayed exactly with "
              "Fractions; collisions, errors and accuracy decided on integer transcripts")
    claim = Claim(kind=ClaimKind.TRANSCRIPT, statement=None, verdict=verdict,
                  parameters=params, evidence=evidence, method=method, reason=reason,
                  timings={"search": t1 - t0, "exact": t2 - t1}, info=info)
    claims = [c for c in (bound_claim(model, spec.s, spec.q),) if c is not None] + [claim]
    return TranscriptResult(verdict, reason, cap, res, collision, er.injective if er else None,
                            N if er else 0, er.correct if er else 0, tuple(claims),
                            {"search": t1 - t0, "exact": t2 - t1})
