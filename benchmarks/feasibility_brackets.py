"""Brackets on the minimal rank of one head, per family and feature class, each end
backed by a certificate that ``certify verify`` re-checks; writes
``reports/feasibility/bracket-<family>-<features>.json`` and ``brackets.md``.

Lower end: every rank ``<= lo - 1`` is excluded by the better of the chain
bounds (Lemma 4 per pair, nonnegative refinement) and the convex dual
certificate (:mod:`certify.convex_bounds`); the claim stored is the convex dual
certificate at ``lo - 1``. Upper end: the smallest rank reached by a downward
search from the one-feature-per-query construction (rank = #queries), each
rank by the SDP search (:mod:`certify.sdp_search`) and then, if that fails,
the alternating LPs, within ``--budget`` seconds each; the search stops at the
first rank where neither verifies (an honest ``unknown``, reported).

Real-feature witnesses are found in the used-pairs model (``alpha >= 0`` on the
pairs some input uses); the table also counts the (query, token) pairs of the
family where the witness's exact kernel is negative, so the paper's class
(``alpha >= 0`` on all of them) can be read off.

    .venv/bin/python benchmarks/feasibility_brackets.py [--budget 120] [--families g12,thm6,paper]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from certify.checkers import verify
from certify.core.certificate import Certificate
from certify.core.codes import greedy_packing, thm6_code
from certify.core.families import chain_family, paper51_family
from certify.feasibility.chain_bounds import chain_bound
from certify.feasibility.convex_bounds import max_certified_rank
from certify.feasibility.decide import decide
from certify.feasibility.lp_search import descend
from certify.feasibility.model import Features, build_problem, lookup_witness
from certify.feasibility.result import Outcome
from certify.feasibility.sdp_search import negative_pairs, sdp_witness

OUT = Path(__file__).resolve().parents[1] / "reports" / "feasibility"


def families(which):
    out = []
    for w in which:
        if w == "g12":
            out.append((chain_family(greedy_packing(12, 6, 3), name="greedy-12-6-3"),
                        "greedy weight-6 code at m = 12, directed distance >= 3 (10 words)"))
        elif w == "thm6":
            out.append((chain_family(thm6_code(24, limit=30), name="thm6-24-cut30"),
                        "Thm 6 construction (greedy middle-layer packing, M = 24, h = 12, "
                        "Delta = 3) cut to its first 30 words; not Thm 6's hypotheses (m >= 168)"))
        elif w == "paper":
            out.append((paper51_family(), "the paper's Sec. 5.1 family (15 words, m = 24)"))
    return out


def upper(fam, problem, feats: Features, lo: int, budget: float, log, at: int | None = None,
          sdp: bool = True):
    """Smallest verified rank in ``[lo, #queries]`` by bisection (a witness at rank r
    pads to every larger rank). Real features: the SDP keeps ``alpha >= floor`` on
    every (query, token) pair first; then the alternating LPs (used pairs).
    Returns ``((rank, how, seconds, witness), [ranks searched without success])``.
    ``at``: the upper end known from an earlier run: only that rank is searched (the
    ranks below it are not searched again; none is reported as failed)."""
    R = problem.num_rows
    w, chk = lookup_witness(problem, R, feats)
    assert chk.ok
    best = (R, "construction", 0.0, w)
    failed: list[int] = []
    bad = lo - 1
    if at is not None and at >= R:
        bad = R - 1                                           # the construction itself
    elif at is not None:
        best, bad = (at + 1, "", 0.0, None), at - 1           # one step: r = at
    while best[0] - bad > 1:
        r = (best[0] + bad) // 2
        t0 = time.perf_counter()
        w, chk, info = sdp_witness(problem, r, feats, time_limit=budget,
                                   all_pairs=feats is Features.REAL) if sdp else (None, None, {})
        how = "SDP (all pairs)" if feats is Features.REAL else "SDP"
        if w is None:
            _, w, chk = descend(problem, r, feats, time_limit=budget, seed=0)
            how = "alternating LPs"
            if w is None or chk is None or not chk.ok:
                w = None
        secs = time.perf_counter() - t0
        log(f"  {fam.name} {feats.value} r = {r}: {'verified by ' + how if w else 'no witness'} "
            f"({secs:.1f} s)")
        if w is None:
            failed.append(r)
            bad = r
        else:
            best = (r, how, secs, w)
    if best[3] is None:
        raise SystemExit(f"{fam.name} {feats.value}: no witness at the given rank {at}")
    return best, failed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=120.0, help="search seconds per rank and method")
    ap.add_argument("--families", default="g12,thm6,paper")
    ap.add_argument("--features", default="real,nonnegative")
    ap.add_argument("--table", default="brackets_table.md", help="table file under reports/feasibility")
    ap.add_argument("--no-sdp", action="store_true",
                    help="search the upper end by the alternating LPs only (no SDP first)")
    ap.add_argument("--at", default="", metavar="FEATURES=RANK,...",
                    help="re-make a bracket at upper ends known from an earlier run: search only that "
                         "rank per feature class (e.g. real=15,nonnegative=21)")
    args = ap.parse_args(argv)
    at = {k: int(v) for k, v in (item.split("=") for item in args.at.split(",") if item)}
    lines = []

    def log(s):
        print(s, flush=True)

    rows = []
    for fam, desc in families(args.families.split(",")):
        problem = build_problem(fam)
        b = chain_bound(fam)
        t0 = time.perf_counter()
        r_cvx, _ = max_certified_rank(b)
        t_cvx = time.perf_counter() - t0
        lo = max(b.max_infeasible_rank, r_cvx or 0) + 1
        log(f"{fam.name}: t = {len(b.queries)} chain queries; Lemma 4 per pair r <= {b.lemma4_rank}, "
            f"refinement r <= {b.perron_rank}, convex dual r <= {r_cvx} ({t_cvx:.1f} s)")
        for fv in args.features.split(","):
            feats = Features(fv)
            low = decide(fam, lo - 1, feats, method="sdp", bound=b)
            assert low.outcome is Outcome.INFEASIBLE
            (hi, how, secs, w), failed = upper(fam, problem, feats, lo, args.budget, log, at.get(fv),
                                               sdp=not args.no_sdp)
            high = decide(fam, hi, feats, bound=b) if how == "construction" else None
            from certify.feasibility.result import FeasibilityResult
            if high is None or high.outcome is not Outcome.FEASIBLE:
                from certify.feasibility.model import exact_check
                chk = exact_check(problem, w)
                high = FeasibilityResult(Outcome.FEASIBLE, hi, feats, fam,
                                         f"{how}, dyadic rounding, value LP, exact re-check",
                                         margin=chk.margin, bound=b, witness=w,
                                         timings={"search_s": secs})
            neg = negative_pairs(problem, high.witness)
            cert = Certificate(claims=[low.to_claim(), high.to_claim()],
                               command=["python", "benchmarks/feasibility_brackets.py",
                                        *(argv if argv is not None else sys.argv[1:])],
                               inputs={f"family:{fam.name}": fam.sha256}, seeds={"search": 0})
            path = OUT / f"bracket-{fam.name}-{feats.value}.json"
            cert.write(path)
            ver = verify.verify_file(path)
            ok = all(not c.problems for c in ver.claims)
            log(f"{fam.name} {feats.value}: [{lo}, {hi}] ({path.name}, verify: "
                f"{'ok' if ok else 'FAILED'}); witness negative on {neg} of "
                f"{problem.num_rows * problem.num_cols} (query, token) pairs")
            rows.append((fam.name, desc, feats.value, lo, hi, how, failed, neg,
                         problem.num_rows * problem.num_cols, b, r_cvx, path.name, ok))
    lines.append("| family | features | bracket | lower end (all r <= lo-1 excluded) | "
                 "upper end found by | ranks searched without success | witness alpha < 0 on | "
                 "certificate |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for (name, _desc, fv, lo, hi, how, failed, neg, npairs, b, r_cvx, fname, ok) in rows:
        lows = (f"chain: Lemma 4 {b.lemma4_rank}, refinement {b.perron_rank}; "
                f"convex dual {r_cvx}")
        lines.append(f"| {name} | {fv} | [{lo}, {hi}] | {lows} | {how} | "
                     f"{', '.join(map(str, failed)) or '-'} ({args.budget:g} s per method) | "
                     f"{neg} / {npairs} pairs | {fname}{'' if ok else ' (verify FAILED)'} |")
    print("\n".join(lines))
    (OUT / args.table).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
