"""Shared by the tests that build models with the linear-attention libraries
themselves (performer-pytorch, linear-attention-transformer, fla) and save them
as people do."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file


class Library:
    """A library module imported at its first use inside a test (so collecting the
    suite imports none of them: fla alone takes seconds); a test using a library
    that is not installed is skipped."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str):
        if attr.startswith("_"):          # what collection asks of every module attribute
            raise AttributeError(attr)
        return getattr(pytest.importorskip(self._name), attr)


def libraries():
    """``(performer, lat, fla_layers, fla_models)``, each imported when a test first
    uses it (:class:`Library`)."""
    return (Library("performer_pytorch.performer_pytorch"),
            Library("linear_attention_transformer.linear_attention_transformer"),
            Library("fla.layers"),
            Library("fla.models"))


def randomize(module, seed: int = 0, std: float = 0.5):
    """Weights of a trained scale (norm weights too: a missed pre-norm must show;
    the libraries initialise q/k near 0.02 and norms at 1)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * std)
    return module


def save_st(sd, folder: Path, config=None, name: str = "model.safetensors") -> Path:
    """``sd`` as a safetensors file in ``folder`` (beside ``config.json`` when given)."""
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous() for k, v in sd.items()}, str(folder / name))
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    return folder


# The kernel arguments a checkpoint's tensors do not show, as a config.json states
# them (models.layouts.defaults.KERNEL_ARGS): without them the model is refused.
#: performer-pytorch SelfAttention with generalized attention, the library's ReLU
PERFORMER_ATTN = {"generalized_attention": True, "kernel_fn": "ReLU", "no_projection": False, "local_heads": 0}
#: performer-pytorch Performer / PerformerLM (local heads per layer: local_attn_heads)
PERFORMER_MODEL = {"generalized_attention": True, "kernel_fn": "ReLU", "no_projection": False,
                   "local_attn_heads": 0}
#: linear-attention-transformer, causal (heads given beside it)
LAT_CAUSAL = {"causal": True, "blindspot_size": 1, "n_local_attn_heads": 0}
#: fla LinearAttention with its denominator, no feature normalization
FLA_LINEAR = {"do_feature_map_norm": True, "norm_q": False, "norm_k": False}


def run_cli(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``certify ARGS`` in this process (from ``cwd``), its exit code, stdout and stderr."""
    from certify.cli import main
    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    try:
        os.chdir(cwd or here)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def replay_fails_on_layer(folder: Path, new_file: Path, layer: int, tmp_path: Path) -> None:
    """The certificate in ``folder`` re-pointed at the changed weights ``new_file`` (its hashes
    updated and its sentences re-rendered: the checker's own checks pass) and replayed: exit 1,
    and exactly the claims of ``layer`` fail, each naming it and its replayed features."""
    from certify.checkers.statements import render
    from certify.core.files import sha256_file
    cert = json.loads((folder / "certificate.json").read_text())
    old_src = next(c["parameters"]["source"] for c in cert["claims"])
    sha = sha256_file(new_file)
    cert["inputs"] = {k.replace(str(Path(old_src).parent), str(new_file.parent)): (sha if k == old_src else v)
                      for k, v in cert["inputs"].items()}
    for c in cert["claims"]:
        c["parameters"].update(source=str(new_file), source_sha256=sha)
        c["statement"] = render(c["kind"], c["parameters"], c["evidence"]).text
    path = tmp_path / "certificate.json"
    path.write_text(json.dumps(cert))
    ver = run_cli(["verify", "--replay-extraction", str(path), "--json"])
    assert ver.returncode == 1, ver.stderr[-1000:]
    failed = [c for c in json.loads(ver.stdout)["claims"] if not c["holds"]]
    layers = {cert["claims"][c["index"]]["parameters"]["layer"] for c in failed}
    assert layers == {layer} and len(failed) == sum(c["parameters"]["layer"] == layer for c in cert["claims"])
    assert all(f"layer {layer}" in c["statement"] and "replayed features" in json.dumps(c) for c in failed)


def lean_forward_is_the_plain_one(path: Path, ids, heads: int) -> None:
    """The checkpoint's lean forward of the model at ``path`` on ``ids`` (no features kept; up to
    layer 0, then continued from its last block; each layer's features recomputed from the hidden
    states entering it) against the forward that keeps every layer's features (the plain twin):
    the same hidden states and the same feature bits, ``heads`` heads per layer."""
    import numpy as np

    from certify.sources.thirdparty import load_model
    from models.layouts import forward as fw
    model, other = load_model(path), load_model(path)
    assert fw.for_sequences(model.detected) is None and fw.for_sequences(other.detected) is None
    full = fw.forward(model.detected, model.stored, ids)
    lean = fw.forward(other.detected, model.stored, ids, keep_features=False, upto=0)
    assert len(lean.inputs) == 1
    # continued from its last block (a replay asks for layer 0, then 1, then 2): not recomputed
    lean = fw.forward(other.detected, model.stored, ids, keep_features=False, resume=lean)
    n = len(model.detected.layers)
    assert not lean.features and len(full.features) == n * heads and len(lean.inputs) == n
    assert all(np.array_equal(a, b) for a, b in zip(full.inputs, lean.inputs))
    for L in other.detected.layers:
        fw.layer_features(other.detected, model.stored, lean, L)
        assert sorted(lean.features) == [(L.index, h) for h in range(heads)]
        for key, (q, k) in lean.features.items():
            assert np.array_equal(q, full.features[key][0]) and np.array_equal(k, full.features[key][1])
