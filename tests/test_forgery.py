"""Forgeries a skeptical reader would try: each must fail ``certify verify``, and say why.

One test per class: a statement edited; a built-in family swapped for another
self-consistent family, or with scored positions removed, hashes recomputed; a
rank parameter lowered under a witness of higher rank; an embedded matrix or
features swapped while the source file is present; trusted fields on small
data; two contradicting claims; a family hash missing from ``inputs``.
"""

from __future__ import annotations

import copy
import functools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from certify.checkers import verify
from certify.checkers.common import canonical_sha256
from certify.checkers.statements import render
from certify.cli import rank as rank_cli

ROOT = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=None)
def _paper51_claims() -> str:
    """Genuine certificates on paper-5.1: infeasible at rank 8 (the chain bound) and
    feasible at rank 15 (the construction), as JSON text."""
    from certify.core.certificate import Certificate
    from certify.core.families import paper51_family
    from certify.feasibility.decide import decide
    from certify.feasibility.model import Features
    fam = paper51_family()
    r8 = decide(fam, 8, Features.REAL, time_limit=30).to_claim()
    r15 = decide(fam, 15, Features.NONNEGATIVE, time_limit=30).to_claim()
    return json.dumps([Certificate(claims=[r8]).to_json(), Certificate(claims=[r15]).to_json()])


def _certs() -> tuple[dict, dict]:
    a, b = json.loads(_paper51_claims())
    return a, b


def _rerender(claim: dict) -> None:
    claim["statement"] = render(claim["kind"], claim["parameters"], claim["evidence"]).text


def _problems(cert: dict, **kw) -> str:
    r = verify.verify_certificate(cert, **kw)
    assert not r.holds and r.exit_code() == 1
    return " | ".join(p for c in r.claims for p in c.problems)


def test_genuine_certificates_verify_with_exit_0():
    for cert in _certs():
        r = verify.verify_certificate(cert)
        assert r.holds and r.exit_code() == 0, [c.problems for c in r.claims]


def test_edited_statement_is_rejected():
    cert = _certs()[0]
    claim = cert["claims"][0]
    assert claim["statement"].startswith("no rank-8 real-feature head")
    claim["statement"] = claim["statement"].replace("rank-8", "rank-13")
    assert "stored statement is not the one its parameters say" in _problems(cert)


def test_statement_of_a_lowered_rank_parameter_is_rejected():
    """Lower the rank under a rank-15 witness and re-render: the witness says 15."""
    cert = _certs()[1]
    claim = cert["claims"][0]
    claim["parameters"]["rank"] = 14
    _rerender(claim)
    assert "rank" in _problems(cert)


def _swap_family(cert: dict, mutate) -> dict:
    cert = copy.deepcopy(cert)
    claim = cert["claims"][0]
    fam = claim["evidence"]["family"]
    mutate(fam)
    body = {k: v for k, v in fam.items() if k != "sha256"}
    fam["sha256"] = canonical_sha256(body)
    claim["parameters"]["family_sha256"] = fam["sha256"]
    cert["inputs"][f"family:{fam['name']}"] = fam["sha256"]
    _rerender(claim)
    return cert


def test_built_in_family_with_scored_positions_removed_is_rejected():
    def unscore_mixed(fam):               # the 424 mixed inputs (x, y, z) no longer scored
        for row, inp in zip(fam["scored"], fam["inputs"]):
            if inp[1] != inp[2]:
                row[0] = 0
    for cert in _certs():
        forged = _swap_family(cert, unscore_mixed)
        assert "built-in name" in _problems(forged)


def test_built_in_family_swapped_for_another_code_is_rejected():
    from certify.core.codes import greedy_packing
    from certify.core.families import chain_family
    other = chain_family(greedy_packing(12, 6, 3, limit=8), n=3, g=3, name="paper-5.1").to_json()

    def swap(fam):
        fam.clear()
        fam.update({k: v for k, v in other.items() if k != "sha256"})
    cert = _swap_family(_certs()[1], swap)
    assert "built-in name" in _problems(cert)


def test_a_renamed_family_is_named_by_its_hash():
    """Under a name of its own the same forgery is a different claim: its sentence
    names the family by hash, so it cannot pass for paper-5.1."""
    cert = copy.deepcopy(_certs()[0])
    claim = cert["claims"][0]
    claim["parameters"]["family"] = claim["evidence"]["family"]["name"] = "my-family"
    body = {k: v for k, v in claim["evidence"]["family"].items() if k != "sha256"}
    claim["evidence"]["family"]["sha256"] = claim["parameters"]["family_sha256"] = canonical_sha256(body)
    cert["inputs"] = {"family:my-family": claim["parameters"]["family_sha256"]}
    _rerender(claim)
    assert "'my-family' with sha256" in claim["statement"]
    r = verify.verify_certificate(cert)
    assert r.holds and "paper-5.1" not in r.claims[0].statement


def test_family_hash_missing_from_inputs_is_rejected():
    cert = _certs()[0]
    cert["inputs"] = {"family:paper-5.1": "0" * 64}
    assert "inputs do not list family:paper-5.1" in _problems(cert)


def test_parametric_built_in_names_are_rebuilt():
    from certify.checkers.families import bind
    from certify.core.families import multilevel_spec, ood_families
    fam = multilevel_spec(12, 3, 6, 4).family()
    assert bind(fam.name, fam.sha256) == ([], [])
    sub = multilevel_spec(12, 3, 6, 4).family(fam_kappas := np.array([[0, 0, 0, 0]]))
    assert sub.name != fam.name and len(fam_kappas) == 1
    assert "built-in name" in bind(fam.name, sub.sha256)[0][0]
    train, test = ood_families(6, 4, 8)
    assert bind(test.name, test.sha256) == ([], []) and "built-in" in bind(test.name, train.sha256)[0][0]


def _rank_cert(tmp_path: Path, name: str, A: np.ndarray) -> dict:
    path = tmp_path / name
    np.save(path, A)
    out = tmp_path / f"{name}.json"
    assert rank_cli.main([str(path), "--eps", "1/100", "--out", str(out)]) in (0, 1)
    return json.loads(out.read_text())


def test_matrix_swapped_under_a_present_source_is_rejected(tmp_path):
    """A rank-1 certificate re-labelled as the rank-2 file: the file is re-read."""
    two = np.array([[1.0, 0.0], [0.0, 1.0]])
    one = np.array([[1.0, 2.0], [2.0, 4.0]])
    real = _rank_cert(tmp_path, "two.npy", two)
    forged = _rank_cert(tmp_path, "one.npy", one)
    src = real["claims"][0]["parameters"]
    for claim in forged["claims"]:
        claim["parameters"]["source"] = src["source"]
        claim["parameters"]["source_sha256"] = src["source_sha256"]
        _rerender(claim)
    forged["inputs"] = {src["source"]: src["source_sha256"]}
    assert "rank exactly 1" in forged["claims"][0]["statement"]
    assert "two.npy" in forged["claims"][0]["statement"]
    assert "not the source file's matrix" in _problems(forged)
    # with the source absent the claim holds only under a named assumption
    (tmp_path / "two.npy").unlink()
    r = verify.verify_certificate(forged)
    assert r.exit_code() == verify.EXIT_ASSUMED
    assert any(a.startswith("source:") for a in r.open_assumptions)


def test_features_swapped_under_a_present_source_is_rejected(tmp_path):
    rng = np.random.default_rng(3)
    for name in ("a.npz", "b.npz"):
        np.savez(tmp_path / name, phi_q=rng.integers(0, 3, size=(16, 3)).astype(np.float64),
                 phi_k=rng.integers(0, 3, size=(16, 3)).astype(np.float64))
        rank_cli.main([str(tmp_path / name), "--tokens", "cube:4", "--out", str(tmp_path / f"{name}.json")])
    a = json.loads((tmp_path / "a.npz.json").read_text())
    b = json.loads((tmp_path / "b.npz.json").read_text())
    pa = a["claims"][0]["parameters"]
    for claim in b["claims"]:
        claim["parameters"].update(source=pa["source"], source_sha256=pa["source_sha256"])
        _rerender(claim)
    b["inputs"] = {pa["source"]: pa["source_sha256"]}
    assert "not the source file's features" in _problems(b)


def test_trusted_fields_on_small_data_are_rejected(tmp_path):
    from certify.core.certificate import Certificate
    from certify.rank import run as rank
    from certify.sources.load import load_kernel
    rng = np.random.default_rng(4)
    np.savez(tmp_path / "f.npz", phi_q=rng.normal(size=(41, 8)), phi_k=rng.normal(size=(41, 8)))
    kernel = load_kernel(str(tmp_path / "f.npz"))
    from certify.rank.nonnegative import nonnegative_claim_factor
    from certify.rank.summary import summarize_features
    s = summarize_features(kernel)
    claim = nonnegative_claim_factor(kernel, s, rank.RankOptions())
    cert = Certificate(claims=[claim]).to_json()
    ev = cert["claims"][0]["evidence"]
    if "trusted" not in ev:                  # the forger drops the features, declares trust
        for k in ("features", "phi_q_row", "phi_k_row", "phi_q_exponent", "phi_k_exponent",
                  "pair", "value", "num_checked"):
            ev.pop(k, None)
        ev.update({"method": "all_products", "num_checked": 41 * 41, "trusted": ["all_products"]})
        cert["claims"][0]["verdict"], cert["claims"][0]["reason"] = "proved", None
        _rerender(cert["claims"][0])
    assert "must be embedded" in _problems(cert)


@pytest.fixture
def lenient_checker(monkeypatch):
    """A checker that accepts every claim: contradictions must be caught anyway."""
    import types
    mod = types.ModuleType("certify.checkers._lenient")
    mod.check = lambda claim, cert, **kw: []
    monkeypatch.setitem(sys.modules, "certify.checkers._lenient", mod)
    for kind in ("feasible", "infeasible", "exact_rank"):
        monkeypatch.setitem(verify.CHECKERS, kind, "_lenient")


def test_contradicting_certificates_are_rejected(lenient_checker):
    feasible, infeasible = _certs()[1], copy.deepcopy(_certs()[0])
    # the forger claims no rank-15 nonnegative head exists (each claim alone "checks")
    claim = infeasible["claims"][0]
    claim["parameters"].update(rank=15, features="nonnegative")
    _rerender(claim)
    a, b = verify.verify_many([("A.json", feasible, None), ("B.json", infeasible, None)])
    assert not a.holds and not b.holds
    msg = a.claims[0].problems[-1]
    assert "contradiction" in msg and "A.json" in msg and "B.json" in msg
    # alone, each holds (under this lenient checker); feasible at 15 vs infeasible at 14 is fine
    assert verify.verify_certificate(infeasible).holds
    claim["parameters"]["rank"] = 14
    _rerender(claim)
    assert all(r.holds for r in verify.verify_many([("A", feasible, None), ("B", infeasible, None)]))
    # feasibility moves up the class chain: nonnegative at 15 contradicts real at 15
    claim["parameters"].update(rank=15, features="real")
    _rerender(claim)
    assert not verify.verify_many([("A", feasible, None), ("B", infeasible, None)])[0].holds


def test_two_exact_ranks_of_one_matrix_contradict(lenient_checker, tmp_path):
    cert = _rank_cert(tmp_path, "m.npy", np.array([[1.0, 0.0], [0.0, 1.0]]))
    other = copy.deepcopy(cert)
    ev = other["claims"][0]["evidence"]
    ev["rank_lower"] = ev["rank_upper"] = 1
    _rerender(other["claims"][0])
    results = verify.verify_many([("A", cert, None), ("B", other, None)])
    assert not results[0].holds and "contradiction" in results[0].claims[0].problems[-1]


def test_verify_command_prints_the_reason(tmp_path):
    cert = _certs()[0]
    cert["claims"][0]["statement"] = "no rank-13 real-feature head solves paper-5.1 with error < 1/2"
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(cert))
    p = subprocess.run([sys.executable, "-m", "certify", "verify", str(path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 1
    assert "FAIL" in p.stderr and "stored statement is not the one" in p.stderr
