"""The canonical extraction (models.canonical: float64, fixed-order sums and
correctly rounded functions, compiled) against the torch forward of the same
heads (the layouts' torch maps), in the same run, one thread, CPU seconds.

The real-size case: an fla ``LinearAttentionForCausalLM`` (hedgehog feature
map, hidden 1024, 16 heads of 64, vocabulary 32000, two layers,
``save_pretrained``), every head of layer 0 on the 32000 embedding rows: the
canonical features against the torch forward of the same maps in float32 and
in float64 (the same model saved in float64, so the same code runs in double).
The same LM with fla's other feature maps at that size: ``elu`` (elu + 1),
``t2r``, ``dpfp`` (``realsize_maps``).

Then every certified first-layer head of the gallery models
(``reports/gallery/models``, on their certified token sets), a 153-feature
fla ``BasedLinearAttention`` head (feature_dim 16, taylor_exp) and a 64-feature
performer-pytorch generalized (relu) head, both on the whole cube {0,1}^16
(65,536 tokens), against torch float32. Also timed: the producer's exact Gram
of the Based head's canonical features (``solvers.exact.gram``, limb-split
float64 products) and the checker's test of it (``certify.checkers.kernel.gram.
gram_identity``, one exact random product) against numpy's float64 ``X^T X``
(not exact).

Run: ``python benchmarks/bench_canonical.py``; results in
``reports/bench/canonical.json``. ``--smoke``: the real-size case at 2000
tokens, hidden 256 and 4 heads only (seconds; writes nothing unless ``--out``).
``--realsize-only`` (with ``--maps elu,t2r``): the real-size cases alone, the
other entries of the existing JSON kept. Each real-size row also gives the
system part of each side's CPU time (page faults: numpy advises transparent huge
pages for arrays of 4 MB and more, and a machine with fragmented memory compacts
for each on first touch).
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")
# numpy's huge-page advice off, as the commands run (certify/__main__.py), for both sides of
# the comparison (the baseline's child processes inherit it)
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")

import argparse
import hashlib
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


#: fla feature maps also measured at the real size (``elu`` is elu + 1)
REALSIZE_MAPS = ("elu", "t2r", "dpfp")


def build_cube16(folder: Path) -> dict[str, Path]:
    import torch
    from fla.layers import BasedLinearAttention
    from performer_pytorch.performer_pytorch import SelfAttention
    from safetensors.torch import save_file
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
    (folder / "performer/config.json").write_text(json.dumps({"generalized_attention": True, "kernel_fn": "ReLU",
                                                              "no_projection": False, "local_heads": 0}))
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
    from certify.checkers.kernel.gram import gram_identity
    from solvers.exact.gram import batch_gram, normalize_pow2
    (_, h, toks), = heads_of(path)
    q, _ = h.canonical_features(toks)
    G, e = normalize_pow2(*batch_gram(q))
    W = G.tolist()
    t_exact = _time(lambda: normalize_pow2(*batch_gram(q)), 1)
    t_check = _time(lambda: gram_identity(q, W, e), 1)
    t_float = _time(lambda: q.T @ q, 3)
    assert gram_identity(q, W, e)
    print(f"exact Gram of the Based head's PhiQ ({q.shape[0]} x {q.shape[1]}): {t_exact:.2f} s, the checker's "
          f"test of it {t_check:.2f} s; float64 X^T X {t_float:.3f} s; ratio {t_exact / t_float:.0f} / "
          f"{t_check / t_float:.0f}", file=sys.stderr)
    return {"what": "exact Gram of PhiQ (65536 x 153) by solvers.exact.gram, and the checker's identity test "
            "of it, vs numpy float64 X^T X", "exact_s": round(t_exact, 3), "check_s": round(t_check, 3),
            "float_s": round(t_float, 4), "ratio": round(t_exact / t_float, 1),
            "check_ratio": round(t_check / t_float, 1)}


def _cpu(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def _cpu_sys(fn) -> tuple[float, float]:
    """CPU seconds of ``fn`` and the part of them spent in the operating system
    (page faults: numpy backs arrays of 4 MB and more with transparent huge pages,
    which a machine with fragmented memory compacts for on each first touch)."""
    import resource
    r0, t = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
    fn()
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
    return t1 - t, r1.ru_stime - r0.ru_stime


def build_hedgehog_lm(folder: Path, hidden: int, heads: int, vocab: int,
                      feature_map: str = "hedgehog") -> tuple[Path, Path]:
    """An fla LM (two layers; the hedgehog feature map unless told) saved with save_pretrained,
    in float32 and in float64."""
    import torch
    from fla.models import LinearAttentionConfig, LinearAttentionForCausalLM
    torch.manual_seed(0)
    cfg = LinearAttentionConfig(hidden_size=hidden, num_hidden_layers=2, num_heads=heads, vocab_size=vocab,
                                feature_map=feature_map, norm_feature_map=True)
    model = LinearAttentionForCausalLM(cfg)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():                     # weights of a trained scale
            p.copy_(torch.randn(p.shape, generator=g) * (0.5 if p.ndim == 1 else p.shape[-1] ** -0.5))
    out = []
    for dt, name in ((torch.float32, "f32"), (torch.float64, "f64")):
        path = folder / name
        model.to(dt).save_pretrained(path)
        (path / "generation_config.json").unlink(missing_ok=True)
        out.append(path)
    return out[0], out[1]


def bench_realsize(tokens: int, hidden: int, heads: int, vocab: int, feature_map: str = "hedgehog") -> dict:
    """Canonical features of every layer-0 head vs the torch forward in float32 and float64."""
    import torch

    from certify.sources.thirdparty import load_model
    from models.canonical import arith
    with tempfile.TemporaryDirectory() as tmp:
        p32, p64 = build_hedgehog_lm(Path(tmp), hidden, heads, vocab, feature_map)
        m32, m64 = load_model(p32), load_model(p64)
        h32 = [h for h in m32.layer(None).heads if hasattr(h, "canonical_features")]
        h64 = [h for h in m64.layer(None).heads if hasattr(h, "canonical_features")]
        emb = m32.detected.embedding.numpy()[:tokens]
        emb64 = torch.from_numpy(emb.astype(np.float64))                  # exact: the same values
        t32 = torch.from_numpy(emb)
        assert len(h32) == heads == len(h64) and all(h.dtype == torch.float64 for h in h64)
        digest = hashlib.sha256()
        diffs = []

        def canonical():
            for h in h32:
                q, k = h.canonical_features(emb)
                digest.update(q.tobytes() + k.tobytes())
        feats64 = []

        def torch64():
            with torch.no_grad():
                for h in h64:
                    feats64.append(h.feature_matrices(emb64))

        def torch32():
            with torch.no_grad():
                for h in h32:
                    h.feature_matrices(t32)
        t_f32, s_f32 = _cpu_sys(torch32)
        t_f64, s_f64 = _cpu_sys(torch64)
        t_can, s_can = _cpu_sys(canonical)
        for h, (tq, tk) in zip(h32, feats64):                     # the canonical values, checked
            q, k = h.canonical_features(emb[:256])
            diffs.append(max(float(np.abs(q - tq[:256].numpy()).max()), float(np.abs(k - tk[:256].numpy()).max())))
        # the pure path (arb and numpy loops, as without the kernel): one head on a few tokens, scaled
        few = min(tokens, 200)
        q0, k0 = h32[0].canonical_features(emb[:few])
        rank = int(q0.shape[1])
        saved = arith._kernel
        arith._kernel = lambda: None
        try:
            t_pure = _cpu(lambda: h32[0].canonical_features(emb[:few]))
            qp, kp = h32[0].canonical_features(emb[:few])
        finally:
            arith._kernel = saved
        same = qp.tobytes() == q0.tobytes() and kp.tobytes() == k0.tobytes()
        t_pure_all = t_pure * (tokens / few) * heads
    row = {"what": f"fla LinearAttentionForCausalLM ({feature_map}), every head of layer 0: {heads} heads of "
                   f"{hidden // heads} on {tokens} embedding rows of width {hidden}, features of width "
                   f"{rank}", "feature_map": feature_map, "tokens": tokens, "hidden": hidden, "heads": heads,
           "vocab": vocab,
           "canonical_s": round(t_can, 2), "torch_float32_s": round(t_f32, 2), "torch_float64_s": round(t_f64, 2),
           "ratio_float32": round(t_can / t_f32, 2), "ratio_float64": round(t_can / t_f64, 2),
           "system_s": {"canonical": round(s_can, 2), "torch_float32": round(s_f32, 2),
                        "torch_float64": round(s_f64, 2)},
           "max_abs_canonical_minus_torch64": max(diffs), "canonical_sha256": digest.hexdigest(),
           "kernel": arith._kernel() is not None,
           "pure_path_estimated_s": round(t_pure_all, 1),
           "pure_path_estimate": f"head 0 on {few} tokens through arb and numpy loops ({t_pure:.2f} CPU s, the "
                                 f"kernel's bits: {same}), times {tokens // few} x {heads} heads"}
    if not same:
        raise AssertionError("the pure path and the kernel give different canonical features")
    print(f"real size ({tokens} tokens x {hidden} wide x {heads} heads, {feature_map}): canonical {t_can:.1f} CPU s, "
          f"torch float32 {t_f32:.1f} s, float64 {t_f64:.1f} s; ratio canonical / torch float32 = "
          f"{t_can / t_f32:.2f}, canonical / torch float64 = {t_can / t_f64:.2f} (the pure path: about "
          f"{t_pure_all:.0f} s, estimated)")
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="the real-size case scaled down (seconds)")
    ap.add_argument("--out", type=Path, default=None, help="JSON results (default reports/bench/canonical.json)")
    ap.add_argument("--realsize-only", action="store_true",
                    help="the real-size cases only; the other entries of the existing JSON are kept as they are")
    ap.add_argument("--maps", default=",".join(REALSIZE_MAPS),
                    help=f"the fla maps measured at the real size besides hedgehog (default {','.join(REALSIZE_MAPS)})")
    a = ap.parse_args(argv)
    import warnings
    warnings.filterwarnings("ignore")
    import torch
    torch.set_num_threads(1)
    import os as _os
    out = {"baseline": "the torch forward of the same heads (models.layouts; real size: float32 and float64, "
                       "CPU seconds; gallery and cube: float32, best of 3)",
           "threads": 1, "load_average": list(_os.getloadavg())}
    if a.smoke:
        out["realsize"] = bench_realsize(2000, 256, 4, 2000)
        out["realsize_maps"] = [bench_realsize(2000, 256, 4, 2000, "elu")]
    else:
        out["realsize"] = bench_realsize(32000, 1024, 16, 32000)
        out["realsize_maps"] = [bench_realsize(32000, 1024, 16, 32000, fm) for fm in a.maps.split(",") if fm]
    if a.realsize_only and not a.smoke:
        dest = a.out if a.out is not None else ROOT / "reports" / "bench" / "canonical.json"
        kept = json.loads(dest.read_text()) if dest.exists() else {}
        out = {**kept, **out, "realsize_only": "this run measured the real-size cases; models and gram are an "
                                              "earlier run's (load_average_models)",
               "load_average_models": kept.get("load_average_models", kept.get("load_average"))}
    elif not a.smoke:
        out["models"] = []
        gallery = ROOT / "reports" / "gallery" / "models"
        for name in ("performer", "performer-user-module/train.ckpt", "lat", "fla-linear-attn", "fla-sharded-bf16",
                     "fla-layer-elu", "fla-based", "zoology", "fast-transformers", "width24"):
            out["models"].append(bench_model(name, gallery / name))
        with tempfile.TemporaryDirectory() as tmp:
            paths = build_cube16(Path(tmp))
            for name, p in paths.items():
                out["models"].append(bench_model(name, p))
            out["gram"] = bench_gram(paths["based-153-cube16"])
    out["load_average_end"] = list(_os.getloadavg())
    dest = a.out if a.out is not None else (None if a.smoke else ROOT / "reports" / "bench" / "canonical.json")
    if dest is not None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp_dest = dest.with_suffix(".tmp")
        tmp_dest.write_text(json.dumps(out, indent=1) + "\n")
        tmp_dest.replace(dest)
        print(f"wrote {dest}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
