"""Time to an exactly verified witness: the SDP search (PSD lift, truncated
nuclear norm, rounding + LP polish) against the alternating-LP descent
(``--method lp``: the rank-#queries construction truncated one rank at a time)
on paper-5.1, per rank, in the same run; the ratio LP / SDP is printed.

Both go through the same exact check (:func:`certify.feasibility_model.verify_factors`).
A method that does not verify within its budget is reported as ``> budget``
(and the ratio as a bound). Also the greedy-12-6-3 chain family (10 words), where
both finish quickly.

    .venv/bin/python benchmarks/bench_sdp.py [--budget 300] [--ranks 13,14] [--small-ranks 6,7,8] [--smoke]

``--smoke``: greedy-12-6-3 at r = 8 only (both methods verify in seconds).
"""

from __future__ import annotations

import argparse
import sys
import time

from certify.core.codes import greedy_packing
from certify.core.families import chain_family, paper51_family
from certify.feasibility.lp_search import descend
from certify.feasibility.model import Features, build_problem
from certify.feasibility.sdp_search import sdp_witness


def _time(fn):
    t0 = time.perf_counter()
    ok = fn()
    return (time.perf_counter() - t0) if ok else None


def bench(fam, ranks, budget: float) -> list[tuple]:
    problem = build_problem(fam)
    print(f"{fam.name}: {problem.num_rows} queries, {problem.num_cols} keys, "
          f"{problem.num_entries} used pairs, {len(problem.targets)} scored positions")
    rows = []
    for r in ranks:
        t_sdp = _time(lambda: sdp_witness(problem, r, Features.REAL, time_limit=budget)[0]
                      is not None)
        t_lp = _time(lambda: (lambda out: out[1] is not None and out[2] is not None and out[2].ok)(
            descend(problem, r, Features.REAL, time_limit=budget, seed=0)))
        fmt = lambda t: f"{t:.1f} s" if t is not None else f"> {budget:.0f} s"  # noqa: E731
        if t_sdp is not None and t_lp is not None:
            ratio = f"{t_lp / t_sdp:.2f}x"
        elif t_sdp is not None:
            ratio = f"> {budget / t_sdp:.2f}x"
        elif t_lp is not None:
            ratio = f"< {t_lp / budget:.2f}x"
        else:
            ratio = "n/a (neither verified)"
        print(f"  r = {r} real: SDP {fmt(t_sdp)} | alternating LPs {fmt(t_lp)} | "
              f"ratio LP / SDP: {ratio}")
        sys.stdout.flush()
        rows.append((fam.name, r, t_sdp, t_lp))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=300.0, help="seconds per method and rank")
    ap.add_argument("--ranks", default="13,14", help="paper-5.1 ranks")
    ap.add_argument("--small-ranks", default="6,7,8", help="greedy-12-6-3 ranks ('' skips)")
    ap.add_argument("--smoke", action="store_true", help="greedy-12-6-3 at r = 8 only")
    args = ap.parse_args(argv)
    if args.smoke:
        args.small_ranks, args.ranks, args.budget = "8", "", 60.0
    rows = []
    if args.small_ranks:
        rows += bench(chain_family(greedy_packing(12, 6, 3), name="greedy-12-6-3"),
                      [int(v) for v in args.small_ranks.split(",")], args.budget)
    if args.ranks:
        rows += bench(paper51_family(), [int(v) for v in args.ranks.split(",")], args.budget)
    return 0 if not args.smoke or all(t_sdp is not None and t_lp is not None for _, _, t_sdp, t_lp in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
