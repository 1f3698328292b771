"""Real-size checkpoints: ``certify checkpoint`` (every head of layer 0) and
``certify verify --replay-extraction`` against the torch forward of the same feature maps.

Three models as researchers build and save them, with the libraries' own initialisation
(``torch.manual_seed(0)`` and the constructors; no weight is re-drawn: a re-drawn model's
singular values sit far from eps and flatter the eps-rank): an fla ``LinearAttentionForCausalLM`` with the hedgehog map (two
layers, bf16 ``save_pretrained``); a user's module ``token_emb = nn.Embedding(V, d)``
+ ``performer = Performer(dim d, depth 6, heads 8, generalized_attention=True)``
saved with ``safetensors.torch.save_model`` (``generalized_attention`` stated in
config.json, the other kernel arguments accepted with ``--assume-library-defaults``);
an fla ``BasedLinearAttention`` (feature_dim 16) under a V-row embedding; fla's
``LinearAttentionForCausalLM`` with the t2r map at hidden 2048 and vocabulary 50,304
(fla's defaults otherwise: unnormalized heads), the whole checkpoint. The first three also
briefly trained (``-trained``: ``--train-steps`` AdamW steps, 200 by default, of next-token
cross-entropy on a seeded synthetic corpus the benchmark makes, :func:`corpus`; fla's
pure-PyTorch references stand in for its Triton ops during training), saved the same way:
trained weights move singular values away from where initialisation puts them.

Each command runs in a child of a small wrapper process that reports the CPU seconds
(user + system) and the peak RSS of all its descendants (the replay's own process
included). The baseline, in this process on one thread: the torch forward of layer
0's feature maps of every head on the same embedding rows, in float32 and in float64,
and the canonical extraction alone (models.canonical). ``--smoke`` runs small sizes
in seconds and writes nothing; the real size writes reports/bench/realsize.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: runs argv[1:] as its child and prints the children's CPU seconds and peak RSS (KiB)
_WRAPPER = ("import json,resource,subprocess,sys;"
            "p=subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,stderr=subprocess.PIPE,text=True);"
            "r=resource.getrusage(resource.RUSAGE_CHILDREN);"
            "print(json.dumps({'rc':p.returncode,'cpu_s':r.ru_utime+r.ru_stime,'maxrss_kib':r.ru_maxrss,"
            "'tail':p.stderr[-400:]}))")


def measured(args: list[str], cwd: Path, python: str | None = None) -> dict:
    """Exit code, CPU seconds and peak RSS of ``python -m certify ARGS`` and its descendants
    (``python``: another environment's interpreter; this one's by default)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-c", _WRAPPER, python or sys.executable, "-m", "certify", *args],
                       cwd=cwd, capture_output=True, text=True, env=env)
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["peak_rss_mb"] = round(out.pop("maxrss_kib") / 1024, 1)
    out["cpu_s"] = round(out["cpu_s"], 2)
    return out


#: the brief training of the trained variants: AdamW at this rate, batches of this many sequences
#: of this many tokens, next-token cross-entropy on :func:`corpus`
TRAIN_LR, TRAIN_BATCH, TRAIN_T = 1e-3, 4, 64


#: ids of the vocabulary the synthetic corpus uses (text uses a small part of a vocabulary often)
CORPUS_TOKENS = 512


def corpus(vocab: int, sequences: int, T: int, seed: int = 0):
    """A seeded synthetic corpus the benchmark makes: a sparse Markov chain on
    :data:`CORPUS_TOKENS` ids of the vocabulary (drawn once), each followed by one of 4 of
    them (drawn once), ``(sequences, T)`` int64 ids: a few hundred steps learn its
    frequencies and part of its transitions (cross-entropy from ln V towards ln 4)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    used = rng.choice(vocab, size=min(vocab, CORPUS_TOKENS), replace=False)
    succ = rng.integers(0, len(used), size=(len(used), 4))
    state = np.empty((sequences, T), dtype=np.int64)
    state[:, 0] = rng.integers(0, len(used), sequences)
    for t in range(1, T):
        state[:, t] = succ[state[:, t - 1], rng.integers(0, 4, sequences)]
    return used[state]


def train_briefly(logits_of, params, vocab: int, steps: int, seed: int = 0) -> dict:
    """``steps`` AdamW steps of next-token cross-entropy on :func:`corpus` (``logits_of(ids)``:
    ``(B, T, V)``); the first and last losses and the CPU seconds, for the results file."""
    import time as _time

    import torch
    if steps <= 0:
        return {}
    torch.manual_seed(seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, len(os.sched_getaffinity(0))))     # training only; timings use one
    ids = torch.as_tensor(corpus(vocab, TRAIN_BATCH * steps, TRAIN_T + 1, seed))
    opt = torch.optim.AdamW(params, lr=TRAIN_LR)
    losses, t0 = [], _time.process_time()
    for i in range(steps):
        batch = ids[i * TRAIN_BATCH:(i + 1) * TRAIN_BATCH]
        logits = logits_of(batch[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                                 batch[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    torch.set_num_threads(threads)
    return {"steps": steps, "lr": TRAIN_LR, "batch": [TRAIN_BATCH, TRAIN_T], "loss_first": round(losses[0], 4),
            "loss_last": round(losses[-1], 4), "train_cpu_s": round(_time.process_time() - t0, 1),
            "corpus": f"a seeded sparse Markov chain on {CORPUS_TOKENS} ids of the vocabulary (4 successors "
                      "an id), seed 0"}


TRAINED: dict[str, dict] = {}        # model name -> its training summary (train_briefly)


def build_hedgehog(folder: Path, hidden: int, heads: int, vocab: int, layers: int = 2, steps: int = 0) -> Path:
    import torch
    from fla.models import LinearAttentionConfig, LinearAttentionForCausalLM
    torch.manual_seed(0)
    cfg = LinearAttentionConfig(hidden_size=hidden, num_hidden_layers=layers, num_heads=heads, vocab_size=vocab,
                                feature_map="hedgehog", norm_feature_map=True)
    path = folder / ("fla-hedgehog" + ("-trained" if steps else ""))
    model = LinearAttentionForCausalLM(cfg)
    if steps:                            # fla's pure-PyTorch references (its Triton ops need a GPU)
        from models.layouts import reference
        with reference._fla_references():
            TRAINED[path.name] = train_briefly(lambda x: model.lm_head(model.model(x).last_hidden_state),
                                               model.parameters(), vocab, steps)
    model.to(torch.bfloat16).save_pretrained(path)
    (path / "generation_config.json").unlink(missing_ok=True)
    return path


def build_performer_user_lm(folder: Path, dim: int, depth: int, heads: int, vocab: int,
                            dim_head: int = 64, steps: int = 0) -> Path:
    import torch
    from performer_pytorch import Performer
    from safetensors.torch import save_model

    class UserLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.token_emb = torch.nn.Embedding(vocab, dim)
            self.performer = Performer(dim=dim, depth=depth, heads=heads, dim_head=dim_head,
                                       generalized_attention=True)
    torch.manual_seed(0)
    path = folder / ("performer-user-lm" + ("-trained" if steps else ""))
    path.mkdir(parents=True)
    lm = UserLM()
    if steps:                            # logits against the (tied) embedding, scaled by 1/sqrt(dim)
        TRAINED[path.name] = train_briefly(lambda x: lm.performer(lm.token_emb(x)) @ lm.token_emb.weight.T
                                           / dim ** 0.5, lm.parameters(), vocab, steps)
    save_model(lm, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps({"generalized_attention": True}))
    return path / "model.safetensors"


def build_based(folder: Path, hidden: int, heads: int, vocab: int, steps: int = 0) -> Path:
    import torch
    from fla.layers import BasedLinearAttention
    from safetensors.torch import save_model

    class UserLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.token_emb = torch.nn.Embedding(vocab, hidden)
            self.attn = BasedLinearAttention(hidden_size=hidden, feature_dim=16, num_heads=heads,
                                             num_key_value_heads=heads)
    torch.manual_seed(0)
    path = folder / ("fla-based" + ("-trained" if steps else ""))
    path.mkdir(parents=True)
    lm = UserLM()
    if steps:                            # fla's PyTorch forward of the layer (its Triton ops need a GPU)
        TRAINED[path.name] = train_briefly(lambda x: lm.attn.forward_reference(lm.token_emb(x))
                                           @ lm.token_emb.weight.T / hidden ** 0.5, lm.parameters(), vocab, steps)
    save_model(lm, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps({"class": "BasedLinearAttention", "feature_dim": 16,
                                                  "num_heads": heads, "num_key_value_heads": heads,
                                                  "embedding": "token_emb.weight"}))
    return path / "model.safetensors"


def build_t2r(folder: Path, hidden: int, vocab: int, layers: int = 2) -> Path:
    """fla's ``LinearAttentionForCausalLM`` with fla's defaults but the t2r map (no
    normalizing denominator: an unnormalized head), bf16 ``save_pretrained``."""
    import torch
    from fla.models import LinearAttentionConfig, LinearAttentionForCausalLM
    torch.manual_seed(0)
    cfg = LinearAttentionConfig(hidden_size=hidden, num_hidden_layers=layers, vocab_size=vocab, feature_map="t2r")
    path = folder / "fla-t2r"
    LinearAttentionForCausalLM(cfg).to(torch.bfloat16).save_pretrained(path)
    (path / "generation_config.json").unlink(missing_ok=True)
    return path


def _cpu(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def forward_baseline(path: Path, assume: list[str]) -> dict:
    """The torch forward (float32, float64) and the canonical extraction of every
    layer-0 head's feature maps on the embedding rows, CPU seconds on one thread."""
    import torch

    from certify.sources.thirdparty import load_model
    model = load_model(path, assume)
    L = model.layer(None)
    hs = [h for h in L.heads if hasattr(h, "canonical_features")]
    emb = model.detected.embedding
    if emb is None:
        return {"note": "no embedding detected: the baseline needs the vocabulary rows"}
    from models.canonical.arith import f64
    from models.optional_torch import tt
    e32 = tt(emb).detach().to(torch.float32)         # a stored weight's torch view (float32 for bf16)
    e64 = tt(emb).detach().to(torch.float64)
    rows = f64(emb)

    def fwd(x):
        with torch.no_grad():
            for h in hs:
                h.feature_matrices(x)
    out = {"heads": len(hs), "tokens": int(emb.shape[0]),
           "torch_float32_s": round(_cpu(lambda: fwd(e32)), 3)}
    try:
        out["torch_float64_s"] = round(_cpu(lambda: fwd(e64)), 3)
    except Exception as exc:                     # noqa: BLE001 - a layout without a float64 forward
        out["torch_float64_s"] = None
        out["float64_note"] = f"{type(exc).__name__}: {exc}"[:200]
    out["canonical_s"] = round(_cpu(lambda: [h.canonical_features(rows) for h in hs]), 3)
    return out


def bench(name: str, path: Path, workdir: Path, assume_all: bool) -> dict:
    extra = ["--assume-library-defaults"] if assume_all else []
    base = forward_baseline(path, ["*"] if assume_all else [])
    out = workdir / f"{name}-out"
    cert = measured(["checkpoint", str(path), "--out", str(out), "--no-progress", *extra], workdir)
    row = {"model": name, "baseline": base, "checkpoint": cert}
    if cert["rc"] == 0:
        row["replay"] = measured(["verify", "--replay-extraction", str(out / "certificate.json")], workdir)
    t32 = base.get("torch_float32_s")
    if t32 is not None:
        t32 = max(t32, 1e-3)                     # the smoke sizes' forward can read 0.000 s
        row["checkpoint_ratio_float32"] = round(cert["cpu_s"] / t32, 1)
        if "replay" in row:
            row["replay_ratio_float32"] = round(row["replay"]["cpu_s"] / t32, 1)
        if base.get("torch_float64_s"):
            row["canonical_ratio_float64"] = round(base["canonical_s"] / base["torch_float64_s"], 2)
    print(f"{name}: checkpoint exit {cert['rc']}, {cert['cpu_s']:.1f} CPU s, peak {cert['peak_rss_mb']:.0f} MB; "
          + (f"replay exit {row['replay']['rc']}, {row['replay']['cpu_s']:.1f} CPU s, peak "
             f"{row['replay']['peak_rss_mb']:.0f} MB; " if "replay" in row else "")
          + (f"torch float32 {t32:.2f} s, float64 {base.get('torch_float64_s')} s, canonical "
             f"{base['canonical_s']:.2f} s; ratio checkpoint / torch float32 = {row['checkpoint_ratio_float32']}"
             + (f", replay / torch float32 = {row['replay_ratio_float32']}" if "replay" in row else "")
             + (f", canonical / torch float64 = {row['canonical_ratio_float64']}"
                if "canonical_ratio_float64" in row else "") if t32 else base.get("note", ""))
          + ("" if cert["rc"] == 0 else f"; checkpoint: {cert['tail'].strip().splitlines()[-1][:300]}"))
    sys.stdout.flush()
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="small sizes (seconds); nothing written")
    ap.add_argument("--out", type=Path, default=None, help="JSON results (default reports/bench/realsize.json)")
    ap.add_argument("--only", default=None, help="one model: fla-hedgehog, performer-user-lm, fla-based, "
                                                "fla-t2r or one of the first three with -trained (its row "
                                                "replaces that model's in the results file)")
    ap.add_argument("--train-steps", type=int, default=200,
                    help="steps of the trained variants' brief training (default 200; --smoke: 3)")
    ap.add_argument("--fla-layers", type=int, default=2,
                    help="layers of the fla hedgehog LM (2; the issue's model has 24: only layer 0 is read)")
    a = ap.parse_args(argv)
    if a.smoke:
        a.train_steps = min(a.train_steps, 3)
    import warnings
    warnings.filterwarnings("ignore")
    import torch
    torch.set_num_threads(1)
    if a.smoke:
        sizes = {"hidden": 32, "heads": 2, "vocab": 200, "p_dim": 32, "p_depth": 2, "p_heads": 2, "p_dim_head": 16,
                 "t2r_hidden": 64, "t2r_vocab": 300}
    else:
        sizes = {"hidden": 1024, "heads": 16, "vocab": 32000, "p_dim": 512, "p_depth": 6, "p_heads": 8,
                 "p_dim_head": 64, "t2r_hidden": 2048, "t2r_vocab": 50304}
    sizes["fla_layers"] = a.fla_layers
    res = {"sizes": sizes, "threads": 1, "load_average": list(os.getloadavg()), "models": [],
           "weights": "the libraries' own initialisation; the -trained models briefly trained from it"}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        builders = {
            "fla-hedgehog": (lambda: build_hedgehog(d, sizes["hidden"], sizes["heads"], sizes["vocab"],
                                                    a.fla_layers), False),
            "performer-user-lm": (lambda: build_performer_user_lm(d, sizes["p_dim"], sizes["p_depth"],
                                                                  sizes["p_heads"], 20000 if not a.smoke else 300,
                                                                  sizes["p_dim_head"]), True),
            "fla-based": (lambda: build_based(d, sizes["hidden"], sizes["heads"], sizes["vocab"]), True),
            "fla-t2r": (lambda: build_t2r(d, sizes["t2r_hidden"], sizes["t2r_vocab"]), False),
            "fla-hedgehog-trained": (lambda: build_hedgehog(d, sizes["hidden"], sizes["heads"], sizes["vocab"],
                                                            a.fla_layers, steps=a.train_steps), False),
            "performer-user-lm-trained": (lambda: build_performer_user_lm(
                d, sizes["p_dim"], sizes["p_depth"], sizes["p_heads"], 20000 if not a.smoke else 300,
                sizes["p_dim_head"], steps=a.train_steps), True),
            "fla-based-trained": (lambda: build_based(d, sizes["hidden"], sizes["heads"], sizes["vocab"],
                                                      steps=a.train_steps), True),
        }
        for name, (build, assume_all) in builders.items():
            if a.only and name != a.only:
                continue
            row = bench(name, build(), d, assume_all)
            if name.endswith("-trained"):
                row["trained"] = TRAINED[name]
            res["models"].append(row)
    res["load_average_end"] = list(os.getloadavg())
    dest = a.out if a.out is not None else (None if a.smoke else ROOT / "reports" / "bench" / "realsize.json")
    if dest is not None and a.only and dest.is_file():    # one model re-run: the others' rows kept
        old = json.loads(dest.read_text())
        if old.get("sizes", {}).get("hidden") == sizes["hidden"]:
            row = res["models"][0]
            row["load_average"], row["load_average_end"] = res["load_average"], res["load_average_end"]
            kept = [m for m in old.get("models", []) if m.get("model") != a.only]
            order = list(builders)
            rows = sorted(kept + [row], key=lambda m: order.index(m["model"]) if m.get("model") in order else len(order))
            res = {**old, "sizes": {**old.get("sizes", {}), **sizes}, "models": rows}
    if dest is not None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp_dest = dest.with_suffix(".tmp")
        tmp_dest.write_text(json.dumps(res, indent=1) + "\n")
        tmp_dest.replace(dest)
        print(f"wrote {dest}", file=sys.stderr)
    failed = [m["model"] for m in res["models"]
              if (m.get("checkpoint") or {}).get("rc") not in (0, 1) or (m.get("replay") or {}).get("rc") != 0]
    if failed:
        print(f"not certified and replayed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
