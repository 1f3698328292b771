"""No default decides a kernel silently; the library check is built from the config
as written; tied fla feature maps are read as fla reads them.

Models are built with the libraries' own constructors and saved as people save
them. A performer ``SelfAttention(kernel_fn=nn.Softplus())`` whose config.json
omits ``kernel_fn`` used to be certified as the ReLU kernel with a library check
that "agreed" (it was rebuilt from the same default): it is refused now, naming
``kernel_fn``; stated, it is certified and agrees with the library's own forward;
accepted with ``--assume-default kernel_fn``, the sentence names the assumed
default.
"""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from library_support import LAT_CAUSAL, libraries, randomize, save_st

from certify.checkers.verify import verify_certificate
from certify.checkpoints.heads import certify_heads
from certify.cli import run as run_cli
from certify.core.errors import InputError, UncertifiableError

performer, lat, fla_layers, fla_models = libraries()

M = 6
#: performer's SelfAttention with generalized attention, every kernel argument but kernel_fn
WRITTEN = {"generalized_attention": True, "no_projection": False, "local_heads": 0}


def _features(cert: dict, head: int) -> tuple[np.ndarray, np.ndarray]:
    c = next(c for c in cert["claims"] if c["kind"] == "exact_rank" and c["parameters"]["head"] == head)
    f = c["evidence"]["features"]

    def rows(key):
        return np.array([[float(v) for v in r] for r in f[key]]) * 2.0 ** f[key + "_exponent"]
    return rows("phi_q"), rows("phi_k")


def _library_outputs(attn, X):
    """performer's own forward: the to_out input (every head) and the to_v output."""
    seen = {}
    hooks = [attn.to_out.register_forward_pre_hook(lambda m, a: seen.__setitem__("o", a[0])),
             attn.to_v.register_forward_hook(lambda m, a, out: seen.__setitem__("v", out))]
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        attn(X)
    for h in hooks:
        h.remove()
    B, N = X.shape[:2]
    return (seen["o"].reshape(B, N, 2, -1).double().numpy(), seen["v"].reshape(B, N, 2, -1).double().numpy())


def _error_against_library(cert: dict, attn, X) -> float:
    """Largest error of sum_j alpha v_j / sum_j alpha (certified features) against the
    library's own output, relative to the values."""
    lib, V = _library_outputs(attn, X)
    idx = (X.long() << torch.arange(M)).sum(-1).numpy()
    worst = 0.0
    for h in range(2):
        Q, K = _features(cert, h)
        A = Q[idx] @ np.swapaxes(K[idx], 1, 2)
        ours = (A @ V[:, :, h]) / A.sum(-1, keepdims=True)
        worst = max(worst, float(np.abs(ours - lib[:, :, h]).max() / np.abs(V).max()))
    return worst


def _forge_origin(cert: dict) -> dict:
    """``cert`` claiming that kernel_fn came from config.json, its sentences re-rendered."""
    from certify.checkers.statements import render
    forged = copy.deepcopy(cert)
    for c in forged["claims"]:
        if "stated" in c["parameters"]:
            c["parameters"]["stated"]["kernel_fn"]["from"] = "config.json"
            c["statement"] = render(c["kind"], c["parameters"], c["evidence"], forged["renderer"]).text
    return forged


@pytest.fixture(scope="module")
def softplus(tmp_path_factory):
    """A Softplus performer SelfAttention and its weights (safetensors)."""
    torch.manual_seed(0)
    attn = randomize(performer.SelfAttention(dim=M, heads=2, dim_head=3, nb_features=6,
                                             generalized_attention=True, kernel_fn=torch.nn.Softplus()).eval(),
                     seed=1)
    X = torch.randint(0, 2, (4, 9, M), generator=torch.Generator().manual_seed(2)).float()
    return attn, tmp_path_factory.mktemp("softplus"), X


def test_softplus_performer_with_kernel_fn_omitted_is_refused_naming_it(softplus, capsys):
    attn, root, _ = softplus
    d = save_st(attn.state_dict(), root / "omitted", WRITTEN)
    with pytest.raises(UncertifiableError, match=r"kernel_fn .*--assume-default kernel_fn") as exc:
        certify_heads(str(d))
    assert '"kernel_fn": ...' in str(exc.value) and "no_projection" not in str(exc.value)
    # the commands: exit 3, one line naming the argument, nothing written
    for cmd in (["checkpoint", str(d), "--out", str(root / "out")], ["rank", str(d)]):
        assert run_cli(cmd[0], cmd[1:]) == 3
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "kernel_fn" in err[0] and "--assume-default kernel_fn" in err[0]
    assert not (root / "out").exists()


def test_softplus_performer_with_kernel_fn_stated_is_certified_and_agrees(softplus):
    attn, root, X = softplus
    d = save_st(attn.state_dict(), root / "stated", {**WRITTEN, "kernel_fn": "Softplus"})
    res = certify_heads(str(d))
    assert [r.status for r in res.rows] == ["certified", "certified"]
    assert [r.feature_map for r in res.rows] == ["performer-generalized-softplus"] * 2
    cert = res.certificate.to_json()
    check = cert["claims"][0]["info"]["library_check"]
    assert check["status"] == "agrees" and check["max_error"] < 1e-5
    assert _error_against_library(cert, attn, X) < 1e-5           # the model's own Softplus kernel
    c = cert["claims"][0]
    assert c["parameters"]["stated"]["kernel_fn"] == {"value": "Softplus", "from": "config.json"}
    assert "built with the stated arguments generalized_attention = true (config.json), kernel_fn = " \
           "Softplus (config.json), local_heads = 0 (config.json), no_projection = false (config.json)" \
           in c["statement"]
    assert verify_certificate(cert, base=d).holds


def test_softplus_performer_with_assumed_default_names_the_assumption(softplus, capsys):
    """--assume-default kernel_fn: the library's ReLU, said in the sentence. It is
    the user's statement, not the model's kernel: the certified ReLU features do
    not reproduce this Softplus model's forward (which is why it is never silent)."""
    attn, root, X = softplus
    d = save_st(attn.state_dict(), root / "assumed", WRITTEN)
    res = certify_heads(str(d), assume=["kernel_fn"])
    assert [r.feature_map for r in res.rows] == ["performer-generalized-relu"] * 2
    cert = res.certificate.to_json()
    assert cert["claims"][0]["parameters"]["stated"]["kernel_fn"] == {"value": "ReLU",
                                                                     "from": "library default, assumed"}
    assert "kernel_fn = ReLU (library default, assumed)" in cert["claims"][0]["statement"]
    assert _error_against_library(cert, attn, X) > 1e-3
    # the replay re-derives the stated arguments from the config and the accepted names
    (d / "forged.json").write_text(json.dumps(_forge_origin(cert)))
    # a stated argument whose origin is forged (sentence re-rendered to match) makes the replay differ
    assert run_cli("verify", ["--replay-extraction", str(d / "forged.json")]) == 1
    out = capsys.readouterr().err
    assert "FAILS: 6 of 6 claims do not hold" in out and "differs" in out


@pytest.mark.slow
def test_an_assumed_default_replays_to_exit_0(softplus):
    attn, root, _ = softplus
    d = save_st(attn.state_dict(), root / "assumed-replay", WRITTEN)
    certify_heads(str(d), assume=["kernel_fn"]).certificate.write(d / "cert.json")
    assert run_cli("verify", ["--replay-extraction", str(d / "cert.json")]) == 0
    # with its forgery in the same verify: one replay job per stated set, not one per head
    (d / "forged.json").write_text(json.dumps(_forge_origin(json.loads((d / "cert.json").read_text()))))
    assert run_cli("verify", ["--replay-extraction", str(d / "cert.json"), str(d / "forged.json")]) == 1


def test_assume_default_of_a_stated_argument_is_bad_usage(softplus):
    attn, root, _ = softplus
    d = save_st(attn.state_dict(), root / "both", {**WRITTEN, "kernel_fn": "Softplus"})
    with pytest.raises(InputError, match="--assume-default kernel_fn: nothing to assume .config.json states it"):
        certify_heads(str(d), assume=["kernel_fn"])
    with pytest.raises(InputError, match="not a kernel argument"):
        certify_heads(str(d), assume=["dropout"])
    # a source that is no detected layout: bad usage, never ignored
    ours = str(Path(__file__).resolve().parents[1] / "models" / "checkpoints" / "paper51-lookup-r8-s0")
    for cmd in (["rank", ours], ["checkpoint", ours], ["checkpoint", "--batch", str(root)]):
        assert run_cli(cmd[0], [*cmd[1:], "--assume-default", "kernel_fn"]) == 2, cmd


def test_library_check_is_built_from_the_config_not_from_the_extractor(softplus, monkeypatch):
    """An extractor that resolved kernel_fn wrongly (Softplus read as ReLU) is caught:
    the library's module is built from the config's "Softplus" and disagrees."""
    from models.layouts import lucidrains
    attn, root, _ = softplus
    d = save_st(attn.state_dict(), root / "check", {**WRITTEN, "kernel_fn": "Softplus"})
    monkeypatch.setitem(lucidrains.KERNEL_FNS, "softplus", lucidrains.KERNEL_FNS["relu"])   # torch and canonical
    with pytest.raises(UncertifiableError, match=r"head 0: the extracted kernel disagrees with performer-pytorch "
                                                 r"1\.1\.4's own computation: scaled error"):
        certify_heads(str(d))


# ---------------------------------------------------------------- linear-attention-transformer

def test_lat_local_window_1_is_rebuilt_as_written(tmp_path):
    """A causal LinearAttentionTransformer with one local head of window 1: the local
    head is refused, the other certified; the library check builds the module with
    window 1 (the config's), not the constructor's 128, and agrees."""
    pytest.importorskip("local_attention")
    from certify.sources.thirdparty import load_model
    from models.layouts.reference import _lucidrains_module
    torch.manual_seed(3)
    model = randomize(lat.LinearAttentionTransformer(dim=M, depth=1, max_seq_len=64, heads=2, dim_head=3,
                                                      causal=True, n_local_attn_heads=1,
                                                      local_attn_window_size=1).eval(), std=0.3, seed=4)
    cfg = {**LAT_CAUSAL, "heads": 2, "dim_head": 3, "n_local_attn_heads": 1, "local_attn_window_size": 1}
    save_st(model.state_dict(), tmp_path, cfg)
    res = certify_heads(str(tmp_path))
    assert [(r.head, r.status) for r in res.rows] == [(0, "refused"), (1, "certified")]
    assert "local" in res.rows[0].reason
    check = res.certificate.claims[0].info["library_check"]
    assert check["status"] == "agrees" and check["max_error"] < 1e-5
    loaded = load_model(tmp_path)
    module, *_ = _lucidrains_module(loaded.detected, loaded.layer(0), loaded.tensors)
    windows = {m.window_size for m in module.modules() if type(m).__name__ == "LocalAttention"}
    assert windows == {1}
    stated = res.certificate.claims[0].parameters["stated"]
    assert stated["n_local_attn_heads"] == {"value": 1, "from": "config.json"}
    assert verify_certificate(res.certificate.to_json(), base=tmp_path).holds


def test_lat_without_heads_or_local_heads_is_refused_naming_them(tmp_path):
    torch.manual_seed(5)
    model = lat.LinearAttentionTransformer(dim=M, depth=1, max_seq_len=64, heads=2, dim_head=3, causal=True)
    save_st(model.state_dict(), tmp_path, {"causal": True, "dim_head": 3})
    with pytest.raises(UncertifiableError, match="blindspot_size .*n_local_attn_heads"):
        certify_heads(str(tmp_path))


# ---------------------------------------------------------------- fla tied feature maps

@pytest.mark.slow  # an fla LM built and saved (4.6 CPU s); fla's layouts run by default in test_fla_embedding and test_fla_unnormalized
def test_fla_tied_hedgehog_saved_with_save_model(tmp_path):
    """tie_feature_map_qk=True makes feature_map_q and feature_map_k one module;
    safetensors' save_model keeps one name of the shared tensors (feature_map_k.*).
    Read as fla reads it (the stored copy serves both), certified, and the library
    check (fla's layer loaded with the copy filled in) agrees."""
    from fla.ops.linear_attn.naive import naive_recurrent_linear_attn
    from safetensors.torch import load_file, save_model
    torch.manual_seed(6)
    layer = randomize(fla_layers.LinearAttention(hidden_size=M, num_heads=2, feature_map="hedgehog",
                                                  tie_feature_map_qk=True, do_feature_map_norm=True), seed=7).eval()
    save_model(layer, str(tmp_path / "model.safetensors"))
    stored = set(load_file(str(tmp_path / "model.safetensors")))
    assert any(k.startswith("feature_map_k.") for k in stored)
    assert not any(k.startswith("feature_map_q.") for k in stored)
    cfg = {"feature_map": "hedgehog", "tie_feature_map_qk": True, "num_heads": 2, "do_feature_map_norm": True,
           "norm_q": False, "norm_k": False}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    res = certify_heads(str(tmp_path))
    assert [r.status for r in res.rows] == ["certified", "certified"]
    assert [r.feature_map for r in res.rows] == ["fla-hedgehog-tied"] * 2
    cert = res.certificate.to_json()
    check = cert["claims"][0]["info"]["library_check"]
    assert check["status"] == "agrees" and check["max_error"] < 1e-5
    X = torch.randint(0, 2, (3, 8, M), generator=torch.Generator().manual_seed(8)).float()
    V = torch.randn(3, 8, 2, 3, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    with torch.no_grad():
        q = layer.feature_map_q(layer.q_proj(X).reshape(3, 8, 2, -1))
        k = layer.feature_map_k(layer.k_proj(X).reshape(3, 8, 2, -1))
        lib, _ = naive_recurrent_linear_attn(q, k, V.float(), normalize=True)
    idx = (X.long() << torch.arange(M)).sum(-1).numpy()
    for h in range(2):
        Q, K = _features(cert, h)
        A = Q[idx] @ np.swapaxes(K[idx], 1, 2) * np.tril(np.ones((8, 8)))
        ours = (A @ V[:, :, h].numpy()) / (A.sum(-1, keepdims=True) + 1e-10)
        assert np.abs(ours - lib[:, :, h].double().numpy()).max() / V.abs().max().item() < 1e-5
    assert verify_certificate(cert, base=tmp_path).holds


def test_fla_untied_layer_missing_a_copy_is_named_missing(tmp_path):
    from safetensors.torch import save_model
    torch.manual_seed(10)
    layer = fla_layers.LinearAttention(hidden_size=M, num_heads=2, feature_map="hedgehog",
                                       tie_feature_map_qk=True, do_feature_map_norm=True)
    save_model(layer, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({"feature_map": "hedgehog", "tie_feature_map_qk": False,
                                                      "num_heads": 2, "do_feature_map_norm": True}))
    with pytest.raises(InputError, match=r"feature_map_q\.\* is missing, and config.json says tie_feature_map_qk "
                                         r"false"):
        certify_heads(str(tmp_path))


# ---------------------------------------------------------------- the table of kernel arguments

@pytest.mark.slow  # every supported library class introspected (4.6 CPU s)
def test_every_kernel_argument_is_a_constructor_argument_of_its_class():
    """KERNEL_ARGS names real constructor arguments (a typo would never be asked
    for), each with a pinned default where the library has one."""
    import importlib
    import inspect

    from models.layouts.defaults import DEFAULTS, KERNEL_ARGS
    assert set(KERNEL_ARGS) <= set(DEFAULTS)
    for key, args in KERNEL_ARGS.items():
        where, pinned, checked = DEFAULTS[key]
        if not checked:                          # not installable: read from its source
            continue
        mod, cls = where.split(":")
        params = inspect.signature(getattr(importlib.import_module(mod), cls).__init__).parameters
        for a in args:
            assert a in params, f"{key}: {a} is not an argument of {where}"
            if params[a].default is not inspect.Parameter.empty:
                assert a in pinned, f"{key}: {a} has a library default the table does not pin"


def test_a_library_check_under_an_assumed_default_is_not_reported_as_independent(softplus):
    """The Softplus model with kernel_fn unstated, accepted with --assume-library-defaults:
    the library's module is built with the same assumed ReLU, so its agreement says
    nothing about the model's kernel (whose forward the ReLU features do not reproduce).
    It is labelled so in the claim's info and in heads.md; a stated kernel_fn is an
    independent comparison."""
    attn, root, X = softplus
    d = save_st(attn.state_dict(), root / "all-defaults", WRITTEN)
    out = root / "all-defaults-out"
    assert run_cli("checkpoint", [str(d), "--assume-library-defaults", "--out", str(out)]) == 0
    cert = json.loads((out / "certificate.json").read_text())
    c = cert["claims"][0]
    assert c["parameters"]["stated"]["kernel_fn"] == {"value": "ReLU", "from": "library default, assumed"}
    check = c["info"]["library_check"]
    assert check["status"] == "agrees" and check["independent"] is False
    assert "same assumption, not an independent check" in check["note"] and "kernel_fn" in check["note"]
    assert _error_against_library(cert, attn, X) > 1e-3            # the model's own kernel differs
    assert "agrees (same assumption, not an independent check)" in (out / "heads.md").read_text()
    stated = certify_heads(str(save_st(attn.state_dict(), root / "stated-2", {**WRITTEN, "kernel_fn": "Softplus"})))
    assert stated.certificate.to_json()["claims"][0]["info"]["library_check"]["independent"] is True
