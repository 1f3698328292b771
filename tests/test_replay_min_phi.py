"""The trusted minima of a ``features_nonnegative`` claim (``min_phi_q``,
``min_phi_k``, taken as stated when the features are too large to embed) are
recomputed from the replayed features: the checker's function on a features file
(default suite), and a 65,536-token cube certificate of an fla ``elu`` layer
(16-dim input, no output norm) that ``verify --replay-extraction`` takes to exit 0
with nothing trusted, while a one-unit change of a claimed minimum fails (slow)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from certify.checkers.gram import _features_sha, summary_problems, write_features


def _claim(q: np.ndarray, k: np.ndarray, mq=None, mk=None) -> dict:
    f = lambda x: f"{Fraction(float(x)).numerator}/{Fraction(float(x)).denominator}"   # noqa: E731
    return {"kind": "nonnegative", "method": "every feature is >= 0 (exact minimum over all tokens)",
            "evidence": {"form": "factor", "method": "features_nonnegative",
                         "features_sha256": {"phi_q": _features_sha(q, q.dtype.name),
                                             "phi_k": _features_sha(k, k.dtype.name), "dtype": q.dtype.name,
                                             "layout": "row-major little-endian (K, r)"},
                         "trusted": ["min_phi_q", "min_phi_k"], "trusted_entries": q.size,
                         "min_phi_q": mq if mq is not None else f(q.min()),
                         "min_phi_k": mk if mk is not None else f(k.min())}}


@pytest.fixture
def feats(tmp_path):
    rng = np.random.default_rng(0)
    q = (np.abs(rng.standard_normal((300, 5))) + 0.25).astype(np.float32)
    k = (np.abs(rng.standard_normal((300, 5))) * 3 + 2.0 ** -20).astype(np.float32)
    path = tmp_path / "features.features"
    write_features(str(path), [q], [k])
    return q, k, str(path)


def test_replayed_minima_discharge_the_trusted_fields(feats):
    q, k, path = feats
    assert summary_problems(_claim(q, k), path) == []


@pytest.mark.parametrize("side", ["q", "k"])
def test_a_one_unit_change_of_a_claimed_minimum_fails(feats, side):
    q, k, path = feats
    m = Fraction(float((q if side == "q" else k).min()))
    wrong = f"{m.numerator + 1}/{m.denominator}"                  # one unit of its last place
    claim = _claim(q, k, **({"mq": wrong} if side == "q" else {"mk": wrong}))
    probs = summary_problems(claim, path)
    assert probs == [f"min_phi_{side} is not the minimum of the replayed features"]


def test_a_minimum_of_other_features_or_a_float_string_fails(feats, tmp_path):
    q, k, path = feats
    other = tmp_path / "other.features"
    q2 = q.copy()
    q2[7, 3] = np.float32(0.125)                                   # a new minimum
    write_features(str(other), [q2], [k])
    assert summary_problems(_claim(q, k), str(other)) == \
        ["the replayed features file does not hash to features_sha256"]
    assert any("exact" in p for p in summary_problems(_claim(q, k, mq=str(float(q.min()))), path))


# ---------------------------------------------------------------- the cube certificate, end to end

def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "certify", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=1800)


@pytest.fixture(scope="module")
def elu_cube(tmp_path_factory):
    """fla LinearAttention(feature_map='elu', output_norm='identity') with 16-dim input and
    2 heads, saved as its users save it; ``certify checkpoint`` certifies it on cube:16."""
    import torch
    from fla.layers import LinearAttention
    from safetensors.torch import save_file
    folder = tmp_path_factory.mktemp("elu16")
    model = folder / "model"
    model.mkdir()
    torch.manual_seed(5)
    layer = LinearAttention(hidden_size=16, num_heads=2, feature_map="elu", output_norm="identity",
                            do_feature_map_norm=True)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 0.5)
    save_file({n: v.contiguous() for n, v in layer.state_dict().items()}, str(model / "model.safetensors"))
    (model / "config.json").write_text(json.dumps({"feature_map": "elu", "output_norm": "identity", "num_heads": 2,
                                                   "do_feature_map_norm": True, "norm_q": False, "norm_k": False}))
    out = _run("checkpoint", "model", "--out", "out", "--no-progress", cwd=folder)
    assert out.returncode == 0, out.stderr[-2000:]
    cert = folder / "out" / "certificate.json"
    return cert, json.loads(cert.read_text())


@pytest.mark.slow
def test_cube_certificate_replays_to_exit_0_with_min_phi_recomputed(elu_cube):
    cert, doc = elu_cube
    nonneg = [c for c in doc["claims"] if c["kind"] == "nonnegative"]
    assert len(nonneg) == 2 and all(c["evidence"]["trusted"] == ["min_phi_q", "min_phi_k"] for c in nonneg)
    assert all(c["parameters"]["token_set"] == "cube:16" and c["parameters"]["num_tokens"] == 65536
               for c in nonneg)
    home = cert.parent.parent                                  # the inputs are named relative to it
    plain = _run("verify", "out/certificate.json", cwd=home)
    assert plain.returncode == 4 and "trusted:nonnegative:min_phi_q,min_phi_k" in plain.stdout + plain.stderr
    out = _run("verify", "--replay-extraction", "--json", "out/certificate.json", cwd=home)
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout)
    assert res["assumptions"] == [] and all(not c["trusted"] for c in res["claims"])


@pytest.mark.slow
def test_cube_certificate_with_a_one_unit_change_of_min_phi_fails(elu_cube):
    cert, doc = elu_cube
    bad = copy.deepcopy(doc)
    i = next(n for n, c in enumerate(bad["claims"]) if c["kind"] == "nonnegative")
    m = Fraction(bad["claims"][i]["evidence"]["min_phi_k"])
    bad["claims"][i]["evidence"]["min_phi_k"] = f"{m.numerator + 1}/{m.denominator}"
    (cert.parent / "bad-min-phi.json").write_text(json.dumps(bad))
    out = _run("verify", "--replay-extraction", "--json", "out/bad-min-phi.json", cwd=cert.parent.parent)
    assert out.returncode == 1, out.stderr[-1500:]
    problems = json.loads(out.stdout)["claims"][i]["problems"]
    assert any("min_phi_k is not the minimum of the replayed features" in p for p in problems), problems
