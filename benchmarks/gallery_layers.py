"""Every layer of the gallery's language models on stated sequences, with the per-layer library check.

``python benchmarks/gallery_layers.py [--out DIR] [--sequences SPEC]`` certifies, with
``certify checkpoint MODEL --sequences SPEC`` (default the probe ``random:2,16,0``), each language
model of ``reports/gallery/models`` whose every layer has a canonical forward (the fla
``LinearAttentionForCausalLM`` ones) and two more built here with the libraries' own
initialisation (seed 0; no weights re-drawn): a performer-pytorch ``PerformerLM`` (3 layers,
dim 64, 4 heads, 32 random relu features, ``rotary_position_emb=False``, safetensors) and a
linear-attention-transformer ``LinearAttentionTransformerLM`` (3 layers, dim 64, 4 heads, causal,
``use_axial_pos_emb=False``, safetensors); then ``verify --replay-extraction`` on each certificate.

Per model: the exit codes, the heads certified, and per layer the largest error of the canonical
hidden states entering it against the library's own forward of the whole model
(``hidden_states.max_error``: max over positions of ``max|h_lib - h| / max|h|``) and of the heads'
outputs against the library's own layer on those inputs (``library_check.max_error``), each
against the tolerance 1e-4. ``--second-env``: each certificate of safetensors weights replayed
again in the torch-free second environment of ``benchmarks/second_environment.py`` (numpy 1.26.4,
python-flint 0.7.1, made when absent). Results in ``reports/bench/gallery_layers.json``; the
certificates in ``--out`` (default a temporary folder).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: the gallery's language models whose every layer runs on stated sequences
GALLERY = ("fla-linear-attn", "fla-sharded-bf16", "fla-default-unnormalized")


def build(work: Path) -> dict[str, Path]:
    """The two lucidrains LMs with the libraries' own initialisation (seed 0)."""
    import torch
    from linear_attention_transformer import LinearAttentionTransformerLM
    from performer_pytorch import PerformerLM
    from safetensors.torch import save_file, save_model
    shape = dict(num_tokens=256, max_seq_len=64, dim=64, depth=3, heads=4, dim_head=16)
    out = {}
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        p = PerformerLM(**shape, causal=True, nb_features=32, generalized_attention=True,
                        kernel_fn=torch.nn.ReLU(), rotary_position_emb=False)
        d = work / "models" / "performer-lm"
        d.mkdir(parents=True, exist_ok=True)
        save_model(p, str(d / "model.safetensors"))          # its redraw helper's shared views once
        (d / "config.json").write_text(json.dumps({
            "causal": True, "generalized_attention": True, "kernel_fn": "ReLU", "rotary_position_emb": False,
            "no_projection": False, "local_attn_heads": 0}))
        out["performer-lm"] = d
        torch.manual_seed(0)
        lat = LinearAttentionTransformerLM(**shape, causal=True, use_axial_pos_emb=False)
        d = work / "models" / "lat-lm"
        d.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in lat.state_dict().items()}, str(d / "model.safetensors"))
        (d / "config.json").write_text(json.dumps({"causal": True, "heads": 4, "dim_head": 16, "blindspot_size": 1,
                                                   "n_local_attn_heads": 0}))
        out["lat-lm"] = d
    return out


def run(name: str, model: Path, out: Path, spec: str) -> dict:
    cmd = [sys.executable, "-m", "certify", "checkpoint", str(model), "--sequences", spec, "--out", str(out),
           "--json", "--no-progress"]
    got = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    row: dict = {"model": name, "path": str(model.relative_to(ROOT)) if model.is_relative_to(ROOT) else model.name,
                 "sequences": spec, "checkpoint_exit": got.returncode}
    if got.returncode not in (0, 1):
        return {**row, "stderr": got.stderr.strip().splitlines()[-1:]}
    heads = json.loads(got.stdout)["heads"]
    layers: dict[int, dict] = {}
    for h in heads:
        chk = h.get("library_check") or {}
        L = layers.setdefault(h["layer"], {"layer": h["layer"], "heads": 0, "certified": 0,
                                           "hidden_states_error": None, "head_check_error": 0.0})
        L["heads"] += 1
        L["certified"] += h["status"] == "certified"
        L["hidden_states_error"] = (chk.get("hidden_states") or {}).get("max_error")
        L["head_check_error"] = max(L["head_check_error"], chk.get("max_error") or 0.0)
        L["status"] = f"{chk.get('status')}; inputs {(chk.get('hidden_states') or {}).get('status')}"
    ver = subprocess.run([sys.executable, "-m", "certify", "verify", "--replay-extraction",
                          str(out / "certificate.json")], capture_output=True, text=True, cwd=ROOT)
    return {**row, "replay_exit": ver.returncode, "verdict": ver.stderr.strip().splitlines()[-1],
            "layers": [layers[k] for k in sorted(layers)], "tolerance": 1e-4}


def second(rows: list[dict], models: dict[str, Path], work: Path) -> None:
    """Each certificate of safetensors weights replayed in the second environment (``row["second_env"]``)."""
    from benchmarks.bench_realsize import measured
    from benchmarks.second_environment import environment
    env = environment(ROOT / ".venv-second", "1.26.4", "0.7.1")
    for r in rows:
        if not any(models[r["model"]].glob("*.safetensors")) or r["checkpoint_exit"] != 0:
            continue
        got = measured(["verify", "--replay-extraction", str(work / r["model"] / "certificate.json")], ROOT,
                       python=env["python_path"])
        tail = [ln for ln in got.pop("tail").splitlines() if ln and not ln.startswith(" ")][-1:]
        r["second_env"] = {"numpy": env["numpy"], "python-flint": env["python-flint"], "torch": env["torch"],
                           "rc": got["rc"], "cpu_s": got["cpu_s"], "verdict": tail[0] if tail else ""}
        print(f"{r['model']} in the second environment: exit {got['rc']}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="where the certificates go (default: a temporary folder)")
    ap.add_argument("--sequences", default="random:2,16,0")
    ap.add_argument("--json", type=Path, default=ROOT / "reports" / "bench" / "gallery_layers.json")
    ap.add_argument("--second-env", action="store_true",
                    help="replay the safetensors models' certificates in the torch-free second environment too")
    args = ap.parse_args(argv)
    work = args.out or Path(tempfile.mkdtemp(prefix="gallery-layers-"))
    models = {n: ROOT / "reports" / "gallery" / "models" / n for n in GALLERY} | build(work)
    rows = []
    for name, path in models.items():
        r = run(name, path, work / name, args.sequences)
        rows.append(r)
        errs = ", ".join(f"L{L['layer']} {L['hidden_states_error']:.2g}/{L['head_check_error']:.2g}"
                         for L in r.get("layers", []))
        print(f"{name}: checkpoint {r['checkpoint_exit']}, replay {r.get('replay_exit')}; hidden/heads error {errs}")
    if args.second_env:
        second(rows, models, work)
    args.json.write_text(json.dumps({"script": "benchmarks/gallery_layers.py", "rows": rows}, indent=1) + "\n")
    print(f"wrote {args.json.relative_to(ROOT) if args.json.is_relative_to(ROOT) else args.json}; "
          f"certificates in {work}")
    return 0 if all(r["checkpoint_exit"] == 0 and r.get("replay_exit") == 0 and r.get("second_env", {}).get("rc", 0) == 0
                    for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
