"""Theorem 9 against a quantized sketch model (``certify transcript``).

The claim checked (``ClaimKind.TRANSCRIPT``): "this quantized L-layer, H-head
sketch model solves the Sec. 4 multilevel family ``(M, s, h, q)`` with error
below 1/2 at every query position".

1. Eq. 8 / Thm 9, exactly: ``2^(L H r (dv+1) p) >= (s+1)^q`` (uniform ``p``-bit
   quantizer, a ``BOUND`` claim) or ``|Sigma|^(L H r (dv+1)) >= (s+1)^q`` (float
   format with ``|Sigma|`` finite values).
2. Float64 fast path (proposes): every assignment in lexicographic batches;
   each transcript is hashed (64 bits) and the hashes sorted once; equal hashes
   give candidate collisions (the pair's full float transcripts are compared).
3. Exact replay (decides): a candidate pair is recomputed with Fractions
   (identity / relu maps) or arb balls (elu1 / exp), starting from the exact
   dyadic weights. Equal certain transcripts with different targets make the
   two inputs' query outputs identical, so one of them errs by >= 1/2:
   ``refuted``. A ball straddling a cell boundary leaves the pair undecided.
4. Without a collision, ``proved`` needs an exact check of every query output of
   every assignment (done up to ``exact_limit`` assignments); a float failure is
   replayed exactly and may refute; everything else is ``unknown``.

Models with identity / relu maps and a uniform quantizer skip steps 2-4: the
certified enumeration (:mod:`certify.transcript.enumerate`, claims in
:mod:`certify.transcript.certified`) decides every assignment's transcript and
correctness exactly, so ``proved`` / ``refuted`` is available at any family
size the enumeration reaches (``--workers N`` / ``--ray-address`` shard it).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

from certify.core.certificate import Certificate, Claim, ClaimKind
from certify.core.errors import InputError
from certify.core.verdict import Verdict
from certify.transcript.capacity import bound_claim, capacity
from certify.transcript.model import ModelRequest, QuantizedSketchModel, build_model, check_compatible
from certify.transcript.replay import (
    _query_error,
    collision_refutation,
    error_refutation,
    family_evidence,
    replay,
)
from certify.transcript.result import DEFAULT_EXACT_LIMIT, TranscriptResult
from certify.transcript.search import DEFAULT_BATCH, search_collisions


def check_transcript(spec, model: QuantizedSketchModel, *, n: int | None = None,
                     time_limit: float | None = None, exact_limit: int = DEFAULT_EXACT_LIMIT,
                     batch: int = DEFAULT_BATCH, progress: bool = True,
                     certified: bool = True, engine=None) -> TranscriptResult:
    """Run the Thm 9 check of ``model`` on ``spec``; see the module docstring.
    ``certified`` (default): models with identity/relu maps and a uniform quantizer
    go through the certified enumeration of :mod:`certify.transcript.enumerate`, which
    decides every assignment exactly at any family size (``exact_limit`` is then
    not needed); ``engine`` shards it over workers."""
    from certify.transcript import enumerate as transcript_enum
    from models.sketch import exact_weights

    n = 2 * spec.q if n is None else n
    check_compatible(spec, model, n)
    if certified and transcript_enum.supported(model):
        from certify.transcript.certified import check_certified

        return check_certified(spec, model, n, time_limit=time_limit, progress=progress,
                               engine=engine)
    from certify.core.budget import CpuBudget

    t0 = time.perf_counter()
    budget = None if time_limit is None else CpuBudget(time_limit)
    cap = capacity(model, spec.s, spec.q)
    res = search_collisions(spec, model, batch=batch, time_limit=time_limit, progress=progress)
    t1 = time.perf_counter()
    EW = exact_weights(model.weights)
    from certify.transcript.certified import transcript_params
    params = transcript_params(spec, model)
    base_ev = {"capacity": cap.to_json()}
    info = {**cap.display(), "context_length": n, "assignments_checked_float64": res.checked,
            "distinct_float64_transcripts": res.distinct_transcripts,
            "float64_accuracy": res.float_accuracy if res.checked else None}
    if budget is not None:
        info["budget"] = budget.record()

    verdict, reason, collision, ev = Verdict.UNKNOWN, None, None, None
    exact_checked = exact_correct = 0
    undecided = 0
    # --- candidate collisions: exact replay decides
    for a, b in res.candidates:
        ra, rb = replay(spec, model, a, EW), replay(spec, model, b, EW)
        if ra.transcript is None or rb.transcript is None:
            undecided += 1
            continue
        if ra.transcript != rb.transcript or ra.kappa == rb.kappa:
            continue                               # float proposal not confirmed
        ev, reason, collision = collision_refutation(spec, model, ra, rb, n)
        verdict = Verdict.REFUTED
        break
    injective = (res.complete and not res.candidates) if res.complete else None
    # --- no certified collision
    if verdict is not Verdict.REFUTED:
        if res.float_max_error >= 0.5:
            r = replay(spec, model, res.worst_index, EW)
            bad = None
            if r.outputs is not None:
                for i, (y, t) in enumerate(zip(r.outputs, r.kappa)):
                    fails, _ = _query_error(y, t)
                    if fails:
                        bad = (i, y, t)
                        break
            if bad is not None and isinstance(bad[1], Fraction):
                verdict = Verdict.REFUTED
                ev, reason = error_refutation(spec, model, r, *bad, n)
        if verdict is not Verdict.REFUTED:
            if not res.complete:
                reason = (f"{budget.describe() if budget else 'time limit'} exhausted: "
                          f"{res.checked} of {res.assignments} assignments checked, no "
                          "certified collision")
            elif res.candidates:
                reason = (f"{len(res.candidates)} candidate collision(s) from float64, none "
                          f"certified ({undecided} straddle a quantizer boundary)")
            elif res.float_max_error >= 0.5:
                reason = (f"no collision; float64 max query error {res.float_max_error:.3g} >= 1/2 "
                          "but the exact replay of the worst assignment did not confirm it")
            elif spec.num_assignments > exact_limit:
                reason = (f"no collision and float64 accuracy {res.float_accuracy:.4g}; exact "
                          f"check of all {spec.num_assignments} assignments skipped (limit "
                          f"{exact_limit})")
            else:
                verdict, reason, exact_checked, exact_correct, ev = _exact_all(
                    spec, model, EW, n, progress)
    t2 = time.perf_counter()
    evidence: dict[str, Any] = dict(base_ev)
    if ev is not None:
        evidence.update(ev)
    else:
        evidence.update({"type": "none", "family": family_evidence(spec, n),
                         "model": model.evidence()})
    from models.sketch import RATIONAL_MAPS
    method = ("float64 streaming transcript hashing proposes; exact replay "
              f"({'Fractions' if model.cfg.feature_map in RATIONAL_MAPS else 'arb balls'}) "
              "from the exact dyadic weights decides")
    claim = Claim(kind=ClaimKind.TRANSCRIPT, statement=None, verdict=verdict,
                  parameters=params, evidence=evidence, method=method, reason=reason,
                  timings={"search": t1 - t0, "exact": t2 - t1}, info=info)
    claims = [c for c in (bound_claim(model, spec.s, spec.q),) if c is not None] + [claim]
    return TranscriptResult(verdict, reason, cap, res, collision, injective, exact_checked,
                            exact_correct, tuple(claims),
                            {"search": t1 - t0, "exact": t2 - t1})


def _exact_all(spec, model, EW, n, progress):
    """Exact check of every query output of every assignment."""
    from tqdm.auto import tqdm

    N = spec.num_assignments
    correct = 0
    for idx in tqdm(range(N), disable=not progress, file=sys.stderr, leave=False, unit="asg"):
        r = replay(spec, model, idx, EW)
        if r.outputs is None:
            return (Verdict.UNKNOWN, f"assignment {list(r.kappa)}: {r.reason}", idx, correct, None)
        ok = True
        for i, (y, t) in enumerate(zip(r.outputs, r.kappa)):
            fails, _ = _query_error(y, t)
            if fails is None:
                return (Verdict.UNKNOWN, f"assignment {list(r.kappa)} query {i}: the output ball "
                        "touches error 1/2", idx, correct, None)
            if fails:
                ok = False
                if isinstance(y, Fraction):
                    ev, reason = error_refutation(spec, model, r, i, y, t, n)
                    return (Verdict.REFUTED, reason, idx + 1, correct, ev)
                return (Verdict.UNKNOWN, f"assignment {list(r.kappa)} query {i}: certified error "
                        ">= 1/2 from an arb ball (not exact evidence)", idx + 1, correct, None)
        correct += ok
    ev = {"type": "all", "family": family_evidence(spec, n), "model": model.evidence(),
          "exact_checked": N}
    return Verdict.PROVED, None, N, correct, ev


@dataclass(frozen=True)
class TranscriptRun:
    """One ``certify transcript`` run: the certificate, and per bit width the
    check's JSON summary (one entry without ``--sweep-bits``)."""

    certificate: Certificate
    rows: tuple[dict[str, Any], ...]
    model: QuantizedSketchModel                 # the last one built (the sweep's largest p)
    results: tuple[TranscriptResult, ...]


def run_transcript(req: ModelRequest, M: int, s: int, h: int, q: int, *, n: int | None = None,
                   bits_range: tuple[int, int] | None = None, time_limit: float | None = None,
                   exact_limit: int = DEFAULT_EXACT_LIMIT, batch: int = DEFAULT_BATCH,
                   progress: bool = False, engine=None,
                   command: Sequence[str] = ()) -> TranscriptRun:
    """The Thm 9 check of the model ``req`` names on the multilevel family
    ``(M, s, h, q)``; with ``bits_range = (lo, hi)``, once per uniform bit width
    ``p`` in ``lo..hi`` (the ``--sweep-bits`` table). ``n`` is the context
    length (default ``2q``). The certificate holds every claim made."""
    from certify.core.families import multilevel_spec

    spec = multilevel_spec(M, s, h, q)
    n = 2 * spec.q if n is None else n
    if 2 * spec.q > n:
        raise InputError(f"2q = {2 * spec.q} exceeds the context length n = {n}")
    widths = [None] if bits_range is None else list(range(bits_range[0], bits_range[1] + 1))
    rows: list[dict[str, Any]] = []
    claims: list[Claim] = []
    results: list[TranscriptResult] = []
    seeds: dict[str, int] = {}
    inputs: dict[str, str] = {}
    model = None
    for p in widths:
        model, seeds, inputs = build_model(req, spec, p)
        r = check_transcript(spec, model, n=n, time_limit=time_limit, exact_limit=exact_limit,
                             batch=batch, progress=progress,
                             engine=engine if bits_range is None else None)
        js = r.to_json()
        rows.append({"p": p, **js} if p is not None else js)
        claims.extend(r.claims)
        results.append(r)
    assert model is not None                # one bit width at least
    cert = Certificate(claims=claims, command=list(command), inputs=inputs, seeds=seeds)
    return TranscriptRun(cert, tuple(rows), model, tuple(results))
