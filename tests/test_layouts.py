"""Auto-detected layouts: real modules from each library, saved as their users save
them, certified with no spec; kernels checked against the library's own computation."""

import contextlib
import dataclasses
import importlib
import inspect
import io
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
from library_support import FLA_LINEAR, LAT_CAUSAL, PERFORMER_ATTN, PERFORMER_MODEL, Library
from safetensors.torch import save_file

from certify.checkers.verify import verify_certificate
from certify.checkpoints.heads import certify_heads
from certify.cli import checkpoint as checkpoint_cli
from certify.core.errors import InputError, UncertifiableError
from certify.core.verdict import Verdict
from certify.sources.thirdparty import read_checkpoint
from models.feature_table import learned, named, names_in
from models.layouts import detect
from models.layouts.defaults import DEFAULTS

performer = Library("performer_pytorch.performer_pytorch")          # imported at first use
lat = Library("linear_attention_transformer.linear_attention_transformer")

ROOT = Path(__file__).resolve().parent.parent
M = 6


def _save(sd, folder: Path, config=None, name="model.safetensors"):
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous() for k, v in sd.items()}, str(folder / name))
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    return folder


def _heads(path):
    sd, cfg, _ = read_checkpoint(path)
    return detect(sd, cfg)


def _cli(*args):
    """``certify checkpoint ARGS`` in this process: exit code, stdout, stderr."""
    from certify.core.errors import run_command
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = run_command("certify checkpoint", checkpoint_cli.main, [str(a) for a in args])
    return types.SimpleNamespace(returncode=rc, stdout=out.getvalue(), stderr=err.getvalue())


def _cli_process(*args):
    return subprocess.run([sys.executable, "-m", "certify", "checkpoint", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def _normalized(q, k, v, causal=True, eps=0.0):
    """sum_j alpha(x_i, x_j) v_j / sum_j alpha(x_i, x_j) over a prefix (causal) or all j."""
    A = q @ k.transpose(-1, -2)                                               # (B, N, N)
    if causal:
        A = A * torch.tril(torch.ones(A.shape[-2:]))
    return (A @ v) / (A.sum(-1, keepdim=True) + eps)


def _certified(res):
    return [r for r in res.rows if r.status == "certified"]


# ---------------------------------------------------------------- the pinned table

@pytest.mark.parametrize("key", [k for k, (_, _, checked) in DEFAULTS.items() if checked])
def test_defaults_table_matches_library_constructors(key):
    where, pinned, _ = DEFAULTS[key]
    mod, cls = where.split(":")
    try:
        obj = getattr(importlib.import_module(mod), cls)
    except ImportError as exc:
        pytest.skip(f"{key[0]} not importable: {exc}")
    sig = {k: p.default for k, p in inspect.signature(obj.__init__).parameters.items()}
    for name, value in pinned.items():
        got = sig[name]
        if name == "kernel_fn":
            got = type(got).__name__
        assert got == value, f"{key}: {name} default is {got!r}, table says {value!r}"


# ---------------------------------------------------------------- performer-pytorch

def test_performer_generalized_no_spec_matches_library_and_verifies(tmp_path):
    torch.manual_seed(0)
    att = performer.SelfAttention(dim=M, heads=2, dim_head=4, nb_features=8, generalized_attention=True).eval()
    folder = _save(att.state_dict(), tmp_path / "perf", PERFORMER_ATTN)
    det = _heads(folder)
    assert det.library == "performer-pytorch" and len(det.layers[0].heads) == 2
    X = torch.randint(0, 2, (40, M)).float()
    P = att.fast_attention.projection_matrix
    for h, head in enumerate(det.layers[0].heads):
        q, k = head.feature_matrices(X)
        rows = slice(4 * h, 4 * h + 4)
        lib_q = performer.generalized_kernel((X @ att.to_q.weight[rows].T)[None, None], projection_matrix=P)[0, 0]
        lib_k = performer.generalized_kernel((X @ att.to_k.weight[rows].T)[None, None], projection_matrix=P)[0, 0]
        assert torch.allclose(q, lib_q, atol=1e-5) and torch.allclose(k, lib_k, atol=1e-5)
    res = certify_heads(str(folder))
    assert [r.rank for r in res.rows] == ["8 proved", "8 proved"]
    assert res.certificate.exit_code() == 0
    cert_path = tmp_path / "cert.json"
    res.certificate.write(cert_path)
    assert verify_certificate(res.certificate.to_json(), base=tmp_path).holds


def test_checkpoint_folder_is_checked_once_and_the_report_shows_that_check(tmp_path, monkeypatch):
    """``write_out`` runs the independent checker once, from the folder the report's check
    reads the certificate from, and the report shows that result: counted calls, the same
    verdict lines as a fresh verify, and a rejected claim still stops the write."""
    import certify.checkers.verify as V
    from certify.checkpoints.heads import write_out
    torch.manual_seed(0)
    att = performer.SelfAttention(dim=M, heads=2, dim_head=4, nb_features=8, generalized_attention=True)
    res = certify_heads(str(_save(att.state_dict(), tmp_path / "perf", PERFORMER_ATTN)))
    real, calls = V.verify_certificate, []

    def counted(cert, base=None, **kw):
        calls.append(base)
        return real(cert, base=base, **kw)
    monkeypatch.setattr(V, "verify_certificate", counted)
    out = write_out(res, str(tmp_path / "out"))
    assert len(calls) == 1 and calls[0].name.startswith(".out.stage.")
    fresh = real(json.loads((out / "certificate.json").read_text()), base=out)
    md = (out / "report.md").read_text()
    assert fresh.holds and f"`certify verify certificate.json`: exit {fresh.exit_code()}, holds" in md
    assert md.count("- re-checked: holds") == len(fresh.claims) == len(res.certificate.claims)

    def rejecting(cert, base=None, **kw):
        r = real(cert, base=base, **kw)
        return dataclasses.replace(r, claims=(dataclasses.replace(r.claims[0], problems=("planted",)),)
                                   + r.claims[1:])
    monkeypatch.setattr(V, "verify_certificate", rejecting)
    with pytest.raises(RuntimeError, match="planted"):
        write_out(res, str(tmp_path / "out2"))
    assert not (tmp_path / "out2").exists()


def test_checkpoint_files_are_hashed_once_for_all_heads(tmp_path, monkeypatch):
    """Every head's provenance and the certificate's inputs name the weights by one
    sha256, computed once per load (not once per head)."""
    import hashlib

    import certify.sources.thirdparty as tp
    torch.manual_seed(0)
    att = performer.SelfAttention(dim=M, heads=2, dim_head=4, nb_features=8, generalized_attention=True)
    folder = _save(att.state_dict(), tmp_path / "perf", PERFORMER_ATTN)
    seen = []
    real = tp.sha256_file
    monkeypatch.setattr(tp, "sha256_file", lambda f: seen.append(str(f)) or real(f))
    res = certify_heads(str(folder))
    w = str(folder / "model.safetensors")
    assert seen.count(w) == 1 and len(seen) == len(set(seen))
    want = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    assert res.certificate.bound_inputs()[w] == want
    assert {c.parameters["source_sha256"] for c in res.certificate.claims
            if "source_sha256" in c.parameters} == {want}


def test_default_performer_is_favor_and_exits_3(tmp_path):
    att = performer.SelfAttention(dim=M, heads=2, dim_head=4, nb_features=8)
    torch.save(att.state_dict(), tmp_path / "attn.pt")
    r = _cli(tmp_path / "attn.pt", "--out", tmp_path / "out")
    assert r.returncode == 3, r.stderr
    assert "FAVOR+" in r.stderr and "maximum over the whole sequence" in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # a width-24 performer built and refused (3 CPU s)
def test_width_24_third_party_head_says_what_is_out_of_reach(tmp_path):
    torch.manual_seed(3)
    att = performer.SelfAttention(dim=24, heads=2, dim_head=4, nb_features=8, generalized_attention=True)
    folder = _save(att.state_dict(), tmp_path / "w24", PERFORMER_ATTN)
    r = _cli_process(folder, "--out", tmp_path / "out", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    kinds = {c["kind"] for c in doc["claims"]}
    assert kinds == {"exact_rank", "eps_rank", "code_rank", "nonnegative"}
    row = doc["heads"][0]
    assert row["token_set"] == "family:paper-5.1" and "scalar readout" in row["out_of_reach"]["correctness"]
    audit = row["lemma3"]["paper-5.1"]
    assert audit.endswith("424 jumps violated") or audit == "holds on all 424 jumps"
    md = (tmp_path / "out" / "heads.md").read_text()
    assert "correctness: no scalar readout" in md and "Lemma 3 on paper-5.1" in md
    v = subprocess.run([sys.executable, "-m", "certify", "verify", str(tmp_path / "out" / "certificate.json")],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert v.returncode in (0, 4), v.stdout + v.stderr


def test_mixed_model_lists_refused_heads(tmp_path):
    """One local (windowed softmax) head refused, the others certified: exit as the claims."""
    pytest.importorskip("local_attention")
    torch.manual_seed(4)
    att = performer.SelfAttention(dim=M, heads=3, dim_head=4, nb_features=8, generalized_attention=True,
                                  local_heads=1, causal=False)
    folder = _save(att.state_dict(), tmp_path / "mixed", {**PERFORMER_ATTN, "local_heads": 1,
                                                          "heads": 3, "dim_head": 4})
    res = certify_heads(str(folder))
    assert [r.status for r in res.rows] == ["certified", "certified", "refused"]
    assert "local" in res.refused[0].reason
    assert res.certificate.exit_code() == 0


# ---------------------------------------------------------------- linear-attention-transformer

def test_lat_causal_no_spec_matches_module(tmp_path):
    torch.manual_seed(1)
    att = lat.SelfAttention(dim=M, heads=2, dim_head=4, causal=True).eval()
    folder = _save(att.state_dict(), tmp_path / "lat", {**LAT_CAUSAL, "heads": 2, "dim_head": 4})
    det = _heads(folder)
    assert det.library == "linear-attention-transformer"
    X = torch.randint(0, 2, (3, 64, M)).float()
    with torch.no_grad():
        ref = att(X)
        outs = []
        for head in det.layers[0].heads:
            q, k = head.feature_matrices(X.reshape(-1, M))
            v = head.values(X.reshape(-1, M)).reshape(3, 64, -1)
            q, k = q.reshape(3, 64, -1), k.reshape(3, 64, -1)
            # the library clamps the denominator at eps = 1e-3 (blindspot_size 1: no buckets)
            A = (q @ k.transpose(1, 2)) * torch.tril(torch.ones(64, 64))
            den = A.sum(-1, keepdim=True).clamp(min=1e-3)
            outs.append((A @ v) / den)
        got = torch.cat(outs, -1) @ att.to_out.weight.T + att.to_out.bias
    assert torch.allclose(got, ref, atol=1e-5), (got - ref).abs().max()
    assert certify_heads(str(folder)).certificate.exit_code() == 0


def test_lat_default_noncausal_exits_3(tmp_path):
    att = lat.SelfAttention(dim=M, heads=2, dim_head=4)
    torch.save(att.state_dict(), tmp_path / "lat.pt")
    r = _cli(tmp_path / "lat.pt")
    assert r.returncode == 3 and "softmax over the sequence" in r.stderr


# ---------------------------------------------------------------- fla

fla_models = Library("fla.models")                  # imported by the first test that uses it


def _fla_model(tmp_path, name, norm=True, **kw):
    cfg = fla_models.LinearAttentionConfig(hidden_size=8, num_hidden_layers=2, num_heads=2, vocab_size=12,
                                           intermediate_size=16, norm_feature_map=norm, **kw)
    torch.manual_seed(5)
    model = fla_models.LinearAttentionForCausalLM(cfg)
    with torch.no_grad():                       # weights of a trained size, not the 0.02 init
        for p in model.parameters():
            p.normal_(0, 0.5)
    model.save_pretrained(tmp_path / name)
    return model, tmp_path / name


@pytest.mark.parametrize("norm", [True, False], ids=["normalized", "unnormalized"])
@pytest.mark.parametrize("fmap,tied", [(f, False) for f in names_in("fla")])
def test_fla_linear_attn_folder_matches_reference_ops(tmp_path, fmap, tied, norm, kv_heads=2):
    """Every map fla's LinearAttention takes, with its denominator (norm_feature_map=True) and
    without (fla's default): the certified features give the library's own output, (A V)/(A 1)
    or A V, and the library check inside the run agrees."""
    from fla.ops.linear_attn.naive import naive_recurrent_linear_attn
    model, folder = _fla_model(tmp_path, f"{fmap}{tied}", norm=norm, feature_map=fmap, tie_feature_map_qk=tied,
                               num_kv_heads=kv_heads)
    g = 2 // kv_heads
    det = _heads(folder)
    assert det.layout == "fla:linear_attn" and det.embedding.shape == (12, 8)
    layer = model.model.layers[0]
    ids = torch.randint(0, 12, (2, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        x = torch.nn.functional.rms_norm(model.model.embeddings(ids), (8,), layer.attn_norm.weight, 1e-6)
        attn = layer.attn
        q = attn.feature_map_q(attn.q_proj(x).reshape(2, 7, 2, 4))
        k = attn.feature_map_k(attn.k_proj(x).reshape(2, 7, kv_heads, 4).repeat_interleave(g, dim=2))
        v = attn.v_proj(x).reshape(2, 7, kv_heads, 4).repeat_interleave(g, dim=2)
        ref, _ = naive_recurrent_linear_attn(q, k, v, normalize=norm)              # (B, T, H, V)
        for h, head in enumerate(det.layers[0].heads):
            assert head.normalized is norm
            pq, pk = head.feature_matrices(model.model.embeddings.weight)          # (V, r)
            scale = q.shape[-1] ** -0.5                                            # fla's default scale
            assert torch.allclose(pq[ids], q[:, :, h] * scale, atol=1e-5)
            assert torch.allclose(pk[ids], k[:, :, h], atol=1e-5)
            vals = head.values(model.model.embeddings.weight)[ids]
            if not norm:        # A V: nothing cancels, every map is compared
                A = (pq[ids] @ pk[ids].transpose(-1, -2)) * torch.tril(torch.ones(7, 7))
                assert torch.allclose(A @ vals, ref[:, :, h], atol=1e-5), (fmap, (A @ vals - ref[:, :, h]).abs().max())
                continue
            if not named("fla", fmap).nonnegative:
                continue        # signed: the normalized output is ill-conditioned where sum alpha ~ 0
            got = _normalized(pq[ids], pk[ids], vals, eps=1e-10)
            assert torch.allclose(got, ref[:, :, h], atol=1e-5), (fmap, (got - ref[:, :, h]).abs().max())
    res = certify_heads(str(folder))
    assert [r.status for r in res.rows] == ["certified"] * 2 + ["out of reach"] * 2
    for r in _certified(res):
        assert r.library_check["status"] == "agrees" and r.library_check["max_error"] < 1e-4, r.library_check
        assert (r.library_check.get("output") == "A V (unnormalized)") is not norm
    words = "unnormalized kernel attention (the paper's normalized-head theorems do not apply)"
    for c in res.certificate.claims:
        assert (words in c.statement) is not norm and c.parameters.get("normalized", True) is norm
    assert bool(res.not_applicable) is not norm
    nonneg = {r.nonnegative for r in _certified(res)}
    if not named("fla", fmap).nonnegative:
        assert nonneg == {"refuted"} and res.certificate.exit_code() == 1
    else:
        assert nonneg == {"proved"}
    assert verify_certificate(res.certificate.to_json(), base=tmp_path).holds


def test_fla_grouped_key_heads(tmp_path):
    """num_kv_heads = 1: both query heads read the one key / value head."""
    test_fla_linear_attn_folder_matches_reference_ops(tmp_path, "relu", False, True, kv_heads=1)
    test_fla_linear_attn_folder_matches_reference_ops(tmp_path / "u", "relu", False, False, kv_heads=1)


@pytest.mark.parametrize("fmap", list(learned("fla")))
def test_fla_bare_layer_tied_maps(tmp_path, fmap):
    """Tied maps: one module under two names (torch.save keeps both keys; save_pretrained refuses)."""
    from fla.layers import LinearAttention
    from fla.ops.linear_attn.naive import naive_recurrent_linear_attn
    torch.manual_seed(10)
    layer = LinearAttention(hidden_size=M, num_heads=2, feature_map=fmap, tie_feature_map_qk=True,
                            do_feature_map_norm=True).eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 0.5)
    torch.save(layer.state_dict(), tmp_path / "layer.pt")
    (tmp_path / "config.json").write_text(json.dumps({**FLA_LINEAR, "num_heads": 2}))
    det = _heads(tmp_path / "layer.pt")
    assert det.layout == "fla:linear_attn-layer" and det.layers[0].heads[0].feature_map == f"fla-{fmap}"
    X = torch.randint(0, 2, (2, 7, M)).float()
    with torch.no_grad():
        q = layer.feature_map_q(layer.q_proj(X).reshape(2, 7, 2, 3))
        k = layer.feature_map_k(layer.k_proj(X).reshape(2, 7, 2, 3))
        v = layer.v_proj(X).reshape(2, 7, 2, 3)
        ref, _ = naive_recurrent_linear_attn(q, k, v, normalize=True)
        for h, head in enumerate(det.layers[0].heads):
            pq, pk = head.feature_matrices(X.reshape(-1, M))
            pq, pk = pq.reshape(2, 7, -1), pk.reshape(2, 7, -1)
            assert torch.allclose(pq, q[:, :, h] * q.shape[-1] ** -0.5, atol=1e-5)
            assert torch.allclose(pk, k[:, :, h], atol=1e-5)
            if not named("fla", fmap).nonnegative:
                continue        # signed: the normalized output is ill-conditioned where sum alpha ~ 0
            got = _normalized(pq, pk, v[:, :, h], eps=1e-10)
            assert torch.allclose(got, ref[:, :, h], atol=1e-5), (got - ref[:, :, h]).abs().max()
    res = certify_heads(str(tmp_path / "layer.pt"))
    assert len(_certified(res)) == 2
    assert verify_certificate(res.certificate.to_json(), base=tmp_path).holds


def test_fla_default_without_a_denominator_is_certified_unnormalized(tmp_path):
    """fla's default norm_feature_map=False (elu + 1, library initialisation): the kernel
    claims, exit 0, the sentence naming the head unnormalized."""
    cfg = fla_models.LinearAttentionConfig(hidden_size=8, num_hidden_layers=1, num_heads=2, vocab_size=12,
                                           intermediate_size=16, feature_map="elu")
    fla_models.LinearAttentionForCausalLM(cfg).save_pretrained(tmp_path / "d")
    r = _cli(tmp_path / "d")
    assert r.returncode == 0, r.stderr
    assert "not applicable: 2 head(s) (0.0, 0.1, as layer.head) are unnormalized kernel attention" in r.stderr


def test_fla_gated_layer_exits_3(tmp_path):
    cfg = fla_models.GLAConfig(hidden_size=8, num_hidden_layers=1, num_heads=2, vocab_size=12,
                               intermediate_size=16)
    fla_models.GLAForCausalLM(cfg).save_pretrained(tmp_path / "gla")
    r = _cli(tmp_path / "gla")
    assert r.returncode == 3 and "gating" in r.stderr and "gla" in r.stderr


def test_fla_rotary_layer_exits_3(tmp_path):
    """RetNet: decay gamma^(i-j) and rotary (xPos) positions."""
    cfg = fla_models.RetNetConfig(hidden_size=8, num_hidden_layers=1, num_heads=2, vocab_size=12,
                                  intermediate_size=16)
    fla_models.RetNetForCausalLM(cfg).save_pretrained(tmp_path / "retnet")
    r = _cli(tmp_path / "retnet")
    assert r.returncode == 3 and "rotary" in r.stderr and "positions" in r.stderr


def test_fla_bare_gated_layer_refused(tmp_path):
    from fla.layers import GatedLinearAttention
    sd = GatedLinearAttention(hidden_size=8, num_heads=2).state_dict()
    with pytest.raises(UncertifiableError, match="gk_proj"):
        certify_heads_sd(sd, {}, tmp_path)


def certify_heads_sd(sd, cfg, d: Path):
    """Save ``sd`` with torch.save (shared tensors allowed) and certify it."""
    d.mkdir(parents=True, exist_ok=True)
    torch.save({k: v.clone() for k, v in sd.items()}, d / "model.pt")
    if cfg:
        (d / "config.json").write_text(json.dumps(cfg))
    return certify_heads(str(d / "model.pt"))


def _based_forward(det, layer_w, X, causal=True, eps=1e-12):
    outs = []
    for head in det.layers[0].heads:
        q, k = head.feature_matrices(X.reshape(-1, X.shape[-1]))
        v = head.values(X.reshape(-1, X.shape[-1]))
        B, N = X.shape[:2]
        outs.append(_normalized(q.reshape(B, N, -1), k.reshape(B, N, -1), v.reshape(B, N, -1), causal, eps))
    return torch.cat(outs, -1) @ layer_w.T


def test_fla_based_layer_matches_forward_reference(tmp_path):
    from fla.layers import BasedLinearAttention
    torch.manual_seed(6)
    layer = BasedLinearAttention(hidden_size=M, feature_dim=3, num_heads=2, num_key_value_heads=2).eval()
    folder = _save(layer.state_dict(), tmp_path / "based", {"class": "BasedLinearAttention", "feature_dim": 3,
                                                           "num_heads": 2, "num_key_value_heads": 2})
    det = _heads(folder)
    assert det.layout == "fla:based"
    X = torch.randint(0, 2, (2, 9, M)).float()
    with torch.no_grad():
        ref = layer.forward_reference(X)
        got = _based_forward(det, layer.o_proj.weight, X)
    assert torch.allclose(got, ref, atol=1e-5), (got - ref).abs().max()
    res = certify_heads(str(folder))
    assert {r.nonnegative for r in _certified(res)} == {"proved"}       # 1 + s + s^2/2 > 0, signed features
    assert {r.rank for r in _certified(res)} <= {f"{n} proved" for n in range(1, 11)}


def test_fla_rebased_layer_matches_reference_op(tmp_path):
    from fla.layers import ReBasedLinearAttention
    from fla.ops.rebased.naive import naive_parallel_rebased
    torch.manual_seed(7)
    layer = ReBasedLinearAttention(hidden_size=M, feature_dim=3, num_heads=2, num_key_value_heads=2).eval()
    with torch.no_grad():
        layer.feature_map.gamma.normal_(1, 0.3)
        layer.feature_map.beta.normal_(0, 0.3)
    folder = _save(layer.state_dict(), tmp_path / "rebased", {"normalize": True})
    det = _heads(folder)
    assert det.layout == "fla:rebased" and len(det.layers[0].heads) == 2
    X = torch.randint(0, 2, (2, 9, M)).float()
    with torch.no_grad():
        q = layer.q_proj(X).reshape(2, 9, 2, 3).transpose(1, 2)
        k = layer.k_proj(X).reshape(2, 9, 2, 3).transpose(1, 2)
        v = layer.v_proj(X).reshape(2, 9, 2, 3).transpose(1, 2)
        ln = lambda u: torch.nn.functional.layer_norm(u, (3,), layer.feature_map.gamma,  # noqa: E731
                                                      layer.feature_map.beta, 1e-5)
        ref = naive_parallel_rebased(ln(q), ln(k), v, use_norm=True)                # (B, H, T, V)
        for h, head in enumerate(det.layers[0].heads):
            pq, pk = head.feature_matrices(X.reshape(-1, M))
            got = _normalized(pq.reshape(2, 9, -1), pk.reshape(2, 9, -1), v[:, h], eps=1e-6)
            assert torch.allclose(got, ref[:, h], atol=1e-5), (got - ref[:, h]).abs().max()
    res = certify_heads(str(folder))
    # (q.k)^2/d >= 0 in exact arithmetic; the certified features are the canonical float64
    # ones (models.canonical), whose exact products are decided pair by pair: here every one
    # is >= 0 (torch's float32 features gave slightly negative products on some pairs)
    nonneg = [c for c in res.certificate.claims if c.kind.value == "nonnegative"]
    assert len(nonneg) == 2 and all(c.verdict is Verdict.PROVED and c.evidence["method"] == "all_products"
                                    for c in nonneg)
    assert verify_certificate(res.certificate.to_json(), base=tmp_path).holds


# ---------------------------------------------------------------- zoology (through fla's port)

def test_zoology_based_keys_through_fla_port(tmp_path):
    from fla.layers import BasedLinearAttention
    torch.manual_seed(8)
    layer = BasedLinearAttention(hidden_size=M, feature_dim=3, num_heads=2, num_key_value_heads=2).eval()
    names = {"q_proj": "proj_q", "k_proj": "proj_k", "v_proj": "proj_v", "o_proj": "proj_o"}
    sd = {f"backbone.layers.0.sequence_mixer.{names[k.split('.')[0]]}.weight": v
          for k, v in layer.state_dict().items()}
    folder = _save(sd, tmp_path / "zoo", {"feature_dim": 3, "num_heads": 2, "num_key_value_heads": 2,
                                           "feature_name": "taylor_exp"})
    det = _heads(folder)
    assert det.library == "zoology" and det.layers[0].prefix == "backbone.layers.0.sequence_mixer."
    X = torch.randint(0, 2, (2, 9, M)).float()
    with torch.no_grad():
        assert torch.allclose(_based_forward(det, layer.o_proj.weight, X), layer.forward_reference(X), atol=1e-5)
    assert certify_heads(str(folder)).certificate.exit_code() == 0


# ---------------------------------------------------------------- pytorch-fast-transformers (table)

def _pft_layer(d_model=M, heads=2, d_keys=3):
    torch.manual_seed(9)
    lin = lambda i, o: torch.nn.Linear(i, o)  # noqa: E731
    mods = {"query_projection": lin(d_model, heads * d_keys), "key_projection": lin(d_model, heads * d_keys),
            "value_projection": lin(d_model, heads * d_keys), "out_projection": lin(heads * d_keys, d_model)}
    return {f"layers.0.attention.{n}.{p}": t for n, m in mods.items() for p, t in m.state_dict().items()}, mods


def test_fast_transformers_linear_layout_from_table(tmp_path):
    sd, mods = _pft_layer()
    folder = _save(sd, tmp_path / "pft", {"attention_type": "causal-linear", "n_heads": 2,
                                           "feature_map": "elu+1"})
    det = _heads(folder)
    assert det.library == "pytorch-fast-transformers"
    X = torch.randint(0, 2, (20, M)).float()
    elu1 = lambda u: torch.nn.functional.elu(u) + 1  # noqa: E731
    with torch.no_grad():
        Q, K = mods["query_projection"](X).reshape(20, 2, 3), mods["key_projection"](X).reshape(20, 2, 3)
        for h, head in enumerate(det.layers[0].heads):
            q, k = head.feature_matrices(X)
            assert torch.allclose(q, elu1(Q[:, h]), atol=1e-6) and torch.allclose(k, elu1(K[:, h]), atol=1e-6)
    assert certify_heads(str(folder)).certificate.exit_code() == 0


@pytest.mark.parametrize("cfg,extra,why", [(None, {}, "'full'"),
                                          ({"attention_type": "linear", "n_heads": 2},
                                           {"layers.0.attention.inner_attention.feature_map.omega":
                                            torch.randn(3, 4)}, "redrawn")])
def test_fast_transformers_refusals(tmp_path, cfg, extra, why):
    sd, _ = _pft_layer()
    folder = _save({**sd, **extra}, tmp_path / "p", cfg)
    with pytest.raises(UncertifiableError, match=why):
        certify_heads(str(folder))


# ---------------------------------------------------------------- selection and errors

def test_layer_and_head_selection(tmp_path):
    _, folder = _fla_model(tmp_path, "sel", feature_map="relu")
    res = certify_heads(str(folder), layer=0, head=1)
    assert [(r.layer, r.head, r.status) for r in res.rows] == [(0, 1, "certified")]
    assert {c.info["head"] for c in res.certificate.claims} == {1}
    with pytest.raises(InputError, match="--layer 5"):
        certify_heads(str(folder), layer=5)


def test_unknown_layout_says_how_to_write_a_spec(tmp_path):
    torch.save({"encoder.weight": torch.zeros(3, 3)}, tmp_path / "w.pt")
    r = _cli(tmp_path / "w.pt")
    assert r.returncode == 2 and "cannot tell the layout" in r.stderr and "--spec" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_performer_lm_rotary_and_positional_refused(tmp_path):
    """PerformerLM (rotary by default; absolute positions otherwise): rotary refuses every layer,
    absolute positions the first (the deeper ones are out of reach without sequences; stated
    sequences resolve the positions: its heads are kept for them), each listed once (the redraw
    helper's second view of the layers is not a layer)."""
    for name, kw, why in (("rot", {}, "rotary"), ("abs", {"rotary_position_emb": False}, "positional embedding")):
        lm = performer.PerformerLM(num_tokens=12, max_seq_len=16, dim=8, depth=2, heads=2, dim_head=4,
                                   nb_features=4, generalized_attention=True, **kw)
        torch.save(lm.state_dict(), tmp_path / f"{name}.pt")
        sd, _, _ = read_checkpoint(tmp_path / f"{name}.pt")
        det = detect(sd, PERFORMER_MODEL)
        assert len(det.layers) == 2 and det.embedding.shape == (12, 8)
        refused = [L for L in det.layers if why in getattr(L.heads[0], "mechanism", "")]
        assert refused == (det.layers if name == "rot" else det.layers[:1])
        assert [L.on_sequences is not None for L in det.layers] == [name == "abs", False]
        with pytest.raises(UncertifiableError, match=why) as exc:
            certify_heads_sd(sd, PERFORMER_MODEL, tmp_path / name)
        assert str(exc.value).count(why) == 1                 # once for the model, not once per layer


def test_performer_lm_without_positions_reads_embedding_rows(tmp_path):
    """A PerformerLM with its positions removed: layer 0 on the vocabulary's rows through its LayerNorm."""
    torch.manual_seed(11)
    lm = performer.PerformerLM(num_tokens=12, max_seq_len=16, dim=8, depth=2, heads=2, dim_head=4,
                               nb_features=4, generalized_attention=True, rotary_position_emb=False)
    sd = {k: v for k, v in lm.state_dict().items() if not k.startswith("pos_emb")}
    det = detect(sd, PERFORMER_MODEL)
    block = lm.performer.net.layers[0][0]                    # PreNorm(LayerNorm, SelfAttention)
    with torch.no_grad():
        x = block.norm(lm.token_emb.weight)
        q_lib = performer.generalized_kernel((x @ block.fn.to_q.weight[4:8].T)[None, None],
                                             projection_matrix=block.fn.fast_attention.projection_matrix)[0, 0]
        q, _ = det.layers[0].heads[1].feature_matrices(lm.token_emb.weight)
    assert torch.allclose(q, q_lib, atol=1e-5)
    res = certify_heads_sd(sd, PERFORMER_MODEL, tmp_path)
    assert [(r.layer, r.status, r.token_set) for r in res.rows][:2] == [(0, "certified", "vocab:12")] * 2
    assert [r.status for r in res.rows[2:]] == ["out of reach"] * 2
