"""Build small models with each supported library, save them as their users do, and
certify them with ``certify checkpoint PATH`` (no spec): ``reports/gallery/``.

    .venv/bin/python reports/gallery/make_gallery.py          # from the repository root
    .venv/bin/python reports/gallery/make_gallery.py --only fla-default-unnormalized   # one model

``--only NAME`` builds and certifies that model alone (one of :data:`SINGLE`) and
replaces its row of ``README.md``, leaving every other committed model and
certificate as it is.

Each model is seeded and a few kilobytes; ``models/`` holds the checkpoints,
``<name>/`` the certificate, its report and the head table (``heads.md``), and
``README.md`` the summary: exit codes of ``checkpoint``, ``verify`` and
``verify --replay-extraction``, heads certified / refused / out of reach, and
the comparison with the library's own computation. The ways of saving cover a
pre-norm ``Performer`` saved with ``torch.save``, a layer inside a user's
module in a training checkpoint (with optimizer state and an EMA copy),
fp16 safetensors, a ``save_pretrained`` folder, a sharded bf16 folder and bare
layers with their constructor arguments in ``config.json``. Refusals (a
default Performer, a gated fla model, softmax attention; and keys that fit
several layers with no config to decide) are recorded with their one-line
reason. pytorch-fast-transformers does not build against the pinned torch: its
layer is written from its key table (the library's own ``nn.Linear`` names).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import torch
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
MODELS = HERE / "models"
#: the worked example of the README's adapter spec section
SPEC = {"format": "certify-attention/adapter/1", "layout": "generic",
        "query_weight": "blocks.0.attn.wq.weight", "query_bias": "blocks.0.attn.wq.bias",
        "key_weight": "blocks.0.attn.wk.weight", "key_bias": "blocks.0.attn.wk.bias",
        "value_weight": "blocks.0.attn.wv.weight", "heads": 4, "head": 2, "feature_map": "elu1"}


#: a generalized performer's kernel arguments, stated (the weights do not show them)
PERFORMER_KERNEL = {"generalized_attention": True, "kernel_fn": "ReLU", "no_projection": False}


def _st(sd, folder: Path, config=None, name="model.safetensors") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous() for k, v in sd.items()}, str(folder / name))
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    return folder


def _pt(sd, folder: Path, config=None, name="model.pt") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(sd, folder / name)
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    return folder / name


def _big(module, std=0.5, seed=0):
    """Weights of a trained scale (the libraries initialise q/k near 0.02; norms at 1)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * std)
    return module


def _pretrained(model, folder: Path, **kw) -> Path:
    model.save_pretrained(folder, **kw)
    (folder / "generation_config.json").unlink(missing_ok=True)
    return folder


def fla_default_unnormalized() -> dict[str, tuple[str, Path, list[str]]]:
    """fla's default linear_attn config (norm_feature_map=False: no normalizing denominator)
    with the t2r map, fla's own initialisation, bf16 save_pretrained."""
    from fla.models import LinearAttentionConfig, LinearAttentionForCausalLM
    torch.manual_seed(13)
    cfg = LinearAttentionConfig(hidden_size=16, num_hidden_layers=2, num_heads=4, vocab_size=32,
                                intermediate_size=32, feature_map="t2r")
    return {"fla-default-unnormalized": (
        "fla LinearAttentionForCausalLM with fla's default norm_feature_map=False (no normalizing denominator: "
        "unnormalized kernel attention), t2r map, fla's own initialisation, bfloat16 save_pretrained",
        _pretrained(LinearAttentionForCausalLM(cfg).to(torch.bfloat16), MODELS / "fla-default-unnormalized"),
        [])}


#: models that ``--only NAME`` builds alone
SINGLE = {"fla-default-unnormalized": fla_default_unnormalized}


def build() -> dict[str, tuple[str, Path, list[str]]]:
    """name -> (what, path, extra arguments of ``certify checkpoint``)."""
    from fla.layers import BasedLinearAttention, LinearAttention
    from fla.models import GLAConfig, GLAForCausalLM, LinearAttentionConfig, LinearAttentionForCausalLM
    from linear_attention_transformer.linear_attention_transformer import LinearAttentionTransformer
    from performer_pytorch.performer_pytorch import Performer, SelfAttention

    out = {}
    torch.manual_seed(0)
    p = _big(Performer(dim=6, depth=2, heads=2, dim_head=3, nb_features=6, generalized_attention=True), seed=1)
    out["performer"] = ("performer-pytorch Performer, 2 layers (LayerNorm pre-norm), generalized (relu) kernel, "
                        "torch.save(state_dict) + config.json",
                        _pt(p.state_dict(), MODELS / "performer", {**PERFORMER_KERNEL, "local_attn_heads": 0}), [])

    class UserModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Linear(4, 6)
            self.blocks = torch.nn.Module()
            self.blocks.attn = SelfAttention(dim=6, heads=2, dim_head=3, nb_features=6,
                                             generalized_attention=True, qkv_bias=True)
    torch.manual_seed(1)
    user = _big(UserModel(), seed=2)
    opt = torch.optim.Adam(user.parameters())
    user.blocks.attn.to_q.weight.sum().backward()
    opt.step()
    sd = {k: v.detach().clone() for k, v in user.state_dict().items()}
    ckpt = {"model": {**sd, **{f"ema.{k}": v.clone() for k, v in sd.items()}},
            "optimizer": opt.state_dict(), "step": 1}
    out["performer-user-module"] = ("performer-pytorch SelfAttention at blocks.attn. in a user's module: a "
                                    "training checkpoint {model (with an EMA copy), optimizer, step}",
                                    _pt(ckpt, MODELS / "performer-user-module", {**PERFORMER_KERNEL, "local_heads": 0},
                                        name="train.ckpt"), [])
    torch.manual_seed(2)
    lat = _big(LinearAttentionTransformer(dim=6, depth=2, max_seq_len=64, heads=2, dim_head=3, causal=True),
               std=0.3, seed=3)
    out["lat"] = ("linear-attention-transformer LinearAttentionTransformer, causal, 2 layers (LayerNorm "
                  "pre-norm), fp16 safetensors",
                  _st({k: v.half() for k, v in lat.state_dict().items()}, MODELS / "lat",
                      {"causal": True, "heads": 2, "dim_head": 3, "blindspot_size": 1,
                       "n_local_attn_heads": 0}), [])
    torch.manual_seed(3)
    cfg = LinearAttentionConfig(hidden_size=8, num_hidden_layers=2, num_heads=2, vocab_size=12,
                                intermediate_size=16, feature_map="hedgehog", norm_feature_map=True)
    out["fla-linear-attn"] = ("fla LinearAttentionForCausalLM (hedgehog, norm_feature_map=True, 2 layers), "
                              "save_pretrained folder",
                              _pretrained(_big(LinearAttentionForCausalLM(cfg), seed=4),
                                          MODELS / "fla-linear-attn"), [])
    torch.manual_seed(4)
    cfg = LinearAttentionConfig(hidden_size=8, num_hidden_layers=1, num_heads=2, vocab_size=12,
                                intermediate_size=16, feature_map="dpfp", norm_feature_map=True)
    out["fla-sharded-bf16"] = ("fla LinearAttentionForCausalLM (dpfp) in bfloat16, save_pretrained in "
                               "2 kB shards (model.safetensors.index.json)",
                               _pretrained(_big(LinearAttentionForCausalLM(cfg), seed=5).to(torch.bfloat16),
                                           MODELS / "fla-sharded-bf16", max_shard_size="2KB"), [])
    out.update(fla_default_unnormalized())
    torch.manual_seed(5)
    elu = _big(LinearAttention(hidden_size=6, num_heads=2, feature_map="elu", output_norm="identity",
                               do_feature_map_norm=True), seed=6)
    out["fla-layer-elu"] = ("fla LinearAttention(feature_map='elu', output_norm='identity'): q/k/v/o only; "
                            "config.json's feature_map decides",
                            _st(elu.state_dict(), MODELS / "fla-layer-elu",
                                {"feature_map": "elu", "output_norm": "identity", "num_heads": 2,
                                 "do_feature_map_norm": True, "norm_q": False, "norm_k": False}), [])
    torch.manual_seed(6)
    based = _big(BasedLinearAttention(hidden_size=6, feature_dim=3, num_heads=2, num_key_value_heads=2), seed=7)
    out["fla-based"] = ("fla BasedLinearAttention (taylor_exp), state_dict; config.json class decides",
                        _st(based.state_dict(), MODELS / "fla-based",
                            {"class": "BasedLinearAttention", "feature_dim": 3, "num_heads": 2,
                             "num_key_value_heads": 2}), [])
    names = {"q_proj": "proj_q", "k_proj": "proj_k", "v_proj": "proj_v", "o_proj": "proj_o"}
    zoo = {f"backbone.layers.0.sequence_mixer.{names[k.split('.')[0]]}.weight": v
           for k, v in based.state_dict().items()}
    out["zoology"] = ("zoology Based key layout (backbone.layers.0.sequence_mixer.proj_*), weights of fla's port",
                      _st(zoo, MODELS / "zoology", {"feature_dim": 3, "num_heads": 2, "num_key_value_heads": 2,
                                                    "feature_name": "taylor_exp"}),
                      [])
    torch.manual_seed(7)
    lin = {n: _big(torch.nn.Linear(6, 6), seed=8 + i) for i, n in enumerate(
        ("query_projection", "key_projection", "value_projection", "out_projection"))}
    pft = {f"layers.0.attention.{n}.{k}": t for n, mod in lin.items() for k, t in mod.state_dict().items()}
    out["fast-transformers"] = ("pytorch-fast-transformers causal-linear AttentionLayer (elu + 1), written "
                                "from its key table", _st(pft, MODELS / "fast-transformers",
                                                          {"attention_type": "causal-linear", "n_heads": 2,
                                                           "feature_map": "elu+1"}), [])
    torch.manual_seed(8)
    w24 = SelfAttention(dim=24, heads=2, dim_head=4, nb_features=8, generalized_attention=True)
    out["width24"] = ("performer-pytorch SelfAttention of width 24: paper-5.1's tokens, no scalar readout",
                      _st(w24.state_dict(), MODELS / "width24", {**PERFORMER_KERNEL, "local_heads": 0}), [])
    torch.manual_seed(9)
    custom = {"blocks.0.attn.wq.weight": torch.randn(32, 6) * 0.5, "blocks.0.attn.wq.bias": torch.randn(32) * 0.1,
              "blocks.0.attn.wk.weight": torch.randn(32, 6) * 0.5, "blocks.0.attn.wk.bias": torch.randn(32) * 0.1,
              "blocks.0.attn.wv.weight": torch.randn(32, 6) * 0.5, "blocks.0.out.weight": torch.randn(6, 32)}
    folder = _st(custom, MODELS / "custom")
    (folder / "spec.json").write_text(json.dumps(SPEC, indent=1) + "\n")
    out["custom"] = ("a custom model (blocks.0.attn.wq/wk/wv, 4 heads of width 8), head 2 through the adapter "
                     "spec of the README", folder / "model.safetensors", ["--spec", str(folder / "spec.json")])
    torch.manual_seed(10)
    fav = SelfAttention(dim=6, heads=2, dim_head=3, nb_features=6)
    out["performer-default"] = ("performer-pytorch SelfAttention with the library's defaults (FAVOR+)",
                                _pt(fav.state_dict(), MODELS / "performer-default", name="attn.pt"), [])
    torch.manual_seed(11)
    out["fla-gla"] = ("fla GLAForCausalLM (gated linear attention)", _pretrained(
        GLAForCausalLM(GLAConfig(hidden_size=8, num_hidden_layers=1, num_heads=2, vocab_size=12,
                                 intermediate_size=16)), MODELS / "fla-gla"), [])
    torch.manual_seed(12)
    enc = torch.nn.TransformerEncoderLayer(d_model=6, nhead=2, dim_feedforward=12)
    out["softmax"] = ("torch.nn.TransformerEncoderLayer (softmax attention)",
                      _pt(enc.state_dict(), MODELS / "softmax", name="encoder.pt"), [])
    out["fla-qkvo-no-config"] = ("q_proj/k_proj/v_proj/o_proj and no config.json (fla's elu LinearAttention "
                                 "with output_norm='identity', saved bare)",
                                 _st(elu.state_dict(), MODELS / "fla-qkvo-no-config"), [])
    return out


def run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "certify", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=1800)


def _check(doc) -> str:
    checks = [h.get("library_check") or {} for h in doc["heads"] if h["status"] == "certified"]
    if not checks:
        return "-"
    if any(c.get("status") == "not run" for c in checks):
        return "not run: " + next(c.get("reason", "") for c in checks if c.get("status") == "not run")
    worst = max(c.get("max_error", 0.0) for c in checks)
    return f"{checks[0]['status']} with {checks[0]['library']} {checks[0]['version']} (max error {worst:.1e})"


def main(argv: list[str] | None = None) -> int:
    warnings.filterwarnings("ignore")
    argv = sys.argv[1:] if argv is None else argv
    only = argv[1] if argv[:1] == ["--only"] and len(argv) == 2 else None
    if argv and (only is None or only not in SINGLE):
        print(f"usage: make_gallery.py [--only {'|'.join(SINGLE)}]", file=sys.stderr)
        return 2
    if only is None and MODELS.exists():
        shutil.rmtree(MODELS)
    if only is not None and (MODELS / only).exists():
        shutil.rmtree(MODELS / only)
    models = SINGLE[only]() if only is not None else build()
    rows = ["| model | what | `checkpoint` exit | `verify` exit | `verify --replay-extraction` exit | heads | "
            "library check | result |", "|---|---|---|---|---|---|---|---|"]
    for name, (what, path, extra) in models.items():
        rel = path.relative_to(ROOT)
        folder = HERE / name
        if folder.exists():
            shutil.rmtree(folder)
        r = run(["checkpoint", str(rel), *[str(Path(a).relative_to(ROOT)) if a.startswith(str(ROOT)) else a
                                             for a in extra], "--out", str(folder.relative_to(ROOT)), "--json"])
        if r.returncode in (0, 1):
            doc = json.loads(r.stdout)
            cert = str((folder / "certificate.json").relative_to(ROOT))
            v = run(["verify", cert])
            vr = run(["verify", "--replay-extraction", cert])
            st = [h["status"] for h in doc["heads"]]
            heads = ", ".join(f"{st.count(s)} {s}" for s in ("certified", "refused", "out of reach") if s in st)
            claims = sorted({c["kind"] for c in doc["claims"]})
            result = f"[{name}/heads.md]({name}/heads.md): {', '.join(claims)}"
            rows.append(f"| `{rel}` | {what} | {r.returncode} | {v.returncode} | {vr.returncode} | {heads} | "
                        f"{_check(doc)} | {result} |")
        else:
            reason = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
            rows.append(f"| `{rel}` | {what} | {r.returncode} | - | - | - | - | {reason.replace('|', '/')} |")
        print(rows[-1], file=sys.stderr)
    if only is not None:                       # its row replaced (or added after the certified ones)
        lines = (HERE / "README.md").read_text().split("\n")
        mine = f"| `{models[only][1].relative_to(ROOT)}` |"
        at = next((i for i, ln in enumerate(lines) if ln.startswith(mine)), None)
        if at is None:
            at = max(i for i, ln in enumerate(lines) if ln.startswith("| `reports/gallery/models/")
                     and ln.split(" | ")[2] in ("0", "1")) + 1
            lines.insert(at, rows[-1])
        else:
            lines[at] = rows[-1]
        (HERE / "README.md").write_text("\n".join(lines))
        return 0
    text = ["# Gallery: small models of each supported library, saved as people save them", "",
            "Built, saved and certified by `reports/gallery/make_gallery.py` with `certify checkpoint PATH` "
            "(no spec, except the custom model of the README's adapter-spec example). Exit codes: 0 every claim "
            "proved, 1 some claim refuted or unknown, 2 bad input (keys that fit several layers, with the "
            "config key that decides), 3 nothing certifiable (the reason is the last column); `verify` 0 every "
            "claim re-derived, 4 every claim holds under the named assumption that the extraction is right; "
            "`verify --replay-extraction` re-runs every head's canonical extraction (float64, fixed-order sums, "
            "correctly rounded functions: the same bits on any machine) in a separate process and compares "
            "the features bit for bit (0: nothing left to assume).", "", *rows, "",
            "Every certified head carries exact rank, eps-rank (eps = 1/1000) and nonnegativity on the "
            "first layer's tokens (the cube {0,1}^m, a family's tokens at m = 24, or the vocabulary's "
            "embedding rows, through the model's own pre-norm); deeper layers are listed as out of reach. "
            "The library check compares the first layer's attention output computed by the library itself "
            "(performer-pytorch, linear-attention-transformer: the module's forward on CPU; fla: its "
            "submodules with the reference ops `fla.ops.*.naive`) with the one the certified kernel gives, on "
            "sequences of the certified tokens with random values (tolerance 1e-4, scaled error; the "
            "certified features are the canonical ones). None of "
            "these third-party heads has a scalar readout, so correctness on a family is out of reach; "
            "Lemma 3's inequality is audited per jump in `heads.md` where a family applies (width 24). A head "
            "without a normalizing denominator (fla's default `norm_feature_map=False`) gets the same kernel "
            "claims, its sentences naming it unnormalized kernel attention, and its library check compares "
            "fla's unnormalized output `A V`; correctness and Lemma 3 are about the normalized head and are "
            "listed once for the model as not applicable.", ""]
    (HERE / "README.md").write_text("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
