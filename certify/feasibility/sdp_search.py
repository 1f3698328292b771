"""SDP witness search for ``certify feasibility --method sdp|auto``.

The PSD lift of :mod:`solvers.sdp` proposes a kernel ``K`` on the family's
(query, key) pairs (values ``g`` eliminated by ``H = alpha * g``), driven to rank
``r`` by truncated-nuclear-norm reweighting. Each proposal is only a start:

1. round: the truncated SVD of ``K`` to rank ``r`` (clipped for nonnegative
   features);
2. check: rationalize (dyadic), re-fit the values by the value LP and re-check
   every scored position exactly (:func:`certify.feasibility.model.verify_factors`);
3. polish: when the rounded point fails, a short alternating-LP run
   (:func:`certify.feasibility.lp_search.search_witness`) started from it, whose
   candidates go through the same exact check.

Only an exactly checked witness yields ``feasible`` (proved). Every
``time_limit`` here is a CPU-second budget of this process
(:mod:`certify.core.budget`), checked between solves; Clarabel stops a solve at
its own iteration limit, never at a clock.
"""

from __future__ import annotations

import time
from typing import Any

from certify.core.budget import CpuBudget
from certify.feasibility.lp_search import search_witness
from certify.feasibility.model import FeasibilityProblem, Features, verify_factors
from certify.feasibility.result import FeasibilityResult, Outcome


def sdp_witness(problem: FeasibilityProblem, rank: int, features: Features, *,
                time_limit: float, seed: int = 0, fraction: float = 0.05,
                iterations: int = 12, polish_s: float = 5.0, solver: str = "CLARABEL",
                all_pairs: bool = False):
    """Returns ``(witness, check, info)``; ``witness`` is None when nothing verified.
    ``all_pairs``: the lift keeps ``alpha >= floor`` on every (query, key) pair, not
    only the used ones, and a witness is accepted only when its exact kernel is
    ``>= 0`` on all of them (:func:`negative_pairs`); the LP polish, which only
    sees used pairs, is then skipped."""
    from solvers.factor import FactorProblem
    from solvers.sdp import reweighted_lift, round_to_rank

    budget = CpuBudget(time_limit)
    Ga, Gh = problem.constraint_matrices()
    fp = FactorProblem(problem.num_rows, problem.num_cols, problem.entries, Ga, Gh)
    nonneg = features is Features.NONNEGATIVE
    info: dict[str, Any] = {"sdp_solves": 0, "polish_lps": 0, "tail": None}
    gen = reweighted_lift(fp, nonneg=nonneg, fraction=fraction, iterations=iterations,
                          rank=rank, solver=solver, all_nonneg=all_pairs,
                          time_limit=budget.left)
    for res in gen:
        info["sdp_solves"] += 1
        sv = res.singular_values
        if res.K is None or sv is None:                 # never: reweighted_lift yields solved lifts only
            continue
        info["tail"] = float(sv[rank:].sum() / max(sv[0], 1e-300)) if sv.size > rank else 0.0
        P, Q = round_to_rank(res.K, rank, nonneg=nonneg)
        w, chk = verify_factors(problem, P, Q, features, rank)
        if w is not None and chk is not None and chk.ok and (
                not all_pairs or negative_pairs(problem, w) == 0):
            info["found_by"] = "rounding"
            return w, chk, info
        if all_pairs:
            continue
        left = budget.left()
        if left <= 0:
            break
        fr, w, chk, _ = search_witness(problem, rank, features, time_limit=min(polish_s, left),
                                       seed=seed, init=(P, Q))
        info["polish_lps"] += fr.iterations
        if w is not None and chk is not None and chk.ok:
            info["found_by"] = "rounding + LP polish"
            return w, chk, info
        if budget.exhausted():
            break
    return None, None, info


def negative_pairs(problem: FeasibilityProblem, w) -> int:
    """How many (query, key) pairs of the family -- all of them, used or not --
    have an exact kernel value ``alpha < 0``."""
    from fractions import Fraction

    bad = 0
    for x in problem.queries:
        for z in problem.keys:
            a = sum((p * q for p, q in zip(w.phi_q[int(x)], w.phi_k[int(z)])), Fraction(0))
            bad += a < 0
    return bad


def sdp_result(problem: FeasibilityProblem, rank: int, features: Features, bound, timings: dict,
               *, time_limit: float, seed: int = 0, lp_fallback: bool = False):
    """A :class:`FeasibilityResult` from the SDP search: ``feasible`` (proved) when a
    proposal verifies; ``unknown`` when it does not and ``lp_fallback`` is False;
    None (let the alternating LPs run) when it does not and ``lp_fallback`` is True."""
    t0 = time.perf_counter()
    budget = CpuBudget(time_limit / 2 if lp_fallback else time_limit)
    try:
        # real features: first with alpha >= 0 on every (query, token) pair (the
        # paper's class on the family), then on the used pairs only
        w, chk, info = sdp_witness(problem, rank, features, seed=seed,
                                   time_limit=budget.seconds * (2 / 3 if features is Features.REAL else 1),
                                   all_pairs=features is Features.REAL)
        if w is not None and features is Features.REAL:
            info["found_by"] += ", alpha >= 0 on all (query, token) pairs"
        left = budget.left()
        if w is None and features is Features.REAL and left > 0:
            w, chk, info = sdp_witness(problem, rank, features, seed=seed, time_limit=left)
    except ImportError as exc:                      # no cvxpy: not a proof of anything
        w, chk, info = None, None, {"error": str(exc)}
    timings = dict(timings, sdp_s=time.perf_counter() - t0)
    info["budget"] = budget.record()
    if w is not None:
        return FeasibilityResult(Outcome.FEASIBLE, rank, features, problem.family,
                                 f"SDP: PSD lift of the kernel, truncated-nuclear-norm "
                                 f"reweighting (Clarabel, {info['sdp_solves']} solves), rank-{rank} "
                                 f"SVD rounding ({info['found_by']}), dyadic rationals, value LP, "
                                 "exact re-check", margin=chk.margin, bound=bound, witness=w,
                                 timings=timings, search_info=info,
                                 model_class=problem.model_class)
    if lp_fallback:
        return None
    lb = "" if bound is None else \
        f"; the chain bounds only exclude r <= {bound.max_infeasible_rank_for(features)}"
    tail = info.get("tail")
    return FeasibilityResult(Outcome.UNKNOWN, rank, features, problem.family,
                             "SDP: PSD lift, truncated-nuclear-norm reweighting", bound=bound,
                             search_info=info, timings=timings, model_class=problem.model_class,
                             reason=f"no exactly verified witness from the SDP proposals: "
                                    f"{budget.spent()} ({info.get('sdp_solves', 0)} solves, "
                                    f"relative singular-value tail past r: "
                                    f"{'n/a' if tail is None else f'{tail:.3g}'}){lb}")

