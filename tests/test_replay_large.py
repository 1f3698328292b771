"""Large kernels reach exit 0: a Based head whose features are too large to embed
(its Grams and the quadratic-kernel lemma's summaries are `trusted:` without a
replay) verifies with `--replay-extraction` at exit 0, the checker recomputing
the summaries from the replayed features (a file); a changed summary fails."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parents[1]
#: a certification on 4,096 tokens and three verifies (half a minute or more on 2 cores):
#: the default suite has the checker's functions in tests/test_checker_gram.py
pytestmark = pytest.mark.slow


def _verify(cert: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "certify", "verify", *extra, str(cert)], cwd=cert.parent,
                          capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def based(tmp_path_factory):
    """fla's BasedLinearAttention, feature_dim 5 (21 features) on cube:12: 86,016 entries per side
    (Grams trusted; nonnegativity decided on all 2^24 pairs, trusted)."""
    from fla.layers import BasedLinearAttention

    from certify.checkpoints.heads import certify_heads
    folder = tmp_path_factory.mktemp("based12")
    torch.manual_seed(3)
    layer = BasedLinearAttention(hidden_size=12, feature_dim=5, num_heads=1, num_key_value_heads=1)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 0.5)
    save_file({k: v.contiguous() for k, v in layer.state_dict().items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"class": "BasedLinearAttention", "feature_dim": 5,
                                                    "num_heads": 1, "num_key_value_heads": 1}))
    res = certify_heads(str(folder))
    cert = folder / "certificate.json"
    doc = res.certificate.to_json()
    cert.write_text(json.dumps(doc))
    return cert, doc


def test_trusted_summaries_are_recomputed_from_the_replay(based):
    cert, doc = based
    assert [c["verdict"] for c in doc["claims"]] == ["proved"] * 3
    assert all("trusted" in c["evidence"] for c in doc["claims"])
    plain = _verify(cert)
    assert plain.returncode == 4 and "trusted:" in plain.stderr
    out = _verify(cert, "--replay-extraction", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout)
    assert res["assumptions"] == [] and all(not c["trusted"] for c in res["claims"])


@pytest.mark.parametrize("claim,field", [(0, "gram_k"), (2, "num_checked")])
def test_a_changed_summary_fails(based, claim, field, tmp_path):
    cert, doc = based
    bad = json.loads(json.dumps(doc))
    ev = bad["claims"][claim]["evidence"]
    if field == "gram_k":
        ev[field][1][2] += 1
        ev[field][2][1] += 1
    else:
        ev[field] -= 1
    path = cert.parent / f"bad-{claim}-{field}.json"
    path.write_text(json.dumps(bad))
    out = _verify(path, "--replay-extraction", "--json")
    assert out.returncode == 1, out.stderr[-1500:]
    problems = json.loads(out.stdout)["claims"][claim]["problems"]
    assert any("replayed" in p for p in problems), problems
