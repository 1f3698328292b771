"""certify.rank: claims, the independent checker, the command, memory at m = 20."""

import copy
import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from certify.checkers.rank import check
from certify.core.codes import paper51_code
from certify.core.kernel import Provenance, from_feature_fn, from_features
from certify.core.verdict import Verdict
from certify.rank.code import code_rank_claim
from certify.rank.options import RankOptions
from certify.rank.run import certify_rank
from tests.packed_grams import as_rows

ROOT = Path(__file__).resolve().parent.parent
PROV = Provenance("memory", None, "memory", "float32")


def run(*args):
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def _planted_features(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Columns [1, x_1..x_8, x_1 + x_2, x_3 + x_4, 2 x_5], each times a float32
    constant: exact in float32, rank 9 on any cube with m >= 8."""
    x = t.astype(np.float32)
    cols = np.stack([np.ones(len(x), np.float32), *x[:, :8].T, x[:, 0] + x[:, 1], x[:, 2] + x[:, 3],
                     2 * x[:, 4]], axis=1)
    dq = np.array([0.1, 3, 1e-3, 7, 0.5, 1, 2, 3, 4, 5, 6, 1e5], np.float32)
    dk = np.array([2, 1e-4, 3, 0.3, 1, 1, 9, 8, 7, 6, 5, 4], np.float32)
    return cols * dq, cols * dk


def _all_checked(cert_json):
    return {c["kind"]: check(c, cert_json) for c in cert_json["claims"]}


def test_factor_claims_and_checker():
    k = from_feature_fn(_planted_features, "cube:9", PROV, rank=12)
    rep = certify_rank(k, RankOptions(eps=Fraction(1, 100), require_nonnegative=True, embed_limit=1 << 14))
    assert (rep.rank_lower, rep.rank_upper, rep.verdict) == (9, 9, Verdict.PROVED)
    cj = rep.certificate.to_json()
    assert _all_checked(cj) == {"exact_rank": [], "nonnegative": [], "eps_rank": []}
    rank_claim = cj["claims"][0]
    assert "features" in rank_claim["evidence"]          # small: features embedded, Grams recomputed


@pytest.mark.parametrize("tamper", ["minor", "null", "lower", "gram", "eps_k"])
def test_checker_catches_tampering(tamper):
    k = from_feature_fn(_planted_features, "cube:9", PROV, rank=12)
    cj = certify_rank(k, RankOptions(eps=Fraction(1, 100), embed_limit=1 << 14)).certificate.to_json()
    bad = as_rows(copy.deepcopy(cj))
    rank_ev = bad["claims"][0]["evidence"]
    eps_claim = bad["claims"][1]
    if tamper == "minor":
        rank_ev["minor_rows"] = [0] * len(rank_ev["minor_rows"])
    elif tamper == "null":
        rank_ev["null_basis"][0][0] += 1
    elif tamper == "lower":
        rank_ev["rank_lower"] = rank_ev["rank_upper"] = 10
    elif tamper == "gram":
        rank_ev["gram_q"][0][0] += 2            # no longer the Gram of the embedded features
    else:
        eps_claim["evidence"]["k"] += 1
    problems = [p for c in bad["claims"] for p in check(c, bad)]
    assert problems


def test_matrix_command_json_out_and_checker(tmp_path):
    rng = np.random.default_rng(0)
    A = (rng.integers(-9, 10, (40, 5)) @ rng.integers(-9, 10, (5, 30))).astype(np.float64) / 8
    np.save(tmp_path / "a.npy", A)
    out = tmp_path / "cert.json"
    r = run("certify.rank", str(tmp_path / "a.npy"), "--json", "--out", str(out), "--eps", "1/10",
            "--require-nonnegative")
    assert r.returncode == 3 and not out.exists()        # signed matrix: refused, nothing written
    r = run("certify.rank", str(tmp_path / "a.npy"), "--json", "--out", str(out), "--eps", "1/10")
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert (obj["rank_lower"], obj["rank_upper"], obj["verdict"]) == (5, 5, "proved")
    cert = json.loads(out.read_text())
    assert all(check(c, cert) == [] for c in cert["claims"])


def test_signed_features_nonnegative_kernel_is_proved_and_signed_refuted():
    rng = np.random.default_rng(1)
    u = rng.standard_normal((50, 3)).astype(np.float32)
    sq = np.einsum("ki,kj->kij", u, u).reshape(50, 9)        # tensor square: alpha = <u, u'>^2 >= 0
    rep = certify_rank(from_features(sq, sq, PROV), RankOptions(require_nonnegative=True))
    cj = rep.certificate.to_json()
    nn = next(c for c in cj["claims"] if c["kind"] == "nonnegative")
    assert nn["verdict"] == "proved" and nn["evidence"]["method"] == "all_products" and check(nn, cj) == []
    from certify.core.errors import UncertifiableError
    with pytest.raises(UncertifiableError, match="signed"):
        certify_rank(from_features(u, u, PROV), RankOptions(require_nonnegative=True))


def test_code_rank_on_paper51_code_known_value():
    """alpha(x, z) = (6 - <x, z>)^2 through exact float32 features of dimension 601.
    On the 5.1 code, B[S,S] = 36, B[S,U] = 0 at directed distance 6, and 36 for the
    complementary pair (0, 14): t = 15, ||C||_F^2 = 17, rank >= ceil(225/17) = 14."""
    def fn(t):
        x = t.astype(np.float32)
        outer = np.einsum("ki,kj->kij", x, x).reshape(len(x), -1)
        q = np.concatenate([np.full((len(x), 1), 36, np.float32), -12 * x, outer], axis=1)
        k = np.concatenate([np.ones((len(x), 1), np.float32), x, outer], axis=1)
        return q, k
    kern = from_feature_fn(fn, "cube:24", PROV, rank=601)
    claim = code_rank_claim(kern, paper51_code(), "paper-5.1", RankOptions())
    ev = claim.to_json()["evidence"]
    assert claim.verdict is Verdict.PROVED and ev["rank_lower"] == 14
    assert ev["bound"] == "225/17" and ev["t"] == 15
    cj = {"claims": [claim.to_json()]}
    assert check(cj["claims"][0], cj) == []
    cj["claims"][0]["evidence"]["rank_lower"] = 15
    assert check(cj["claims"][0], cj)


def test_thm2_matrix_kernel_command(tmp_path):
    """The cube kernel exp(-tau <x, z>) at m = 6, tau = 1/2: rank 2^6, all entries > 0."""
    from certify.core.cube import all_tokens
    T = all_tokens(6).astype(np.int64)
    np.save(tmp_path / "k.npy", np.exp(-0.5 * (T @ T.T)))
    r = run("certify.rank", str(tmp_path / "k.npy"), "--tokens", "cube:6", "--json", "--require-nonnegative")
    obj = json.loads(r.stdout)
    assert r.returncode == 0 and (obj["rank_lower"], obj["rank_upper"]) == (64, 64)


SCRIPT = """
import resource, sys, json
import numpy as np
sys.path.insert(0, {root!r})
from tests.test_rank import _planted_features, PROV
from certify.core.kernel import from_feature_fn
from certify.rank.options import RankOptions
from certify.rank.run import certify_rank
k = from_feature_fn(_planted_features, "cube:20", PROV, rank=12)
rep = certify_rank(k, RankOptions(batch_size=1 << 15))
print(json.dumps({{"lower": rep.rank_lower, "upper": rep.rank_upper, "verdict": rep.verdict.value,
                  "maxrss_kb": next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))}}))
"""


def test_factor_form_cube_m20_without_the_big_matrix():
    r = subprocess.run([sys.executable, "-c", SCRIPT.format(root=str(ROOT))], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert (obj["lower"], obj["upper"], obj["verdict"]) == (9, 9, "proved")
    # 2^20 x 2^20 float64 would need 2^43 bytes; the whole process stays below 1.5 GiB
    assert obj["maxrss_kb"] * 1024 < 1.5 * 2 ** 30
