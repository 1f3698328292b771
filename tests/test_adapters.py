"""Adapters: real modules from performer-pytorch and linear-attention-transformer."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from library_support import Library
from safetensors.torch import save_file

from certify.core.errors import InputError, UncertifiableError
from certify.core.verdict import Verdict
from certify.rank.options import RankOptions
from certify.rank.run import certify_rank
from certify.sources.checkpoint import read_state_dict
from certify.sources.load import load_kernel
from models.adapters import adapt

performer = Library("performer_pytorch.performer_pytorch")          # imported at first use
lat = Library("linear_attention_transformer.linear_attention_transformer")

ROOT = Path(__file__).resolve().parent.parent
M, H, D = 6, 2, 4


def _save(module, tmp_path, spec):
    sd = {k: v.detach().contiguous() for k, v in module.state_dict().items()}
    save_file(sd, str(tmp_path / "w.safetensors"))
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    return tmp_path / "w.safetensors", tmp_path / "spec.json"


def _reproduce(kernels, sd, X, causal=False):
    """Attention output rebuilt from the extracted kernels: per head
    sum_j alpha(x_i, x_j) v_j / sum_j alpha(x_i, x_j), then the output projection."""
    B, N, _ = X.shape
    flat = X.reshape(-1, M).numpy().astype(np.uint8)
    outs = []
    for k, head in kernels:
        q, kk = k.features_at(flat)
        q, kk = torch.from_numpy(q).float().reshape(B, N, -1), torch.from_numpy(kk).float().reshape(B, N, -1)
        v = head.values(X.reshape(-1, M)).reshape(B, N, -1)
        A = q @ kk.transpose(1, 2)
        if causal:
            A = A * torch.tril(torch.ones(N, N))
        den = A.sum(-1, keepdim=True)
        outs.append((A @ v) / (den.clamp(min=1e-3) if causal else den))
    return torch.cat(outs, -1) @ sd["to_out.weight"].T + sd["to_out.bias"]


def test_performer_generalized_kernel_reproduces_module(tmp_path):
    torch.manual_seed(0)
    att = performer.SelfAttention(dim=M, heads=H, dim_head=D, nb_features=8, generalized_attention=True,
                                  qkv_bias=True).eval()
    w, _ = _save(att, tmp_path, {})
    kernels = []
    for h in range(H):
        spec = tmp_path / f"spec{h}.json"
        spec.write_text(json.dumps({"layout": "performer", "heads": H, "dim_head": D, "head": h}))
        k = load_kernel(w, spec=str(spec), tokens="cube:6")
        assert k.rank == 8 and k.guarantee == "features_nonnegative" and k.provenance.adapter == "adapter:performer"
        kernels.append((k, adapt(read_state_dict(w), json.loads(spec.read_text()))))
    X = torch.randint(0, 2, (4, 7, M)).float()
    with torch.no_grad():
        ref = att(X)
    got = _reproduce(kernels, att.state_dict(), X)
    assert torch.allclose(got, ref, atol=1e-5, rtol=1e-5)
    rep = certify_rank(kernels[0][0], RankOptions(require_nonnegative=True))
    assert rep.verdict is Verdict.PROVED and 1 <= rep.rank_lower <= 8


def test_lat_causal_kernel_reproduces_module(tmp_path):
    torch.manual_seed(1)
    att = lat.SelfAttention(dim=M, heads=H, dim_head=D, causal=True).eval()
    w, _ = _save(att, tmp_path, {})
    sd = read_state_dict(w)
    kernels = []
    for h in range(H):
        spec = {"layout": "linear-attention-transformer", "heads": H, "dim_head": D, "head": h, "causal": True}
        (tmp_path / "s.json").write_text(json.dumps(spec))
        kernels.append((load_kernel(w, spec=str(tmp_path / "s.json"), tokens="cube:6"), adapt(sd, spec)))
    X = torch.randint(0, 2, (3, 5, M)).float()
    with torch.no_grad():
        ref = att(X)
    assert torch.allclose(_reproduce(kernels, att.state_dict(), X, causal=True), ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("module,spec,why", [
    ("performer-softmax", {"layout": "performer", "heads": H, "dim_head": D, "attention": "softmax"}, "maximum"),
    ("lat", {"layout": "linear-attention-transformer", "heads": H, "dim_head": D, "causal": False}, "over the sequence"),
    ("performer", {"layout": "performer", "heads": H, "dim_head": D, "positional": "rotary"}, "position"),
    ("performer", {"layout": "performer", "heads": H, "dim_head": D, "redraw_features": True}, "redrawn"),
])
def test_uncertifiable_layers_exit_3(tmp_path, module, spec, why):
    torch.manual_seed(0)
    if module.startswith("performer"):
        att = performer.SelfAttention(dim=M, heads=H, dim_head=D, nb_features=8,
                                      generalized_attention=module == "performer")
    else:
        att = lat.SelfAttention(dim=M, heads=H, dim_head=D, causal=False)
    w, s = _save(att, tmp_path, spec)
    out = tmp_path / "k.npz"
    r = subprocess.run([sys.executable, "-m", "certify", "extract", str(w), "--spec", str(s), "--out", str(out),
                        "--tokens", "cube:6"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 3 and why in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_missing_projection_is_uncertifiable(tmp_path):
    att = performer.SelfAttention(dim=M, heads=H, dim_head=D, nb_features=8, generalized_attention=True)
    sd = {k: v for k, v in att.state_dict().items() if "projection" not in k}
    with pytest.raises(UncertifiableError, match="drawn"):
        adapt(sd, {"layout": "performer", "heads": H, "dim_head": D})


class _Evil:
    def __reduce__(self):
        return (print, ("pickled code ran",))


def test_pickle_with_code_is_refused_exit_2(tmp_path):
    torch.save({"to_q.weight": torch.zeros(8, M), "evil": _Evil()}, tmp_path / "w.pt")
    (tmp_path / "s.json").write_text(json.dumps({"layout": "linear-attention-transformer", "heads": H,
                                                 "dim_head": D, "causal": True}))
    r = subprocess.run([sys.executable, "-m", "certify.rank", str(tmp_path / "w.pt"), "--spec",
                        str(tmp_path / "s.json"), "--tokens", "cube:6"], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 2 and "pickled code ran" not in r.stdout + r.stderr
    assert "weights_only" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_spec_rejects_unknown_keys():
    with pytest.raises(InputError, match="unknown keys"):
        adapt({}, {"layout": "performer", "heads": 2, "hedas": 3})
