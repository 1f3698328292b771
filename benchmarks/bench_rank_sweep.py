"""The certified rank against numpy's SVD and scipy's QR with pivoting, swept over
the rank: CPU time against r, both upper-bound modes, in-process and end to end.

Matrices (n = 512, 2048, 4096; exact integer entries, stored as float64 .npy):

* ``small``: ``U V`` with factor entries in ``[-8, 8)``, planted rank r;
* ``12bit``: ``U V`` with factor entries in ``[-2^12, 2^12)`` (the rank benchmark's);
* ``cube``: a real kernel on the cube ``{0,1}^m`` (n = 2^m): ``(1 + <x, z>)^d``,
  d = 2, 3, of rank ``1 + m + C(m, 2) (+ C(m, 3))`` (``x_i^2 = x_i`` on the cube).

Per matrix, one BLAS thread (threadpoolctl), CPU seconds, medians of
interleaved runs (``--reps``): ``numpy.linalg.matrix_rank`` (SVD),
``scipy.linalg.qr(..., pivoting=True)`` (rank from ``|R_ii|``), and the
certified rank (``solvers.exact.exact_rank`` of the lossless integer matrix)
with the exact upper bound, with the Freivalds upper bound (error <=
2^-128) and with the default ``auto`` (the one predicted cheaper,
:mod:`solvers.exact.upper_cost`; the point records its choice and
predictions); then end to end, each in a fresh process, the runs interleaved: a
script that loads the .npy and runs ``matrix_rank``, ``certify rank M.npy
--upper-bound {exact, freivalds, auto} --out C.json`` (reading, hashing, the
producer, its own run of the checker, writing) and ``certify verify C.json``
(re-derives from the file); the CPU seconds of each child (``getrusage``). The
children run as an installed package does: one BLAS thread, and with bytecode
caches (``PYTHONDONTWRITEBYTECODE`` is dropped and one warm-up run writes them).

The exact mode is skipped where its predicted span-check work ``n1 n2 r k``
exceeds ``--exact-work`` multiply-adds (its time grows like n^2 r^2; the
skipped points are listed with the prediction). Results are appended to
``reports/bench/rank_sweep.json`` point by point (a partial run keeps what it
measured); ``benchmarks/report.py`` draws ``rank_time_vs_r.png`` and the table
of ``reports/bench/README.md`` from it. ``--smoke`` runs one small point of each
kind and writes nothing.

Run: ``python benchmarks/bench_rank_sweep.py [--sizes 2048,4096] [--ranks 16,64,256,1024]
[--kinds small,12bit,cube] [--points 512:64,2048:256] [--reps 3] [--no-cli] [--smoke]``.
The full sweep takes many minutes.
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
import math
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

OUT = ROOT / "reports" / "bench" / "rank_sweep.json"


def planted(n: int, r: int, bits: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    U = rng.integers(-(1 << bits), 1 << bits, (n, r))
    V = rng.integers(-(1 << bits), 1 << bits, (r, n))
    return (U @ V).astype(np.float64)                    # exact: |entries| < 2^(2 bits + log2 r) < 2^53


def cube_kernel(m: int, d: int) -> tuple[np.ndarray, int]:
    """``(1 + <x, z>)^d`` on ``{0,1}^m`` and its rank ``sum_{k <= d} C(m, k)``."""
    x = ((np.arange(1 << m)[:, None] >> np.arange(m)) & 1).astype(np.int64)
    K = (1 + x @ x.T) ** d
    return K.astype(np.float64), sum(math.comb(m, k) for k in range(d + 1))


def matrices(n: int, ranks, kinds):
    for kind in kinds:
        if kind == "cube":
            if n & (n - 1):                                  # n = 2^m only
                continue
            m = n.bit_length() - 1
            for d in (2, 3):
                A, r = cube_kernel(m, d)
                yield f"cube (1+x.z)^{d}", r, A
        else:
            for r in ranks:
                if r < n:
                    yield kind, r, planted(n, r, 3 if kind == "small" else 12)


def svd_rank(A):
    return int(np.linalg.matrix_rank(A))


def qrcp_rank(A):
    from scipy.linalg import qr
    R, _ = qr(A, mode="r", pivoting=True)
    d = np.abs(np.diag(R))
    return int((d > d[0] * max(A.shape) * np.finfo(np.float64).eps).sum()) if d.size and d[0] else 0


def certified(A, upper: str):
    """The library call a user makes: lossless integers, matrix hash, exact rank."""
    from certify.rank.evidence import freivalds_challenge, matrix_sha256
    from solvers.exact import dyadic, exact_rank
    N = dyadic(A)
    sha = matrix_sha256(N)
    return exact_rank(N, upper=upper,
                      challenge=lambda p, R, C: bytes.fromhex(freivalds_challenge(
                          {"error_log2": 128}, {"matrix_sha256": sha, "shape": list(N.shape), "prime": p,
                                                "minor_rows": list(R), "minor_cols": list(C)})))


def predicted_work(A) -> int:
    """The exact span check's work ``n1 n2 r k`` for the planted minor (the canonical
    minor as the producer finds it)."""
    from solvers.exact import dyadic
    from solvers.exact.elimination import canonical_minor, elimination_prime
    from solvers.exact.upper_cost import span_work
    N = dyadic(A)
    rng = np.random.default_rng(0)
    p = elimination_prime(max(A.shape), rng)
    rk, rows, cols = canonical_minor(N.values, p, rng, Nf=N.values.astype(np.float64))
    if not rk:
        return 0
    return span_work(N.values, rows, cols)


def timed(fn, *a):
    """(CPU seconds of this process, result)."""
    t = time.process_time()
    out = fn(*a)
    return time.process_time() - t, out


NUMPY_E2E = ("import sys, numpy as np; A = np.load(sys.argv[1]); "
             "print(int(np.linalg.matrix_rank(A)))")


def child_env() -> dict:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_child(cmd, env, cwd) -> tuple[subprocess.CompletedProcess, float, float]:
    """``(process, CPU seconds of the child, wall seconds)``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return p, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), wall


def end_to_end(A, modes, reps: int, env) -> dict:
    """The SVD script, ``certify rank --upper-bound MODE --out C.json`` and ``certify
    verify C.json`` per mode, each a fresh process, interleaved ``reps`` times:
    medians of the children's CPU seconds, the runs, the ranks and exits."""
    out: dict = {}
    runs: dict[str, list] = {"svd_e2e_s": []}
    for mode in modes:
        runs[f"{mode}_cli_s"], runs[f"{mode}_verify_s"] = [], []
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "m.npy"
        np.save(src, A)
        run_child([sys.executable, "-m", "certify", "rank", "--help"], env, tmp)    # writes bytecode caches
        for i in range(reps):
            order = ["svd", *modes] if i % 2 == 0 else [*modes, "svd"][::-1]
            for which in order:
                if which == "svd":
                    p, cpu, _ = run_child([sys.executable, "-c", NUMPY_E2E, str(src)], env, tmp)
                    runs["svd_e2e_s"].append(cpu)
                    out["svd_e2e_rank"] = int(p.stdout) if p.returncode == 0 else None
                    continue
                cert = Path(tmp) / f"c-{which}-{i}.json"
                p, cpu, _ = run_child([sys.executable, "-m", "certify", "rank", str(src), "--out", str(cert),
                                       "--upper-bound", which, "--no-progress", "--json"], env, tmp)
                runs[f"{which}_cli_s"].append(cpu)
                out[f"{which}_cli_exit"] = p.returncode
                try:
                    js = json.loads(p.stdout)
                    claim = js["certificate"]["claims"][0]
                    out[f"{which}_cli_rank"] = [js["rank_lower"], js["rank_upper"]]
                    out[f"{which}_cli_witness"] = claim["evidence"]["upper_witness"]
                    out[f"{which}_cli_timings"] = claim["timings"]
                except (ValueError, KeyError, TypeError, IndexError):
                    out[f"{which}_cli_rank"] = None
                v, cpu, _ = run_child([sys.executable, "-m", "certify", "verify", str(cert), "--json"], env, tmp)
                runs[f"{which}_verify_s"].append(cpu)
                out[f"{which}_verify_exit"] = v.returncode
    out.update({k: statistics.median(v) for k, v in runs.items() if v})
    out["e2e_runs_s"] = runs
    out["e2e_reps"] = reps
    return out


def bench_point(kind, r, A, reps, exact_work, cli) -> dict:
    from threadpoolctl import threadpool_limits

    n = A.shape[0]
    pt: dict = {"n": n, "kind": kind, "planted": r, "reps": reps, "seconds": "cpu"}
    with threadpool_limits(1):
        work = predicted_work(A)
        pt["exact_work"] = work
        do_exact = work <= exact_work
        runs: dict[str, list] = {"svd": [], "qrcp": [], "freivalds": [], "auto": []}
        if do_exact:
            runs["exact"] = []
        results: dict = {}
        for i in range(reps):
            order = list(runs) if i % 2 == 0 else list(runs)[::-1]
            for which in order:
                if which == "exact" and i > 0 and runs["exact"] and runs["exact"][0] > 20:
                    continue                                        # one run of a slow exact point
                if which == "svd":
                    dt, results["svd_rank"] = timed(svd_rank, A)
                elif which == "qrcp":
                    dt, results["qrcp_rank"] = timed(qrcp_rank, A)
                else:
                    dt, res = timed(certified, A, which)
                    results[which] = res
                runs[which].append(dt)
    pt["runs_s"] = runs
    pt["median_s"] = {k: statistics.median(v) for k, v in runs.items() if v}
    pt["svd_rank"], pt["qrcp_rank"] = results.get("svd_rank"), results.get("qrcp_rank")
    for which in ("exact", "freivalds", "auto"):
        res = results.get(which)
        if res is not None:
            pt[which] = {"rank": [res.lower, res.upper], "verdict": res.verdict.value,
                         "witness": res.upper_witness, "timings": dict(res.timings),
                         "details": dict(res.details)}
    if not do_exact:
        pt["exact_skipped"] = f"predicted work {work:.3g} > {exact_work:.3g} multiply-adds"
    if cli:
        pt.update(end_to_end(A, ["freivalds", "auto"] + (["exact"] if do_exact else []), reps, child_env()))
    return pt


def line(pt) -> str:
    m = pt["median_s"]
    f = lambda k: f"{m[k]:.2f}" if k in m else "-"        # noqa: E731
    ex = pt.get("exact", {})
    fv = pt.get("freivalds", {})
    cli = " | ".join(f"{pt[k]:.2f}" if k in pt else "-" for k in
                     ("svd_e2e_s", "exact_cli_s", "exact_verify_s", "freivalds_cli_s", "freivalds_verify_s"))
    return (f"| {pt['n']} | {pt['kind']} | {pt['planted']} | {f('svd')} | {f('qrcp')} | {f('exact')} | "
            f"{f('freivalds')} | {ex.get('rank', '-')} | {fv.get('rank', '-')} | svd {pt['svd_rank']}, "
            f"qrcp {pt['qrcp_rank']} | {cli} |")


def ratio_line(pt) -> str:
    """The figures the sweep is for, as ratios within the run (CPU seconds)."""
    parts = []
    for mode in ("exact", "freivalds", "auto"):
        if f"{mode}_cli_s" in pt and pt.get("svd_e2e_s"):
            parts.append(f"{mode} e2e / SVD e2e {pt[f'{mode}_cli_s'] / pt['svd_e2e_s']:.2f} "
                         f"(verify / rank {pt[f'{mode}_verify_s'] / pt[f'{mode}_cli_s']:.2f})")
    m = pt["median_s"]
    for mode in ("exact", "freivalds", "auto"):
        if mode in m:
            parts.append(f"{mode} / SVD in process {m[mode] / m['svd']:.2f}")
    auto = (pt.get("auto") or {}).get("details", {}).get("upper_auto")
    if auto:
        parts.append(f"auto chose {auto['choice']} (predicted exact {auto['exact_s']:.3g} s, "
                     f"freivalds {auto['freivalds_s']:.3g} s)")
    return f"ratio n = {pt['n']} {pt['kind']} r = {pt['planted']}: " + "; ".join(parts)


def cases(a):
    """``(kind, r, A)`` of the run: ``--points`` n:r pairs of the planted kinds, or
    ``--sizes`` x ``--ranks`` x ``--kinds`` (a cube kernel where n is a power of 2)."""
    if a.points:
        for item in a.points.split(","):
            n, r = (int(v) for v in item.split(":"))
            yield from matrices(n, [r], [k for k in a.kinds.split(",") if k != "cube"])
        return
    for n in (int(v) for v in a.sizes.split(",")):
        yield from matrices(n, [int(v) for v in a.ranks.split(",")], a.kinds.split(","))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="2048,4096")
    ap.add_argument("--ranks", default="16,64,256,1024")
    ap.add_argument("--kinds", default="small,12bit,cube")
    ap.add_argument("--points", default="", help="n:r pairs instead of --sizes x --ranks (planted kinds)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--exact-work", type=float, default=2.0 ** 40,
                    help="skip the exact mode above this predicted work (default 2^40, ~2 min)")
    ap.add_argument("--no-cli", action="store_true", help="in-process timings only")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--append", action="store_true", help="keep the points already in --out")
    ap.add_argument("--smoke", action="store_true",
                    help="one small point per planted kind (n = 96, r = 8), one run, nothing written")
    a = ap.parse_args(argv)
    if a.smoke:
        a.points, a.kinds, a.reps, a.out = "96:8", "small,12bit", 1, None
    print(f"# rank sweep, one BLAS thread, CPU seconds, medians of {a.reps} interleaved runs; shared machine, "
          f"load average {os.getloadavg()}", flush=True)
    print("| n | matrix | r | SVD s | QRCP s | exact s | freivalds s | exact rank | freivalds rank | "
          "float ranks | SVD e2e s | `certify rank` exact s | verify s | `certify rank` freivalds s | "
          "verify s |")
    print("|" + "---|" * 15, flush=True)
    points = json.loads(a.out.read_text())["points"] if a.out and a.append and a.out.is_file() else []
    ok = True
    for kind, r, A in cases(a):
        pt = bench_point(kind, r, A, a.reps, a.exact_work, not a.no_cli)
        pt["loadavg"] = os.getloadavg()
        ok &= all(pt.get(f"{m}_cli_exit", 0) == 0 and pt.get(f"{m}_verify_exit", 0) == 0
                  for m in ("exact", "freivalds"))
        points = [p for p in points if (p["n"], p["kind"], p["planted"]) != (pt["n"], kind, r)] + [pt]
        print(line(pt), flush=True)
        print(ratio_line(pt), flush=True)
        if a.out is not None:
            a.out.parent.mkdir(parents=True, exist_ok=True)
            tmp = a.out.with_suffix(".tmp")
            tmp.write_text(json.dumps({"points": points, "machine": "2 cores shared with other work; "
                                       "CPU seconds, medians of interleaved runs",
                                       "exact_work_limit": a.exact_work}, indent=1) + "\n")
            os.replace(tmp, a.out)
    print(f"load average after: {os.getloadavg()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
