"""The forgery classes that reached exit 0 under certificate/1, rebuilt here from
genuine certificates made in the test (never from stored files): each must end
at exit 1, or at exit 4 naming an assumption that covers the lie; never at 0.

1. a Freivalds upper bound at an error the producer chose (2^-15): below the
   fixed floor 2^-128 it holds only under ``randomized:freivalds-error-2^-15``,
   and the challenge hashes every field the producer chooses;
2. an old renderer (``statements/1``) or an old version (``certificate/1``):
   refused before any claim is read, with how to re-make the file;
3. a third-party head whose ``stated`` kernel arguments are deleted: refused by
   the schema, and by the replay, which never assumes an argument for it;
4. two ranks of one absent matrix file, one relabelled ``vocab:5``: a
   vocabulary label on a matrix file is refused, and the contradiction key is
   the file's hash whatever the label;
5. two kernels built in memory: their sentences name their content hashes, so
   two different kernels never print the same subject.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
from committed import report_json

from certify.checkers import schema as schema_mod
from certify.checkers import verify
from certify.checkers.common import NotACertificate
from certify.checkers.rank import freivalds as fchk
from certify.checkers.statements import render
from certify.cli import rank as rank_cli
from certify.core.kernel import Provenance, from_matrix
from certify.rank.options import RankOptions
from certify.rank.run import certify_rank


def _planted(n: int, r: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.integers(-8, 8, (n, r)) @ rng.integers(-8, 8, (r, n))).astype(np.float64)


def _memory_cert(A: np.ndarray, **opt) -> dict:
    kernel = from_matrix(A, Provenance("memory", None, "memory", "float64"))
    return json.loads(json.dumps(certify_rank(kernel, RankOptions(**opt)).certificate.to_json()))


def _rerender(claim: dict) -> None:
    claim["statement"] = render(claim["kind"], claim["parameters"], claim["evidence"]).text


# ---------------------------------------------------------------- 1. the Freivalds floor

def test_a_freivalds_bound_below_the_floor_holds_only_under_a_named_assumption():
    cert = _memory_cert(_planted(9, 3, 0), upper_bound="freivalds", error_log2=15)
    c = cert["claims"][0]
    assert c["parameters"]["error_log2"] == 15 and c["evidence"]["upper_witness"] == "freivalds"
    assert c["statement"].endswith("error probability <= 2^-15")
    r = verify.verify_certificate(cert)
    assert r.holds and r.exit_code() == 4
    assert r.open_assumptions == ("randomized:freivalds-error-2^-15",)
    # at the floor, the same claim needs no assumption
    strong = verify.verify_certificate(_memory_cert(_planted(9, 3, 0), upper_bound="freivalds"))
    assert strong.exit_code() == 0 and strong.assumptions == ()
    # raising error_log2 in the file (sentence re-rendered) changes the challenge: refused
    forged = copy.deepcopy(cert)
    forged["claims"][0]["parameters"]["error_log2"] = 128
    _rerender(forged["claims"][0])
    bad = verify.verify_certificate(forged)
    assert bad.exit_code() == 1 and "challenge" in " ".join(bad.claims[0].problems)


@pytest.mark.parametrize("where,key,value", [
    ("parameters", "source", "other.npy"), ("parameters", "token_set", "cube:3"),
    ("parameters", "num_tokens", 8), ("evidence", "prime", 3), ("evidence", "minor_rows", [0, 1]),
    ("evidence", "scale", {"kind": "dyadic", "exponent": 1}), ("parameters", "error_log2", 127)])
def test_the_challenge_hashes_every_field_the_producer_chooses(where, key, value):
    c = _memory_cert(_planted(9, 3, 1), upper_bound="freivalds")["claims"][0]
    edited = copy.deepcopy(c)
    edited[where][key] = value
    assert fchk.challenge(edited) != fchk.challenge(c) == c["evidence"]["freivalds"]["challenge"]
    # what is not hashed is the test's own output and the matrix (bound by its hash)
    assert fchk.challenge({**c, "evidence": {k: v for k, v in c["evidence"].items()
                                             if k not in ("freivalds", "matrix")}}) == fchk.challenge(c)


# ---------------------------------------------------------------- 2. renderer and version

def test_an_old_renderer_or_version_is_refused_with_how_to_remake_it(tmp_path):
    certs = [_memory_cert(_planted(9, 3, 2), upper_bound="freivalds"),
             _memory_cert(_planted(12, 2, 3), eps=__import__("fractions").Fraction(1, 100))]
    kinds = {c["kind"] for cert in certs for c in cert["claims"]}
    assert {"exact_rank", "eps_rank"} <= kinds
    for cert in certs:
        old = dict(cert, renderer="certify-attention/statements/1")
        with pytest.raises(NotACertificate, match=f"rendered by {schema_mod.RENDERER_OF[cert['schema']]}"):
            verify.parse(json.dumps(old))
        v1 = dict(cert, schema="certify-attention/certificate/1")
        with pytest.raises(NotACertificate, match="no longer read.*re-make it"):
            verify.parse(json.dumps(v1))
        # and through the command: exit 2, one line
        p = tmp_path / "old.json"
        p.write_text(json.dumps(old))
        from certify.cli import run as run_cli
        assert run_cli("verify", [str(p)]) == 2


ROOT = Path(__file__).resolve().parent.parent
COMMITTED = sorted(p for p in report_json()
                   if '"schema": "certify-attention/certificate/' in p.read_text()[:4000])


def test_an_old_renderer_is_refused_for_every_claim_shape_of_the_committed_certificates():
    shapes = set()
    for path in COMMITTED:
        cert = json.loads(path.read_text())
        shapes |= {(c["kind"], c["evidence"].get("form"), c["parameters"].get("upper_bound"))
                   for c in cert["claims"]}
        with pytest.raises(NotACertificate):
            verify.parse(json.dumps(dict(cert, renderer="certify-attention/statements/1")))
    kinds = {k for k, _, _ in shapes}
    assert {"bound", "exact_rank", "eps_rank", "code_rank", "nonnegative", "feasible", "infeasible",
            "correctness", "gap_domination", "transcript"} <= kinds, kinds


def test_the_renderer_must_print_every_parameter_a_claim_carries():
    cert = _memory_cert(_planted(9, 3, 2), upper_bound="freivalds")
    c = cert["claims"][0]
    from certify.checkers.statements import check_statement
    assert check_statement(c, cert["renderer"]) == []
    # a parameter the sentence reads is never dropped silently: the claim that lost it fails
    hidden = copy.deepcopy(c)
    del hidden["parameters"]["upper_bound"]
    assert check_statement(hidden, cert["renderer"])


# ---------------------------------------------------------------- 3. stated arguments

def test_a_third_party_claim_without_stated_fails_and_its_replay_assumes_nothing(tmp_path):
    from certify.checkpoints.heads import certify_heads
    from certify.checkpoints.replay import StatedDiffers, _kernel
    root = Path(__file__).resolve().parent.parent / "reports" / "gallery" / "models" / "lat"
    cert = json.loads(json.dumps(certify_heads(str(root)).certificate.to_json()))
    c = cert["claims"][0]
    assert c["parameters"]["adapter"].startswith("layout:") and c["parameters"]["stated"]
    forged = copy.deepcopy(cert)
    for claim in forged["claims"]:
        claim["parameters"].pop("stated", None)
        _rerender(claim)
    r = verify.verify_certificate(forged, base=root)
    assert r.exit_code() == 1
    assert all(any("stated" in p for p in cl.problems) for cl in r.claims)
    # the replay of such a claim refuses instead of assuming every default
    job = {"adapter": c["parameters"]["adapter"], "token_set": c["parameters"]["token_set"],
           "path": str(root / "model.safetensors"), "stated": None}
    with pytest.raises(StatedDiffers, match="does not state"):
        _kernel(job)


# ---------------------------------------------------------------- 4. labels are not identities

def test_a_vocabulary_label_on_a_matrix_file_is_refused_and_ranks_of_one_file_contradict(tmp_path):
    path = tmp_path / "m.npy"
    np.save(path, _planted(9, 3, 4))
    out = tmp_path / "a.json"
    assert rank_cli.main([str(path), "--out", str(out)]) == 0
    a = json.loads(out.read_text())
    # a second, genuine certificate of a rank-5 matrix, moved onto the same (now absent) file
    other = tmp_path / "o.npy"
    np.save(other, _planted(9, 5, 5))
    assert rank_cli.main([str(other), "--out", str(tmp_path / "b.json")]) == 0
    b = json.loads((tmp_path / "b.json").read_text())
    cb = b["claims"][0]
    cb["parameters"]["source"] = a["claims"][0]["parameters"]["source"]
    cb["parameters"]["source_sha256"] = a["claims"][0]["parameters"]["source_sha256"]
    b["inputs"] = dict(a["inputs"])
    _rerender(cb)
    path.unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ra, rb = verify.verify_many([("a", a, elsewhere), ("b", b, elsewhere)], assume=["source"])
    assert ra.exit_code() == rb.exit_code() == 1
    assert any("contradiction" in p for p in rb.claims[0].problems)
    relabelled = copy.deepcopy(b)
    relabelled["claims"][0]["parameters"]["token_set"] = "vocab:9"
    _rerender(relabelled["claims"][0])
    ra, rb = verify.verify_many([("a", a, elsewhere), ("b", relabelled, elsewhere)], assume=["source"])
    assert rb.exit_code() == 1 and any("vocab" in p for p in rb.claims[0].problems)
    # a relabelled row set (index -> cube:3 is not even 9 rows; tokens are rows) is still one file
    from certify.checkers.binding import kernel_identity
    c1, c2 = a["claims"][0], copy.deepcopy(a["claims"][0])
    c2["parameters"]["token_set"] = "cube:3"
    assert kernel_identity(c1) == kernel_identity(c2) == ("file", c1["parameters"]["source_sha256"])


# ---------------------------------------------------------------- 5. memory subjects

def test_two_kernels_built_in_memory_never_print_the_same_subject():
    one = _memory_cert(np.outer(np.arange(1.0, 5.0), np.arange(1.0, 5.0)))
    two = _memory_cert(np.diag([1.0, 2.0, 0.0, 0.0]))
    s1, s2 = one["claims"][0]["statement"], two["claims"][0]["statement"]
    assert "rank exactly 1" in s1 and "rank exactly 2" in s2
    subject = s1.split(" (4 x 4)")[0]
    assert subject.startswith("the kernel matrix of memory (sha256 ") and subject not in s2
    for cert in (one, two):
        assert verify.verify_certificate(cert).exit_code() == 0
    # the hash printed is the content's: moving one sentence onto the other data fails
    forged = copy.deepcopy(two)
    forged["claims"][0]["statement"] = s2.replace(s2.split(" (4 x 4)")[0], subject)
    assert verify.verify_certificate(forged).exit_code() == 1


def test_an_extraction_in_another_precision_never_reads_like_the_canonical_one():
    """The same head's kernel from float32 features is another kernel: its sentence
    says so, and its identity differs (no contradiction with the float64 one)."""
    from certify.checkers.binding import kernel_identity
    root = Path(__file__).resolve().parent.parent / "reports" / "gallery" / "lat" / "certificate.json"
    c = json.loads(root.read_text())["claims"][0]
    assert c["kind"] == "exact_rank" and c["parameters"]["dtype"] == "float64"
    assert "features computed in" not in c["statement"]
    other = copy.deepcopy(c)
    other["parameters"]["dtype"] = "float32"
    other["evidence"]["features_sha256"]["dtype"] = "float32"
    _rerender(other)
    assert other["statement"] != c["statement"] and "(features computed in float32)" in other["statement"]
    assert kernel_identity(other) != kernel_identity(c)
