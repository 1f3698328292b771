"""Certified exact rank against float baselines, measured in the same run.

1. Matrix form, float64 kernels with planted rank (exact products of integer
   factors, scaled by 2^-20): ``solvers.exact.exact_rank`` (modular lower
   bound + exact column-span witness) vs ``numpy.linalg.matrix_rank`` (SVD).
2. Factor form on the whole cube ``{0,1}^m`` (m = 16, 20; r = 64; float32
   features ``exp(+-W x)``): the exact Gram pass and exact core rank vs the
   same pass in plain float64 (Gram in float64 + ``matrix_rank`` of the core);
   time and peak memory (VmHWM) of each case in a fresh process, against the
   ``2^m x 2^m`` float64 matrix a dense method would need.

Run: ``python benchmarks/bench_rank.py [--quick]``. One thread per library.
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def planted(n: int, r: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    U = rng.integers(-(1 << 12), 1 << 12, (n, r))
    V = rng.integers(-(1 << 12), 1 << 12, (r, n))
    return (U @ V).astype(np.float64) * 2.0 ** -20       # exact: |entries| < 2^31


def bench_matrix(n: int, r: int) -> dict:
    from solvers.exact import dyadic, exact_rank
    A = planted(n, r)
    t = time.perf_counter()
    np_rank = int(np.linalg.matrix_rank(A))
    t_np = time.perf_counter() - t
    t = time.perf_counter()
    res = exact_rank(dyadic(A), seed=0)               # includes the float -> integer conversion
    t_ex = time.perf_counter() - t
    return {"n": n, "planted": r, "numpy_rank": np_rank, "numpy_s": t_np, "exact_lower": res.lower,
            "exact_upper": res.upper, "verdict": res.verdict.value, "exact_s": t_ex,
            "modular_s": res.timings.get("modular", 0.0), "proposal_s": res.timings.get("proposal", 0.0),
            "span_check_s": res.timings.get("span_check", 0.0),
            "ratio": t_ex / t_np}


CUBE = """
import os, sys, json, time, resource
sys.path.insert(0, {root!r})
import numpy as np, torch
torch.set_num_threads(1)
from certify.kernel import Provenance, from_feature_fn
from certify.rank import summarize_features
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="sizes 1024/2048 and m = 12/16 only")
    ap.add_argument("--sizes", help="comma-separated matrix sizes (default 1024,2048,4096,8192)")
    ap.add_argument("--rank", type=int, default=64, help="planted rank (default 64)")
    ap.add_argument("--no-cube", action="store_true", help="skip the factor-form cube runs")
    a = ap.parse_args()
    sizes = (1024, 2048) if a.quick else (1024, 2048, 4096, 8192)
    if a.sizes:
        sizes = tuple(int(x) for x in a.sizes.split(","))
    print("# factor form on the cube, r = 64: exact Gram pass + exact core rank vs float64 Gram + matrix_rank")
    for m in (() if a.no_cube else (12, 16) if a.quick else (16, 20)):
        e = bench_cube(m, 64, "exact")
        f = bench_cube(m, 64, "float")
        dense_gb = (1 << (2 * m)) * 8 / 2 ** 30
        print(f"m={m}: exact rank [{e['rank_lower']}, {e['rank_upper']}] {e['verdict']} in {e['seconds']:.2f}s, "
              f"peak RSS {e['maxrss_mb']:.0f} MB; float rank {f['float_rank']} in {f['seconds']:.2f}s, "
              f"peak RSS {f['maxrss_mb']:.0f} MB; time ratio exact/float = {e['seconds'] / f['seconds']:.2f}; "
              f"dense 2^m x 2^m float64 would need {dense_gb:,.0f} GiB "
              f"(ratio dense/exact-peak = {dense_gb * 1024 / e['maxrss_mb']:,.0f})")

    print(f"# matrix form: certified exact rank vs numpy.linalg.matrix_rank (float64, planted "
          f"rank {a.rank}), one thread each")
    print("| n | numpy matrix_rank s | exact rank | exact s | sketch+minor s | span check s | ratio exact/numpy |")
    print("|---|---|---|---|---|---|---|")
    for n in sizes:
        b = bench_matrix(n, a.rank)
        print(f"| {n} | {b['numpy_s']:.2f} | [{b['exact_lower']}, {b['exact_upper']}] {b['verdict']} "
              f"| {b['exact_s']:.2f} | {b['modular_s'] + b['proposal_s']:.2f} | {b['span_check_s']:.2f} "
              f"| {b['ratio']:.2f} |", flush=True)


def _hwm_mb() -> float:
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024

if __name__ == "__main__":
    main()
