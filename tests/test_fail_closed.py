"""``certify verify`` fails closed: what a certificate leaves out is a failure, never a pass.

Each test rebuilds one way a false sentence used to reach exit 0 (a claim whose
binding field was removed, a replay that compared nothing, two claims about one
kernel in different representations, a token set declared larger than the
file it is read from) from genuine certificates, and requires verify to reject
it. The schema itself is checked to be the published one, closed, and linked
from docs/trust.md.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from committed import report_json

from certify.checkers import binding, schema, sources, verify
from certify.checkers.statements import render

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "reports" / "reference"


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def _first(cert: dict, kind: str) -> int:
    return next(i for i, c in enumerate(cert["claims"]) if c["kind"] == kind)


def _check(cert: dict, base: Path, replayed=None) -> verify.Verification:
    return verify.verify_certificate(cert, base=base, replayed=replayed or {})


# ---------------------------------------------------------------- the schema

def test_published_schema_is_the_built_one_and_a_valid_2020_12_schema():
    import jsonschema
    built = schema.build()
    assert schema.published() == json.loads(json.dumps(built))
    # byte for byte: `make schema` on a clean tree changes nothing (order included; the writer
    # itself runs in tests/test_declarations.py)
    assert schema.SCHEMA_FILE.read_bytes() == schema.text().encode()
    jsonschema.Draft202012Validator.check_schema(built)
    assert built["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert built["additionalProperties"] is False
    # one definition per claim kind, each closed at every level the checker does not close
    for kind, d in built["$defs"].items():
        if kind == "claim":
            continue
        assert d["additionalProperties"] is False, kind
        assert d["properties"]["parameters"].get("additionalProperties", False) is False \
            or kind == "bound", kind


def test_schema_is_printed_by_verify_and_linked_from_the_trust_page():
    out = subprocess.run([sys.executable, "-m", "certify", "verify", "--schema"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == schema.published()
    assert "certify/checkers/certificate.schema.json" in (ROOT / "docs" / "trust.md").read_text()


def test_a_removed_field_is_exit_1_naming_it(tmp_path):
    cert = _load(REF / "checkpoint-paper51-lookup-r8-s0.json")
    i = _first(cert, "exact_rank")
    del cert["claims"][i]["parameters"]["source_sha256"]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cert))
    out = subprocess.run([sys.executable, "-m", "certify", "verify", str(path)],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 1
    assert f"$.claims[{i}].parameters: 'source_sha256' is a required property" in out.stderr


def test_every_committed_certificate_is_valid_under_the_schema():
    found = 0
    for path in report_json():
        obj = json.loads(path.read_text())
        if isinstance(obj, dict) and str(obj.get("schema", "")).startswith("certify-attention/certificate"):
            found += 1
            assert schema.violations(obj) == {}, path
    assert found >= 30


# ---------------------------------------------------------------- every source bound

@pytest.mark.parametrize("kind", ["correctness", "eps_rank", "code_rank", "nonnegative"])
def test_a_claim_without_source_sha256_is_rejected(kind):
    cert = _load(REF / "checkpoint-paper51-lookup-r32-s0.json")
    i = _first(cert, kind)
    claim = cert["claims"][i]
    del claim["parameters"]["source_sha256"]
    claim["statement"] = render(kind, claim["parameters"], claim["evidence"]).text
    r = _check(cert, REF)
    assert r.exit_code() == 1 and not r.claims[i].holds
    assert any("source_sha256" in p for p in r.claims[i].problems)
    # and the binding rule alone (schema aside) refuses it too
    assert binding.referent(claim) is None


def test_proved_correctness_flipped_to_refuted_without_its_binding_fails():
    """The false sentence 'the head of paper51-lookup-r32-s0 does not solve
    paper-5.1' (it does, with margin 0.354), with its source hash removed."""
    cert = _load(REF / "checkpoint-paper51-lookup-r32-s0.json")
    i = _first(cert, "correctness")
    assert cert["claims"][i]["verdict"] == "proved"
    for strip in (("source_sha256",), ("source", "source_sha256", "adapter", "weights_sha256")):
        forged = copy.deepcopy(cert)
        claim = forged["claims"][i]
        for k in strip:
            claim["parameters"].pop(k)
        claim["verdict"], claim["reason"] = "refuted", "forged"
        claim["statement"] = render("correctness", claim["parameters"], claim["evidence"]).text
        r = _check(forged, REF)
        assert not r.claims[i].holds and r.exit_code() == 1, strip


def test_a_file_claim_without_sha_or_with_a_null_sha_is_unbound():
    claim = {"kind": "nonnegative", "parameters": {"token_set": "index", "source": "m.npy",
                                                    "source_sha256": None, "adapter": "matrix-file",
                                                    "num_tokens": 2}}
    assert binding.referent(claim) is None
    bad, _, _, _ = sources.bind(claim, {"inputs": {}}, None, {})
    assert bad and "no sha256" in bad[0]


# ---------------------------------------------------------------- replays compare something

def test_a_replay_with_nothing_to_compare_discharges_nothing(tmp_path):
    cert = _load(REF / "checkpoint-paper51-lookup-r8-s0.json")
    i = _first(cert, "exact_rank")
    claim = cert["claims"][i]
    # strip every object a replay could compare: the features' hash and any head hash
    claim["evidence"].pop("features_sha256")
    claim["parameters"].pop("head_sha256", None)
    assert sources.replay_keys(claim, cert, REF) == []
    stripped = copy.deepcopy(cert)
    stripped["claims"] = [claim]
    # the replay builds no job for it (an empty comparison is no replay) ...
    assert sources.replay_extraction([("c", stripped, REF)]) == {}
    # ... and the binding fails the claim instead of counting it as a match
    bad, assume, _, _ = sources.bind(claim, cert, REF, {"anything": "match"})
    assert bad and "nothing in the claim can be compared" in bad[0] and not assume
    r = _check(cert, REF, replayed={"anything": "match"})
    assert not r.claims[i].holds and r.exit_code() == 1


def test_a_claim_is_discharged_only_by_its_own_comparison():
    cert = _load(REF / "checkpoint-paper51-lookup-r8-s0.json")
    i = _first(cert, "exact_rank")
    claim = cert["claims"][i]
    keys = sources.replay_keys(claim, cert, REF)
    assert keys and keys[0].startswith("features\0")
    # the comparison keys name the extraction by content: the same claim in a certificate whose
    # inputs (the files read beside the source) differ is another replay
    other_inputs = {**cert, "inputs": {**cert["inputs"], "extra.json": "0" * 64}}
    assert sources.replay_keys(claim, other_inputs, REF) != keys
    other = {k.replace(claim["evidence"]["features_sha256"]["phi_q"], "0" * 64): "match" for k in keys}
    bad, assume, _, _ = sources.bind(claim, cert, REF, other)      # another kernel's match
    assert not bad and assume and assume[0].startswith("extraction:")
    bad, assume, _, _ = sources.bind(claim, cert, REF, {k: "match" for k in keys})
    assert not bad and not assume
    bad, _, _, _ = sources.bind(claim, cert, REF, {keys[0]: "differs: x"})
    assert bad


# ---------------------------------------------------------------- one identity per kernel

def _kernel_claim(form: str, lo: int, hi: int, **params) -> dict:
    p = {"token_set": "index", "source": "k.npz", "source_sha256": "a" * 64,
         "adapter": "matrix-file", "num_tokens": 16, **params}
    ev = {"form": form, "rank_lower": lo, "rank_upper": hi}
    ev.update({"matrix_sha256": "int64:" + "b" * 64} if form == "matrix" else
              {"features_sha256": {"phi_q": "c" * 64, "phi_k": "d" * 64, "dtype": "float64",
                                   "layout": "row-major little-endian (K, r)"}})
    return {"kind": "exact_rank", "verdict": "proved", "statement": f"rank {lo}",
            "parameters": p, "evidence": ev}


def test_two_ranks_of_one_kernel_in_matrix_and_factor_form_contradict():
    items = [("a.json", 0, _kernel_claim("factor", 8, 8)), ("b.json", 0, _kernel_claim("matrix", 3, 3))]
    out = verify.contradictions(items)
    assert ("a.json", 0) in out and ("b.json", 0) in out
    # another head of the same weights is another kernel: no contradiction
    def head(lo, h):
        return _kernel_claim("factor", lo, lo, layer=0, head=h, stated={},
                             adapter=f"layout:lib:Attention layer 0 head {h}")
    assert verify.contradictions([("a.json", 0, head(8, 0)), ("b.json", 0, head(3, 1))]) == {}
    assert verify.contradictions([("a.json", 0, head(8, 0)), ("b.json", 0, head(3, 0))])


def test_nonnegativity_proved_and_refuted_of_one_kernel_contradict():
    a = _kernel_claim("factor", 0, 0)
    b = copy.deepcopy(a)
    a.update(kind="nonnegative", statement="x")
    b.update(kind="nonnegative", verdict="refuted", statement="x'")
    b["evidence"]["form"] = "matrix"          # the same file read as a matrix
    out = verify.contradictions([("a", 0, a), ("b", 0, b)])
    assert ("a", 0) in out and ("b", 0) in out


def test_eps_ranks_of_one_kernel_at_one_eps_must_agree():
    def eps(k, exact):
        c = _kernel_claim("factor", 0, 0, eps="1/10")
        c.update(kind="eps_rank")
        c["evidence"].update(k=k, exact=exact)
        return c
    assert verify.contradictions([("a", 0, eps(5, True)), ("b", 0, eps(7, False))])
    assert verify.contradictions([("a", 0, eps(5, True)), ("b", 0, eps(4, False))]) == {}


# ---------------------------------------------------------------- sizes are measured

def _features_file(tmp: Path) -> tuple[Path, dict]:
    rng = np.random.default_rng(0)
    q = rng.integers(0, 5, size=(8, 2)).astype(np.float64)
    k = rng.integers(0, 5, size=(8, 2)).astype(np.float64)
    path = tmp / "f.npz"
    np.savez(path, phi_q=q, phi_k=k)
    out = subprocess.run([sys.executable, "-m", "certify", "rank", str(path), "--require-nonnegative",
                          "--out", str(tmp / "c.json"), "--no-progress"],
                         capture_output=True, text=True, cwd=tmp)
    assert out.returncode == 0, out.stderr
    return path, _load(tmp / "c.json")


def test_a_declared_cube_over_an_8_row_file_is_rejected(tmp_path):
    _, cert = _features_file(tmp_path)
    i = _first(cert, "nonnegative")
    claim = cert["claims"][i]
    ev = claim["evidence"]
    # the forgery: "nonnegative on {0,1}^16", features not embedded but taken as stated
    claim["parameters"].update(token_set="cube:16", num_tokens=1 << 16)
    claim["verdict"], claim["reason"] = "proved", None
    for k in ("features", "features_claim", "tokens"):
        ev.pop(k, None)
    ev.update(method="features_nonnegative", min_phi_q="0", min_phi_k="0",
              trusted=["min_phi_q", "min_phi_k"])
    for k in ("pair", "value", "phi_q_row", "phi_q_exponent", "phi_k_row", "phi_k_exponent"):
        ev.pop(k, None)
    claim["statement"] = render("nonnegative", claim["parameters"], ev).text
    r = _check(cert, tmp_path)
    assert not r.claims[i].holds and r.exit_code() == 1
    assert any("source file's rows 8" in p for p in r.claims[i].problems), r.claims[i].problems
    # accepting every assumption does not help: the failure is not an assumption
    r = verify.verify_certificate(cert, base=tmp_path, assume=["trusted", "source", "extraction"])
    assert r.exit_code() == 1


def test_signed_zeros_hash_as_zeros(tmp_path):
    q = np.array([[1.0, -0.0], [0.5, 2.0], [-0.0, 1.0]])
    k = np.array([[0.25, 1.0], [-0.0, -0.0], [1.0, 3.0]])
    np.savez(tmp_path / "z.npz", phi_q=q, phi_k=k)
    out = subprocess.run([sys.executable, "-m", "certify", "rank", "z.npz", "--out", "c.json",
                          "--no-progress"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    cert = _load(tmp_path / "c.json")
    i = _first(cert, "exact_rank")
    assert cert["claims"][i]["evidence"]["rank_lower"] == 2
    assert _check(cert, tmp_path).exit_code() == 0
