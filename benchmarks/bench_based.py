"""A 153-feature Based head on the whole 16-bit cube, certified and verified,
against the uncertified float64 answer to the same questions, in the same run.

The layer is fla's own ``BasedLinearAttention(hidden_size=16, feature_dim=16)``
(taylor_exp features: 1 + 16 + 136 = 153, kernel ``1 + s + s^2/2``), weights
drawn N(0, 0.5^2) with a fixed seed and saved as its users save it (a
safetensors state dict and a ``config.json``). Its tokens are the cube
``{0,1}^16`` (65,536 tokens, 2^32 pairs).

* ours: ``certify checkpoint DIR --out OUT`` (fresh process: exact rank,
  eps-rank at 1/1000 and nonnegativity, each ``proved`` or not; the producer
  runs the independent checker before writing) and ``certify verify
  OUT/certificate.json`` (fresh process);
* baseline: the float64 answer on the same features (the project's own
  extraction): Gram matrices, ``matrix_rank`` of the core, the count of
  eigenvalues above eps^2, and the minimum of ``<phi_q(x), phi_k(z)>`` over all
  2^32 pairs (blocked float64 products): nothing proved.

Bars (printed): certified in under 2 minutes, verified in under 1 minute.
Results go to ``reports/bench/based.json``. ``--smoke``: the same pipeline on a
15-feature head (``hidden_size=8, feature_dim=4``, the cube {0,1}^8), its weights
written with numpy in fla's state-dict layout, nothing written.

Run: ``python benchmarks/bench_based.py [--no-pairs] [--smoke]``.
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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BARS = {"certify_s": 120.0, "verify_s": 60.0}


def build(folder: Path, seed: int = 0) -> Path:
    import torch
    from fla.layers import BasedLinearAttention
    from safetensors.torch import save_file
    torch.manual_seed(seed)
    layer = BasedLinearAttention(hidden_size=16, feature_dim=16, num_heads=1, num_key_value_heads=1)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 0.5)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in layer.state_dict().items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"class": "BasedLinearAttention", "feature_dim": 16,
                                                    "num_heads": 1, "num_key_value_heads": 1}) + "\n")
    return folder


def build_small(folder: Path, seed: int = 0, hidden: int = 8, feature_dim: int = 4) -> Path:
    """A small head in fla's state-dict layout (``q_proj``, ``k_proj``: ``(feature_dim,
    hidden)``; ``v_proj``, ``o_proj``: ``(hidden, hidden)``), weights N(0, 0.5^2) from numpy."""
    from safetensors.numpy import save_file
    rng = np.random.default_rng(seed)
    shapes = {"q_proj.weight": (feature_dim, hidden), "k_proj.weight": (feature_dim, hidden),
              "v_proj.weight": (hidden, hidden), "o_proj.weight": (hidden, hidden)}
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: (rng.standard_normal(v) * 0.5).astype(np.float32) for k, v in shapes.items()},
              str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"class": "BasedLinearAttention", "feature_dim": feature_dim,
                                                    "num_heads": 1, "num_key_value_heads": 1}) + "\n")
    return folder


def _timed(cmd: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, float, float]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return p, wall, cpu


def baseline(folder: Path, pairs: bool) -> dict:
    """The float64 answer on the same features (uncertified)."""
    from threadpoolctl import threadpool_limits

    from certify.checkpoints.heads import load_detected
    from certify.core.files import sha256_file
    from certify.core.kernel import Provenance
    from certify.sources.checkpoint import from_model
    loaded = load_detected(str(folder), None)
    det, weights = loaded.detected, loaded.source
    h = det.layers[0].heads[0]
    kernel = from_model(h, f"cube:{det.m}", Provenance(str(weights), sha256_file(weights), "bench", "float32"))
    t0, c0 = time.perf_counter(), time.process_time()
    with threadpool_limits(1):
        qs, ks = zip(*kernel.feature_batches(1 << 14))
        Q, K = np.concatenate(qs).astype(np.float64), np.concatenate(ks).astype(np.float64)
        GQ, GK = Q.T @ Q, K.T @ K
        core = GQ @ GK
        rank = int(np.linalg.matrix_rank(core))
        ev = np.linalg.eigvals(core).real
        eps_rank = int((ev > 1e-6).sum())
        low = None
        if pairs:
            low = np.inf
            for a in range(0, len(Q), 4096):
                low = min(low, float((Q[a:a + 4096] @ K.T).min()))
    return {"float_rank": rank, "float_eps_rank": eps_rank, "float_min_alpha": low,
            "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "pairs": pairs,
            "tokens": kernel.num_tokens, "features": int(kernel.rank)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-pairs", action="store_true", help="skip the baseline's 2^32-pair float minimum")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench" / "based.json")
    ap.add_argument("--smoke", action="store_true", help="a 15-feature head on cube:8, nothing written")
    a = ap.parse_args(argv)
    if a.smoke:
        a.out = None
        print(f"# BasedLinearAttention layout, 15 features, cube:8 (256 tokens); load average {os.getloadavg()}")
    else:
        print(f"# fla BasedLinearAttention, 153 features, cube:16 (65,536 tokens); load average "
              f"{os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        folder = build_small(tmp / "based8") if a.smoke else build(tmp / "based16")
        p, wall, cpu = _timed([sys.executable, "-m", "certify", "checkpoint", str(folder), "--out",
                               str(tmp / "out")], tmp)
        if p.returncode not in (0, 1):
            print(p.stderr[-3000:], file=sys.stderr)
            return 1
        cert = json.loads((tmp / "out" / "certificate.json").read_text())
        v, vwall, vcpu = _timed([sys.executable, "-m", "certify", "verify",
                                 str(tmp / "out" / "certificate.json"), "--json"], tmp)
        vj = json.loads(v.stdout)
        base = baseline(folder, not a.no_pairs)
    verdicts = {c["kind"]: {"verdict": c["verdict"], "method": c["evidence"].get("method"),
                          "value": c["evidence"].get("rank_lower", c["evidence"].get("k")),
                          "seconds": sum(c.get("timings", {}).values())} for c in cert["claims"]}
    res = {"certify_s": wall, "certify_cpu_s": cpu, "certify_exit": p.returncode, "verdicts": verdicts,
           "verify_s": vwall, "verify_cpu_s": vcpu, "verify_exit": v.returncode, "verify_holds": vj["holds"],
           "verify_assumptions": vj["open_assumptions"], "baseline": base,
           "ratio_cpu": cpu / base["cpu_s"], "bars": BARS, "loadavg_end": os.getloadavg()}
    res["bars_met"] = wall < BARS["certify_s"] and vwall < BARS["verify_s"] and \
        all(c["verdict"] == "proved" for c in verdicts.values())
    for kind, c in verdicts.items():
        print(f"  {kind}: {c['verdict']}" + (f" ({c['method']})" if c["method"] else "")
              + (f", value {c['value']}" if c["value"] is not None else ""))
    print(f"  certify checkpoint: {wall:.1f} s wall, {cpu:.1f} CPU s (bar < {BARS['certify_s']:.0f} s: "
          f"{'met' if wall < BARS['certify_s'] else 'MISSED'}); exit {p.returncode}")
    print(f"  certify verify: {vwall:.1f} s wall, {vcpu:.1f} CPU s (bar < {BARS['verify_s']:.0f} s: "
          f"{'met' if vwall < BARS['verify_s'] else 'MISSED'}); exit {v.returncode}, holds {vj['holds']}"
          + (f", assuming {', '.join(vj['open_assumptions'])}" if vj["open_assumptions"] else ""))
    print(f"  float64 baseline (uncertified): rank {base['float_rank']}, eps-rank {base['float_eps_rank']}, "
          + (f"min alpha over {base['tokens']}^2 pairs {base['float_min_alpha']:.4f}, " if base["pairs"] else "")
          + f"{base['wall_s']:.1f} s wall, {base['cpu_s']:.1f} CPU s; ratio certified/float (CPU) "
          f"{res['ratio_cpu']:.2f}")
    print(f"  load average after: {os.getloadavg()}")
    if a.out is None:
        return 0 if p.returncode == 0 and v.returncode in (0, 4) else 1
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"  wrote {a.out.relative_to(ROOT) if a.out.is_relative_to(ROOT) else a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
