"""Witness search below the known ranks of paper-5.1, and the Perron lower bound.

For each requested ``RANK:FEATURES`` the script (fixed seed, time limit per rank)
1. walks down from the one-feature-per-query construction with the alternating
   LPs of :func:`certify.feasibility.search_witness` (each rank starts from the
   truncation of the previous witness) until the chain breaks;
2. at the target rank runs :func:`certify.witness_search.smooth_search`
   (soft-min margin, L-BFGS over PhiQ, PhiK, g; LP polish), first from the
   truncated last witness, then from random starts;
3. writes every exactly verified witness as a FEASIBLE certificate
   ``OUT_DIR/paper51-r{R}-{features}.json`` in the command's format.
It also prints the Lemma 4 and Perron-refined lower bounds.

    .venv/bin/python benchmarks/search_paper51.py --targets 12:real,14:nonnegative \\
        --time-limit 300 --seed 0 [--out-dir reports/feasibility]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from certify.core.certificate import Certificate
from certify.core.families import paper51_family
from certify.feasibility.chain_bounds import chain_bound
from certify.feasibility.lp_search import search_witness
from certify.feasibility.model import Features, build_problem
from certify.feasibility.result import FeasibilityResult, Outcome
from certify.feasibility.witness_search import smooth_search


def construction_factors(problem):
    toks = problem.family.tokens.astype(np.float64)
    G = toks[problem.queries] @ toks[problem.keys].T
    return np.eye(problem.num_rows), (float(2 * problem.family.n) ** -G).T


def run_target(problem, rank: int, feats: Features, *, time_limit: float, seed: int):
    t0 = time.perf_counter()
    cur, cur_rank = construction_factors(problem), problem.num_rows
    log = []
    for r in range(problem.num_rows - 1, rank - 1, -1):
        left = time_limit - (time.perf_counter() - t0)
        if left <= 0:
            break
        res, w, chk, fac = search_witness(problem, r, feats, time_limit=min(left, 60.0),
                                          seed=seed + r, init=cur)
        log.append((r, "alternating", time.perf_counter() - t0, w is not None))
        if fac is None:
            break
        cur, cur_rank = fac, r
        if r == rank:
            return w, chk, log, time.perf_counter() - t0, "alternating LPs (descent)"
    left = time_limit - (time.perf_counter() - t0)
    if left <= 0:
        return None, None, log, time.perf_counter() - t0, None
    P, Q = cur
    if feats is not Features.NONNEGATIVE and P.shape[1] > rank:
        U, S, Vt = np.linalg.svd(P @ Q.T, full_matrices=False)
        P, Q = U[:, :rank] * np.sqrt(S[:rank]), Vt[:rank].T * np.sqrt(S[:rank])
    res = smooth_search(problem, rank, feats, time_limit=left, seed=seed, init=(P, Q))
    log.append((rank, f"smooth (best margin {res.best_margin:.4g}, {res.restarts} starts)",
                time.perf_counter() - t0, res.witness is not None))
    return res.witness, res.check, log, time.perf_counter() - t0, \
        (f"soft-min L-BFGS from the rank-{cur_rank} witness, stage {res.stage}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", default="12:real,14:nonnegative")
    ap.add_argument("--time-limit", type=float, default=300.0, help="seconds per target")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-dir", default="reports/feasibility")
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    fam = paper51_family()
    problem = build_problem(fam)
    cb = chain_bound(fam)
    print(f"lower bounds: Lemma 4 excludes r <= {cb.lemma4_rank}; nonnegative refinement "
          f"(t={len(cb.queries)}, rho={cb.rho}) excludes r <= {cb.perron_rank}")
    status = 0
    for item in args.targets.split(","):
        r_s, f_s = item.split(":")
        rank, feats = int(r_s), Features(f_s)
        w, chk, log, secs, how = run_target(problem, rank, feats, time_limit=args.time_limit,
                                            seed=args.seed)
        for r, stage, t, ok in log:
            print(f"  rank {r} {feats.value}: {stage}, {'witness' if ok else 'none'} at {t:.1f} s")
        if w is None or chk is None or not chk.ok:
            print(f"rank {rank} {feats.value}: no exactly verified witness in {secs:.1f} s")
            status = 1
            continue
        result = FeasibilityResult(Outcome.FEASIBLE, rank, feats, fam,
                                   f"{how}; dyadic rounding, value LP, exact re-check",
                                   margin=chk.margin, witness=w, timings={"search_s": secs})
        cert = Certificate(claims=[result.to_claim()],
                           command=["python", "benchmarks/search_paper51.py", "--targets", item,
                                    "--time-limit", f"{args.time_limit:g}", "--seed",
                                    str(args.seed)],
                           inputs={f"family:{fam.name}": fam.sha256}, seeds={"search": args.seed})
        path = Path(args.out_dir) / f"paper51-r{rank}-{feats.value}.json"
        cert.write(path)
        print(f"rank {rank} {feats.value}: witness, exact margin {float(chk.margin):.4g}, "
              f"{secs:.1f} s -> {path}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
