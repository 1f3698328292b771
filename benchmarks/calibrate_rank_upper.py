"""Calibrate the cost model of ``certify rank --upper-bound auto``
(:mod:`solvers.exact.upper_cost`): time the two upper-bound proofs ``certify rank``
runs -- the checker's exact column-span check
(:func:`certify.checkers.rank.span.column_span`) and the Freivalds test at error
2^-128 (its plan, then :func:`certify.checkers.rank.freivalds.shared_test`) -- on
planted matrices, and fit CPU seconds per unit of each predicted count by least
squares on the relative error (non-negative constants, scipy's ``nnls``).

One BLAS thread, CPU seconds of this process (``time.process_time``), each
point repeated until it has run at least ``--min-seconds`` (the mean is kept).
The machine is shared: the fit is a ratio of CPU seconds within one run, which
load changes far less than wall time. Writes
``reports/bench/rank_upper_calibration.json`` (points, units, fitted constants,
and the predicted / measured ratio of each point) and prints the constants to
paste into :mod:`solvers.exact.upper_cost`.

Run: ``python benchmarks/calibrate_rank_upper.py [--points 512:64:3,...] [--smoke]``.
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")
# numpy's huge-page advice off, as the commands run (certify/__main__.py), for both sides of
# the comparison (the baseline's child processes inherit it)
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

OUT = ROOT / "reports" / "bench" / "rank_upper_calibration.json"
#: n:r:bits (factor entries in [-2^bits, 2^bits)); the exact check at 2048:256 takes minutes
POINTS = ("128:4:3,128:16:3,256:4:3,256:8:12,256:32:3,256:64:12,512:4:3,512:16:3,512:16:12,"
          "512:64:3,512:64:12,512:128:3,512:256:3,512:256:12,1024:8:3,1024:32:12,1024:128:3,"
          "1024:256:3,1024:512:3,2048:4:3,2048:16:3,2048:64:3,2048:64:12,2048:128:3")


def timed(fn, min_seconds: float) -> tuple[float, object]:
    """(mean CPU seconds of one call, its result), repeating until ``min_seconds``."""
    total, runs, out = 0.0, 0, None
    while total < min_seconds or runs == 0:
        t = time.process_time()
        out = fn()
        total += time.process_time() - t
        runs += 1
        if runs >= 50:
            break
    return total / runs, out


def units(n: int, r: int, bits: int) -> dict:
    """The predicted counts of both checks for the planted point (no timing)."""
    from bench_rank_sweep import planted

    from certify.checkers.kernel.span import bound_sq
    from solvers.exact import dyadic
    from solvers.exact.elimination import canonical_minor, elimination_prime
    from solvers.exact.upper_cost import exact_units, freivalds_units

    V = dyadic(planted(n, r, bits)).values
    rng = np.random.default_rng(0)
    _, R, C = canonical_minor(V, elimination_prime(n, rng), rng)
    bsq = bound_sq(V, list(R), list(C))
    return {"exact_units": list(exact_units(V, list(R), list(C), lambda *a: bsq)),
            "freivalds_units": list(freivalds_units(V, list(R), list(C), lambda *a: bsq))}


def measure(n: int, r: int, bits: int, min_seconds: float) -> dict:
    from bench_rank_sweep import planted

    from certify.checkers.kernel.span import bound_sq
    from certify.checkers.rank.freivalds import shared_test
    from certify.checkers.rank.span import column_span
    from solvers.exact import dyadic
    from solvers.exact.elimination import canonical_minor, elimination_prime
    from solvers.exact.freivalds import plan
    from solvers.exact.upper_cost import exact_units, freivalds_units

    V = dyadic(planted(n, r, bits)).values
    rng = np.random.default_rng(0)
    p = elimination_prime(n, rng)
    rk, R, C = canonical_minor(V, p, rng)
    R, C = list(R), list(C)
    bsq = bound_sq(V, R, C)
    known = lambda *a: bsq                                           # noqa: E731
    ex_units = exact_units(V, R, C, known)
    fr_units = freivalds_units(V, R, C, known)
    t_ex, ok = timed(lambda: column_span(V, R, C), min_seconds)

    def freivalds():
        pl = plan(V, R, C, 128, known)
        return shared_test(V, R, C, b"calibration" * 3, pl.vector_bits, pl.vectors, pl.num_primes,
                           digest="calibration")
    t_fr, (passed, _) = timed(freivalds, min_seconds)
    return {"n": n, "r": rk, "bits": bits, "exact_s": t_ex, "freivalds_s": t_fr,
            "exact_ok": ok, "freivalds_passed": passed, "exact_units": list(ex_units),
            "freivalds_units": list(fr_units)}


def fit(points: list[dict], key: str, units: str) -> list[float]:
    """Non-negative constants ``c`` (per unit, then a fixed cost) minimizing the
    relative error ``sum ((c . u_i + c0) / t_i - 1)^2``."""
    from scipy.optimize import nnls

    A = np.array([[*p[units], 1.0] for p in points]) / np.array([[p[key]] for p in points])
    c, _ = nnls(A, np.ones(len(points)))
    return [float(v) for v in c]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", default=POINTS)
    ap.add_argument("--min-seconds", type=float, default=0.3)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--smoke", action="store_true", help="two small points, nothing written")
    ap.add_argument("--refit", action="store_true",
                    help="keep the timings in --out, recompute the units and fit again")
    a = ap.parse_args(argv)
    if a.smoke:
        a.points, a.out, a.min_seconds = "96:4:3,128:16:3", None, 0.0
    from threadpoolctl import threadpool_limits

    load0 = os.getloadavg()
    print(f"# rank upper-bound calibration, one BLAS thread, CPU seconds; shared machine, load {load0}")
    pts = []
    if a.refit:
        old = json.loads(a.out.read_text())
        load0 = old["loadavg_before"]
        for pt in old["points"]:
            pts.append({**pt, **units(pt["n"], pt["r"], pt["bits"])})
    with threadpool_limits(1):
        for item in ([] if a.refit else a.points.split(",")):
            n, r, bits = (int(v) for v in item.split(":"))
            pt = measure(n, r, bits, a.min_seconds)
            pts.append(pt)
            print(f"n={n} r={pt['r']} bits={bits}: exact {pt['exact_s']:.4f} s, freivalds "
                  f"{pt['freivalds_s']:.4f} s", flush=True)
    ce = fit(pts, "exact_s", "exact_units")
    cf = fit(pts, "freivalds_s", "freivalds_units")
    for pt in pts:
        pe = sum(c * u for c, u in zip(ce, [*pt["exact_units"], 1.0]))
        pf = sum(c * u for c, u in zip(cf, [*pt["freivalds_units"], 1.0]))
        pt["predicted_exact_s"], pt["predicted_freivalds_s"] = pe, pf
        right = (pe <= pf) == (pt["exact_s"] <= pt["freivalds_s"])
        pt["choice_right"] = right
        print(f"n={pt['n']} r={pt['r']} bits={pt['bits']}: exact {pt['exact_s']:.4f} (pred {pe:.4f}), "
              f"freivalds {pt['freivalds_s']:.4f} (pred {pf:.4f}){'' if right else '  WRONG CHOICE'}")
    doc = {"machine": "2 cores shared with other work; one BLAS thread; CPU seconds",
           "loadavg_before": load0, "loadavg_after": os.getloadavg(),
           "exact_constants": {"per_madd": ce[0], "per_reduce": ce[1], "per_entry": ce[2],
                               "per_det": ce[3], "fixed": ce[4]},
           "freivalds_constants": {"per_madd": cf[0], "per_obj": cf[1], "per_solve": cf[2],
                                   "fixed": cf[3]},
           "points": pts}
    print(json.dumps({k: doc[k] for k in ("exact_constants", "freivalds_constants")}, indent=1))
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = a.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
