"""``certify verify --replay-extraction`` re-runs every head's extraction of a
third-party certificate in a separate process (the same loader, one thread) and
compares the features bit for bit: a certificate of each supported library,
replayed on the same machine and versions, exits 0; a certificate whose kernel
is not the checkpoint's fails."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from library_support import LAT_CAUSAL, PERFORMER_MODEL, libraries, randomize

from certify.checkers.sources import replay_extraction
from certify.checkpoints.heads import certify_heads

performer, lat, fla_layers, fla_models = libraries()

ROOT = Path(__file__).resolve().parent.parent
M = 6


def _save(sd, folder: Path, config) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    torch.save({k: v.clone() for k, v in sd.items()}, folder / "model.pt")
    (folder / "config.json").write_text(json.dumps(config))
    return folder / "model.pt"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory) -> dict[str, Path]:
    """One certificate per supported library, each beside its checkpoint."""
    d = tmp_path_factory.mktemp("replay")
    torch.manual_seed(0)
    based = randomize(fla_layers.BasedLinearAttention(hidden_size=M, feature_dim=2, num_heads=2,
                                                 num_key_value_heads=2), 4)
    names = {"q_proj": "proj_q", "k_proj": "proj_k", "v_proj": "proj_v", "o_proj": "proj_o"}
    lin = {n: randomize(torch.nn.Linear(M, 4), 5) for n in ("query_projection", "key_projection", "value_projection")}
    ckpts = {
        "performer-pytorch": _save(randomize(performer.Performer(dim=M, depth=2, heads=2, dim_head=2, nb_features=4,
                                                            generalized_attention=True), 1).state_dict(),
                                   d / "performer", PERFORMER_MODEL),
        "linear-attention-transformer": _save(randomize(lat.LinearAttentionTransformer(
            dim=M, depth=1, max_seq_len=32, heads=2, dim_head=2, causal=True), 2).state_dict(), d / "lat",
            {**LAT_CAUSAL, "heads": 2, "dim_head": 2}),
        "zoology": _save({f"mixer.{names[k.split('.')[0]]}.weight": v for k, v in based.state_dict().items()},
                         d / "zoology", {"feature_dim": 2, "num_heads": 2, "feature_name": "taylor_exp"}),
        "pytorch-fast-transformers": _save({f"attn.{n}.{k}": t for n, mod in lin.items()
                                            for k, t in mod.state_dict().items()}, d / "pft",
                                           {"attention_type": "linear", "n_heads": 2, "feature_map": "elu+1"}),
    }
    cfg = fla_models.LinearAttentionConfig(hidden_size=6, num_hidden_layers=1, num_heads=2, vocab_size=10,
                                           intermediate_size=8, norm_feature_map=True, feature_map="t2r")
    randomize(fla_models.LinearAttentionForCausalLM(cfg), 3).save_pretrained(d / "fla")
    ckpts["fla"] = d / "fla"
    out = {}
    for lib, path in ckpts.items():
        res = certify_heads(str(path))
        assert res.library == lib
        cert = Path(path if path.is_dir() else path.parent) / "certificate.json"
        res.certificate.write(cert)
        out[lib] = cert
    return out


def test_replay_exits_0_on_a_certificate_of_each_library(certificates):
    """One verify, one replay process, every head of every certificate (exit 4
    without the replay: the extraction is a named assumption)."""
    certs = [str(certificates[k]) for k in sorted(certificates)]
    p = subprocess.run([sys.executable, "-m", "certify", "verify", *certs], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 4 and "assuming: extraction:" in p.stderr, p.stderr[-600:]
    p = subprocess.run([sys.executable, "-m", "certify", "verify", "--replay-extraction", *certs], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-1200:]


def test_replay_compares_every_head(certificates, tmp_path):
    """Each head is its own replay job: a certificate whose head-1 claims name head 0's
    extraction differs (the replay computes head 0's features, not head 1's). On the fla
    model (safetensors: the replay needs no torch); every library's replay: the test above."""
    cert = json.loads(certificates["fla"].read_text())
    got = replay_extraction([("c", cert, certificates["fla"].parent)])
    assert set(got.values()) == {"match"} and len(got) == 2           # one replay per head
    renamed = 0
    for c in cert["claims"]:
        if c["info"]["head"] == 1:
            c["parameters"]["adapter"] = c["parameters"]["adapter"].replace("head 1", "head 0")
            renamed += 1
    assert renamed > 0
    got = replay_extraction([("c", cert, certificates["fla"].parent)])
    # one comparison per claim's own features: head 1's hashes against head 0's replay differ
    assert any(v.startswith("differs") for v in got.values())


def test_replay_records_the_versions_it_depends_on(certificates):
    from certify.checkpoints.replay import replay
    cert = json.loads(certificates["fla"].read_text())
    c = cert["claims"][0]
    p = c["parameters"]
    job = {"key": "k", "source": p["source"], "path": str(certificates["fla"].parent / "model.safetensors"),
           "adapter": p["adapter"], "token_set": p["token_set"], "dtype": c["evidence"]["features_sha256"]["dtype"],
           "want": [["x", "y"]], "stated": p["stated"]}
    rec = replay([job])["k"]
    assert rec["phi_q"] == c["evidence"]["features_sha256"]["phi_q"]
    assert rec["versions"]["torch"] == torch.__version__ and rec["versions"]["extraction"]


def test_replay_reads_a_checkpoint_once_for_all_its_heads(certificates, monkeypatch):
    """The replay worker reads and detects a checkpoint once for every head replayed
    from it; each head's features still hash to its own claims' features_sha256."""
    import certify.sources.thirdparty as tp
    from certify.checkpoints.replay import replay
    cert = json.loads(certificates["performer-pytorch"].read_text())
    jobs, want = [], {}
    for c in cert["claims"]:
        p, fs = c["parameters"], c["evidence"].get("features_sha256")
        if fs is None or p["adapter"] in want:
            continue
        want[p["adapter"]] = (fs["phi_q"], fs["phi_k"])
        jobs.append({"key": p["adapter"], "source": p["source"],
                     "path": str(certificates["performer-pytorch"].parent / "model.pt"), "adapter": p["adapter"],
                     "token_set": p["token_set"], "dtype": fs["dtype"], "want": [["x", "y"]], "stated": p["stated"]})
    assert len(jobs) == 2
    loads = []
    real = tp.load_model
    monkeypatch.setattr(tp, "load_model", lambda *a, **kw: loads.append(a) or real(*a, **kw))
    got = replay(jobs)
    assert len(loads) == 1
    assert {k: (v["phi_q"], v["phi_k"]) for k, v in got.items()} == want


def test_a_user_lm_on_its_vocabulary_replays_its_trusted_summaries(tmp_path):
    """A user's language model (``token_emb`` + performer's ``Performer``, saved with
    safetensors' ``save_model``) certified on its 2,100 vocabulary rows with 33
    features per token: the summaries are too large to embed (69,300 entries), so
    the replay must write the features in row order to recompute them. Vocabulary
    rows have no Boolean coordinates; the replay used to fail on that."""
    from safetensors.torch import save_model

    from certify.cli import run as run_cli

    class LM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.token_emb = torch.nn.Embedding(2100, 16)
            self.performer = performer.Performer(dim=16, depth=1, heads=2, dim_head=8,
                                                 generalized_attention=True, nb_features=32)

    torch.manual_seed(3)
    d = tmp_path / "lm"
    d.mkdir()
    save_model(LM(), str(d / "model.safetensors"))
    (d / "config.json").write_text(json.dumps({"generalized_attention": True, "kernel_fn": "ReLU",
                                               "no_projection": False, "local_heads": 0}))
    out = tmp_path / "out"
    assert run_cli("checkpoint", [str(d / "model.safetensors"), "--head", "0", "--out", str(out)]) == 0
    cert = json.loads((out / "certificate.json").read_text())
    assert {c["parameters"]["token_set"] for c in cert["claims"]} == {"vocab:2100"}
    assert any(c["evidence"].get("trusted") for c in cert["claims"])
    assert run_cli("verify", [str(out / "certificate.json")]) == 4        # trusted and extraction
    assert run_cli("verify", ["--replay-extraction", str(out / "certificate.json")]) == 0
