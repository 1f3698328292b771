"""The canonical extraction (models.canonical: float64, fixed-order sums,
correctly rounded functions through arb) against the torch forward of the same
heads (float32, the layouts' torch maps), in the same run, one thread.

Heads: every certified first-layer head of the gallery models
(``reports/gallery/models``, on their certified token sets), a 153-feature
fla ``BasedLinearAttention`` head (feature_dim 16, taylor_exp) and a 64-feature
performer-pytorch generalized (relu) head, both on the whole cube {0,1}^16
(65,536 tokens). Also timed: the checker's exact Gram of the Based head's
canonical features (``certify.checkers.gram.exact_gram``, limb-split float64
products) against numpy's float64 ``X^T X`` (not exact).

Run: ``python benchmarks/bench_canonical.py``; results in ``reports/bench/canonical.json``.
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _cube(m: int) -> np.ndarray:
    idx = np.arange(1 << m, dtype=np.int64)
    return ((idx[:, None] >> np.arange(m)) & 1).astype(np.float32)


def _time(fn, repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def build_cube16(folder: Path) -> dict[str, Path]:
    import torch
    from safetensors.torch import save_file

    from fla.layers import BasedLinearAttention
    from performer_pytorch.performer_pytorch import SelfAttention
    torch.manual_seed(0)
    based = BasedLinearAttention(hidden_size=16, feature_dim=16, num_heads=1, num_key_value_heads=1)
    with torch.no_grad():
        for p in based.parameters():
            p.normal_(0, 0.5)
    (folder / "based").mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in based.state_dict().items()}, str(folder / "based/model.safetensors"))
    (folder / "based/config.json").write_text(json.dumps({"class": "BasedLinearAttention", "feature_dim": 16,
                                                          "num_heads": 1, "num_key_value_heads": 1}))
    torch.manual_seed(1)
    perf = SelfAttention(dim=16, heads=1, dim_head=16, nb_features=64, generalized_attention=True)
    (folder / "performer").mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in perf.state_dict().items()},
              str(folder / "performer/model.safetensors"))
    (folder / "performer/config.json").write_text(json.dumps({"generalized_attention": True}))
    return {"based-153-cube16": folder / "based", "performer-64-cube16": folder / "performer"}


def heads_of(path: Path):
    """``[(name, head, tokens)]`` for the certified first-layer heads of a model."""
    from certify.sources.thirdparty import load_model
    from models.layouts import Refusal
    model = load_model(path)
    L = model.layer(None)
    if model.detected.embedding is not None:
        toks = model.detected.embedding.numpy()
    elif L.m <= 16:
        toks = _cube(L.m)
    else:
        from certify.core.families import load_family
        toks = np.asarray(load_family("paper-5.1").tokens, dtype=np.float32)
    return [(h.details.get("head"), h, toks) for h in L.heads if not isinstance(h, Refusal)]


def bench_model(name: str, path: Path) -> dict:
    import torch
    rows = []
    for hi, h, toks in heads_of(path):
        tt = torch.from_numpy(toks)

        def torch_fwd():
            with torch.no_grad():
                h.feature_matrices(tt)
        t_torch = _time(torch_fwd, 3)
        t_canon = _time(lambda: h.canonical_features(toks), 1)
        q, k = h.canonical_features(toks)
        with torch.no_grad():
            tq, tk = h.feature_matrices(tt)
        scale = max(float(np.abs(q).max()), float(np.abs(k).max()), 1e-300)
        diff = max(float(np.abs(q - tq.double().numpy()).max()), float(np.abs(k - tk.double().numpy()).max()))
        rows.append({"head": hi, "feature_map": h.feature_map, "tokens": int(toks.shape[0]), "r": int(q.shape[1]),
                     "torch_s": round(t_torch, 5), "canonical_s": round(t_canon, 4),
                     "ratio": round(t_canon / t_torch, 1), "max_abs_diff_over_max": diff / scale})
        print(f"{name} head {hi} ({h.feature_map}, {toks.shape[0]} tokens, r = {q.shape[1]}): canonical "
              f"{t_canon:.3f} s, torch {t_torch:.4f} s, ratio {t_canon / t_torch:.0f}; "
              f"max |canonical - torch| / max = {diff / scale:.1e}", file=sys.stderr)
    return {"model": name, "heads": rows}


def bench_gram(path: Path) -> dict:
    from certify.checkers.gram import exact_gram
    (_, h, toks), = heads_of(path)
    q, _ = h.canonical_features(toks)
    t_exact = _time(lambda: exact_gram(q), 1)
    t_float = _time(lambda: q.T @ q, 3)
    print(f"exact Gram of the Based head's PhiQ ({q.shape[0]} x {q.shape[1]}): {t_exact:.2f} s; float64 "
          f"X^T X {t_float:.3f} s; ratio {t_exact / t_float:.0f}", file=sys.stderr)
    return {"what": "exact Gram of PhiQ (65536 x 153), certify.checkers.gram vs numpy float64 X^T X",
            "exact_s": round(t_exact, 3), "float_s": round(t_float, 4), "ratio": round(t_exact / t_float, 1)}


def main() -> int:
    import warnings
    warnings.filterwarnings("ignore")
    import torch
    torch.set_num_threads(1)
    out = {"baseline": "the torch forward of the same heads (models.layouts, float32; best of 3)",
           "threads": 1, "models": []}
    gallery = ROOT / "reports" / "gallery" / "models"
    for name in ("performer", "performer-user-module/train.ckpt", "lat", "fla-linear-attn", "fla-sharded-bf16",
                 "fla-layer-elu", "fla-based", "zoology", "fast-transformers", "width24"):
        out["models"].append(bench_model(name, gallery / name))
    with tempfile.TemporaryDirectory() as tmp:
        paths = build_cube16(Path(tmp))
        for name, p in paths.items():
            out["models"].append(bench_model(name, p))
        out["gram"] = bench_gram(paths["based-153-cube16"])
    dest = ROOT / "reports" / "bench" / "canonical.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {dest.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
