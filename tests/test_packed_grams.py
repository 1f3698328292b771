"""Stated Grams written once and packed: the eps-rank claim of a head names the exact-rank
claim's Grams (``grams_claim``), Grams are packed integers (``int-le`` in base64); both
checkers read them exactly as rows, and a change anywhere fails every claim that reads it."""

from __future__ import annotations

import base64
import copy
import json
import random
from fractions import Fraction

import pytest

from certify.checkers import verify
from certify.checkers.common import Bad, packed_matrix
from certify.core.kernel import from_feature_fn
from certify.rank.evidence import packed_ints
from certify.rank.options import RankOptions
from certify.rank.run import certify_rank
from certify.reference import claims as reference_claims
from certify.reference.check import check_certificate
from tests.packed_grams import as_rows
from tests.test_rank import PROV, _planted_features


@pytest.fixture(scope="module")
def cert():
    k = from_feature_fn(_planted_features, "cube:9", PROV, rank=12)
    return certify_rank(k, RankOptions(eps=Fraction(1, 100), embed_limit=1 << 14,
                                               require_nonnegative=True)).certificate.to_json()


def reference_verify(cert):
    return check_certificate("c", cert, None, None)


def _fails(cert, index):
    got = verify.verify_certificate(copy.deepcopy(cert))
    return got.exit_code() != 0 and not got.claims[index].holds


def test_round_trip_of_wide_and_negative_entries():
    rng = random.Random(5)
    for bits in (1, 7, 8, 63, 64, 120, 2000):
        rows = [[rng.randrange(-(1 << bits), 1 << bits) for _ in range(3)] for _ in range(4)]
        rows[0][0], rows[1][1] = (1 << bits) - 1, -(1 << bits)           # the extremes of the width
        p = packed_ints(rows)
        assert p["bytes"] == (bits + 8) // 8 and p["shape"] == [4, 3]
        assert packed_matrix(json.loads(json.dumps(p)), "g") == rows
    assert packed_ints([[0, -1], [1, 127]])["bytes"] == 1 and packed_ints([[128]])["bytes"] == 2


@pytest.mark.parametrize("change", ["padding bits", "length", "bytes", "shape", "key", "alphabet"])
def test_a_malformed_packing_is_refused(change):
    p = packed_ints([[1, -2], [3, 4]])                  # 4 entries of 1 byte
    raw = base64.b64decode(p["base64"])
    if change == "padding bits":                        # the same bytes, another text
        t = p["base64"]
        n = len(t.rstrip("="))                          # 4 bytes: two pads, 4 padding bits
        abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        p["base64"] = t[:n - 1] + abc[abc.index(t[n - 1]) + 1] + t[n:]
        assert t.endswith("==") and base64.b64decode(p["base64"]) == raw
    elif change == "length":
        p["base64"] = base64.b64encode(raw + b"\0").decode()
    elif change == "bytes":
        p["bytes"] = 2
    elif change == "shape":
        p["shape"] = [1, 4]
        assert packed_matrix(p, "g") == [[1, -2, 3, 4]]          # a shape is read as stated ...
        p["shape"] = [2, 3]                                     # ... and must account for every byte
    elif change == "key":
        p["extra"] = 1
    else:
        p["base64"] = p["base64"].replace("=", "*")
    with pytest.raises(Bad):
        packed_matrix(p, "g")


def test_the_eps_claim_names_the_exact_claims_grams_and_both_checkers_hold(cert):
    kinds = [c["kind"] for c in cert["claims"]]
    exact, eps = kinds.index("exact_rank"), kinds.index("eps_rank")
    ev = cert["claims"][eps]["evidence"]
    assert ev["grams_claim"] == exact and "gram_q" not in ev
    assert cert["claims"][exact]["evidence"]["gram_q"]["packed"] == "int-le"
    assert verify.verify_certificate(copy.deepcopy(cert)).exit_code() == 0
    assert reference_verify(copy.deepcopy(cert)).exit_code() == 0
    rows = as_rows(copy.deepcopy(cert))                   # the same claims with rows: the same verdicts
    assert verify.verify_certificate(rows).exit_code() == 0


def test_one_byte_of_the_shared_gram_fails_both_claims_in_both_checkers(cert):
    kinds = [c["kind"] for c in cert["claims"]]
    exact, eps = kinds.index("exact_rank"), kinds.index("eps_rank")
    bad = copy.deepcopy(cert)
    g = bad["claims"][exact]["evidence"]["gram_q"]
    raw = bytearray(base64.b64decode(g["base64"]))
    raw[0] ^= 1                                           # entry (0, 0) off by one
    g["base64"] = base64.b64encode(bytes(raw)).decode()
    assert _fails(bad, exact) and _fails(bad, eps)
    assert reference_verify(copy.deepcopy(bad)).exit_code() != 0


@pytest.mark.parametrize("where", ["nonnegative", "itself", "out of range", "other features", "both"])
def test_grams_claim_must_name_an_exact_claim_of_the_same_features(cert, where):
    kinds = [c["kind"] for c in cert["claims"]]
    exact, eps = kinds.index("exact_rank"), kinds.index("eps_rank")
    bad = copy.deepcopy(cert)
    ev = bad["claims"][eps]["evidence"]
    if where == "nonnegative":
        ev["grams_claim"] = kinds.index("nonnegative")
    elif where == "itself":
        ev["grams_claim"] = eps
    elif where == "out of range":
        ev["grams_claim"] = len(kinds)
    elif where == "other features":
        bad["claims"][exact]["evidence"]["r"] += 1        # the exact claim fails too; the eps claim must
    else:
        ev.update({k: bad["claims"][exact]["evidence"][k] for k in ("gram_q", "gram_q_exponent")})
    # the claim itself, in each checker (the other claims are as in the test above)
    got = verify.check_claim(eps, bad["claims"][eps], bad)
    assert not got.holds and "grams_claim" in got.problems[0]
    problems, _ = reference_claims.check(bad["claims"][eps], reference_claims.Context(bad, None, None))
    assert problems and "grams_claim" in problems[0]
