"""Build one small model of each supported library, save it as its users do, and
certify it with ``certify checkpoint PATH`` (no spec): ``reports/gallery/``.

    .venv/bin/python reports/gallery/make_gallery.py          # from the repository root

Each model is seeded and a few kilobytes; ``models/`` holds the checkpoints,
``<name>/`` the certificate, its report and the head table (``heads.md``), and
``README.md`` the summary: exit codes of ``checkpoint`` and ``verify``, heads
certified / refused / out of reach. Two refusals (a default Performer, a gated
fla model) are recorded with their one-line reason. pytorch-fast-transformers
does not build against the pinned torch: its layer is written from its key
table (the library's own ``nn.Linear`` names), not by the library.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
MODELS = HERE / "models"


def _st(sd, folder: Path, config=None, name="model.safetensors") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous() for k, v in sd.items()}, str(folder / name))
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    return folder


def _big(module, std=0.5):
    """Weights of a trained scale (the libraries initialise q/k near 0.02)."""
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0, std)
    return module


def build() -> dict[str, tuple[str, Path, str]]:
    from performer_pytorch.performer_pytorch import SelfAttention as Performer
    from linear_attention_transformer.linear_attention_transformer import SelfAttention as LAT
    from fla.layers import BasedLinearAttention
    from fla.models import GLAConfig, GLAForCausalLM, LinearAttentionConfig, LinearAttentionForCausalLM

    out = {}
    torch.manual_seed(0)
    p = Performer(dim=6, heads=2, dim_head=4, nb_features=8, generalized_attention=True)
    out["performer"] = ("performer-pytorch SelfAttention, generalized (relu) kernel, config.json with its "
                        "constructor arguments", _st(p.state_dict(), MODELS / "performer",
                                                     {"generalized_attention": True, "heads": 2, "dim_head": 4}),
                        "certified")
    torch.manual_seed(1)
    lat = LAT(dim=6, heads=2, dim_head=4, causal=True)
    d = MODELS / "lat"
    d.mkdir(parents=True, exist_ok=True)
    torch.save(lat.state_dict(), d / "attn.pt")
    (d / "config.json").write_text(json.dumps({"causal": True, "heads": 2, "dim_head": 4}) + "\n")
    out["lat"] = ("linear-attention-transformer causal SelfAttention, torch.save(state_dict)", d / "attn.pt",
                  "certified")
    torch.manual_seed(2)
    cfg = LinearAttentionConfig(hidden_size=8, num_hidden_layers=2, num_heads=2, vocab_size=12,
                                intermediate_size=16, feature_map="hedgehog", norm_feature_map=True)
    m = _big(LinearAttentionForCausalLM(cfg))
    m.save_pretrained(MODELS / "fla-linear-attn")
    (MODELS / "fla-linear-attn" / "generation_config.json").unlink(missing_ok=True)
    out["fla-linear-attn"] = ("fla LinearAttentionForCausalLM (hedgehog, norm_feature_map=True, 2 layers), "
                              "save_pretrained folder", MODELS / "fla-linear-attn", "certified")
    torch.manual_seed(3)
    based = _big(BasedLinearAttention(hidden_size=6, feature_dim=3, num_heads=2, num_key_value_heads=2))
    out["fla-based"] = ("fla BasedLinearAttention (taylor_exp), state_dict", _st(
        based.state_dict(), MODELS / "fla-based", {"feature_dim": 3, "num_heads": 2, "num_key_value_heads": 2}),
        "certified")
    names = {"q_proj": "proj_q", "k_proj": "proj_k", "v_proj": "proj_v", "o_proj": "proj_o"}
    zoo = {f"backbone.layers.0.sequence_mixer.{names[k.split('.')[0]]}.weight": v
           for k, v in based.state_dict().items()}
    out["zoology"] = ("zoology Based key layout (backbone.layers.0.sequence_mixer.proj_*), weights of fla's port",
                      _st(zoo, MODELS / "zoology", {"feature_dim": 3, "num_heads": 2, "num_key_value_heads": 2}),
                      "certified")
    torch.manual_seed(4)
    lin = {n: torch.nn.Linear(6, 6) for n in ("query_projection", "key_projection", "value_projection",
                                              "out_projection")}
    pft = {f"layers.0.attention.{n}.{k}": t for n, mod in lin.items() for k, t in mod.state_dict().items()}
    out["fast-transformers"] = ("pytorch-fast-transformers causal-linear AttentionLayer (elu + 1), written "
                                "from its key table", _st(pft, MODELS / "fast-transformers",
                                                          {"attention_type": "causal-linear", "n_heads": 2}),
                                "certified")
    torch.manual_seed(5)
    w24 = Performer(dim=24, heads=2, dim_head=4, nb_features=8, generalized_attention=True)
    out["width24"] = ("third-party head of width 24 (performer-pytorch generalized): paper-5.1's tokens, "
                      "no scalar readout", _st(w24.state_dict(), MODELS / "width24",
                                              {"generalized_attention": True}), "certified")
    torch.manual_seed(6)
    fav = Performer(dim=6, heads=2, dim_head=4, nb_features=8)
    d = MODELS / "performer-default"
    d.mkdir(parents=True, exist_ok=True)
    torch.save(fav.state_dict(), d / "attn.pt")
    out["performer-default"] = ("performer-pytorch SelfAttention with the library's defaults (FAVOR+)",
                                d / "attn.pt", "refused")
    torch.manual_seed(7)
    GLAForCausalLM(GLAConfig(hidden_size=8, num_hidden_layers=1, num_heads=2, vocab_size=12,
                             intermediate_size=16)).save_pretrained(MODELS / "fla-gla")
    (MODELS / "fla-gla" / "generation_config.json").unlink(missing_ok=True)
    out["fla-gla"] = ("fla GLAForCausalLM (gated linear attention)", MODELS / "fla-gla", "refused")
    return out


def run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "certify", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=1800)


def main() -> int:
    if MODELS.exists():
        shutil.rmtree(MODELS)
    models = build()
    rows = ["| model | what | `checkpoint` exit | `verify` exit | heads | result |", "|---|---|---|---|---|---|"]
    for name, (what, path, _) in models.items():
        rel = path.relative_to(ROOT)
        folder = HERE / name
        if folder.exists():
            shutil.rmtree(folder)
        r = run(["checkpoint", str(rel), "--out", str(folder.relative_to(ROOT)), "--json"])
        if r.returncode in (0, 1):
            doc = json.loads(r.stdout)
            v = run(["verify", str((folder / "certificate.json").relative_to(ROOT))])
            st = [h["status"] for h in doc["heads"]]
            heads = ", ".join(f"{st.count(s)} {s}" for s in ("certified", "refused", "out of reach") if s in st)
            claims = sorted({c["kind"] for c in doc["claims"]})
            result = f"[{name}/heads.md]({name}/heads.md): {', '.join(claims)}"
            rows.append(f"| `{rel}` | {what} | {r.returncode} | {v.returncode} | {heads} | {result} |")
        else:
            reason = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
            rows.append(f"| `{rel}` | {what} | {r.returncode} | - | - | {reason.replace('|', '/')} |")
        print(rows[-1], file=sys.stderr)
    text = ["# Gallery: one small model of each supported library", "",
            "Built, saved and certified by `reports/gallery/make_gallery.py` with `certify checkpoint PATH` "
            "and no spec. Exit codes: 0 every claim proved, 1 some claim refuted or unknown, 3 nothing "
            "certifiable (the reason is the last column); `verify` 0 every claim re-derived, 4 every claim "
            "holds under named assumptions.", "", *rows, "",
            "Every certified head carries exact rank, eps-rank (eps = 1/1000) and nonnegativity on the "
            "first layer's tokens (the cube {0,1}^m, a family's tokens at m = 24, or the vocabulary's "
            "embedding rows); deeper layers are listed as out of reach. None of these third-party heads "
            "has a scalar readout, so correctness on a family is out of reach; Lemma 3's inequality is "
            "audited per jump in `heads.md` where a family applies (width 24).", ""]
    (HERE / "README.md").write_text("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
