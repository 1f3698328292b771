"""`certify checkpoint`: a failing checkpoint names an input that really fails; a
solving one is proved; dense heads are refused; every certificate verifies."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("models.checkpoint")

from certify.checkers import verify  # noqa: E402
from certify.checkpoints import run as checkpoint_cmd
from certify.cli import checkpoint as checkpoint_cli
from certify.core.errors import UncertifiableError  # noqa: E402
from certify.core.families import paper51_family  # noqa: E402
from certify.sources.checkpoint import load_model  # noqa: E402
from models.checkpoint import save_checkpoint  # noqa: E402
from models.heads import DenseSoftmaxHead, LookupHead  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def softmin_lookup(fam, base: int = 8) -> LookupHead:
    """A lookup head that solves paper-5.1 exactly at rank 15 (one feature per query):
    alpha(x, z) = base^-<x,z>, g = <x,z> (all float32 values are exact dyadics)."""
    T = fam.tokens.astype(np.int64)
    G = T @ T.T
    q = fam.query_tokens()
    h = LookupHead(fam.tokens, rank=len(q), feature_map="lookup_relu")
    with torch.no_grad():
        h.query_map.raw.zero_()
        h.query_map.raw[q, torch.arange(len(q))] = 1.0
        h.key_map.raw.copy_(torch.tensor([[float(base) ** -G[x, z] for x in q] for z in range(len(T))]))
        h.g.copy_(torch.tensor(G, dtype=torch.float32))
    return h


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt")
    fam = paper51_family()
    bad = LookupHead(fam.tokens, rank=8, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        bad.g.copy_(torch.randn(bad.g.shape, generator=torch.Generator().manual_seed(4)) + 2)
    save_checkpoint(bad, d / "bad8", {"seed": 3})
    save_checkpoint(softmin_lookup(fam), d / "good15", {"seed": 0})
    save_checkpoint(DenseSoftmaxHead(m=24, dk=4, dv=4, generator=torch.Generator().manual_seed(0)),
                    d / "dense")
    return d


def _exact_output(model, tokens, seq, pos=0) -> Fraction:
    """The model's output at ``pos`` in exact rationals, from its certified (canonical,
    float64) feature tables and its value table."""
    idx = model.index_of(tokens[seq])
    PQ, PK = model.query_map.canonical_table(), model.key_map.canonical_table()
    g = model.g.detach().double()
    x = int(idx[pos])
    a = [sum(Fraction(float(PQ[x, k])) * Fraction(float(PK[int(z), k])) for k in range(PQ.shape[1]))
         for z in idx]
    num = sum(ai * Fraction(float(g[x, int(z)])) for ai, z in zip(a, idx))
    return num / sum(a)


def test_failing_checkpoint_names_an_input_that_really_fails(ckpts, tmp_path):
    fam = paper51_family()
    res = checkpoint_cmd.certify_checkpoint(str(ckpts / "bad8"))
    kinds = {c.kind.value: c for c in res.certificate.claims}
    assert kinds["correctness"].verdict.value == "refuted"
    assert kinds["exact_rank"].verdict.value == "proved"
    assert kinds["exact_rank"].evidence["rank_lower"] == 8
    assert res.failing, "a failing input must be named"
    _, model = load_model(ckpts / "bad8")
    for f in res.failing:
        seq = fam.inputs[f["input"]]
        assert list(seq) == f["sequence"]
        t_hat = _exact_output(model, fam.tokens, seq, f["position"])
        assert t_hat == Fraction(f["t_hat"])
        target = int(fam.targets[f["input"], f["position"]])
        assert target == f["target"] and abs(t_hat - target) >= Fraction(1, 2)
        # the float forward pass agrees that it fails
        with torch.no_grad():
            y = float(model(torch.as_tensor(np.array(seq[None])))[0, f["position"]])
        assert abs(y - target) >= 0.5 - 1e-4
    gd = kinds["gap_domination"]
    if gd.verdict.value == "refuted":
        v = gd.evidence["violation"]
        j = fam.jumps[v["jump"]]
        assert v["failing_input"]["input"] == j[8 + "YZM".index(v["role"])]
        assert Fraction(v["alpha_xy"]) <= Fraction(v["factor"]) * Fraction(v["alpha_xz"])
    assert verify.verify_certificate(res.certificate.to_json()).holds


def test_solving_checkpoint_is_proved(ckpts, tmp_path, capsys):
    from certify.cli import run as run_cli
    out = tmp_path / "out"
    code = checkpoint_cli.main([str(ckpts / "good15"), "--out", str(out)])
    cert = json.loads((out / "certificate.json").read_text())
    kinds = {c["kind"]: c for c in cert["claims"]}
    assert kinds["correctness"]["verdict"] == "proved"
    assert kinds["gap_domination"]["verdict"] == "proved"
    assert kinds["exact_rank"]["evidence"]["rank_lower"] == kinds["exact_rank"]["evidence"]["rank_upper"] == 15
    assert code == 0
    assert (out / "report.md").is_file()
    capsys.readouterr()
    # the weights -> features step ran in torch: verify holds it as a named assumption (exit 4);
    # the commands run in process (the replay starts its own process all the same)
    assert run_cli("verify", [str(out / "certificate.json")]) == 4
    assert "holds, assuming: extraction:" in capsys.readouterr().err
    # ... accepted by name, or re-derived bit for bit in a separate process
    assert run_cli("verify", [str(out / "certificate.json"), "--assume", "extraction"]) == 0
    assert run_cli("verify", [str(out / "certificate.json"), "--replay-extraction"]) == 0
    # a certificate whose embedded features are not the checkpoint's fails the replay
    forged = json.loads((out / "certificate.json").read_text())
    ev = forged["claims"][0]["evidence"]
    ev["features_sha256"]["phi_q"] = "0" * 64
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    capsys.readouterr()
    assert run_cli("verify", [str(tmp_path / "forged.json"), "--replay-extraction"]) == 1
    assert "extraction replay" in capsys.readouterr().err


def test_command_json_and_exit_codes(ckpts, tmp_path, capsys):
    """What ``certify checkpoint`` runs, in process (the command as a process:
    tests/test_hub_models.py and tests/test_check_isolation.py)."""
    from certify.cli import run as run_cli
    assert run_cli("checkpoint", [str(ckpts / "bad8"), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "refuted" and doc["failing_inputs"]
    assert "paper-5.1" in doc["families"]
    assert run_cli("checkpoint", [str(ckpts / "dense")]) == 3
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert run_cli("checkpoint", [str(tmp_path / "nope")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_dense_head_is_refused(ckpts):
    with pytest.raises(UncertifiableError):
        checkpoint_cmd.certify_checkpoint(str(ckpts / "dense"))


def test_checkpoint_progress_bar_names_each_head_and_stage_on_stderr_only(capsys):
    """On a terminal ``certify checkpoint`` shows one bar over the heads whose postfix
    names the head and its stage; stdout (``--json``) never carries it, and without
    a terminal nothing is drawn."""
    from certify.checkpoints.heads import certify_heads
    lat = ROOT / "reports" / "gallery" / "models" / "lat"
    res = certify_heads(str(lat), progress=True)
    out, err = capsys.readouterr()
    assert out == "" and "heads:" in err and "layer 0 head 0: exact rank, eps-rank, nonnegativity" in err
    assert "4/4" in err and len(res.rows) == 4
    certify_heads(str(lat))
    assert capsys.readouterr() == ("", "")
