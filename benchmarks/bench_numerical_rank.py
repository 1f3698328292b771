"""Certified numerical rank of a non-integer float matrix against numpy's ``matrix_rank`` script,
measured in the same run.

The matrix: a Gaussian product ``X Y^T`` (``X``, ``Y`` n x r standard normal, float64; n = 1024,
r = 64 by default), whose stored values have full exact rank over Q and numerical rank r. Each
repetition runs, interleaved (numpy, ours, verify, then ours, verify, numpy, ...), as fresh
processes with one BLAS thread (``OMP_NUM_THREADS=1``), CPU seconds from ``getrusage`` of the child:

* baseline (named): ``python numpy_rank.py M.npy``, a script that loads the matrix and prints
  ``numpy.linalg.matrix_rank(A)`` (SVD, unverified);
* ours: ``certify rank M.npy --numerical-only --out C.json``: reading and hashing the file, the
  float estimate of the count, the kernel's rigorous two-sided bounds
  (certify/checkers/kernel/singular.py), the producer's own run of the checker before writing
  (it finds the bounds in its scratch), writing;
* ``certify verify C.json``: the independent checker re-reads the file and re-derives the count.

Medians and the ratios ours / numpy and verify / numpy; the count must equal numpy's and the claim
must be proved, verify exit 0. Bar (printed): ours <= 2x numpy. Also, in this process, the bounds
alone (``singular_bounds``) against ``matrix_rank`` alone (no interpreter start-up). Results go to
``reports/bench/numerical_rank.json``; ``--smoke`` (n = 256, one repetition) writes nothing
unless ``--out`` is given.

Run: ``python benchmarks/bench_numerical_rank.py [--n 1024] [--r 64] [--reps 5] [--smoke]``.
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

BAR = 2.0
NUMPY_SCRIPT = "import sys, numpy as np\nprint(int(np.linalg.matrix_rank(np.load(sys.argv[1]))))\n"


def gaussian_product(n: int, r: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, r)) @ rng.standard_normal((r, n))


def _child(args: list[str], cwd: Path) -> tuple[float, int, str]:
    """(CPU seconds of the child, its exit code, its stdout)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, p.returncode, p.stdout


def _in_process(A: np.ndarray, r: int, reps: int) -> dict:
    from certify.checkers.kernel.singular import singular_bounds
    ours, theirs = [], []
    for _ in range(reps):
        t = time.process_time()
        singular_bounds(A, r)
        ours.append(time.process_time() - t)
        t = time.process_time()
        np.linalg.matrix_rank(A)
        theirs.append(time.process_time() - t)
    return {"bounds_s": statistics.median(ours), "matrix_rank_s": statistics.median(theirs),
            "ratio": statistics.median(ours) / statistics.median(theirs), "runs": {"bounds": ours,
                                                                                  "matrix_rank": theirs}}


def bench(n: int, r: int, reps: int) -> dict:
    A = gaussian_product(n, r)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        np.save(d / "m.npy", A)
        (d / "numpy_rank.py").write_text(NUMPY_SCRIPT)
        t_np, t_ours, t_ver, counts = [], [], [], set()
        claim = None
        for i in range(reps):
            for which in (("np", "ours") if i % 2 == 0 else ("ours", "np")):
                if which == "np":
                    cpu, rc, out = _child(["numpy_rank.py", "m.npy"], d)
                    assert rc == 0, rc
                    counts.add(int(out))
                    t_np.append(cpu)
                    continue
                (d / "c.json").unlink(missing_ok=True)
                cpu, rc, _ = _child(["-m", "certify", "rank", "m.npy", "--numerical-only", "--out", "c.json",
                                     "-q", "--no-progress"], d)
                assert rc == 0, rc
                t_ours.append(cpu)
                claim = json.loads((d / "c.json").read_text())["claims"][0]
                cpu, rc, _ = _child(["-m", "certify", "verify", "c.json", "-q"], d)
                assert rc == 0, rc
                t_ver.append(cpu)
    assert claim is not None and len(counts) == 1
    ev = claim["evidence"]
    row = {"n": n, "r": r, "k": ev["k_lower"], "numpy_matrix_rank": counts.pop(), "verdict": claim["verdict"],
           "sigma_max": ev["sigma_max"], "tol": [ev["tol_lower"], ev["tol_upper"]],
           "ours_s": statistics.median(t_ours), "verify_s": statistics.median(t_ver),
           "numpy_s": statistics.median(t_np), "runs": {"ours": t_ours, "verify": t_ver, "numpy": t_np}}
    row["ratio"] = row["ours_s"] / row["numpy_s"]
    row["verify_ratio"] = row["verify_s"] / row["numpy_s"]
    row["in_process"] = _in_process(A, r, reps)
    assert row["k"] == ev["k_upper"] == row["numpy_matrix_rank"] and row["verdict"] == "proved"
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--r", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    n, reps = (256, 1) if a.smoke else (a.n, a.reps)
    out = a.out if a.smoke else (a.out or ROOT / "reports" / "bench" / "numerical_rank.json")
    load = os.getloadavg()
    print(f"# certified numerical rank vs numpy's matrix_rank script; n = {n}, r = {a.r}; load average {load}")
    row = bench(n, a.r, reps)
    print(f"n = {n}, r = {a.r}: k = {row['k']} proved (numpy {row['numpy_matrix_rank']}); certify rank "
          f"{row['ours_s']:.3f} s, verify {row['verify_s']:.3f} s, numpy script {row['numpy_s']:.3f} s (CPU, "
          f"medians of {reps}); ratio ours / numpy {row['ratio']:.2f}, verify / numpy {row['verify_ratio']:.2f}; "
          f"in process: bounds {row['in_process']['bounds_s']:.3f} s vs matrix_rank "
          f"{row['in_process']['matrix_rank_s']:.3f} s")
    print(f"bar: certify rank <= {BAR:.0f}x the numpy script: {'met' if row['ratio'] <= BAR else 'NOT met'}")
    if out is not None:
        res = {"benchmark": "numerical_rank", "baseline": "python numpy_rank.py M.npy: load the matrix, "
               "print numpy.linalg.matrix_rank(A) (SVD, unverified)", "ours": "certify rank M.npy "
               "--numerical-only --out C.json (the producer and its own check), then certify verify C.json",
               "threads": 1, "reps": reps, "loadavg_start": load, "loadavg_end": os.getloadavg(),
               "bar": BAR, "rows": [row]}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=1) + "\n")
        print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
