"""Is there a rank-r normalized nonnegative kernel head that solves a finite family?

``python -m certify.feasibility --rank R [--family NAME|FILE] [--features real|nonnegative]
[--class paper|used-pairs] [--json] [--out CERT] [--time-limit S] [--seed N] [--sweep LO:HI]``

Model class (``--class``, recorded as ``parameters["class"]`` of every claim):
``paper`` (default) is the paper's head: ``alpha >= 0`` on every (query, token)
pair of the family and ``alpha(q, q) > 0``, extended to the whole cube by a
stored rule (:func:`certify.feasibility_model.extension_rule`); ``used-pairs``
is the relaxed model (``alpha >= 0`` only on the pairs the inputs use).
``parameters["scope"]`` says what ``rank`` is about: ``cube`` (a head on all of
``{0,1}^m`` of that rank: the extension rule costs no feature) or ``family``
(a head on the family's tokens; a paper-class ``plus-one`` witness extends to
the cube at ``rank + 1``, recorded in the evidence).

Verdicts, each re-checked exactly:

* ``infeasible`` (proved): ``r`` is at most the Lemma 3 + Lemma 4 bound derived
  from the family's own chains (:mod:`certify.feasibility_bounds`). The bound
  only uses ``alpha >= 0`` on used pairs, so it holds in both classes, and for
  the whole-cube head too (its restriction to the family is a family head);
* ``feasible`` (proved): a witness (``PhiQ``, ``PhiK``, lookup values ``g``) in
  exact rationals solves every scored position strictly
  (:mod:`certify.feasibility_model`); found by the one-feature-per-query
  construction when ``r >= #queries``, otherwise by alternating LPs
  (:mod:`solvers.factor`);
* ``unknown``: no witness within the time limit and no bound excludes ``r``.

A feasible witness at rank r pads with zero features to every larger rank, a
nonnegative witness is also a real one, and a paper-class one is a used-pairs one.
"""

from __future__ import annotations

import argparse
import enum
import json
import sys
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from certify.certificate import Certificate, Claim, ClaimKind, Verdict, q_to_str
from certify import cli, limits, outputs
from certify.errors import InputError, run_command
from certify.families import Family, load_family
from certify.feasibility_bounds import ChainBound, chain_bound
from certify.feasibility_model import (ExactCheck, FeasibilityProblem, Features, ModelClass,
                                       Witness, build_problem, lookup_witness, verify_factors)


class Outcome(str, enum.Enum):
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class FeasibilityResult:
    outcome: Outcome
    rank: int
    features: Features
    family: Family
    method: str
    margin: Fraction | None = None
    bound: ChainBound | None = None
    witness: Witness | None = None
    reason: str | None = None
    best_float_margin: float | None = None
    timings: dict = field(default_factory=dict)
    search_info: dict = field(default_factory=dict)     # LP and restart counts (diagnostics)
    model_class: ModelClass = ModelClass.PAPER

    @property
    def cube_rank(self) -> int | None:
        """Rank of the whole-cube head a paper-class witness extends to."""
        return None if self.witness is None else self.witness.cube_rank

    @property
    def scope(self) -> str:
        """What ``rank`` is about: ``cube`` when a whole-cube head of that rank is
        proved, else ``family``."""
        return "cube" if self.cube_rank is not None and self.cube_rank == self.rank else "family"

    def summary(self) -> dict[str, Any]:
        out = {"verdict": self.outcome.value, "rank": self.rank,
               "features": self.features.value, "class": self.model_class.value,
               "scope": self.scope, "cube_rank": self.cube_rank,
               "extension": None if self.witness is None or self.witness.extension is None
               else dict(self.witness.extension), "family": self.family.name,
               "sha256": self.family.sha256, "method": self.method,
               "margin": None if self.margin is None else q_to_str(self.margin),
               "margin_float": None if self.margin is None else float(self.margin),
               "lower_bound": None if self.bound is None else q_to_str(self.bound.bound),
               "lower_bound_float": None if self.bound is None else float(self.bound.bound),
               "max_infeasible_rank": None if self.bound is None else self.bound.max_infeasible_rank,
               "reason": self.reason, "timings": dict(self.timings)}
        return out

    def to_claim(self) -> Claim:
        params = {"rank": self.rank, "features": self.features.value,
                  "class": self.model_class.value, "scope": self.scope,
                  "family": self.family.name, "family_sha256": self.family.sha256,
                  "error": "1/2"}
        fam = self.family.to_json()
        if self.outcome is Outcome.INFEASIBLE:      # statements: certify.checkers.statements
            return Claim(ClaimKind.INFEASIBLE, None, Verdict.PROVED, params,
                         {"family": fam, "derivation": self.bound.to_json()},
                         self.method, None, self.timings)
        statement = None
        if self.outcome is Outcome.FEASIBLE:
            info = {"margin_float": float(self.margin), **self.search_info}
            if self.cube_rank is not None:
                info["cube_rank"] = self.cube_rank
            return Claim(ClaimKind.FEASIBLE, statement, Verdict.PROVED, params,
                         {"family": fam, "witness": self.witness.to_json(),
                          "margin": q_to_str(self.margin)}, self.method, None, self.timings,
                         info=info)
        info: dict[str, Any] = dict(self.search_info)
        if self.bound is not None:
            info["chain_bound"] = q_to_str(self.bound.bound)
        if self.best_float_margin is not None and np.isfinite(self.best_float_margin):
            info["best_float_lp_margin"] = float(self.best_float_margin)
        return Claim(ClaimKind.FEASIBLE, statement, Verdict.UNKNOWN, params, {},
                     self.method, self.reason, self.timings, info=info)


# ---------------------------------------------------------------- library

def decide(family: Family, rank: int, features: Features, *, time_limit: float = 60.0,
           seed: int = 0, progress: bool = False, problem: FeasibilityProblem | None = None,
           bound: ChainBound | None | bool = True,
           model_class: ModelClass | str = ModelClass.PAPER,
           iterations: int | None = None, method: str = "lp") -> FeasibilityResult:
    """The verdict at one rank in ``model_class``. ``bound=True`` derives the chain
    bound here; pass a precomputed one (or None) to reuse it across ranks. A given
    ``problem`` must be of ``model_class``. ``iterations``: an LP budget per rank
    step instead of the wall clock (reproducible results). ``method``: ``lp``
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
    if method != "lp" and (method == "sdp" or bound is None or rank > bound.max_infeasible_rank):
        from certify.convex_bounds import convex_result      # convex dual certificate (SDP)
        res = convex_result(family, rank, features, bound, timings, model_class=model_class)
        if res is not None:
            return res
    if bound is not None and rank <= bound.max_infeasible_rank:
        how = ("Lemma 4 (per-pair Lambda, strict)" if rank <= bound.lemma4_rank else
               "the nonnegative refinement of Lemma 4 (Delta(r) < 0)")
        return FeasibilityResult(Outcome.INFEASIBLE, rank, features, family,
                                 f"Lemma 3 chains of the family + {how}",
                                 bound=bound, timings=timings, model_class=model_class)
    problem = problem or build_problem(family, model_class)
    t1 = time.perf_counter()
    w, chk = lookup_witness(problem, rank, features)
    timings["construction_s"] = time.perf_counter() - t1
    if w is not None and chk.ok:
        return FeasibilityResult(Outcome.FEASIBLE, rank, features, family,
                                 "one feature per query token: PhiQ = I, PhiK = (2n)^-<x,z>, "
                                 "g = <x,z>; exact re-check", margin=chk.margin, bound=bound,
                                 witness=w, timings=timings, model_class=model_class)
    t2 = time.perf_counter()
    if method != "lp":                                       # PSD-lift proposals (solvers.sdp)
        from certify.sdp_search import sdp_result
        out = sdp_result(problem, rank, features, bound, timings, time_limit=time_limit,
                         seed=seed, lp_fallback=(method == "auto"))
        if out is not None:
            return out
    res, w, chk = descend(problem, rank, features, time_limit=time_limit, seed=seed,
                          progress=progress, iterations=iterations)
    timings["search_s"] = time.perf_counter() - t2
    if w is not None and chk is not None and chk.ok:
        return FeasibilityResult(Outcome.FEASIBLE, rank, features, family,
                                 f"alternating LPs from the truncated construction (last rank: "
                                 f"{res.iterations} LPs, {res.restarts} restarts), dyadic "
                                 "rounding, value LP, exact re-check",
                                 margin=chk.margin, bound=bound, witness=w, timings=timings,
                                 search_info={"lps": res.iterations, "restarts": res.restarts},
                                 model_class=model_class)
    lb = "" if bound is None else f"; the chain bounds only exclude r <= {bound.max_infeasible_rank}"
    return FeasibilityResult(Outcome.UNKNOWN, rank, features, family, "alternating LPs",
                             bound=bound, best_float_margin=res.delta,
                             search_info={"lps": res.iterations, "restarts": res.restarts},
                             reason=f"no exactly verified witness within "
                                    + (f"{iterations} LPs per rank " if iterations else
                                       f"{time_limit:g} s ")
                                    + f"(best float LP margin {res.delta:.3g}){lb}",
                             timings=timings, model_class=model_class)


def search_witness(problem: FeasibilityProblem, rank: int, features: Features, *,
                   time_limit: float, seed: int = 0, progress: bool = False,
                   init: tuple[np.ndarray, np.ndarray] | None = None,
                   iterations: int | None = None):
    """Alternating-LP search; every improving float candidate is rounded and
    checked exactly. Starts from ``init`` (float factors of a higher rank,
    truncated) when given, then random restarts. Returns
    ``(FactorResult, witness or None, check or None, float factors or None)``."""
    from solvers.factor import FactorProblem, alternating_search, truncate

    Ga, Gh = problem.constraint_matrices()
    fp = FactorProblem(problem.num_rows, problem.num_cols, problem.entries, Ga, Gh)
    nonneg = features is Features.NONNEGATIVE
    found: list = []

    def accept(P, Q, delta):
        w, chk = verify_factors(problem, P, Q, features, rank)
        if w is not None and chk is not None and chk.ok:
            found.append((w, chk, (P.copy(), Q.copy())))
            return True
        return False

    start = None
    if init is not None:
        start = truncate(fp, init[0], init[1], rank, nonneg=nonneg)
    bar = cli.time_bar(f"rank {rank} {features.value}", time_limit, progress is True)
    own_bar = bar is not None
    if progress not in (True, False):        # a bar shared by the caller (descend)
        bar = progress
    try:
        budget = {} if iterations is None else {"max_iterations": iterations}
        res = alternating_search(fp, rank, nonneg=nonneg, rng=np.random.default_rng(seed),
                                 time_limit=time_limit, accept=accept, progress=bar,
                                 init=start, **budget)
    finally:
        if own_bar:
            bar.close()
    if found:
        return res, found[-1][0], found[-1][1], found[-1][2]
    return res, None, None, None


def _construction_factors(problem: FeasibilityProblem) -> tuple[np.ndarray, np.ndarray]:
    """Float factors of the one-feature-per-query construction (rank = #queries)."""
    toks = problem.family.tokens.astype(np.float64)
    G = toks[problem.queries] @ toks[problem.keys].T                   # (R, C)
    return np.eye(problem.num_rows), (float(2 * problem.family.n) ** -G).T


def descend(problem: FeasibilityProblem, rank: int, features: Features, *, time_limit: float,
            seed: int = 0, progress: bool = False, iterations: int | None = None):
    """From the rank-#queries construction down to ``rank``, one rank at a time,
    each start the truncation of the previous solution; the remaining time goes
    to the target rank. Returns ``(FactorResult, witness, check)`` of the target."""
    if iterations is not None:               # reproducible: LP budgets, no clock
        time_limit = float("inf")
    t0 = time.perf_counter()
    cur = _construction_factors(problem)
    R = problem.num_rows
    # one bar for the whole descent, named by the rank asked for
    bar = cli.time_bar(f"rank {rank} {features.value} search", time_limit, bool(progress))
    progress = bar if bar is not None else False
    try:
        return _descend(problem, rank, features, time_limit, seed, progress, t0, cur, R,
                        iterations)
    finally:
        if bar is not None:
            bar.close()


def _descend(problem, rank, features, time_limit, seed, progress, t0, cur, R, iterations=None):
    res = w = chk = None
    for r in range(R - 1, rank - 1, -1):
        left = time_limit - (time.perf_counter() - t0)
        if left <= 0:
            break
        budget = left if r == rank else left / (r - rank + 1)
        res, w, chk, fac = search_witness(problem, r, features, time_limit=budget,
                                          seed=seed + r, progress=progress, init=cur,
                                          iterations=iterations)
        if fac is None:
            if r != rank:          # the chain broke: spend what is left at the target
                left = time_limit - (time.perf_counter() - t0)
                res, w, chk, fac = search_witness(problem, rank, features, time_limit=max(left, 0.01),
                                                  seed=seed, progress=progress, init=cur,
                                                  iterations=iterations)
            break
        cur = fac
    return res, w, chk


def _decide_task(family, r, feats, time_limit, seed, iterations, model_class, method):
    """One sweep task (module level, so a Ray worker can run it)."""
    return decide(family, r, feats, time_limit=time_limit, seed=seed, iterations=iterations,
                  model_class=model_class, method=method)


def sweep(family: Family, lo: int, hi: int, features_list: Sequence[Features], *,
          time_limit: float, seed: int, progress: bool = False,
          model_class: ModelClass | str = ModelClass.PAPER, engine=None,
          iterations: int | None = None, method: str = "lp"):
    """Every rank in ``lo..hi`` for each feature class; returns ``(results, brackets)``
    with ``brackets[features] = (largest proved-infeasible + 1, smallest proved-feasible
    or None)`` for the rank on the family. :func:`cube_brackets` gives the
    whole-cube head's. With an ``engine`` (:mod:`certify.parallel`) the (features,
    rank) tasks run as parallel tasks; results are merged in the same order."""
    model_class = ModelClass(model_class)
    problem = build_problem(family, model_class)
    bound = chain_bound(family)
    results: list[FeasibilityResult] = []
    brackets = {}
    if engine is not None and engine.uses_ray:
        tasks = [(family, r, feats, time_limit, seed, iterations, model_class, method)
                 for feats in features_list for r in range(lo, hi + 1)]
        done = iter(engine.map(_decide_task, tasks, label="feasibility"))
    for feats in features_list:
        for r in range(lo, hi + 1):
            if engine is not None and engine.uses_ray:
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
        lower = (max(infeas) + 1) if infeas else (int(bound.max_infeasible_rank) + 1 if bound else 1)
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


# ---------------------------------------------------------------- command

def _parse(argv):
    p = argparse.ArgumentParser(prog="certify feasibility", description=__doc__.split("\n")[0])
    p.add_argument("--rank", type=int, help="feature dimension r >= 1")
    p.add_argument("--family", default="paper-5.1", help="built-in family name or family file")
    p.add_argument("--features", choices=[f.value for f in Features], default=None,
                   help="feature class (default: real; --sweep runs both unless given)")
    p.add_argument("--class", dest="model_class", choices=[c.value for c in ModelClass],
                   default=ModelClass.PAPER.value,
                   help="model class: paper (alpha >= 0 on every (query, token) pair, "
                        "extended to the whole cube; default) or used-pairs (alpha >= 0 on "
                        "the pairs the inputs use)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("--out", metavar="CERT", help="write the certificate here; " + cli.OUT_FILE_HELP)
    p.add_argument("--time-limit", type=float, default=60.0,
                   help="search seconds per rank (finite, > 0; default 60)")
    p.add_argument("--seed", type=int, default=0, help="seed of the witness search (default 0)")
    p.add_argument("--sweep", metavar="LO:HI", help="run every rank in LO..HI (not with --rank)")
    cli.add_progress(p)
    p.add_argument("--method", choices=["lp", "sdp", "auto"], default="lp",
                   help="lp: chain bounds + alternating LPs; sdp: convex dual certificates and "
                        "PSD-lift (SDP) witness proposals; auto: chain bounds, then both")
    # parallel sweeps (certify.parallel) and reproducible budgets
    from certify.parallel import add_arguments
    add_arguments(p)
    p.add_argument("--iterations", type=int, default=None,
                   help="LP budget per rank step instead of --time-limit (reproducible "
                        "whatever the worker count)")
    return p.parse_args(argv)


def _sweep_range(text: str) -> tuple[int, int]:
    try:
        a, b = (int(v) for v in text.split(":"))
    except ValueError:
        raise InputError(f"--sweep must be LO:HI with integers, got {text!r}") from None
    if a < 1 or b < a:
        raise InputError(f"--sweep needs 1 <= LO <= HI, got {text!r}")
    return a, b


def _line(res: FeasibilityResult) -> str:
    head = (f"{res.family.name} rank {res.rank} {res.features.value} "
            f"[class {res.model_class.value}]: {res.outcome.value}")
    if hasattr(res, "line_detail"):                          # convex dual / SDP results
        detail = res.line_detail()
    elif res.outcome is Outcome.INFEASIBLE:
        b = res.bound
        detail = (f"(proved) ranks <= {b.max_infeasible_rank} excluded (Lemma 4 bound "
                  f"{q_to_str(b.bound)} ~ {float(b.bound):.4f}; nonnegative refinement with "
                  f"rho = {q_to_str(b.rho)}: r <= {b.perron_rank}) [{res.method}]")
    elif res.outcome is Outcome.FEASIBLE:
        detail = f"(proved) exact margin {float(res.margin):.6g} [{res.method}]"
        if res.cube_rank is not None:
            detail += (f"; whole cube: rank {res.cube_rank} "
                       f"({res.witness.extension['rule']} rule)")
    else:
        detail = f"- {res.reason}"
    secs = sum(res.timings.values())
    return f"{head} {detail}; {secs:.2f} s"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    limits.check_time_limit(args.time_limit)
    if args.iterations is not None and args.iterations < 1:
        raise InputError(f"--iterations must be >= 1, got {args.iterations}")
    if args.rank is not None and args.sweep:
        raise InputError("give either --rank R or --sweep LO:HI, not both")
    if args.rank is not None:
        limits.check_int("rank", args.rank, "--rank")
    if args.sweep:
        limits.check_int("rank", _sweep_range(args.sweep)[1], "--sweep HI")
    if args.out:
        outputs.check_out_file(args.out)
    progress = cli.show_progress(args.no_progress)
    model_class = ModelClass(args.model_class)
    family = load_family(args.family)
    if args.sweep:
        lo, hi = _sweep_range(args.sweep)
        feats = [Features(args.features)] if args.features else [Features.REAL, Features.NONNEGATIVE]
        from certify.parallel import engine_from_args

        with engine_from_args(args, progress=progress) as engine:
            results, brackets = sweep(family, lo, hi, feats, time_limit=args.time_limit,
                                      seed=args.seed, progress=progress,
                                      model_class=model_class, engine=engine,
                                      iterations=args.iterations, method=args.method)
    else:
        if args.rank is None:
            raise InputError("give --rank R (or --sweep LO:HI)")
        if args.rank < 1:
            raise InputError(f"rank must be an integer >= 1, got {args.rank}")
        results = [decide(family, args.rank, Features(args.features or "real"),
                          time_limit=args.time_limit, seed=args.seed,
                          progress=progress, model_class=model_class,
                          iterations=args.iterations, method=args.method)]
        brackets = None
    for res in results:
        print(_line(res), file=sys.stderr)
    cube = None
    if brackets:
        cube = cube_brackets(results, brackets) if model_class is ModelClass.PAPER else None
        for k, (a, b) in brackets.items():
            line = (f"{family.name} {k} [class {model_class.value}]: minimum rank on the family "
                    f"in [{a}, {b if b is not None else '?'}]")
            if cube is not None:
                c = cube[k][1]
                line += f"; whole-cube head in [{a}, {c if c is not None else '?'}]"
            print(line, file=sys.stderr)
    cert = Certificate(claims=[r.to_claim() for r in results],
                       command=["certify", "feasibility",
                                *(argv if argv is not None else sys.argv[1:])],
                       inputs={f"family:{family.name}": family.sha256}, seeds={"search": args.seed})
    if args.out:
        outputs.write_file(args.out, cert.dumps())
    if args.json:
        if brackets is None:
            doc = results[0].summary()
        else:
            doc = {"family": family.name, "sha256": family.sha256,
                   "class": model_class.value,
                   "results": [r.summary() for r in results],
                   "bracket": {k: list(v) for k, v in brackets.items()},
                   "bracket_cube": None if cube is None else {k: list(v)
                                                              for k, v in cube.items()}}
        print(json.dumps(doc, indent=1))
    return cert.exit_code()


if __name__ == "__main__":
    from certify import feasibility as _module      # one copy of the result classes for the
    sys.exit(run_command("certify.feasibility", _module.main))   # lazily imported searches
