"""Factor files end to end: ``certify rank F.npz --eps 1/1000`` and ``certify verify`` against
numpy's SVD of the product, measured in the same run.

``F.npz`` holds float32 ``phi_q``, ``phi_k`` (20,000 tokens x r). Two kinds:

* ``performer``: ``relu(E W) + 1e-3`` (as ``bench_eps_rank.py``): full rank, every singular value
  far above eps; the float congruence decides;
* ``low-rank``: ``E W`` with 64-dim ``E`` rounded to float32: rank 64 up to the float32 rounding,
  so ``r - 64`` singular values sit at the rounding's scale, around eps, where binary64
  cannot decide and the arb-ball congruence (or, failing it, the exact characteristic
  polynomial) does.

Baseline: numpy's SVD of ``PhiQ PhiK^T`` in factored form, ``svd(qr(PhiQ).R qr(PhiK).R^T)``,
unverified, in this process. Ours: each command in a child process (CPU seconds of it and
its descendants, one BLAS thread); the eps-rank claim's own timing is read from the
certificate. Results: ``reports/bench/factor_files.json``.

Run: ``python benchmarks/bench_factor_files.py [--ranks 64,256,1024] [--kinds performer,low-rank]
[--smoke]``.
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
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_realsize import measured  # noqa: E402


def features(kind: str, r: int, tokens: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((tokens, 64)) * 0.5
    Wq, Wk = rng.standard_normal((64, r)), rng.standard_normal((64, r))
    if kind == "performer":
        return np.maximum(E @ Wq, 0) + 1e-3, np.maximum(E @ Wk, 0) + 1e-3
    return E @ Wq, E @ Wk


def svd_seconds(q: np.ndarray, k: np.ndarray) -> tuple[float, int]:
    t = time.process_time()
    s = np.linalg.svd(np.linalg.qr(q, mode="r") @ np.linalg.qr(k, mode="r").T, compute_uv=False)
    return time.process_time() - t, int(np.sum(s > 1e-3))


def run(kind: str, r: int, tokens: int, folder: Path) -> dict:
    q, k = (a.astype(np.float32) for a in features(kind, r, tokens))
    np.savez(folder / "f.npz", phi_q=q, phi_k=k)
    t_svd, k_svd = svd_seconds(q.astype(np.float64), k.astype(np.float64))
    rank = measured(["rank", "f.npz", "--eps", "1/1000", "--out", "c.json", "-q"], folder)
    cert = json.loads((folder / "c.json").read_text()) if (folder / "c.json").exists() else {"claims": []}
    eps = next((c for c in cert["claims"] if c["kind"] == "eps_rank"), {})
    ver = measured(["verify", "c.json"], folder)
    row = {"kind": kind, "r": r, "tokens": tokens, "numpy_svd_s": round(t_svd, 2), "numpy_k": k_svd,
           "k": (eps.get("evidence") or {}).get("k"), "method": eps.get("method"),
           "eps_rank_claim_s": round((eps.get("timings") or {}).get("eps_rank", float("nan")), 2),
           "rank_cmd": rank, "verify_cmd": ver}
    row["eps_rank_over_svd"] = round(row["eps_rank_claim_s"] / t_svd, 2)
    row["rank_cmd_over_svd"] = round(rank["cpu_s"] / t_svd, 2)
    row["verify_over_svd"] = round(ver["cpu_s"] / t_svd, 2)
    print(f"{kind:>9} r = {r:4d}: k = {row['k']} ({row['method']}; numpy {k_svd}); numpy SVD {t_svd:.2f} s; "
          f"eps-rank claim {row['eps_rank_claim_s']} s ({row['eps_rank_over_svd']}x); certify rank "
          f"{rank['cpu_s']} s, exit {rank['rc']} (ratio {row['rank_cmd_over_svd']}); verify {ver['cpu_s']} s, "
          f"exit {ver['rc']} ({row['verify_over_svd']}x)", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="64,256,1024")
    ap.add_argument("--kinds", default="performer,low-rank")
    ap.add_argument("--tokens", type=int, default=20000)
    ap.add_argument("--out", default=None, help="default: reports/bench/factor_files.json (none with --smoke)")
    ap.add_argument("--smoke", action="store_true", help="r = 32, 2,000 tokens; writes nothing unless --out")
    a = ap.parse_args()
    if a.smoke:
        a.ranks, a.tokens = "32", 2000
    elif a.out is None:
        a.out = str(ROOT / "reports/bench/factor_files.json")
    rows = []
    for kind in a.kinds.split(","):
        for r in (int(v) for v in a.ranks.split(",")):
            with tempfile.TemporaryDirectory() as d:
                rows.append(run(kind, r, a.tokens, Path(d)))
            if a.out:
                Path(a.out).write_text(json.dumps({"rows": rows, "load_average": os.getloadavg(),
                                                   "machine": "2 cores shared with other work; CPU seconds"},
                                                  indent=1) + "\n")


if __name__ == "__main__":
    main()
