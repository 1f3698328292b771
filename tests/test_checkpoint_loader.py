"""One loader for every command: weights read as people save them (one reader,
torch-free for safetensors), detection that refuses to guess, and ``rank``,
``extract`` and ``checkpoint`` ending in the same kernel on every supported layout."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from library_support import (
    FLA_LINEAR,
    LAT_CAUSAL,
    PERFORMER_ATTN,
    PERFORMER_MODEL,
    libraries,
    randomize,
    save_st,
)
from safetensors.torch import save_file

from certify.cli import checkpoint as checkpoint_cli
from certify.cli import extract as extract_cli
from certify.cli import rank as rank_cli
from certify.core.errors import InputError, run_command
from certify.sources.load import kind_of, load_kernel
from certify.sources.weights import read_weights

performer, lat, fla_layers, fla_models = libraries()

ROOT = Path(__file__).resolve().parent.parent
W = 8


def _run(cmd: str, main, *args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rc = run_command(f"certify {cmd}", main, [str(a) for a in args])
    return rc, out.getvalue(), err.getvalue()


# ---------------------------------------------------------------- one checkpoint of every supported layout

@pytest.fixture(scope="module")
def layouts(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("layouts")
    torch.manual_seed(0)
    out = {}
    out["performer-selfattention"] = save_st(randomize(performer.SelfAttention(
        dim=W, heads=2, dim_head=4, nb_features=6, generalized_attention=True), 1).state_dict(),
        d / "p1", PERFORMER_ATTN)
    perf = randomize(performer.Performer(dim=W, depth=2, heads=2, dim_head=4, nb_features=6,
                                    generalized_attention=True), 2)
    (d / "p2").mkdir()
    torch.save(perf.state_dict(), d / "p2" / "model.pt")
    (d / "p2" / "config.json").write_text(json.dumps(PERFORMER_MODEL))
    out["performer-performer"] = d / "p2" / "model.pt"
    out["lat-selfattention"] = save_st(randomize(lat.SelfAttention(dim=W, heads=2, dim_head=4, causal=True), 3).state_dict(),
                                   d / "l1", {**LAT_CAUSAL, "heads": 2})
    out["lat-transformer"] = save_st(randomize(lat.LinearAttentionTransformer(
        dim=W, depth=2, max_seq_len=64, heads=2, dim_head=4, causal=True), 4).state_dict(), d / "l2",
        {**LAT_CAUSAL, "heads": 2, "dim_head": 4})
    out["fla-linear-attention"] = save_st(randomize(fla_layers.LinearAttention(
        hidden_size=W, num_heads=2, feature_map="relu", do_feature_map_norm=True), 5).state_dict(), d / "f1",
        {**FLA_LINEAR, "feature_map": "relu", "num_heads": 2})
    based = randomize(fla_layers.BasedLinearAttention(hidden_size=W, feature_dim=2, num_heads=2,
                                                 num_key_value_heads=2), 6)
    out["fla-based"] = save_st(based.state_dict(), d / "f2", {"class": "BasedLinearAttention", "feature_dim": 2,
                                                          "num_heads": 2})
    out["fla-rebased"] = save_st(randomize(fla_layers.ReBasedLinearAttention(
        hidden_size=W, feature_dim=2, num_heads=2, num_key_value_heads=2), 7).state_dict(), d / "f3",
        {"normalize": True})
    cfg = fla_models.LinearAttentionConfig(hidden_size=W, num_hidden_layers=2, num_heads=2, vocab_size=12,
                                           intermediate_size=16, norm_feature_map=True, feature_map="hedgehog")
    randomize(fla_models.LinearAttentionForCausalLM(cfg), 8).save_pretrained(d / "f4")
    out["fla-model"] = d / "f4"
    names = {"q_proj": "proj_q", "k_proj": "proj_k", "v_proj": "proj_v", "o_proj": "proj_o"}
    out["zoology"] = save_st({f"backbone.layers.0.sequence_mixer.{names[k.split('.')[0]]}.weight": v
                          for k, v in based.state_dict().items()}, d / "z", {"feature_dim": 2, "num_heads": 2,
                                                                     "feature_name": "taylor_exp"})
    lin = {n: randomize(torch.nn.Linear(W, W), 9) for n in ("query_projection", "key_projection",
                                                       "value_projection", "out_projection")}
    out["fast-transformers"] = save_st({f"attention.{n}.{k}": t for n, m in lin.items()
                                    for k, t in m.state_dict().items()}, d / "ft",
                                   {"attention_type": "causal-linear", "n_heads": 2, "feature_map": "elu+1"})
    return out


LAYOUTS = ["performer-selfattention", "performer-performer", "lat-selfattention", "lat-transformer",
           "fla-linear-attention", "fla-based", "fla-rebased", "fla-model", "zoology", "fast-transformers"]


@pytest.mark.parametrize("name", LAYOUTS)
def test_rank_tokens_cube8_and_extract_on_every_layout(layouts, name, tmp_path):
    path = layouts[name]
    rc, out, err = _run("rank", rank_cli.main, path, "--tokens", "cube:8", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["token_set"] == "cube:8" and doc["rank_lower"] == doc["rank_upper"] >= 1
    assert doc["adapter"].startswith("layout:") and doc["adapter"].endswith("layer 0 head 0")
    chk = doc["library_check"]
    assert chk["status"] == ("not run" if name == "fast-transformers" else "agrees"), chk
    if name == "fla-model":
        assert "vocabulary ids" in doc["tokens_as"]
    rc, out, err = _run("extract", extract_cli.main, path, "--out", tmp_path / "k.npz", "--json")
    assert rc == 0, err
    meta = json.loads(out)
    assert meta["token_set"] == ("vocab:12" if name == "fla-model" else "cube:8")
    k = load_kernel(tmp_path / "k.npz")
    assert k.provenance.adapter == doc["adapter"]
    if name != "fla-model":                 # rank read cube:8 vectors, extract the vocabulary's rows
        assert k.provenance.details["library_check"] == chk


def test_rank_extract_and_checkpoint_end_in_the_same_kernel(layouts, tmp_path):
    """One path, three commands: the same features (sha256), source and adapter."""
    path = layouts["performer-performer"]
    rc, out, _ = _run("rank", rank_cli.main, path, "--head", "1", "--json")
    rank_claim = json.loads(out)["certificate"]["claims"][0]
    rc, _, err = _run("checkpoint", checkpoint_cli.main, path, "--out", tmp_path / "c", "--no-progress")
    assert rc == 0, err
    cert = json.loads((tmp_path / "c" / "certificate.json").read_text())
    ck = next(c for c in cert["claims"] if c["kind"] == "exact_rank" and c["info"]["head"] == 1)
    assert ck["evidence"]["features_sha256"] == rank_claim["evidence"]["features_sha256"]
    for key in ("source", "source_sha256", "adapter", "token_set", "dtype"):
        assert ck["parameters"][key] == rank_claim["parameters"][key]
    _run("extract", extract_cli.main, path, "--head", "1", "--out", tmp_path / "k.npz")
    with np.load(tmp_path / "k.npz") as z:
        q = z["phi_q"]
    from certify.rank.summary import summarize_features
    assert summarize_features(load_kernel(tmp_path / "k.npz")).sha_q == \
        rank_claim["evidence"]["features_sha256"]["phi_q"] and q.dtype == np.float64


def test_rank_json_matrix_of_exact_rows_works_again(tmp_path):
    hilbert = [[f"1/{i + j + 1}" for j in range(5)] for i in range(5)]
    (tmp_path / "hilbert.json").write_text(json.dumps(hilbert))
    rc, out, err = _run("rank", rank_cli.main, tmp_path / "hilbert.json", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["rank_lower"] == doc["rank_upper"] == 5 and doc["form"] == "matrix"


def test_service_api_reads_third_party_checkpoints(layouts):
    from certify import api
    cert = api.rank_of_matrix(str(layouts["lat-selfattention"]), tokens="cube:8")
    assert cert.claims[0].info["library_check"]["status"] == "agrees"
    assert any(p.endswith("config.json") for p in cert.inputs)
    cert = api.certify_checkpoint(str(layouts["fla-model"]))
    assert {c.info["layer"] for c in cert.claims} == {0} and {c.info["head"] for c in cert.claims} == {0, 1}


def test_layer_and_head_options(layouts):
    rc, out, err = _run("rank", rank_cli.main, layouts["performer-performer"], "--layer", "1", "--json")
    assert rc == 2 and "reads the outputs of the layer before it" in err
    rc, out, err = _run("rank", rank_cli.main, layouts["performer-performer"], "--head", "5")
    assert rc == 2 and "--head 5" in err
    rc, out, err = _run("rank", rank_cli.main, ROOT / "models/checkpoints/paper51-lookup-r8-s0", "--head", "0")
    assert rc == 2 and "models/ checkpoint" in err


# ---------------------------------------------------------------- the one weight reader

def test_read_weights_keeps_stored_bytes_and_needs_no_torch_for_safetensors(tmp_path):
    t = {"a.weight": torch.randn(3, 4).to(torch.bfloat16), "b": torch.arange(5, dtype=torch.int64)}
    save_file(t, str(tmp_path / "w.safetensors"))
    code = ("import sys; from certify.sources.weights import read_weights; "
            f"ws = read_weights({str(tmp_path / 'w.safetensors')!r}); "
            "assert 'torch' not in sys.modules; "
            "print(ws.tensors['a.weight'].dtype, ws.tensors['a.weight'].shape, ws.tensors['a.weight'].data.hex())")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    dtype, *_ , hexdata = p.stdout.split()
    assert dtype == "bfloat16" and bytes.fromhex(hexdata) == t["a.weight"].view(torch.uint8).numpy().tobytes()
    back = read_weights(tmp_path / "w.safetensors").torch()
    assert back["a.weight"].dtype == torch.bfloat16 and torch.equal(back["a.weight"], t["a.weight"])


@pytest.mark.parametrize("wrap,nesting", [
    (lambda sd: {"model": sd, "ema": {k: v + 1 for k, v in sd.items()}, "step": 3}, ["model"]),
    (lambda sd: {"state_dict": {"module": sd}, "optimizer": {"state": {}}}, ["state_dict", "module"]),
    (lambda sd: {"ema": sd, "epoch": 2}, ["ema"]),
    (lambda sd: sd, []),
])
def test_training_checkpoints_are_unwrapped(tmp_path, wrap, nesting):
    sd = {"layer.weight": torch.randn(2, 3), "layer.bias": torch.randn(2)}
    torch.save(wrap(sd), tmp_path / "c.pt")
    ws = read_weights(tmp_path / "c.pt")
    assert list(ws.nesting) == nesting and set(ws.tensors) == set(sd)
    got = ws.torch()
    assert all(torch.equal(got[k], sd[k]) for k in sd)


def test_unreadable_weights_are_one_line_exit_2(tmp_path):
    (tmp_path / "junk.pt").write_bytes(b"not a zip")
    torch.save([torch.zeros(2)], tmp_path / "list.pt")
    torch.save({"step": 3}, tmp_path / "nothing.pt")
    save_file({"a": torch.zeros(2)}, str(tmp_path / "s1.safetensors"))
    (tmp_path / "idx").mkdir()
    (tmp_path / "idx" / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"a": "s1.safetensors", "b": "missing.safetensors"}}))
    for bad in ("junk.pt", "list.pt", "nothing.pt", "idx"):
        rc, _, err = _run("checkpoint", checkpoint_cli.main, tmp_path / bad)
        assert rc == 2 and len(err.strip().splitlines()) == 1, (bad, err)


def test_kind_of_decides_what_a_path_is(layouts, tmp_path):
    np.save(tmp_path / "m.npy", np.eye(3))
    save_file({"matrix": torch.eye(3)}, str(tmp_path / "m.safetensors"))
    assert kind_of(tmp_path / "m.npy") == "kernel" and kind_of(tmp_path / "m.safetensors") == "kernel"
    assert kind_of(layouts["fla-model"]) == "weights"
    assert kind_of(layouts["fla-based"] / "model.safetensors") == "weights"
    assert kind_of(ROOT / "models/checkpoints/paper51-lookup-r8-s0.json") == "models"
    rc, _, err = _run("checkpoint", checkpoint_cli.main, tmp_path / "m.npy")
    assert rc == 2 and "certify rank" in err


# ---------------------------------------------------------------- detection that cannot guess

def test_qkvo_keys_without_config_are_refused_with_the_candidates(tmp_path):
    layer = fla_layers.LinearAttention(hidden_size=W, num_heads=2, feature_map="elu", output_norm="identity",
                                       do_feature_map_norm=True)
    save_st(layer.state_dict(), tmp_path)
    rc, _, err = _run("checkpoint", checkpoint_cli.main, tmp_path)
    assert rc == 2 and len(err.strip().splitlines()) == 1
    for cand in ("LinearAttention", "BasedLinearAttention", "ReBasedLinearAttention", "softmax attention",
                 '"class"'):
        assert cand in err
    (tmp_path / "config.json").write_text(json.dumps({"class": "ReBasedLinearAttention", "use_gamma": True}))
    rc, _, err = _run("checkpoint", checkpoint_cli.main, tmp_path)
    assert rc == 2 and "use_gamma=True does not fit the keys" in err
    (tmp_path / "config.json").write_text(json.dumps({"feature_map": "hedgehog"}))
    rc, _, err = _run("checkpoint", checkpoint_cli.main, tmp_path)
    assert rc == 2 and "fit no fla layer" in err and "'hedgehog' does not fit the keys" in err
    (tmp_path / "config.json").write_text(json.dumps({**FLA_LINEAR, "feature_map": "elu",
                                                      "num_heads": 2, "output_norm": "identity"}))
    rc, out, err = _run("rank", rank_cli.main, tmp_path, "--json")
    assert rc == 0 and json.loads(out)["adapter"] == "layout:fla:linear_attn-layer layer 0 head 0"


def test_library_in_config_must_fit_the_keys(layouts, tmp_path):
    sd = torch.load(layouts["performer-performer"], weights_only=True)
    torch.save(sd, tmp_path / "m.pt")
    (tmp_path / "config.json").write_text(json.dumps({"library": "linear-attention-transformer"}))
    rc, _, err = _run("checkpoint", checkpoint_cli.main, tmp_path / "m.pt")
    assert rc == 2 and "projection_matrix" in err


def test_softmax_attention_is_exit_3_with_that_reason(tmp_path):
    enc = torch.nn.TransformerEncoderLayer(d_model=W, nhead=2, dim_feedforward=16)
    torch.save(enc.state_dict(), tmp_path / "enc.pt")
    rc, _, err = _run("checkpoint", checkpoint_cli.main, tmp_path / "enc.pt")
    assert rc == 3 and "softmax attention is not a finite-rank kernel" in err
    rc, _, err = _run("rank", rank_cli.main, tmp_path / "enc.pt", "--tokens", "cube:8")
    assert rc == 3 and "softmax" in err
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_embd=W, n_layer=1, n_head=2, vocab_size=12, n_positions=16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        transformers.GPT2LMHeadModel(cfg).save_pretrained(tmp_path / "gpt2")
    rc, _, err = _run("checkpoint", checkpoint_cli.main, tmp_path / "gpt2", "--no-progress")
    assert rc == 3 and "softmax attention is not a finite-rank kernel" in err


def test_fla_model_state_dict_without_its_config_is_bad_input(layouts, tmp_path):
    from certify.sources.weights import read_weights as rw
    sd = rw(layouts["fla-model"]).torch()
    torch.save(sd, tmp_path / "lm.pt")
    rc, _, err = _run("checkpoint", checkpoint_cli.main, tmp_path / "lm.pt")
    assert rc == 2 and "without its config.json" in err


def test_unknown_model_folder_config_does_not_crash(tmp_path):
    with pytest.raises(InputError):
        load_kernel(save_st({"x.weight": torch.zeros(2, 2), "y.weight": torch.zeros(2, 2)}, tmp_path,
                        {"model_type": "my_model"}))


def test_service_job_finds_a_zipped_third_party_folder(layouts, tmp_path):
    """The service hands the unpacked folder to the API, which reads it with the one loader."""
    from certify.service import worker as jobs
    folder = layouts["fla-model"]
    files = sorted(folder.iterdir())
    assert jobs._find_checkpoint(files, folder.parent) == Path(folder.name)
    models = ROOT / "models" / "checkpoints"
    assert jobs._find_checkpoint([models / "paper51-lookup-r8-s0.json", models / "paper51-lookup-r8-s0.safetensors"],
                                 models) == Path("paper51-lookup-r8-s0.json")
