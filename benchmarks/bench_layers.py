"""Every layer of an fla language model on stated sequences: ``certify checkpoint MODEL
--sequences random:S,T,SEED`` and ``certify verify --replay-extraction`` against the torch
float32 forward of the whole model on the same ids.

The models are built by the library with its own initialisation (``torch.manual_seed(0)``,
``LinearAttentionForCausalLM(config)``, ``save_pretrained``; no weight is re-drawn):

* ``hedgehog``: 24 layers, hidden 1024, 16 heads, vocabulary 32000, ``feature_map="hedgehog"``,
  ``norm_feature_map=True`` (the issue's real size);
* ``default``: fla's default ``linear_attn`` configuration (``feature_map="elementwise_product"``
  is its default map; here ``t2r``, the default-config family's nonnegative map, with
  ``norm_feature_map`` False as fla's default) at the same width and depth.

The baseline, in a child process on one thread: fla's own ``LinearAttentionForCausalLM``
forward (``model.model(ids)``, hidden states of every layer) in float32 on the same
``S x T`` ids, with fla's chunked pure-PyTorch linear attention op
(``naive_chunk_linear_attn``; its Triton kernels need a GPU), its RMSNorm and SwiGLU
references; only the forward call is timed (not the import or the model's construction),
the strictest baseline. Each ``certify`` command runs in a child of a wrapper that reports
the CPU seconds (user + system) and the peak RSS of its descendants. ``--smoke``: 2 layers,
hidden 64, 2 sequences of 64, nothing written; the real size writes reports/bench/layers.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_realsize import measured  # noqa: E402

OUT = ROOT / "reports" / "bench" / "layers.json"
CONFIGS = {"hedgehog": {"feature_map": "hedgehog", "norm_feature_map": True},
           "default": {"feature_map": "t2r"}}

#: the child that times fla's own float32 forward: argv MODEL_DIR SEQUENCES
_BASELINE = r"""
import contextlib, io, json, sys, time, warnings
import torch
torch.set_num_threads(1)
from models.layouts import reference
from certify.sources.sequences import read_sequences
with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
    warnings.simplefilter("ignore")
    import fla.layers.linear_attn as la
    from fla.models import LinearAttentionForCausalLM
    from fla.ops.linear_attn.naive import naive_chunk_linear_attn
    model = LinearAttentionForCausalLM.from_pretrained(sys.argv[1], torch_dtype=torch.float32).eval()
    ids = torch.as_tensor(read_sequences(sys.argv[2], model.config.vocab_size).ids)
    def op(q, k, v, initial_state=None, normalize=False, cu_seqlens=None, **kw):
        return naive_chunk_linear_attn(q, k, v, normalize=normalize), None   # (o, final state)
    with reference._fla_references(), torch.no_grad():
        for n in ("chunk_linear_attn", "fused_chunk_linear_attn", "fused_recurrent_linear_attn"):
            setattr(la, n, op)
        t = time.process_time()
        hs = model.model(ids, use_cache=False, output_hidden_states=True).hidden_states
        cpu = time.process_time() - t
print(json.dumps({"forward_float32_s": round(cpu, 3), "layers": len(hs) - 1, "tokens": int(ids.numel())}))
"""


def build(folder: Path, name: str, layers: int, hidden: int, heads: int, vocab: int) -> Path:
    import contextlib
    import io
    import warnings

    import torch
    from fla.models import LinearAttentionConfig, LinearAttentionForCausalLM
    torch.manual_seed(0)
    path = folder / name
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        cfg = LinearAttentionConfig(hidden_size=hidden, num_hidden_layers=layers, num_heads=heads,
                                    vocab_size=vocab, **CONFIGS[name])
        LinearAttentionForCausalLM(cfg).save_pretrained(path)
    (path / "generation_config.json").unlink(missing_ok=True)
    return path


def baseline(path: Path, seqs: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-c", _BASELINE, str(path), seqs], capture_output=True, text=True,
                       env=env, cwd=ROOT)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def bench(name: str, path: Path, workdir: Path, seqs: str) -> dict:
    base = baseline(path, seqs)
    out = workdir / f"{name}-out"
    cert = measured(["checkpoint", str(path), "--sequences", seqs, "--out", str(out), "--no-progress"], workdir)
    row: dict = {"model": name, "sequences": seqs, "baseline": base, "checkpoint": cert}
    if cert["rc"] == 0:
        row["replay"] = measured(["verify", "--replay-extraction", str(out / "certificate.json")], workdir)
        heads = json.loads((out / "heads.json").read_text())["heads"]
        row["heads_certified"] = sum(h["status"] == "certified" for h in heads)
        row["layers_hidden_state_error"] = {
            str(h["layer"]): h["library_check"]["hidden_states"].get("max_error") for h in heads
            if (h.get("library_check") or {}).get("hidden_states")}
    t = base.get("forward_float32_s")
    if t:
        row["checkpoint_ratio"] = round(cert["cpu_s"] / t, 1)
        if "replay" in row:
            row["replay_ratio"] = round(row["replay"]["cpu_s"] / t, 1)
    print(f"{name}: checkpoint exit {cert['rc']}, {cert['cpu_s']:.1f} CPU s, peak {cert['peak_rss_mb']:.0f} MB"
          + (f"; replay exit {row['replay']['rc']}, {row['replay']['cpu_s']:.1f} CPU s, peak "
             f"{row['replay']['peak_rss_mb']:.0f} MB" if "replay" in row else "")
          + (f"; fla float32 forward {t:.2f} CPU s; ratio checkpoint / forward = {row['checkpoint_ratio']}"
             + (f", replay / forward = {row['replay_ratio']}" if "replay" in row else "")
             if t else f"; baseline: {base.get('error')}")
          + ("" if cert["rc"] == 0 else f"; checkpoint: {cert['tail'].strip().splitlines()[-1][:300]}"),
          flush=True)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="hedgehog,default")
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--sequences", default="random:4,512,0", help="S sequences of T ids (default 4 x 512)")
    ap.add_argument("--smoke", action="store_true", help="2 layers, hidden 64, 2 x 64 ids; nothing written")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--baseline-only", metavar="MODEL_DIR", help="time fla's forward of a saved model, nothing else")
    a = ap.parse_args(argv)
    if a.baseline_only:
        print(json.dumps(baseline(Path(a.baseline_only), a.sequences)))
        return 0
    if a.smoke:
        a.layers, a.hidden, a.heads, a.vocab, a.sequences, a.out = 2, 64, 2, 100, "random:2,64,0", None
    print(f"# every layer on {a.sequences}: {a.layers} layers, hidden {a.hidden}, {a.heads} heads, vocabulary "
          f"{a.vocab}; CPU seconds, one thread; load average {os.getloadavg()}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models.split(","):
            path = build(Path(tmp), name, a.layers, a.hidden, a.heads, a.vocab)
            rows.append(bench(name, path, Path(tmp), a.sequences))
    ok = all(r["checkpoint"]["rc"] == 0 and r.get("replay", {}).get("rc") == 0 for r in rows)
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        tmp_out = a.out.with_suffix(".tmp")
        tmp_out.write_text(json.dumps({"rows": rows, "layers": a.layers, "hidden": a.hidden, "heads": a.heads,
                                       "vocab": a.vocab, "sequences": a.sequences, "seconds": "cpu",
                                       "loadavg_end": os.getloadavg()}, indent=1) + "\n")
        os.replace(tmp_out, a.out)
    print(f"load average after: {os.getloadavg()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
