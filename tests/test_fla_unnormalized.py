"""fla's default ``linear_attn`` (``norm_feature_map=False``: no normalizing
denominator) is certified as unnormalized kernel attention.

The model is built with fla's own config classes and initialisation and saved with
``save_pretrained``; its layer-0 heads get the kernel claims (exact rank, eps-rank,
nonnegativity on the vocabulary), their sentences name them unnormalized, the
library check compares fla's own unnormalized output ``A V``, and the replay
re-derives the word from the config: a certificate that calls the head normalized,
or names another feature map, fails ``verify --replay-extraction`` even with its
sentences re-rendered to match.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import warnings

import pytest

torch = pytest.importorskip("torch")
# fla (with triton and transformers) costs seconds to import: looked up here, imported by the
# tests that build a model, so collecting the suite does not pay for it on every worker
if importlib.util.find_spec("fla") is None:
    pytest.skip("fla is not installed", allow_module_level=True)

WORDS = "unnormalized kernel attention (the paper's normalized-head theorems do not apply)"


def _save(folder, *, hidden, heads, vocab, norm=False, fmap="t2r", dtype=None, layers=1):
    """An fla LinearAttentionForCausalLM with fla's own initialisation, save_pretrained."""
    from fla.models import LinearAttentionConfig, LinearAttentionForCausalLM
    torch.manual_seed(0)
    cfg = LinearAttentionConfig(hidden_size=hidden, num_hidden_layers=layers, num_heads=heads,
                                vocab_size=vocab, feature_map=fmap, norm_feature_map=norm)
    model = LinearAttentionForCausalLM(cfg)
    if dtype is not None:
        model = model.to(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.save_pretrained(folder)
    return folder


def _run(capsys, *args):
    from certify.cli import main
    capsys.readouterr()
    code = main(list(args))
    return code, capsys.readouterr().err


def _replayed(cert: dict, base) -> str:
    """What the extraction replay says of the first claim's kernel (its job as verify sends it)."""
    from certify.checkpoints.replay import replay
    c = cert["claims"][0]
    p, fs = c["parameters"], c["evidence"]["features_sha256"]
    job = {"key": "k", "source": p["source"], "path": str(base / p["source"]), "adapter": p["adapter"],
           "token_set": p["token_set"], "dtype": fs["dtype"], "stated": p["stated"],
           "normalized": [p.get("normalized", True)], "want": [[fs["phi_q"], fs["phi_k"]]]}
    return replay([job])["k"]["phi_q"]


def _rerendered(cert: dict, edit) -> dict:
    """``cert`` with ``edit(parameters)`` applied to every kernel claim, its sentences
    re-rendered so that only the replay can tell."""
    from certify.checkers.statements import render
    forged = copy.deepcopy(cert)
    for c in forged["claims"]:
        edit(c["parameters"])
        c["statement"] = render(c["kind"], c["parameters"], c["evidence"], forged["renderer"]).text
    return forged


@pytest.fixture(scope="module")
def default_model(tmp_path_factory):
    """fla's default linear_attn config (t2r map, no denominator), small, bf16: certified once."""
    from certify.checkpoints.heads import certify_heads, write_out
    root = tmp_path_factory.mktemp("unnorm")
    d = _save(root / "model", hidden=16, heads=4, vocab=64, dtype=torch.bfloat16)
    res = certify_heads(str(d))
    write_out(res, str(root / "out"))
    return root, d, res, json.loads((root / "out" / "certificate.json").read_text())


def test_every_head_is_certified_and_named_unnormalized(default_model):
    _, d, res, cert = default_model
    assert json.loads((d / "config.json").read_text())["norm_feature_map"] is False
    assert [r.status for r in res.rows] == ["certified"] * 4
    kinds = [(c["kind"], c["parameters"]["head"]) for c in cert["claims"]]
    assert kinds == [(k, h) for h in range(4) for k in ("exact_rank", "eps_rank", "nonnegative")]
    for c in cert["claims"]:
        assert c["verdict"] == "proved"
        assert c["parameters"]["normalized"] is False and c["parameters"]["token_set"] == "vocab:64"
        assert f"(sha256 {c['parameters']['source_sha256'][:16]}...), {WORDS}, built with the stated " \
               "arguments feature_map = t2r (config.json), norm_feature_map = false (config.json)" in c["statement"]
        # t2r is relu(W u): nonnegative features, proved on every pair of the 64 tokens
        if c["kind"] == "nonnegative":
            assert c["evidence"]["method"] == "features_nonnegative"
    # the head dimension is 4: 4 t2r features, rank at most 4 (the 64 x 64 kernel has rank exactly 4)
    assert {c["evidence"]["rank_lower"] for c in cert["claims"] if c["kind"] == "exact_rank"} == {4}
    assert res.certificate.exit_code() == 0


def test_the_library_check_compares_the_unnormalized_output(default_model):
    _, _, res, cert = default_model
    for r in res.rows:
        chk = r.library_check
        assert chk["status"] == "agrees" and chk["output"] == "A V (unnormalized)"
        assert chk["error"] == "max_i |o_lib - o_ext| / (sum_j <|phiQ_i|, |phiK_j|> max|v|)"
        assert 0 < chk["max_error"] < 1e-4 and chk["positions_left_out"] == 0
    assert "normalize=do_feature_map_norm" in cert["claims"][0]["info"]["library_check"]["method"]


@pytest.mark.parametrize("fmap", ["t2r", "elementwise_product"])
def test_the_library_check_sees_a_wrong_denominator_or_head(tmp_path, fmap):
    """Planted mistakes: an extraction that divides by sum_j alpha (the head read as
    normalized), or that gives head 0 the kernel of head 1, disagrees with fla's own
    A V by far more than the tolerance; the true reading agrees (signed features
    too: fla's default map)."""
    from certify.sources.thirdparty import _pool, load_model
    from models.layouts.reference import TOLERANCE, check_layer
    d = _save(tmp_path / fmap, hidden=16, heads=2, vocab=48, fmap=fmap)
    model = load_model(d)
    det = model.detected
    L = det.layers[0]
    pool = _pool(model, "vocab:48", None, None, 0)

    def errors():
        chk = check_layer(det, L, model.tensors, pool)
        return [chk.errors[h] for h in range(2)]
    assert max(errors()) < TOLERANCE
    for h in L.heads:
        h.normalized = True
    assert min(errors()) > 100 * TOLERANCE
    for h in L.heads:
        h.normalized = False
    L.heads[0].canon_q, L.heads[0].canon_k = L.heads[1].canon_q, L.heads[1].canon_k
    L.heads[0].Wq, L.heads[0].Wk = L.heads[1].Wq, L.heads[1].Wk
    del L.heads[0]._w64                      # its weights in float64, kept from the first call
    assert errors()[0] > 100 * TOLERANCE


def test_claims_about_the_normalized_head_are_listed_once_for_the_model(default_model):
    root, _, res, cert = default_model
    assert set(res.not_applicable) == {"correctness", "gap_domination (Lemma 3 audit)"}
    assert all(v["heads"] == ["0.0", "0.1", "0.2", "0.3"] for v in res.not_applicable.values())
    assert cert["environment"]["layout"]["not_applicable"] == res.not_applicable
    md = (root / "out" / "heads.md").read_text()
    assert md.count("## Not applicable") == 1 and md.count("- correctness: ") == 1
    assert not any(r.out_of_reach.get("correctness") for r in res.rows)      # not once per head


def test_replay_reproduces_it_and_forgeries_fail(default_model, capsys):
    root, _, _, cert = default_model
    path = root / "out" / "certificate.json"
    assert _run(capsys, "verify", str(path))[0] == 4                         # assuming the extraction
    assert _run(capsys, "verify", "--replay-extraction", str(path))[0] == 0
    # the head called normalized (the field dropped, sentences re-rendered): the features are the
    # same, the config's denominator is not
    normal = root / "called-normalized.json"
    normal.write_text(json.dumps(_rerendered(cert, lambda p: p.pop("normalized"))))
    code, err = _run(capsys, "verify", "--replay-extraction", str(normal))
    assert code == 1 and "FAILS: 12 of 12 claims do not hold" in err and WORDS not in err
    assert _run(capsys, "verify", str(normal))[0] == 4                       # only the replay can tell
    forged = json.loads(normal.read_text())
    assert _replayed(cert, root / "out") == forged["claims"][0]["evidence"]["features_sha256"]["phi_q"]
    assert _replayed(forged, root / "out").startswith(
        "differs: the certificate calls the head normalized; the checkpoint's config builds it unnormalized")
    # another feature map named (relu's features are t2r's without the learned layer)
    relu = root / "called-relu.json"
    relu.write_text(json.dumps(_rerendered(
        cert, lambda p: p["stated"]["feature_map"].update(value="relu"))))
    code, err = _run(capsys, "verify", "--replay-extraction", str(relu))
    assert code == 1 and "differs" in err
    # one verify of the genuine certificate and its forgery: the shared replay fails both
    code, _ = _run(capsys, "verify", "--replay-extraction", str(path), str(normal))
    assert code == 1


def test_normalized_is_only_ever_false_and_only_for_a_third_party_head(default_model, capsys):
    root, _, _, cert = default_model
    bad = copy.deepcopy(cert)
    bad["claims"][0]["parameters"]["normalized"] = True
    (root / "true.json").write_text(json.dumps(bad))
    code, err = _run(capsys, "verify", str(root / "true.json"))
    assert code == 1 and "normalized" in err
    from certify.checkers import schema
    from certify.checkers.statements import RenderError, render
    c = cert["claims"][0]
    with pytest.raises(RenderError, match="normalized"):
        render(c["kind"], {**c["parameters"], "normalized": None}, c["evidence"], cert["renderer"])
    assert schema.claim_violations(c, 0) == [] and schema.conforms(cert)
    # a kernel built in memory has no layer to lack a denominator: the field is refused there
    mem = copy.deepcopy(c)
    mem["parameters"] = {k: v for k, v in c["parameters"].items()
                         if k not in ("stated", "layer", "head", "normalized")}
    mem["parameters"].update(adapter="memory", source="memory", source_sha256=None, token_set="cube:6")
    assert schema.claim_violations(mem, 0) == []
    mem["parameters"]["normalized"] = False
    assert any("adapter" in v for v in schema.claim_violations(mem, 0))


def test_a_normalized_model_called_unnormalized_fails_replay(tmp_path, capsys):
    from certify.checkpoints.heads import certify_heads
    d = _save(tmp_path / "norm", hidden=8, heads=2, vocab=16, norm=True)
    res = certify_heads(str(d))
    cert = res.certificate.to_json()
    assert not res.not_applicable and all("normalized" not in c["parameters"] for c in cert["claims"])
    assert all(WORDS not in c["statement"] for c in cert["claims"])
    (d / "cert.json").write_text(json.dumps(cert))
    assert _run(capsys, "verify", "--replay-extraction", str(d / "cert.json"))[0] == 0
    (d / "forged.json").write_text(json.dumps(_rerendered(cert, lambda p: p.update(normalized=False))))
    code, err = _run(capsys, "verify", "--replay-extraction", str(d / "forged.json"))
    assert code == 1 and "FAILS: 6 of 6 claims do not hold" in err
    assert _replayed(json.loads((d / "forged.json").read_text()), d).startswith(
        "differs: the certificate calls the head unnormalized; the checkpoint's config builds it normalized")


@pytest.mark.slow
def test_default_config_at_width_64_certified_and_replayed(tmp_path, capsys):
    """The issue's model: fla's default linear_attn config (t2r, norm_feature_map=False),
    hidden 64, 4 heads, vocabulary 256, library initialisation, bf16 save_pretrained:
    layer 0 certified head by head (exit 0) and replayed (exit 0)."""
    d = _save(tmp_path / "model", hidden=64, heads=4, vocab=256, dtype=torch.bfloat16, layers=2)
    code, err = _run(capsys, "checkpoint", str(d), "--out", str(tmp_path / "out"), "--no-progress")
    assert code == 0, err
    cert = json.loads((tmp_path / "out" / "certificate.json").read_text())
    assert len(cert["claims"]) == 12 and all(WORDS in c["statement"] for c in cert["claims"])
    assert {c["evidence"]["rank_lower"] for c in cert["claims"] if c["kind"] == "exact_rank"} == {16}
    assert _run(capsys, "verify", "--replay-extraction", str(tmp_path / "out" / "certificate.json"))[0] == 0
