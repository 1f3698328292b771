"""Is there a rank-r normalized nonnegative kernel head that solves a finite family?

``python -m certify.feasibility --rank R [--family NAME|FILE] [--features real|nonnegative]
[--json] [--out CERT] [--time-limit S] [--seed N] [--sweep LO:HI]``

Verdicts, each re-checked exactly:

* ``infeasible`` (proved): ``r`` is at most the Lemma 3 + Lemma 4 bound derived
  from the family's own chains (:mod:`certify.feasibility_bounds`);
* ``feasible`` (proved): a witness (``PhiQ``, ``PhiK``, lookup values ``g``) in
  exact rationals solves every scored position strictly
  (:mod:`certify.feasibility_model`); found by the one-feature-per-query
  construction when ``r >= #queries``, otherwise by alternating LPs
  (:mod:`solvers.factor`);
* ``unknown``: no witness within the time limit and no bound excludes ``r``.

A feasible witness at rank r pads with zero features to every larger rank, and
a nonnegative witness is also a real one.
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
from certify.errors import InputError, run_command
from certify.families import Family, load_family
from certify.feasibility_bounds import ChainBound, chain_bound
from certify.feasibility_model import (ExactCheck, FeasibilityProblem, Features, Witness,
                                       build_problem, lookup_witness, verify_factors)


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

    def summary(self) -> dict[str, Any]:
        out = {"verdict": self.outcome.value, "rank": self.rank,
               "features": self.features.value, "family": self.family.name,
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
                  "family": self.family.name, "family_sha256": self.family.sha256,
                  "error": "1/2"}
        fam = self.family.to_json()
        if self.outcome is Outcome.INFEASIBLE:
            return Claim(ClaimKind.INFEASIBLE,
                         f"no rank-{self.rank} {self.features.value}-feature head solves "
                         f"{self.family.name} with error < 1/2", Verdict.PROVED, params,
                         {"family": fam, "derivation": self.bound.to_json()},
                         self.method, None, self.timings)
        statement = (f"a rank-{self.rank} {self.features.value}-feature head solves "
                     f"{self.family.name} with error < 1/2")
        if self.outcome is Outcome.FEASIBLE:
            return Claim(ClaimKind.FEASIBLE, statement, Verdict.PROVED, params,
                         {"family": fam, "witness": self.witness.to_json(),
                          "margin": q_to_str(self.margin)}, self.method, None, self.timings,
                         info={"margin_float": float(self.margin), **self.search_info})
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
           bound: ChainBound | None | bool = True, method: str = "lp") -> FeasibilityResult:
    """The verdict at one rank. ``bound=True`` derives the chain bound here; pass a
    precomputed one (or None) to reuse it across ranks."""
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 1:
        raise InputError(f"rank must be an integer >= 1, got {rank!r}")
    rank = int(rank)
    features = Features(features)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    if bound is True:
        bound = chain_bound(family)
    timings["lower_bound_s"] = time.perf_counter() - t0
    if method not in ("lp", "sdp", "auto"):
        raise InputError(f"method must be lp, sdp or auto, got {method!r}")
    if method != "lp" and (method == "sdp" or bound is None or rank > bound.max_infeasible_rank):
        from certify.convex_bounds import convex_result      # convex dual certificate (SDP)
        res = convex_result(family, rank, features, bound, timings)
        if res is not None:
            return res
    if bound is not None and rank <= bound.max_infeasible_rank:
        how = ("Lemma 4 (per-pair Lambda, strict)" if rank <= bound.lemma4_rank else
               "the nonnegative refinement of Lemma 4 (Delta(r) < 0)")
        return FeasibilityResult(Outcome.INFEASIBLE, rank, features, family,
                                 f"Lemma 3 chains of the family + {how}",
                                 bound=bound, timings=timings)
    problem = problem or build_problem(family)
    t1 = time.perf_counter()
    w, chk = lookup_witness(problem, rank, features)
    timings["construction_s"] = time.perf_counter() - t1
    if w is not None and chk.ok:
        return FeasibilityResult(Outcome.FEASIBLE, rank, features, family,
                                 "one feature per query token: PhiQ = I, PhiK = (2n)^-<x,z>, "
                                 "g = <x,z>; exact re-check", margin=chk.margin, bound=bound,
                                 witness=w, timings=timings)
    t2 = time.perf_counter()
    if method != "lp":                                       # PSD-lift proposals (solvers.sdp)
        from certify.sdp_search import sdp_result
        out = sdp_result(problem, rank, features, bound, timings, time_limit=time_limit,
                         seed=seed, lp_fallback=(method == "auto"))
        if out is not None:
            return out
    res, w, chk = descend(problem, rank, features, time_limit=time_limit, seed=seed,
                          progress=progress)
    timings["search_s"] = time.perf_counter() - t2
    if w is not None and chk is not None and chk.ok:
        return FeasibilityResult(Outcome.FEASIBLE, rank, features, family,
                                 f"alternating LPs from the truncated construction (last rank: "
                                 f"{res.iterations} LPs, {res.restarts} restarts), dyadic "
                                 "rounding, value LP, exact re-check",
                                 margin=chk.margin, bound=bound, witness=w, timings=timings,
                                 search_info={"lps": res.iterations, "restarts": res.restarts})
    lb = "" if bound is None else f"; the chain bounds only exclude r <= {bound.max_infeasible_rank}"
    return FeasibilityResult(Outcome.UNKNOWN, rank, features, family, "alternating LPs",
                             bound=bound, best_float_margin=res.delta,
                             search_info={"lps": res.iterations, "restarts": res.restarts},
                             reason=f"no exactly verified witness within {time_limit:g} s "
                                    f"(best float LP margin {res.delta:.3g}){lb}",
                             timings=timings)


def search_witness(problem: FeasibilityProblem, rank: int, features: Features, *,
                   time_limit: float, seed: int = 0, progress: bool = False,
                   init: tuple[np.ndarray, np.ndarray] | None = None):
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
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(desc=f"rank {rank} {features.value}", unit="LP", file=sys.stderr,
                   leave=False)
    try:
        res = alternating_search(fp, rank, nonneg=nonneg, rng=np.random.default_rng(seed),
                                 time_limit=time_limit, accept=accept, progress=bar,
                                 init=start)
    finally:
        if bar is not None:
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
            seed: int = 0, progress: bool = False):
    """From the rank-#queries construction down to ``rank``, one rank at a time,
    each start the truncation of the previous solution; the remaining time goes
    to the target rank. Returns ``(FactorResult, witness, check)`` of the target."""
    t0 = time.perf_counter()
    cur = _construction_factors(problem)
    R = problem.num_rows
    res = w = chk = None
    for r in range(R - 1, rank - 1, -1):
        left = time_limit - (time.perf_counter() - t0)
        if left <= 0:
            break
        budget = left if r == rank else left / (r - rank + 1)
        res, w, chk, fac = search_witness(problem, r, features, time_limit=budget,
                                          seed=seed + r, progress=progress, init=cur)
        if fac is None:
            if r != rank:          # the chain broke: spend what is left at the target
                left = time_limit - (time.perf_counter() - t0)
                res, w, chk, fac = search_witness(problem, rank, features, time_limit=max(left, 0.01),
                                                  seed=seed, progress=progress, init=cur)
            break
        cur = fac
    return res, w, chk


def sweep(family: Family, lo: int, hi: int, features_list: Sequence[Features], *,
          time_limit: float, seed: int, progress: bool = False, method: str = "lp"):
    """Every rank in ``lo..hi`` for each class; returns ``(results, brackets)`` with
    ``brackets[class] = (largest proved-infeasible + 1, smallest proved-feasible or None)``."""
    problem = build_problem(family)
    bound = chain_bound(family)
    results: list[FeasibilityResult] = []
    brackets = {}
    for feats in features_list:
        for r in range(lo, hi + 1):
            results.append(decide(family, r, feats, time_limit=time_limit, seed=seed,
                                  progress=progress, problem=problem, bound=bound,
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


# ---------------------------------------------------------------- command

def _parse(argv):
    p = argparse.ArgumentParser(prog="certify.feasibility", description=__doc__.split("\n")[0])
    p.add_argument("--rank", type=int, help="feature dimension r >= 1")
    p.add_argument("--family", default="paper-5.1", help="built-in family name or family file")
    p.add_argument("--features", choices=[f.value for f in Features], default=None,
                   help="feature class (default: real; --sweep runs both unless given)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("--out", help="write the certificate here (atomically)")
    p.add_argument("--time-limit", type=float, default=60.0, help="search seconds per rank")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sweep", metavar="LO:HI", help="run every rank in LO..HI")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--method", choices=["lp", "sdp", "auto"], default="lp",
                   help="lp: chain bounds + alternating LPs; sdp: convex dual certificates and "
                        "PSD-lift (SDP) witness proposals; auto: chain bounds, then both")
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
    head = f"{res.family.name} rank {res.rank} {res.features.value}: {res.outcome.value}"
    if hasattr(res, "line_detail"):                          # convex dual / SDP results
        detail = res.line_detail()
    elif res.outcome is Outcome.INFEASIBLE:
        b = res.bound
        detail = (f"(proved) ranks <= {b.max_infeasible_rank} excluded (Lemma 4 bound "
                  f"{q_to_str(b.bound)} ~ {float(b.bound):.4f}; nonnegative refinement with "
                  f"rho = {q_to_str(b.rho)}: r <= {b.perron_rank}) [{res.method}]")
    elif res.outcome is Outcome.FEASIBLE:
        detail = f"(proved) exact margin {float(res.margin):.6g} [{res.method}]"
    else:
        detail = f"- {res.reason}"
    secs = sum(res.timings.values())
    return f"{head} {detail}; {secs:.2f} s"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    if args.time_limit is not None and args.time_limit <= 0:
        raise InputError(f"--time-limit must be positive, got {args.time_limit}")
    family = load_family(args.family)
    if args.sweep:
        lo, hi = _sweep_range(args.sweep)
        feats = [Features(args.features)] if args.features else [Features.REAL, Features.NONNEGATIVE]
        results, brackets = sweep(family, lo, hi, feats, time_limit=args.time_limit,
                                  seed=args.seed, progress=not args.no_progress,
                                  method=args.method)
    else:
        if args.rank is None:
            raise InputError("give --rank R (or --sweep LO:HI)")
        if args.rank < 1:
            raise InputError(f"rank must be an integer >= 1, got {args.rank}")
        results = [decide(family, args.rank, Features(args.features or "real"),
                          time_limit=args.time_limit, seed=args.seed,
                          progress=not args.no_progress, method=args.method)]
        brackets = None
    for res in results:
        print(_line(res), file=sys.stderr)
    if brackets:
        for k, (a, b) in brackets.items():
            print(f"{family.name} {k}: minimum rank in [{a}, {b if b is not None else '?'}]",
                  file=sys.stderr)
    cert = Certificate(claims=[r.to_claim() for r in results],
                       command=["python", "-m", "certify.feasibility",
                                *(argv if argv is not None else sys.argv[1:])],
                       inputs={f"family:{family.name}": family.sha256}, seeds={"search": args.seed})
    if args.out:
        cert.write(args.out)
    if args.json:
        if brackets is None:
            doc = results[0].summary()
        else:
            doc = {"family": family.name, "sha256": family.sha256,
                   "results": [r.summary() for r in results],
                   "bracket": {k: list(v) for k, v in brackets.items()}}
        print(json.dumps(doc, indent=1))
    return cert.exit_code()


if __name__ == "__main__":
    from certify import feasibility as _module      # one copy of the result classes for the
    sys.exit(run_command("certify.feasibility", _module.main))   # lazily imported searches
