"""Certified eps-rank of a factor kernel at r in the hundreds, against numpy's float
count of the same singular values, measured in the same run.

The kernels have the spectrum shape of a performer head (``Performer(dim=512,
heads=8, generalized_attention=True)`` under ``nn.Embedding(20000, 512)``:
ReLU random features plus 1e-3, 266 of them by default): ``PhiQ, PhiK`` are
``relu(E W) + 1e-3`` for 20,000 Gaussian token vectors ``E`` (64-dim) and
Gaussian ``W`` (64 x r), r = 64, 128, 266; singular values of ``PhiQ PhiK^T``
from about 10^3 to 10^6, eps = 1/1000 (the command's default) and a threshold
in the middle of the spectrum (``k = r / 2``).

* ours, producer: ``certify.rank.eps.eps_rank_factor_claim`` on the exact
  summary (the exact Grams are computed once, before timing): the count by the
  verified float congruence (:mod:`solvers.congruence`), and for r <= 128 the
  enclosures of every singular value; the exact characteristic polynomial only
  where floats cannot decide;
* ours, checker: ``certify.checkers.rank.check`` of that claim with the Grams
  taken as stated (a head too large to embed; this includes the checker's PSD
  test of both Grams);
* baseline (named): numpy's float count from the same exact Grams rounded to
  float64, ``svd(cholesky(GQ)^T cholesky(GK)) > eps`` (unverified);
* previous method, for r <= ``--charpoly-max`` (default 128; over 100 CPU s at
  266): the exact characteristic polynomial of the core with Descartes' rule
  and Arb enclosures (producer), and the checker's exact count, PSD tests and
  enclosure counts.

CPU seconds (``time.process_time``), one BLAS thread, interleaved medians of
``--reps`` runs. Bars (printed): at r = 266 producer and checker each under 10
CPU s. Results go to ``reports/bench/eps_rank.json``; ``--smoke`` (r = 32,
2,000 tokens, one repetition, a few seconds) prints the same lines and writes
nothing unless ``--out`` is given.

Run: ``python benchmarks/bench_eps_rank.py [--ranks 64,128,266] [--reps 3] [--smoke]``.
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
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BAR_S = 10.0
BAR_R = 266


def features(r: int, tokens: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((tokens, 64)) * 0.5
    return (np.maximum(E @ rng.standard_normal((64, r)), 0) + 1e-3,
            np.maximum(E @ rng.standard_normal((64, r)), 0) + 1e-3)


def _cpu(fn):
    t = time.process_time()
    out = fn()
    return time.process_time() - t, out


def _numpy_count(gq, eq, gk, ek, eps: Fraction) -> int:
    Gq = np.array([[float(v) for v in row] for row in gq]) * 2.0 ** eq
    Gk = np.array([[float(v) for v in row] for row in gk]) * 2.0 ** ek
    s = np.linalg.svd(np.linalg.cholesky(Gq).T @ np.linalg.cholesky(Gk), compute_uv=False)
    return int(np.sum(s > float(eps)))


def _previous(gq, eq, gk, ek, eps: Fraction, enclosures: bool):
    """The previous method, producer then checker: exact characteristic polynomial."""
    import flint

    from certify.checkers.kernel import is_psd, roots
    from certify.checkers.rank import eps as ceps
    from solvers import spectral as sp
    GQ, GK = flint.fmpz_mat(gq), flint.fmpz_mat(gk)
    t_p, res = _cpu(lambda: sp.eps_rank_core(GQ * GK, eq + ek, eps, enclosures=enclosures))

    def check():
        assert is_psd(GQ) and is_psd(GK)                   # the kernel's exact PSD test
        P = roots.charpoly(GQ * GK)
        k = roots.count_above(P, eps * eps / Fraction(2) ** (eq + ek))
        if enclosures:
            ceps._check_enclosures(lambda: P, GQ.nrows(), eq + ek,
                                   [[f"{lo.numerator}/{lo.denominator}", f"{hi.numerator}/{hi.denominator}"]
                                    for lo, hi in res.sigma_sq_enclosures])
        return k
    t_c, k = _cpu(check)
    assert k == res.k
    return t_p, t_c, res.k


def bench(r: int, tokens: int, reps: int, charpoly_max: int) -> list[dict]:
    from certify.checkers.rank import check
    from certify.core.kernel import Provenance, from_features
    from certify.rank.eps import eps_rank_factor_claim
    from certify.rank.options import RankOptions
    from certify.rank.summary import summarize_features

    q, k = features(r, tokens)
    kern = from_features(q, k, Provenance("memory", None, "memory", "float64"))
    summ = summarize_features(kern)
    gq = [[int(v) for v in row] for row in summ.gram_q.tolist()]
    gk = [[int(v) for v in row] for row in summ.gram_k.tolist()]
    s = np.linalg.svd(np.linalg.qr(q)[1] @ np.linalg.qr(k)[1].T, compute_uv=False)
    mid = Fraction(float(np.sqrt(s[r // 2 - 1] * s[r // 2])))
    out = []
    for label, eps in (("1/1000", Fraction(1, 1000)), ("mid-spectrum", mid)):
        opt = RankOptions(eps=eps, embed_limit=0)
        t_prod, t_chk, t_np = [], [], []
        claim = None
        for i in range(reps):
            order = ("np", "ours") if i % 2 == 0 else ("ours", "np")
            for which in order:
                if which == "np":
                    t, n_np = _cpu(lambda: _numpy_count(gq, summ.eq, gk, summ.ek, eps))
                    t_np.append(t)
                else:
                    t, c = _cpu(lambda: eps_rank_factor_claim(kern, summ, eps, opt))
                    claim = c.to_json()
                    t_prod.append(t)
                    t, probs = _cpu(lambda: check(claim, {"claims": [claim]}))
                    assert probs == [], probs
                    t_chk.append(t)
        row = {"r": r, "tokens": tokens, "eps": label, "k": claim["evidence"]["k"], "numpy_k": n_np,
               "method": claim["method"], "enclosures": len(claim["evidence"]["sigma_sq_enclosures"]),
               "producer_s": statistics.median(t_prod), "checker_s": statistics.median(t_chk),
               "numpy_s": statistics.median(t_np), "runs": {"producer": t_prod, "checker": t_chk, "numpy": t_np}}
        row["producer_ratio"] = row["producer_s"] / row["numpy_s"]
        row["checker_ratio"] = row["checker_s"] / row["numpy_s"]
        if r <= charpoly_max:
            tp, tc, kp = _previous(gq, summ.eq, gk, summ.ek, eps, enclosures=r <= 128)
            assert kp == row["k"]
            row.update(previous_producer_s=tp, previous_checker_s=tc)
        out.append(row)
        prev = (f"; previous (charpoly) producer {row['previous_producer_s']:.2f} s, checker "
                f"{row['previous_checker_s']:.2f} s" if "previous_producer_s" in row else "")
        print(f"r = {r:3d}, eps {label:>12}: k = {row['k']} ({row['method']}, numpy {n_np}); "
              f"producer {row['producer_s']:.3f} s, checker {row['checker_s']:.3f} s, numpy float SVD count "
              f"{row['numpy_s']:.4f} s; ratio producer/numpy {row['producer_ratio']:.1f}, "
              f"checker/numpy {row['checker_ratio']:.1f}{prev}", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="64,128,266")
    ap.add_argument("--tokens", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--charpoly-max", type=int, default=128,
                    help="also time the previous exact method up to this r")
    ap.add_argument("--smoke", action="store_true", help="r = 32, 2000 tokens, one run; writes only with --out")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    if a.smoke:
        ranks, tokens, reps = [32], 2000, 1      # seconds, the previous method included
        out = a.out
    else:
        ranks, tokens, reps = [int(v) for v in a.ranks.split(",")], a.tokens, a.reps
        out = a.out or ROOT / "reports" / "bench" / "eps_rank.json"
    print(f"# certified eps-rank (factor form) vs numpy's float SVD count; {tokens} tokens; "
          f"load average {os.getloadavg()}")
    rows = [row for r in ranks for row in bench(r, tokens, reps, a.charpoly_max)]
    bars = [row for row in rows if row["r"] == BAR_R]
    for row in bars:
        ok = row["producer_s"] < BAR_S and row["checker_s"] < BAR_S
        print(f"bar: r = {BAR_R}, eps {row['eps']}: producer {row['producer_s']:.2f} s and checker "
              f"{row['checker_s']:.2f} s each under {BAR_S:.0f} CPU s: {'met' if ok else 'NOT met'}")
    if out is not None:
        res = {"benchmark": "eps_rank", "baseline": "numpy float SVD count from the same Grams "
               "(svd(cholesky(GQ)^T cholesky(GK)) > eps, unverified)", "tokens": tokens, "reps": reps,
               "rows": rows, "bar": {"r": BAR_R, "cpu_s": BAR_S}, "loadavg_end": os.getloadavg()}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=1) + "\n")
        print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
