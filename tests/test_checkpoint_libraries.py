"""Models built with each library's own constructors and saved as people save them
(pre-norm containers, bare layers inside a user's module, nested training
checkpoints, shards, bf16/fp16): the certified kernel -- the features embedded in
the certificate, exactly -- reproduces the library's own computation on the
tokens, and the certificate counts the layers and heads the model has.

Each test recomputes the library's attention output with the library's modules
(hooks on its forward, or fla's pure-PyTorch reference ops) and compares it with
``sum_j alpha(x_i, x_j) v_j / sum_j alpha(x_i, x_j)`` built from the certified
features, so a kernel the model does not compute fails here.
"""

from __future__ import annotations

import json
import warnings
from fractions import Fraction
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

from certify.checkers.verify import verify_certificate
from certify.checkpoints.heads import certify_heads

performer, lat, fla_layers, fla_models = libraries()

M = 6
TOL = 1e-5          # float32 features against the library's float32 forward, scaled by the value size


# ---------------------------------------------------------------- helpers

def _features(cert: dict, layer: int, head: int) -> tuple[np.ndarray, np.ndarray, str]:
    """The certified features of one head, exactly as embedded, and its token set."""
    claims = cert["claims"]
    c = next(c for c in claims if c["kind"] == "exact_rank" and c["info"]["layer"] == layer
             and c["info"]["head"] == head)
    ev = c["evidence"]
    f = ev["features"] if "features" in ev else claims[ev["features_claim"]]["evidence"]["features"]

    def rows(key):
        e = Fraction(2) ** f[key + "_exponent"]
        return np.array([[float(Fraction(v) * e) for v in r] for r in f[key]])
    return rows("phi_q"), rows("phi_k"), c["parameters"]["token_set"]


def _attend(Q, K, V, causal: bool, eps: float = 0.0):
    """(B, N, dv): sum_j alpha_ij v_j / (sum_j alpha_ij + eps), alpha = Q K^T (float64)."""
    A = Q @ np.swapaxes(K, 1, 2)
    if causal:
        A = A * np.tril(np.ones(A.shape[1:]))
    return (A @ V) / (A.sum(-1, keepdims=True) + eps)


def _cube_index(x: torch.Tensor) -> np.ndarray:
    """Row of each 0/1 vector in the cube's little-endian order."""
    return (x.long() << torch.arange(x.shape[-1])).sum(-1).numpy()


def _scaled_error(got, want, V) -> float:
    return float(np.abs(np.asarray(got) - np.asarray(want)).max() / np.abs(V).max())


def _rows_by_status(res):
    return [(r.layer, r.head, r.status) for r in res.rows]


def _verifies(res, base: Path):
    assert verify_certificate(res.certificate.to_json(), base=base).holds


def _lucidrains_check(res, module, attn, X, heads: int, causal: bool, norm=None):
    """Hooks on the library's forward: layer 0's to_out input (every head's output)
    with the values the library computes; the same from the certified kernel."""
    cert = res.certificate.to_json()
    seen = {}
    hooks = [attn.to_out.register_forward_pre_hook(lambda m, a: seen.__setitem__("o", a[0])),
             attn.to_v.register_forward_hook(lambda m, a, out: seen.__setitem__("v", out))]
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module(X)
    for h in hooks:
        h.remove()
    B, N = X.shape[:2]
    lib = seen["o"].reshape(B, N, heads, -1).double().numpy()
    V = seen["v"].reshape(B, N, heads, -1).double().numpy()
    idx = _cube_index(X)
    for h in range(heads):
        Q, K, ts = _features(cert, 0, h)
        assert ts == f"cube:{X.shape[-1]}"
        ours = _attend(Q[idx], K[idx], V[:, :, h], causal)
        assert _scaled_error(ours, lib[:, :, h], V[:, :, h]) < TOL, h


# ---------------------------------------------------------------- performer-pytorch

@pytest.fixture(scope="module")
def performer_depth2(tmp_path_factory):
    """A depth-2 Performer (pre-norm LayerNorm around every attention), torch.save."""
    torch.manual_seed(0)
    model = performer.Performer(dim=M, depth=2, heads=2, dim_head=3, nb_features=6,
                                generalized_attention=True).eval()
    randomize(model, seed=1)
    d = tmp_path_factory.mktemp("performer2")
    torch.save(model.state_dict(), d / "model.pt")
    (d / "config.json").write_text(json.dumps(PERFORMER_MODEL))
    return model, d


def test_performer_library_check_builds_only_the_layers_up_to_the_compared_one(performer_depth2, monkeypatch):
    """The library comparison of layer 0 builds a depth-1 Performer from the weights of
    block 0 (the later blocks do not change its output): the same errors, bit for bit,
    as the whole stack built and run."""
    from models.layouts import reference as ref
    _, d = performer_depth2
    path, sub = "net.layers.0.0.fn.", {"net.layers.0.0.fn.a": 0, "net.layers.1.0.fn.a": 1, "g": 2,
                                       "proj_updater.instance.layers.1.0.fn.a": 3}
    assert ref._layers_upto(path, sub) == ({"net.layers.0.0.fn.a": 0, "g": 2}, 1)
    assert ref._layers_upto("net.blocks.0.f.", sub) is None
    import performer_pytorch.performer_pytorch as lib
    built = []
    real_perf = lib.Performer

    def spy(*a, **kw):
        built.append(kw["depth"])
        return real_perf(*a, **kw)
    monkeypatch.setattr(lib, "Performer", spy)
    short = certify_heads(str(d / "model.pt")).certificate.claims[0].info["library_check"]
    monkeypatch.setattr(ref, "_layers_upto", lambda path, sub: None)
    full = certify_heads(str(d / "model.pt")).certificate.claims[0].info["library_check"]
    assert built == [1, 2]
    assert short["status"] == "agrees" and short == full


def test_performer_depth2_prenorm_reproduces_library_and_counts_layers(performer_depth2):
    model, d = performer_depth2
    res = certify_heads(str(d / "model.pt"))
    # two layers of two heads: the proj_updater's second view of the layers is not counted
    assert _rows_by_status(res) == [(0, 0, "certified"), (0, 1, "certified"),
                                    (1, 0, "out of reach"), (1, 1, "out of reach")]
    assert res.certificate.environment["layout"]["layers"] == 2
    X = torch.randint(0, 2, (4, 9, M), generator=torch.Generator().manual_seed(2)).float()
    attn = model.net.layers[0][0].fn
    _lucidrains_check(res, model, attn, X, heads=2, causal=False)
    info = res.certificate.claims[0].info
    assert info["input_path"] == ["LayerNorm net.layers.0.0.norm (eps 1e-05)"]
    assert info["library_check"]["status"] == "agrees" and info["library_check"]["max_error"] < 1e-4
    _verifies(res, d)


def test_performer_without_its_prenorm_would_disagree(performer_depth2, monkeypatch):
    """Soundness: the extraction that fed the raw cube to to_q/to_k (no LayerNorm)
    is caught by the comparison with the library and the heads are refused."""
    from models.layouts import lucidrains
    _, d = performer_depth2
    monkeypatch.setattr(lucidrains, "_pre_norm", lambda *a, **k: ([], "none"))
    from certify.core.errors import UncertifiableError
    with pytest.raises(UncertifiableError, match="disagrees with performer-pytorch"):
        certify_heads(str(d / "model.pt"))


def test_performer_scalenorm_and_rezero(tmp_path):
    X = torch.randint(0, 2, (3, 8, M), generator=torch.Generator().manual_seed(3)).float()
    for kind in ("use_scalenorm", "use_rezero"):
        torch.manual_seed(4)
        model = randomize(performer.Performer(dim=M, depth=1, heads=2, dim_head=3, nb_features=6,
                                               generalized_attention=True, **{kind: True}).eval(), seed=5)
        with torch.no_grad():
            model.net.layers[0][0].g.fill_(0.7)
        d = tmp_path / kind
        d.mkdir()
        torch.save(model.state_dict(), d / "model.pt")
        (d / "config.json").write_text(json.dumps(PERFORMER_MODEL))   # g's shape decides
        res = certify_heads(str(d / "model.pt"))
        assert [r.status for r in res.rows] == ["certified"] * 2
        _lucidrains_check(res, model, model.net.layers[0][0].fn, X, heads=2, causal=False)
        assert res.certificate.environment["layout"]["defaults_used"][kind].startswith("true, from the shape")


def test_performer_in_a_users_module_in_a_training_checkpoint(tmp_path):
    """{"model": state_dict, "optimizer": ..., "step": ...} of a user's module holding a
    SelfAttention under the prefix 'blocks.attn.' (with an EMA copy beside it)."""
    torch.manual_seed(6)

    class User(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Linear(3, M)
            self.blocks = torch.nn.Module()
            self.blocks.attn = performer.SelfAttention(dim=M, heads=2, dim_head=3, nb_features=6,
                                                       generalized_attention=True, qkv_bias=True)
    user = randomize(User().eval(), seed=7)
    ema = {f"ema.{k}": v.clone() for k, v in user.state_dict().items()}
    opt = torch.optim.SGD(user.parameters(), lr=0.1, momentum=0.9)
    user.blocks.attn.to_q.weight.sum().backward()
    opt.step()
    with torch.no_grad():                       # the checkpoint holds the weights after the step
        sd = user.state_dict()
    torch.save({"model": {**sd, **ema}, "optimizer": opt.state_dict(), "step": 1}, tmp_path / "train.ckpt")
    (tmp_path / "config.json").write_text(json.dumps(PERFORMER_ATTN))
    res = certify_heads(str(tmp_path / "train.ckpt"))
    layout = res.certificate.environment["layout"]
    assert _rows_by_status(res) == [(0, 0, "certified"), (0, 1, "certified")]
    assert layout["prefix"] == "blocks.attn." and layout["weights"]["nesting"] == ["model"]
    assert {"optimizer", "step"} <= set(layout["weights"]["ignored"])
    assert any("wrappers (ema)" in n for n in layout["notes"])
    X = torch.randint(0, 2, (4, 7, M), generator=torch.Generator().manual_seed(8)).float()
    _lucidrains_check(res, user.blocks.attn, user.blocks.attn, X, heads=2, causal=False)
    _verifies(res, tmp_path)


def test_performer_sharded_safetensors(tmp_path):
    torch.manual_seed(9)
    model = randomize(performer.Performer(dim=M, depth=2, heads=2, dim_head=3, nb_features=6,
                                           generalized_attention=True, causal=True).eval(), seed=10)
    sd = {k: v.contiguous() for k, v in model.state_dict().items() if not k.startswith("proj_updater")}
    names = sorted(sd)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for f, ks in shards.items():
        save_file({k: sd[k] for k in ks}, str(tmp_path / f))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {k: f for f, ks in shards.items() for k in ks}}))
    (tmp_path / "config.json").write_text(json.dumps({**PERFORMER_MODEL, "causal": True}))
    res = certify_heads(str(tmp_path))
    assert [r.status for r in res.rows] == ["certified"] * 2 + ["out of reach"] * 2
    assert set(res.certificate.inputs) >= {str(tmp_path / f) for f in shards}
    X = torch.randint(0, 2, (3, 8, M), generator=torch.Generator().manual_seed(11)).float()
    _lucidrains_check(res, model, model.net.layers[0][0].fn, X, heads=2, causal=True)
    _verifies(res, tmp_path)


# ---------------------------------------------------------------- linear-attention-transformer

def test_lat_depth2_prenorm_fp16_reproduces_library(tmp_path):
    """A causal LinearAttentionTransformer (PreNorm LayerNorm), weights saved as fp16."""
    torch.manual_seed(12)
    model = randomize(lat.LinearAttentionTransformer(dim=M, depth=2, max_seq_len=64, heads=2, dim_head=3,
                                                      causal=True).eval(), std=0.3, seed=13)
    half = {k: v.half() for k, v in model.state_dict().items()}
    save_st(half, tmp_path, {**LAT_CAUSAL, "heads": 2, "dim_head": 3})
    model.load_state_dict({k: v.float() for k, v in half.items()})        # the model the file holds
    res = certify_heads(str(tmp_path))
    assert _rows_by_status(res) == [(0, 0, "certified"), (0, 1, "certified"),
                                    (1, 0, "out of reach"), (1, 1, "out of reach")]
    assert res.certificate.environment["layout"]["stored_dtype"] == "float16"
    assert res.certificate.claims[0].parameters["dtype"] == "float64"         # the canonical features
    X = torch.randint(0, 2, (3, 8, M), generator=torch.Generator().manual_seed(14)).float()
    _lucidrains_check(res, model, model.layers.layers[0][0].fn, X, heads=2, causal=True)
    _verifies(res, tmp_path)


# ---------------------------------------------------------------- fla

def _fla_naive(layer, x, V):
    """fla's LinearAttention on CPU: its own submodules and the naive reference op."""
    from fla.ops.linear_attn.naive import naive_recurrent_linear_attn
    B, N = x.shape[:2]
    q = layer.feature_map_q(layer.q_proj(x).reshape(B, N, layer.num_heads, -1))
    k = layer.feature_map_k(layer.k_proj(x).reshape(B, N, layer.num_kv_heads, -1))
    k = k.repeat_interleave(layer.num_kv_groups, dim=2)
    o, _ = naive_recurrent_linear_attn(q, k, V, normalize=True)
    return o


def _fla_check(res, layer, X, V, layer_index=0):
    cert = res.certificate.to_json()
    with torch.no_grad():
        lib = _fla_naive(layer, X, V.float()).double().numpy()
    idx = _cube_index(X)
    for h in range(layer.num_heads):
        Q, K, ts = _features(cert, layer_index, h)
        ours = _attend(Q[idx], K[idx], V[:, :, h].numpy(), causal=True, eps=1e-10)     # fla's epsilon
        assert _scaled_error(ours, lib[:, :, h], V[:, :, h].numpy()) < TOL, h


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fla_elu_identity_output_norm_is_linear_attention(tmp_path, dtype):
    """LinearAttention(feature_map="elu", output_norm="identity") keeps only q/k/v/o:
    the config's feature_map decides (not Based), and the elu kernel has rank <= 3."""
    torch.manual_seed(15)
    layer = randomize(fla_layers.LinearAttention(hidden_size=M, num_heads=2, feature_map="elu",
                                                  output_norm="identity", do_feature_map_norm=True), seed=16)
    layer = layer.to(dtype).float().eval()                        # the values a bf16 file holds
    assert set(layer.state_dict()) == {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"}
    save_st({k: v.to(dtype) for k, v in layer.state_dict().items()}, tmp_path,
        {**FLA_LINEAR, "feature_map": "elu", "output_norm": "identity", "num_heads": 2})
    res = certify_heads(str(tmp_path))
    assert res.layout == "fla:linear_attn-layer" and [r.feature_map for r in res.rows] == ["fla-elu"] * 2
    assert {r.rank for r in res.rows} <= {"1 proved", "2 proved", "3 proved"}
    X = torch.randint(0, 2, (3, 8, M), generator=torch.Generator().manual_seed(17)).float()
    V = torch.randn(3, 8, 2, 3, generator=torch.Generator().manual_seed(18), dtype=torch.float64)
    _fla_check(res, layer, X, V)
    if dtype is torch.bfloat16:
        assert res.certificate.environment["layout"]["stored_dtype"] == "bfloat16"
    _verifies(res, tmp_path)


def test_fla_dpfp_layer_certificate_is_written_and_checked(tmp_path):
    """dpfp's relu(-0.0) gives -0.0 features; the certificate holds +0.0 (the same
    number), so the checker re-derives the features' hash and the write succeeds."""
    torch.manual_seed(19)
    layer = randomize(fla_layers.LinearAttention(hidden_size=M, num_heads=2, feature_map="dpfp",
                                                  do_feature_map_norm=True), seed=20).eval()
    torch.save(layer.state_dict(), tmp_path / "layer.pt")
    (tmp_path / "config.json").write_text(json.dumps({**FLA_LINEAR, "feature_map": "dpfp", "num_heads": 2}))
    res = certify_heads(str(tmp_path / "layer.pt"))
    res.certificate.write(tmp_path / "cert.json")           # the producer's own check passes
    cert = json.loads((tmp_path / "cert.json").read_text())
    assert len({(c["info"]["layer"], c["info"]["head"]) for c in cert["claims"]}) == 2
    assert [r.rank for r in res.rows] != ["", ""] and {r.nonnegative for r in res.rows} == {"proved"}
    X = torch.randint(0, 2, (3, 8, M), generator=torch.Generator().manual_seed(21)).float()
    X[0, 0] = 0                                      # the zero token: relu(-0.0)
    V = torch.randn(3, 8, 2, 3, generator=torch.Generator().manual_seed(22), dtype=torch.float64)
    _fla_check(res, layer, X, V)


def test_fla_sharded_bf16_model_folder_reads_embedding_rows(tmp_path):
    """save_pretrained in bf16 with small shards: vocabulary rows through attn_norm."""
    from fla.modules.norm.layernorm import rms_norm_ref
    cfg = fla_models.LinearAttentionConfig(hidden_size=8, num_hidden_layers=2, num_heads=2, vocab_size=12,
                                           intermediate_size=16, norm_feature_map=True, feature_map="relu")
    torch.manual_seed(23)
    model = randomize(fla_models.LinearAttentionForCausalLM(cfg), seed=24)
    model.to(torch.bfloat16).save_pretrained(tmp_path / "m", max_shard_size="2KB")
    model.float()
    assert (tmp_path / "m" / "model.safetensors.index.json").is_file()
    res = certify_heads(str(tmp_path / "m"))
    assert _rows_by_status(res) == [(0, 0, "certified"), (0, 1, "certified"),
                                    (1, 0, "out of reach"), (1, 1, "out of reach")]
    assert {r.token_set for r in res.rows[:2]} == {"vocab:12"}
    cert = res.certificate.to_json()
    block = model.model.layers[0]
    ids = torch.randint(0, 12, (3, 9), generator=torch.Generator().manual_seed(25))
    V = torch.randn(3, 9, 2, 4, generator=torch.Generator().manual_seed(26), dtype=torch.float64)
    with torch.no_grad():
        x = rms_norm_ref(model.model.embeddings(ids), block.attn_norm.weight, None, eps=cfg.norm_eps)
        lib = _fla_naive(block.attn, x, V.float()).double().numpy()
    for h in range(2):
        Q, K, _ = _features(cert, 0, h)
        ours = _attend(Q[ids.numpy()], K[ids.numpy()], V[:, :, h].numpy(), causal=True, eps=1e-10)
        assert _scaled_error(ours, lib[:, :, h], V[:, :, h].numpy()) < TOL
    _verifies(res, tmp_path)


def test_fla_bare_layer_without_config_uses_the_pinned_defaults(tmp_path):
    """No config.json: the keys tell the map (elementwise_product) and the head split;
    the denominator and norm_q / norm_k are unstated, so the layer is refused (exit 3)
    naming them, and certified as unnormalized kernel attention once the library's
    defaults are accepted by name."""
    from certify.core.errors import UncertifiableError
    from certify.sources.thirdparty import load_model
    layer = fla_layers.LinearAttention(hidden_size=M, num_heads=2)
    torch.save(layer.state_dict(), tmp_path / "layer.pt")
    with pytest.raises(UncertifiableError, match="do_feature_map_norm .*unnormalized kernel attention"):
        load_model(tmp_path / "layer.pt")
    det = load_model(tmp_path / "layer.pt", ["*"]).detected
    assert det.defaults["do_feature_map_norm"] is False
    assert det.defaults["feature_map"].startswith("elementwise_product")
    assert det.stated["do_feature_map_norm"] == {"value": False, "from": "library default, assumed"}
    res = certify_heads(str(tmp_path / "layer.pt"), assume=["*"])
    assert [r.status for r in res.rows] == ["certified"] * 2
    assert all(c.parameters["normalized"] is False for c in res.certificate.claims)
    assert {r.library_check["output"] for r in res.rows} == {"A V (unnormalized)"}
