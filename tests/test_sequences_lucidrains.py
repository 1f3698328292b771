"""Every layer of a performer-pytorch ``PerformerLM`` and of a linear-attention-transformer
``LinearAttentionTransformerLM`` on stated token sequences (``checkpoint --sequences``,
:mod:`models.layouts.lucidrains_forward`).

Small LMs with the libraries' own initialisation (3 layers, dim 16, 2 heads of 8, vocabulary
50, 32 learned positions): performer with ``rotary_position_emb=False`` and 12 random features,
a causal one (relu kernel, GELU feed-forward) and a non-causal one (``ff_glu``, projection
biases); linear-attention-transformer causal with ``use_axial_pos_emb=False``. Every
head of every layer is certified on the inputs to its layer at every position (exit 0) and
replayed (exit 0; the LAT one by the reference checker too); the canonical hidden states agree with the
library's own LM forward at float32 tolerance, and a planted mistake in the canonical forward (GELU dropped) is
caught by that comparison; layer 2's weights changed after certification fail the replay on
layer 2's claims alone; without ``--sequences`` the first layer is refused once, naming the
command; sequences longer than the learned positions end with one line and exit 2.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

if importlib.util.find_spec("performer_pytorch") is None or \
        importlib.util.find_spec("linear_attention_transformer") is None:
    pytest.skip("performer-pytorch or linear-attention-transformer is not installed", allow_module_level=True)

from library_support import lean_forward_is_the_plain_one, replay_fails_on_layer  # noqa: E402 (after the skip: it imports torch)
from library_support import run_cli as _run  # noqa: E402

#: the models' constructor arguments beyond the shared ones
MODELS = {"causal": {"causal": True},
          "glu": {"causal": False, "ff_glu": True, "qkv_bias": True, "attn_out_bias": True},
          "lat": {"causal": True}}
#: each model's rank per head: performer's 12 random features (relu + 0.001 > 0), lat's dim_head 8
RANK = {"causal": 12, "glu": 12, "lat": 8}


def _make(path: Path, name: str, seed: int = 0) -> Path:
    """The model ``name`` of :data:`MODELS` (the causal performer: torch.save; the others: safetensors)."""
    import torch
    from linear_attention_transformer import LinearAttentionTransformerLM
    from performer_pytorch import PerformerLM
    from safetensors.torch import save_file, save_model
    torch.manual_seed(seed)
    path.mkdir(parents=True)
    shape = dict(num_tokens=50, max_seq_len=32, dim=16, depth=3, heads=2, dim_head=8)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        if name == "lat":
            m = LinearAttentionTransformerLM(**shape, use_axial_pos_emb=False, **MODELS[name])
            save_file({k: v.contiguous() for k, v in m.state_dict().items()}, str(path / "model.safetensors"))
            (path / "config.json").write_text(json.dumps({"causal": True, "heads": 2, "dim_head": 8,
                                                          "blindspot_size": 1, "n_local_attn_heads": 0}))
            return path
        m = PerformerLM(**shape, nb_features=12, generalized_attention=True, kernel_fn=torch.nn.ReLU(),
                        rotary_position_emb=False, **MODELS[name])
    if name == "glu":                   # safetensors (its replay needs no torch); the causal one torch.save
        save_model(m, str(path / "model.safetensors"))            # the shared (redraw helper) views once
    else:
        torch.save(m.state_dict(), path / "model.pt")
    (path / "config.json").write_text(json.dumps({
        "causal": MODELS[name]["causal"], "generalized_attention": True, "kernel_fn": "ReLU",
        "rotary_position_emb": False, "no_projection": False, "local_attn_heads": 0}))
    return path


@pytest.fixture(scope="module")
def certified(tmp_path_factory):
    d = tmp_path_factory.mktemp("performer-lm")
    out = {}
    for name in MODELS:
        path = _make(d / name, name)
        folder = d / f"out-{name}"
        run = _run(["checkpoint", str(path), "--sequences", "random:3,16,0", "--out", str(folder), "--json",
                    "--no-progress"])
        out[name] = (path, run, folder)
    return out


@pytest.mark.parametrize("name", list(MODELS))
def test_every_layer_is_certified_and_replayed(certified, name):
    _, run, folder = certified[name]
    assert run.returncode == 0, run.stderr[-2000:]
    rows = json.loads(run.stdout)["heads"]
    assert [(r["layer"], r["head"], r["status"]) for r in rows] == \
        [(L, h, "certified") for L in range(3) for h in range(2)]
    for r in rows:
        # performer: 12 random relu features + 0.001; lat: softmax(q) and exp(k), 8 each: nonnegative
        assert (r["rank"], r["nonnegative"]) == (f"{RANK[name]} proved", "proved")
        chk = r["library_check"]
        assert chk["status"] == "agrees" and chk["max_error"] <= 1e-4
        hs = chk["hidden_states"]
        assert hs["status"] == "agrees" and 0 < hs["max_error"] <= 1e-4 or r["layer"] == 0
    cert = json.loads((folder / "certificate.json").read_text())
    said = ("the 48 inputs to layer 2 at every position of 3 token sequences of length 16 "
            "(the seeded random probe random:3,16,0, ids sha256 ")
    assert all(said in c["statement"] for c in cert["claims"] if c["parameters"]["layer"] == 2)
    if name == "causal":                # its torch.save weights: the replay child imports torch (below)
        return
    ver = _run(["verify", "--replay-extraction", str(folder / "certificate.json")])
    assert ver.returncode == 0, ver.stdout[-2000:] + ver.stderr[-2000:]
    if name == "lat":                   # the reference checker once (a safetensors model: no torch to start)
        ref = _run(["verify", "--reference", "--replay-extraction", str(folder / "certificate.json")])
        assert ref.returncode == 0 and "all 18 claims re-derived" in ref.stderr, ref.stderr[-2000:]
    assert f"layer 2 of {certified[name][0]}" in cert["claims"][-1]["statement"]


@pytest.mark.slow
def test_the_torch_save_model_replays(certified):
    """The causal performer LM saved with torch.save (weights_only): its certificate replays to
    exit 0 (the replay child reads the pickle with torch; about 2 CPU s of import)."""
    ver = _run(["verify", "--replay-extraction", str(certified["causal"][2] / "certificate.json")])
    assert ver.returncode == 0, ver.stdout[-2000:] + ver.stderr[-2000:]


@pytest.mark.parametrize("name", ["causal", "lat"])
def test_library_check_catches_a_planted_mistake(certified, monkeypatch, name):
    """The hidden-state comparison is not vacuous: without the feed-forward's GELU the canonical
    forward disagrees with the library's LM from layer 1 on (layer 0's inputs agree)."""
    import numpy as np

    from certify.sources.sequences import read_sequences
    from certify.sources.thirdparty import load_model
    from models.layouts import lucidrains_forward
    from models.layouts.forward import for_sequences
    from models.layouts.reference import check_forward
    model = load_model(certified[name][0])
    assert for_sequences(model.detected) is None
    seqs = read_sequences("random:2,12,3", 50)
    good = lucidrains_forward.forward(model.detected, model.stored, seqs.ids)
    ok = check_forward(model.detected, model.tensors, seqs.ids, good.inputs)
    assert ok["status"] == "agrees" and max(ok["layers"]) < 1e-5, ok
    monkeypatch.setattr(lucidrains_forward, "cr_gelu", lambda a: np.asarray(a))
    bad = lucidrains_forward.forward(model.detected, model.stored, seqs.ids)
    got = check_forward(model.detected, model.tensors, seqs.ids, bad.inputs)
    assert got["status"] == "disagrees" and got["layers"][0] < 1e-5 and min(got["layers"][1:]) > 1e-3


def test_changed_layer_2_weights_fail_the_replay_on_layer_2_alone(certified, tmp_path):
    """Layer 2's query weights changed after certification, the certificate's hashes updated to
    the new file (sentences re-rendered): the replay fails exactly layer 2's claims, naming them."""
    import shutil

    from safetensors.numpy import load_file, save_file
    path, _, folder = certified["glu"]
    new = tmp_path / "changed"
    shutil.copytree(path, new)
    t = load_file(str(new / "model.safetensors"))
    key = "performer.net.layers.2.0.fn.to_q.weight"
    t[key] = (t[key] * np.float32(1.5)).astype(np.float32)
    save_file(t, str(new / "model.safetensors"))
    replay_fails_on_layer(folder, new / "model.safetensors", 2, tmp_path)


def test_without_sequences_the_positions_are_refused_once_naming_the_command(certified, tmp_path):
    path = certified["causal"][0]
    run = _run(["checkpoint", str(path), "--no-progress", "--out", str(tmp_path / "o")])
    assert run.returncode == 3
    line = run.stderr.strip().splitlines()[-1]
    assert line.count("position embedding is added") == 1
    assert "--sequences FILE.npy|FILE.jsonl|random:S,T,SEED certifies every layer" in line
    assert not (tmp_path / "o").exists()


def test_bad_sequences_or_blocks_are_one_line_before_any_work(certified, tmp_path, monkeypatch):
    """Sequences longer than the learned positions, and a last block missing a tensor the forward
    reads: one line, exit 2, nothing written, and no head's features computed."""
    import shutil

    from safetensors.numpy import load_file, save_file

    from models.layouts.base import FeatureHead

    def never(*a, **k):
        raise AssertionError("a head's features were computed before the input was refused")
    monkeypatch.setattr(FeatureHead, "canonical_projected", never)
    bad = tmp_path / "bad"
    shutil.copytree(certified["glu"][0], bad)
    t = load_file(str(bad / "model.safetensors"))
    del t["performer.net.layers.2.1.fn.fn.w2.bias"]
    save_file(t, str(bad / "model.safetensors"))
    for model, spec, words in (
            (certified["causal"][0], "random:2,33,0", "length 33 are longer than the model's 32 learned positions"),
            (bad, "random:2,8,0", "performer.net.layers.2.1.fn.fn.w2.bias is not in the checkpoint")):
        run = _run(["checkpoint", str(model), "--sequences", spec, "--out", str(tmp_path / "o")])
        lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
        assert run.returncode == 2 and len(lines) == 1 and words in lines[0], lines
        assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("name", ["glu", "lat"])
def test_a_layer_s_features_recomputed_are_the_forward_s_bits(certified, name):
    """The lean forward the checkpoint runs (no features kept, continued from its last block,
    a layer's features recomputed from the hidden states entering it) against the forward that
    keeps every layer's features: the same hidden states and the same feature bits."""
    from certify.sources.sequences import read_sequences
    lean_forward_is_the_plain_one(certified[name][0], read_sequences("random:2,8,4", 50).ids, 2)
