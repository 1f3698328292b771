"""Certified exact rank against ``numpy.linalg.matrix_rank``, measured in the same run.

1. Matrix form, float64 matrices of planted rank 64 (exact products of 12-bit
   integer factors, scaled by 2^-20), n = 1024, 2048, 4096: the certified
   exact rank (``solvers.exact.exact_rank`` of the lossless integer matrix:
   the float -> integer conversion, the modular lower bound and the exact
   column-span witness, checked) against ``numpy.linalg.matrix_rank`` (SVD,
   unverified), one BLAS thread each, interleaved (numpy, ours, ours, numpy,
   ...) ``--reps`` times; medians and their ratio. Then once per n: the
   ``certify rank F.npy --out C.json`` command end to end (reading, hashing,
   the producer, the producer's own run of the independent checker, writing)
   and ``certify verify C.json`` (the checker re-derives the rank from the
   re-read file, no assumption left).
2. ``--cube``: the factor form on the whole cube ``{0,1}^m`` (m = 16, 20; r = 64;
   float32 features ``exp(+-W x)``): the exact Gram pass and exact core rank vs
   the same pass in plain float64; time and peak memory (VmHWM) per case in a
   fresh process.

Seconds are CPU seconds (this process's, or the child's from ``getrusage``);
the children run with one BLAS thread and bytecode caches, as an installed
package does. Bars (printed): ratio <= 0.5 at n = 4096 and <= 1.0 at n = 2048.
Results go to ``reports/bench/rank.json`` (``--out``); ``benchmarks/report.py``
draws the plot and the report from it. ``--smoke``: n = 128, one run, nothing
written.

Run: ``python benchmarks/bench_rank.py [--sizes 1024,2048,4096] [--reps 3] [--cube] [--smoke]``.
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
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BARS = {4096: 0.5, 2048: 1.0}


def planted(n: int, r: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    U = rng.integers(-(1 << 12), 1 << 12, (n, r))
    V = rng.integers(-(1 << 12), 1 << 12, (r, n))
    return (U @ V).astype(np.float64) * 2.0 ** -20       # exact: |entries| < 2^31


def _numpy_rank(A: np.ndarray) -> tuple[float, int]:
    t = time.process_time()
    r = int(np.linalg.matrix_rank(A))
    return time.process_time() - t, r


def _certified_rank(A: np.ndarray):
    from solvers.exact import dyadic, exact_rank
    t = time.process_time()
    res = exact_rank(dyadic(A), seed=0)                  # includes the float -> integer conversion
    return time.process_time() - t, res


def bench_matrix(n: int, r: int, reps: int) -> dict:
    """Interleaved medians of numpy's and our time on one matrix, then the command
    line and verify once."""
    from threadpoolctl import threadpool_limits

    A = planted(n, r)
    t_np, t_ex, res, np_rank = [], [], None, None
    with threadpool_limits(1):
        for i in range(reps):
            order = ("np", "ex") if i % 2 == 0 else ("ex", "np")
            for which in order:
                if which == "np":
                    dt, np_rank = _numpy_rank(A)
                    t_np.append(dt)
                else:
                    dt, res = _certified_rank(A)
                    t_ex.append(dt)
    out = {"n": n, "planted": r, "reps": reps, "numpy_rank": np_rank, "numpy_s": t_np, "exact_s": t_ex,
           "numpy_median_s": statistics.median(t_np), "exact_median_s": statistics.median(t_ex),
           "exact_lower": res.lower, "exact_upper": res.upper, "verdict": res.verdict.value,
           "timings": {k: v for k, v in res.timings.items()}, "details": dict(res.details)}
    out["ratio"] = out["exact_median_s"] / out["numpy_median_s"]
    out.update(_command_line(A))
    return out


def _child(cmd, env, cwd) -> tuple[subprocess.CompletedProcess, float]:
    """``(process, CPU seconds of the child)``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return p, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _command_line(A: np.ndarray) -> dict:
    """``certify rank`` end to end and ``certify verify``, each in a fresh process
    (CPU seconds of the child; bytecode caches written by a warm-up run)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as tmp:
        src, cert = Path(tmp) / "planted.npy", Path(tmp) / "cert.json"
        np.save(src, A)
        _child([sys.executable, "-m", "certify", "rank", "--help"], env, tmp)
        p, t_cli = _child([sys.executable, "-m", "certify", "rank", str(src), "--out", str(cert),
                           "--no-progress"], env, tmp)
        v, t_verify = _child([sys.executable, "-m", "certify", "verify", str(cert), "--json"], env, tmp)
        try:
            js = json.loads(v.stdout)
            assumptions = list(js["open_assumptions"])
            holds = bool(js["holds"])
        except (ValueError, KeyError, TypeError):
            assumptions, holds = ["(verify --json unreadable)"], False
    return {"cli_s": t_cli, "cli_exit": p.returncode, "verify_s": t_verify, "verify_exit": v.returncode,
            "verify_holds": holds, "verify_assumptions": assumptions}


CUBE = """
import os, sys, json, time
sys.path.insert(0, {root!r})
import numpy as np
from certify.core.kernel import Provenance, from_feature_fn
from certify.rank.summary import summarize_features
from solvers import exact as ex
m, r, mode = {m}, {r}, {mode!r}
W = (np.random.default_rng(0).standard_normal((r, m)) * 0.5).astype(np.float32)
def fn(t):
    u = t.astype(np.float32) @ W.T
    return np.exp(u), np.exp(-u)
k = from_feature_fn(fn, f"cube:{{m}}", Provenance("bench", None, "bench", "float32"), rank=r)
t = time.perf_counter()
if mode == "exact":
    s = summarize_features(k, batch_size=1 << 15, keep_limit=0)
    res = ex.core_rank(ex.IntMatrix(ex.compact(s.gram_q)), ex.IntMatrix(ex.compact(s.gram_k)))
    out = {{"rank_lower": res.lower, "rank_upper": res.upper, "verdict": res.verdict.value}}
else:
    gq = np.zeros((r, r)); gk = np.zeros((r, r))
    for q, kk in k.feature_batches(1 << 15):
        q = q.astype(np.float64); kk = kk.astype(np.float64)
        gq += q.T @ q; gk += kk.T @ kk
    out = {{"float_rank": int(np.linalg.matrix_rank(gq @ gk))}}
out["seconds"] = time.perf_counter() - t
out["maxrss_mb"] = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
print(json.dumps(out))
"""


def bench_cube(m: int, r: int, mode: str) -> dict:
    p = subprocess.run([sys.executable, "-c", CUBE.format(root=str(ROOT), m=m, r=r, mode=mode)],
                       capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    return json.loads(p.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1024,2048,4096", help="comma-separated n (8192: numpy takes minutes)")
    ap.add_argument("--rank", type=int, default=64, help="planted rank (default 64)")
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions per n (median)")
    ap.add_argument("--cube", action="store_true", help="also the factor-form cube runs (m = 16, 20)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench" / "rank.json",
                    help="results (JSON) for benchmarks/report.py")
    ap.add_argument("--smoke", action="store_true", help="n = 128, rank 8, one run, nothing written")
    a = ap.parse_args(argv)
    if a.smoke:
        a.sizes, a.rank, a.reps, a.cube, a.out = "128", 8, 1, False, None
    sizes = [int(x) for x in a.sizes.split(",")]
    print(f"# certified exact rank vs numpy.linalg.matrix_rank (float64, planted rank {a.rank}), one BLAS "
          f"thread each, CPU seconds, median of {a.reps} interleaved runs; load average {os.getloadavg()}")
    print("| n | numpy s (median) | certified s (median) | ratio | bar | rank | primes (bound bits) "
          "| `certify rank` CLI s | `certify verify` s |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows, ok, exits_ok = [], True, True
    for n in sizes:
        b = bench_matrix(n, a.rank, a.reps)
        rows.append(b)
        bar = BARS.get(n)
        met = bar is None or b["ratio"] <= bar
        ok &= met
        d = b["details"]
        print(f"| {n} | {b['numpy_median_s']:.2f} | {b['exact_median_s']:.2f} | {b['ratio']:.2f} | "
              f"{'-' if bar is None else ('<= %.1f %s' % (bar, 'met' if met else 'MISSED'))} | "
              f"[{b['exact_lower']}, {b['exact_upper']}] {b['verdict']} | "
              f"{d.get('span_primes', '-')} ({d.get('span_bound_bits', '-')}) | {b['cli_s']:.2f} | "
              f"{b['verify_s']:.2f} (exit {b['verify_exit']}"
              f"{', assuming ' + ', '.join(b['verify_assumptions']) if b['verify_assumptions'] else ''}) |",
              flush=True)
        print(f"ratio certified / numpy at n = {n}: {b['ratio']:.2f} in process; `certify rank` end to end "
              f"{b['cli_s']:.2f} CPU s, `certify verify` {b['verify_s']:.2f} CPU s (exit {b['verify_exit']})",
              flush=True)
        exits_ok &= b["cli_exit"] == 0 and b["verify_exit"] == 0
    cube = []
    if a.cube:
        print("# factor form on the cube, r = 64: exact Gram pass + exact core rank vs float64 Gram + matrix_rank")
        for m in (16, 20):
            e, f = bench_cube(m, 64, "exact"), bench_cube(m, 64, "float")
            dense_gb = (1 << (2 * m)) * 8 / 2 ** 30
            cube.append({"m": m, "exact": e, "float": f, "dense_gib": dense_gb})
            print(f"m={m}: exact rank [{e['rank_lower']}, {e['rank_upper']}] {e['verdict']} in "
                  f"{e['seconds']:.2f}s, peak RSS {e['maxrss_mb']:.0f} MB; float rank {f['float_rank']} in "
                  f"{f['seconds']:.2f}s; ratio exact/float = {e['seconds'] / f['seconds']:.2f}; dense "
                  f"2^m x 2^m float64 would need {dense_gb:,.0f} GiB")
    print(f"load average after: {os.getloadavg()}")
    if a.out is None:
        return 0 if exits_ok else 1
    a.out.parent.mkdir(parents=True, exist_ok=True)
    prev = json.loads(a.out.read_text()) if a.out.is_file() else {}
    if not a.cube and prev.get("cube"):
        cube = prev["cube"]
    a.out.write_text(json.dumps({"matrix": rows, "cube": cube, "bars": {str(k): v for k, v in BARS.items()},
                                 "seconds": "cpu", "loadavg_end": os.getloadavg(), "bars_met": ok}, indent=1)
                     + "\n")
    print(f"wrote {a.out.relative_to(ROOT) if a.out.is_relative_to(ROOT) else a.out}")
    return 0 if exits_ok else 1


if __name__ == "__main__":
    sys.exit(main())
