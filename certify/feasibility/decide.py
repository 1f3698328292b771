"""Is there a rank-r normalized nonnegative kernel head that solves a finite family?

``python -m certify.feasibility --rank R [--family NAME|FILE] [--features real|nonnegative]
[--class paper|used-pairs] [--json] [--out CERT] [--time-limit S] [--seed N] [--sweep LO:HI]``

Model class (``--class``, recorded as ``parameters["class"]`` of every claim):
``paper`` (default) is the paper's head: ``alpha >= 0`` on every (query, token)
pair of the family and ``alpha(q, q) > 0``, extended to the whole cube by a
stored rule (:func:`certify.feasibility.model.extension_rule`); ``used-pairs``
is the relaxed model (``alpha >= 0`` only on the pairs the inputs use).
``parameters["scope"]`` says what ``rank`` is about: ``cube`` (a head on all of
``{0,1}^m`` of that rank: the extension rule costs no feature) or ``family``
(a head on the family's tokens; a paper-class ``plus-one`` witness extends to
the cube at ``rank + 1``, recorded in the evidence).

Verdicts, each re-checked exactly:

* ``infeasible`` (proved): ``r`` is at most the Lemma 3 + Lemma 4 bound derived
  from the family's own chains (:mod:`certify.feasibility.chain_bounds`). The bound
  only uses ``alpha >= 0`` on used pairs, so it holds in both classes, and for
  the whole-cube head too (its restriction to the family is a family head);
* ``feasible`` (proved): a witness (``PhiQ``, ``PhiK``, lookup values ``g``) in
  exact rationals solves every scored position strictly
  (:mod:`certify.feasibility.model`); found by the one-feature-per-query
  construction when ``r >= #queries``, otherwise by alternating LPs
  (:mod:`solvers.factor`);
* ``unknown``: no witness within the budget and no bound excludes ``r``.

``time_limit`` is a budget of CPU seconds of the process running the search
(:mod:`certify.core.budget`; in a parallel sweep, the worker's), checked between
solves, so a verdict does not depend on the machine's load; ``iterations``
replaces it by a count of LPs per rank step. Either is recorded in the claim's
``info["budget"]``, and an ``unknown`` reason says "CPU-second budget of N s
exhausted".

A feasible witness at rank r pads with zero features to every larger rank, a
nonnegative witness is also a real one, and a paper-class one is a used-pairs one.
"""

from __future__ import annotations

import time
from typing import Literal, Sequence

import numpy as np

from certify.core.budget import CpuBudget
from certify.core.errors import InputError
from certify.core.families import Family
from certify.feasibility.chain_bounds import ChainBound, chain_bound
from certify.feasibility.lp_search import descend
from certify.feasibility.model import FeasibilityProblem, Features, ModelClass, build_problem, lookup_witness
from certify.feasibility.result import FeasibilityResult, Outcome


def decide(family: Family, rank: int, features: Features, *, time_limit: float = 60.0,
           seed: int = 0, progress: bool = False, problem: FeasibilityProblem | None = None,
           bound: ChainBound | None | Literal[True] = True,
           model_class: ModelClass | str = ModelClass.PAPER,
           iterations: int | None = None, method: str = "lp") -> FeasibilityResult:
    """The verdict at one rank in ``model_class``. ``bound=True`` derives the chain
    bound here; pass a precomputed one (or None) to reuse it across ranks. A given
    ``problem`` must be of ``model_class``. ``time_limit``: CPU seconds of this
    process for the witness search. ``iterations``: an LP budget per rank step
    instead (reproducible results). ``method``: ``lp``
    (chain bounds, alternating LPs), ``sdp`` (convex dual certificates, PSD-lift
    proposals) or ``auto`` (both)."""
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 1:
        raise InputError(f"rank must be an integer >= 1, got {rank!r}")
    rank = int(rank)
    features = Features(features)
    model_class = ModelClass(model_class)
    if problem is not None and problem.model_class is not model_class:
        raise ValueError(f"problem is of class {problem.model_class.value}, "
                         f"asked {model_class.value}")
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    if bound is True:
        bound = chain_bound(family)
    timings["lower_bound_s"] = time.perf_counter() - t0
    if method not in ("lp", "sdp", "auto"):
        raise InputError(f"method must be lp, sdp or auto, got {method!r}")
    excluded = 0 if bound is None else bound.max_infeasible_rank_for(features)
    if method != "lp" and (method == "sdp" or bound is None or rank > excluded):
        from certify.feasibility.convex_bounds import convex_result  # convex dual certificate (SDP)
        res = convex_result(family, rank, features, bound, timings, model_class=model_class)
        if res is not None:
            return res
    if bound is not None and rank <= excluded:
        how = ("Lemma 4 (per-pair Lambda, strict)" if rank <= bound.lemma4_rank else
               "the nonnegative refinement of Lemma 4 (Delta(r) < 0)"
               if rank <= bound.max_infeasible_rank else
               "the packing lemma on nonnegative features (kappa^2 = "
               f"{bound.kappa_sq}: {len(bound.queries)} feature-share vectors cannot live in "
               f"R^{rank})")
        return FeasibilityResult(Outcome.INFEASIBLE, rank, features, family,
                                 f"Lemma 3 chains of the family + {how}",
                                 bound=bound, timings=timings, model_class=model_class)
    problem = problem or build_problem(family, model_class)
    t1 = time.perf_counter()
    w, chk = lookup_witness(problem, rank, features)
    timings["construction_s"] = time.perf_counter() - t1
    if w is not None and chk is not None and chk.ok:
        return FeasibilityResult(Outcome.FEASIBLE, rank, features, family,
                                 "one feature per query token: PhiQ = I, PhiK = (2n)^-<x,z>, "
                                 "g = <x,z>; exact re-check", margin=chk.margin, bound=bound,
                                 witness=w, timings=timings, model_class=model_class)
    t2 = time.perf_counter()
    budget = CpuBudget(float("inf") if iterations is not None else time_limit)
    if method != "lp":                                       # PSD-lift proposals (solvers.sdp)
        from certify.feasibility.sdp_search import sdp_result
        out = sdp_result(problem, rank, features, bound, timings, time_limit=time_limit,
                         seed=seed, lp_fallback=(method == "auto"))
        if out is not None:
            return out
    # after the SDP proposals of ``auto`` (half the budget, which a solve may overrun)
    # the LPs get what is left, never less than half
    left = budget.left() if method == "lp" else max(budget.left(), budget.seconds / 2)
    res, w, chk = descend(problem, rank, features, time_limit=left,
                          seed=seed, progress=progress, iterations=iterations)
    timings["search_s"] = time.perf_counter() - t2
    lps, restarts = (res.iterations, res.restarts) if res is not None else (0, 0)
    info = {"lps": lps, "restarts": restarts,
            "budget": {"kind": "lp_iterations", "limit": iterations}
            if iterations is not None else budget.record()}
    if w is not None and chk is not None and chk.ok and w.rank == rank:
        return FeasibilityResult(Outcome.FEASIBLE, rank, features, family,
                                 f"alternating LPs from the truncated construction (last rank: "
                                 f"{lps} LPs, {restarts} restarts), dyadic "
                                 "rounding, value LP, exact re-check",
                                 margin=chk.margin, bound=bound, witness=w, timings=timings,
                                 search_info=info, model_class=model_class)
    lb = "" if bound is None else f"; the chain bounds only exclude r <= {excluded}"
    delta = res.delta if res is not None else float("-inf")
    return FeasibilityResult(Outcome.UNKNOWN, rank, features, family, "alternating LPs",
                             bound=bound, best_float_margin=delta, search_info=info,
                             reason="no exactly verified witness: "
                                    + (f"budget of {iterations} LPs per rank step used"
                                       if iterations is not None else budget.spent())
                                    + f" (best float LP margin {delta:.3g}){lb}",
                             timings=timings, model_class=model_class)


def _decide_task(family, r, feats, time_limit, seed, iterations, model_class, method):
    """One sweep task (module level, so a Ray worker can run it)."""
    return decide(family, r, feats, time_limit=time_limit, seed=seed, iterations=iterations,
                  model_class=model_class, method=method)


#: CPU seconds of one alternating LP on paper-5.1 (4404 rows, 826-1190 columns;
#: 0.08-0.9 s measured), scaled by the problem's constraint rows for others
_LP_S_PER_ROW = 0.3 / 4404


def _predicted_costs(problem: FeasibilityProblem, bound: ChainBound | None,
                     tasks: Sequence[tuple]) -> list[float] | None:
    """CPU seconds each sweep task is predicted to take, for the engine's choice
    between one process and Ray: next to nothing where a chain bound excludes the
    rank or the construction reaches it; otherwise the search budget (its time
    limit, or its LPs: ``iterations`` per rank step from the construction down)."""
    Ga, _ = problem.constraint_matrices()
    lp_s = _LP_S_PER_ROW * (Ga.shape[0] + problem.num_rows + 3 * len(problem.entries))
    out = []
    for _, r, feats, time_limit, _, iterations, _, method in tasks:
        excluded = 0 if bound is None else bound.max_infeasible_rank_for(feats)
        if (r <= excluded and method == "lp") or r >= problem.num_rows:
            out.append(0.05)
        elif iterations is not None:
            out.append(lp_s * iterations * max(1, problem.num_rows - r))
        else:
            out.append(float(time_limit))
    return out


def sweep(family: Family, lo: int, hi: int, features_list: Sequence[Features], *,
          time_limit: float, seed: int, progress: bool = False,
          model_class: ModelClass | str = ModelClass.PAPER, engine=None,
          iterations: int | None = None, method: str = "lp"):
    """Every rank in ``lo..hi`` for each feature class; returns ``(results, brackets)``
    with ``brackets[features] = (largest proved-infeasible + 1, smallest proved-feasible
    or None)`` for the rank on the family. :func:`cube_brackets` gives the
    whole-cube head's. With an ``engine`` asked for more than one process
    (:mod:`certify.core.engine`) the (features, rank) tasks go to it with their
    predicted costs (it runs them here when a local Ray would not pay); results are
    merged in the same order."""
    model_class = ModelClass(model_class)
    problem = build_problem(family, model_class)
    bound = chain_bound(family)
    results: list[FeasibilityResult] = []
    brackets = {}
    parallel = engine is not None and engine.parallel
    if parallel:
        tasks = [(family, r, feats, time_limit, seed, iterations, model_class, method)
                 for feats in features_list for r in range(lo, hi + 1)]
        done = iter(engine.map(_decide_task, tasks, label="feasibility",
                               cost_s=_predicted_costs(problem, bound, tasks)))
    for feats in features_list:
        for r in range(lo, hi + 1):
            if parallel:
                results.append(next(done))
                continue
            results.append(decide(family, r, feats, time_limit=time_limit, seed=seed,
                                  progress=progress, problem=problem, bound=bound,
                                  model_class=model_class, iterations=iterations,
                                  method=method))
        mine = [x for x in results if x.features is feats]
        infeas = [x.rank for x in mine if x.outcome is Outcome.INFEASIBLE]
        feas = [x.rank for x in mine if x.outcome is Outcome.FEASIBLE]
        if feats is Features.REAL:          # a nonnegative witness is a real one
            feas += [x.rank for x in results if x.features is Features.NONNEGATIVE
                     and x.outcome is Outcome.FEASIBLE]
        lower = (max(infeas) + 1) if infeas else \
            (int(bound.max_infeasible_rank_for(feats)) + 1 if bound else 1)
        brackets[feats.value] = (lower, min(feas) if feas else None)
    return results, brackets


def cube_brackets(results: Sequence[FeasibilityResult],
                  brackets: dict) -> dict[str, tuple[int, int | None]]:
    """Brackets for the whole-cube head of the paper's class: the lower end is the
    family's (a cube head restricts to a family head), the upper end the least
    ``cube_rank`` of a proved witness (its rank, or rank + 1 under ``plus-one``)."""
    out = {}
    for feats, (lower, _) in brackets.items():
        ok = {feats} | ({Features.NONNEGATIVE.value} if feats == Features.REAL.value else set())
        cube = [x.cube_rank for x in results if x.outcome is Outcome.FEASIBLE
                and x.features.value in ok and x.cube_rank is not None]
        out[feats] = (lower, min(cube) if cube else None)
    return out
