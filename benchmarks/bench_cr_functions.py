"""Correctly rounded functions of the canonical extraction: the compiled kernel
(``models/canonical/_crkernel.c``: double-double values with proven error
bounds and Ziv's rounding test) against arb, the definition, on every input.

For exp, expm1, softplus, sigmoid, tanh and gelu: ``--n`` inputs random over
the whole range (``tests/cr_cases.random_inputs``: uniform on the active range,
normal, random bit patterns of every exponent including subnormals, log-uniform
magnitudes), every hard case (``cr_cases.hard_inputs``: thresholds with 64-ulp
neighbours, table node edges, first-order midpoint families, special values)
and the ``--keep`` inputs whose double-double value lies nearest to a midpoint
among ``--pool`` random ones. For softmax: rows of 128 with ``--n`` entries in
all, plus the special rows. Every input's arb value is computed (worker
processes); printed and recorded: the entries where the kernel's decided value
differs from arb (must be 0), whether the full result (kernel plus arb for
the undecided) equals arb everywhere, how many entries fell back to arb, and
CPU nanoseconds per entry of the kernel against CPU microseconds of arb.

Run: ``python benchmarks/bench_cr_functions.py`` (10^7 per function, about an
hour of CPU for arb), ``--smoke`` (2 * 10^4, seconds); results in
``reports/bench/cr_functions.json`` (``--out`` to change; the smoke run writes
nothing unless asked).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402

CHUNK = 20000


def _arb_chunk(args):
    name, x = args
    from models.canonical import arith
    t = time.process_time()
    if name == "softmax":
        out = arith._softmax_arb(x)
    else:
        out = arith.arb_values(name, x)
    return out, time.process_time() - t


def arb_all(name: str, x: np.ndarray, workers: int, progress: str) -> tuple[np.ndarray, float]:
    """arb's value of every entry (rows for softmax), and the workers' CPU seconds."""
    step = CHUNK if name != "softmax" else max(1, CHUNK // x.shape[1])
    parts = [(name, x[i:i + step]) for i in range(0, len(x), step)]
    outs, cpu = [], 0.0
    ctx = mp.get_context("fork")
    with ctx.Pool(workers) as pool:
        for i, (o, c) in enumerate(pool.imap(_arb_chunk, parts)):
            outs.append(o)
            cpu += c
            if sys.stderr.isatty() or i % 50 == 0:
                print(f"\r  {progress}: arb {min((i + 1) * step, len(x))}/{len(x)}", end="", file=sys.stderr)
    print("", file=sys.stderr)
    return np.concatenate(outs), cpu


def _bits(a):
    return np.ascontiguousarray(a).view(np.int64)


def bench_function(name: str, n: int, pool: int, keep: int, workers: int, rng) -> dict:
    import cr_cases as C

    from models.canonical import arith
    rand = C.random_inputs(name, n, rng)
    hard = C.hard_inputs(name)
    t = time.perf_counter()
    near = C.near_midpoints(name, pool, keep, rng)
    t_search = time.perf_counter() - t
    x = np.concatenate([rand, hard, near])
    arith.fast_path(name, x[:10])                                  # tables built before timing
    t = time.process_time()
    fast, und = arith.fast_path(name, rand)
    t_fast = time.process_time() - t
    fast_all, und_all = arith.fast_path(name, x)
    assert np.array_equal(_bits(fast_all[:n]), _bits(fast))
    want, t_arb = arb_all(name, x, workers, name)
    wrong = np.flatnonzero(~und_all & (_bits(fast_all) != _bits(want)))
    full = arith.cr_function(name, x)
    sizes = {"random": n, "hard": hard.size, "near_midpoint": near.size}
    cuts = np.cumsum([0, n, hard.size, near.size])
    fallbacks = {k: int(und_all[cuts[i]:cuts[i + 1]].sum()) for i, k in enumerate(sizes)}
    row = {"function": name, "inputs": sizes, "total": int(x.size), "fallbacks": fallbacks,
           "fallback_rate_random": fallbacks["random"] / n, "mismatches": int(wrong.size),
           "full_result_equals_arb": bool(np.array_equal(_bits(full), _bits(want))),
           "kernel_ns_per_entry": round(t_fast / n * 1e9, 2), "arb_us_per_entry": round(t_arb / x.size * 1e6, 2),
           "ratio_arb_over_kernel": round(t_arb / x.size / (t_fast / n), 1),
           "near_midpoint_search": {"pool": pool, "kept": int(near.size), "seconds": round(t_search, 1)},
           "examples_of_mismatch": [[float(x[i]), float(fast_all[i]), float(want[i])] for i in wrong[:5]]}
    print(f"{name}: {x.size} inputs ({n} random, {hard.size} hard, {near.size} near a midpoint): "
          f"{wrong.size} differ from arb; full result equals arb: {row['full_result_equals_arb']}; "
          f"fallbacks {fallbacks}; kernel {row['kernel_ns_per_entry']} ns, arb {row['arb_us_per_entry']} us "
          f"per entry (CPU), ratio {row['ratio_arb_over_kernel']}")
    return row


def bench_softmax(n: int, workers: int, rng) -> dict:
    import cr_cases as C

    from models.canonical import arith
    width = 128
    rows = C.softmax_rows(max(1, n // width), width, rng)
    arith.cr_softmax(rows[:2])
    t = time.process_time()
    out, bad = arith.softmax_fast_path(rows)
    t_fast = time.process_time() - t
    want, t_arb = arb_all("softmax", rows, workers, "softmax")
    wrong = int((_bits(out[~bad]) != _bits(want[~bad])).sum())
    full = arith.cr_softmax(rows)
    row = {"function": "softmax", "rows": int(rows.shape[0]), "width": width, "total": int(rows.size),
           "rows_fallen_back": int(bad.sum()), "mismatches": wrong,
           "full_result_equals_arb": bool(np.array_equal(_bits(full), _bits(want))),
           "kernel_ns_per_entry": round(t_fast / rows.size * 1e9, 2),
           "arb_us_per_entry": round(t_arb / rows.size * 1e6, 2),
           "ratio_arb_over_kernel": round(t_arb / t_fast, 1)}
    print(f"softmax: {rows.size} entries in {rows.shape[0]} rows of {width}: {wrong} differ from arb; full result "
          f"equals arb: {row['full_result_equals_arb']}; rows fallen back {int(bad.sum())}; kernel "
          f"{row['kernel_ns_per_entry']} ns, arb {row['arb_us_per_entry']} us per entry (CPU), ratio "
          f"{row['ratio_arb_over_kernel']}")
    return row


def main(argv=None) -> int:
    import cr_cases as C
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="2 * 10^4 inputs per function, a small search (seconds)")
    ap.add_argument("--n", type=int, default=10 ** 7, help="random inputs per function (default 10^7)")
    ap.add_argument("--pool", type=int, default=2 * 10 ** 7, help="random inputs searched for near-midpoints")
    ap.add_argument("--keep", type=int, default=20000, help="near-midpoint inputs kept")
    ap.add_argument("--workers", type=int, default=2, help="processes computing arb's values")
    ap.add_argument("--functions", default=",".join(C.FUNCTIONS + ("softmax",)), help="comma-separated")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--out", type=Path, default=None,
                    help="JSON results (default reports/bench/cr_functions.json; none for --smoke)")
    a = ap.parse_args(argv)
    if a.smoke:
        a.n, a.pool, a.keep = 2 * 10 ** 4, 2 * 10 ** 5, 200
    from models.canonical import arith
    k = arith._kernel()
    if k is None:
        print("the compiled kernel models/canonical/_crkernel.c is not built (make install)", file=sys.stderr)
        return 2
    rng = np.random.default_rng(a.seed)
    res = {"what": "the compiled kernel vs arb (models.canonical.arith) on every input", "seed": a.seed,
           "n_random_per_function": a.n, "variants": list(k.variants()), "load_average": list(os.getloadavg()),
           "functions": []}
    bad = 0
    for name in a.functions.split(","):
        row = bench_softmax(a.n, a.workers, rng) if name == "softmax" else \
            bench_function(name, a.n, a.pool, a.keep, a.workers, rng)
        bad += row["mismatches"] + (not row["full_result_equals_arb"])
        res["functions"].append(row)
    res["load_average_end"] = list(os.getloadavg())
    print(f"correctly rounded functions: {sum(r['total'] for r in res['functions'])} inputs, "
          f"{sum(r['mismatches'] for r in res['functions'])} differ from arb; ratio arb / kernel per entry "
          f"{min(r['ratio_arb_over_kernel'] for r in res['functions'])}-"
          f"{max(r['ratio_arb_over_kernel'] for r in res['functions'])}")
    dest = a.out if a.out is not None else (None if a.smoke else ROOT / "reports" / "bench" / "cr_functions.json")
    if dest is not None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(".tmp")
        tmp.write_text(json.dumps(res, indent=1) + "\n")
        tmp.replace(dest)
        print(f"wrote {dest}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
