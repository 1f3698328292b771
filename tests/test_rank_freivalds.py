"""The Freivalds upper bound of the exact rank (solvers/exact/freivalds.py, its
checker certify/checkers/rank/freivalds.py and the kernel's certify/checkers/kernel/freivalds.py): a planted counterexample of rank
r + 1 (the extra rank in one entry) is refused, the stated error bound is at
most 2^-128, and the randomness is re-derived from the certificate alone."""

import copy
import json
from fractions import Fraction

import numpy as np
import pytest

from certify.checkers import verify
from certify.checkers.kernel import freivalds as fker
from certify.checkers.rank import freivalds as fchk
from certify.core.kernel import Provenance, from_matrix
from certify.rank.evidence import freivalds_challenge, matrix_sha256
from certify.rank.options import RankOptions
from certify.rank.run import certify_rank
from solvers.exact import IntMatrix, exact_rank_fast
from solvers.exact import freivalds as fv


def _planted(n, r, seed, bits=12):
    rng = np.random.default_rng(seed)
    return rng.integers(-(1 << bits), 1 << bits, (n, r)) @ rng.integers(-(1 << bits), 1 << bits, (r, n))


def _cert(A, upper="freivalds"):
    kernel = from_matrix(A.astype(np.float64), Provenance("memory", None, "memory", "float64"))
    return certify_rank(kernel, RankOptions(upper_bound=upper)).certificate.to_json()


def _bad(N, rows, cols):
    """N with one entry outside the minor's rows and columns raised by 1: rank r + 1."""
    B = N.copy()
    i = next(i for i in range(N.shape[0]) if i not in rows)
    j = next(j for j in range(N.shape[1]) if j not in cols)
    B[i, j] += 1
    return B


def test_the_stated_error_bound_is_at_most_2_to_the_minus_128():
    # at least 2^55 primes in [2^61, 2^62) (the bound the error uses), and for every plan
    # the bound 2^-(s t) + e^m is <= 2^-128; producer and checker compute the same number
    assert fv.primes_in_range_lower() > 1 << 55
    assert fker.primes_lower() == fv.primes_in_range_lower()
    for n, r, bits in ((60, 5, 2), (200, 30, 12), (150, 140, 20)):
        N = _planted(n, r, 0, bits)
        pl = fv.plan(N, list(range(r)), list(range(r)), 128)
        assert pl.error <= Fraction(1, 1 << 128)
        assert pl.error == fker.error(pl.vector_bits, pl.vectors, pl.num_primes, pl.L, pl.LD)
        assert pl.vector_bits * pl.vectors >= 129


@pytest.mark.parametrize("n,r,bits", [(90, 6, 12), (120, 40, 3)])
def test_a_planted_counterexample_of_rank_r_plus_1_is_refused(n, r, bits):
    N = _planted(n, r, 1, bits)
    res = exact_rank_fast(IntMatrix(N))
    rows, cols = list(res.minor_rows), list(res.minor_cols)
    assert (res.lower, res.upper) == (r, r)
    B = _bad(N, rows, cols)
    assert np.linalg.matrix_rank(B.astype(np.float64)) == r + 1
    for k in range(20):                             # twenty challenges: every one catches it
        got = fv.freivalds_span_test(B, rows, cols, f"challenge {k}".encode())
        assert got is not None and got.passed is False
        assert got.plan.error <= Fraction(1, 1 << 128)             # the bound it runs under
        ok = fv.freivalds_span_test(N, rows, cols, f"challenge {k}".encode())
        assert ok.passed is True and len(ok.primes) == ok.plan.num_primes
    # the producer does not claim rank r for it: the failed test proves rank > r, and
    # the fallback is exact
    res_b = exact_rank_fast(IntMatrix(B), upper="freivalds", challenge=lambda p, R, C: b"x")
    assert res_b is None or (res_b.lower, res_b.upper) == (r + 1, r + 1)
    c = _cert(B)["claims"][0]
    assert (c["evidence"]["rank_lower"], c["evidence"]["rank_upper"]) == (r + 1, r + 1)


def _forged(A_bad, claim):
    """The claim ``rank r`` (Freivalds) moved onto the rank r + 1 matrix with every
    hash, challenge and prime made consistent: only the test itself can refuse it."""
    import flint
    c = copy.deepcopy(claim)
    ev = c["evidence"]
    N = IntMatrix(A_bad)
    ev["matrix"] = N.rows()
    ev["matrix_sha256"] = matrix_sha256(N)
    ch = freivalds_challenge(c["parameters"], ev)
    R, C = ev["minor_rows"], ev["minor_cols"]
    MZ = flint.fmpz_mat([[int(A_bad[i, j]) for j in C] for i in R])
    ev["freivalds"]["challenge"] = ch
    ev["freivalds"]["primes"] = fchk.primes(bytes.fromhex(ch), MZ, len(ev["freivalds"]["primes"]))
    return c


def test_the_checker_refuses_a_forged_claim_on_the_counterexample():
    N = _planted(80, 7, 2)
    cert = _cert(N)
    claim = cert["claims"][0]
    assert claim["evidence"]["upper_witness"] == "freivalds"
    assert claim["parameters"]["upper_bound"] == "freivalds" and claim["parameters"]["error_log2"] == 128
    assert claim["statement"].endswith("has rank exactly 7 over Q, the upper bound by a Freivalds "
                                       "test with error probability <= 2^-128")
    r = verify.verify_certificate(cert, assume=["extraction"])     # a matrix built in memory
    assert r.holds and r.exit_code() == 0
    B = _bad(N, claim["evidence"]["minor_rows"], claim["evidence"]["minor_cols"])
    forged = _forged(B, claim)
    problems = fchk.check(forged, B, forged["evidence"]["minor_rows"], forged["evidence"]["minor_cols"],
                          __import__("certify.checkers.kernel.span", fromlist=["bound_sq"]).bound_sq)
    assert problems and "Freivalds check fails" in problems[0]
    bad = copy.deepcopy(cert)
    bad["claims"][0] = forged
    r = verify.verify_certificate(bad)
    assert not r.holds and any("Freivalds check fails" in p for p in r.claims[0].problems)


def test_the_randomness_is_reproducible_from_the_certificate():
    N = _planted(70, 5, 3)
    cert = json.loads(json.dumps(_cert(N)))                 # only what the file holds
    claim = cert["claims"][0]
    ev, _k = claim["evidence"], claim["parameters"]["error_log2"]
    fr = ev["freivalds"]
    ch = fchk.challenge(claim)
    assert fr["challenge"] == ch == freivalds_challenge(claim["parameters"], ev)
    import flint
    A = np.array(ev["matrix"], dtype=np.int64)
    MZ = flint.fmpz_mat([[int(A[i, j]) for j in ev["minor_cols"]] for i in ev["minor_rows"]])
    assert fchk.primes(bytes.fromhex(ch), MZ, len(fr["primes"])) == fr["primes"]
    X = fv.challenge_vectors(bytes.fromhex(ch), A.shape[1], fr["vectors"], fr["vector_bits"])
    assert np.array_equal(X, fchk.vectors(bytes.fromhex(ch), A.shape[1], fr["vectors"], fr["vector_bits"]))
    assert X.shape == (70, fr["vectors"]) and X.max() < 1 << fr["vector_bits"] and X.max() > 0
    # the same claim content draws the same randomness; another content draws other
    again = fv.freivalds_span_test(A, ev["minor_rows"], ev["minor_cols"], bytes.fromhex(ch))
    assert list(again.primes) == fr["primes"]
    other = fchk.challenge({**claim, "evidence": {**ev, "prime": ev["prime"] + 2}})
    assert other != ch and fchk.primes(bytes.fromhex(other), MZ, 3) != fr["primes"][:3]


@pytest.mark.parametrize("edit", ["error_log2", "prime_list", "vector_bits", "vectors", "challenge",
                                  "upper_bound", "witness", "drop_params"])
def test_every_field_of_the_freivalds_claim_is_bound(edit):
    cert = _cert(_planted(60, 4, 4))
    c = cert["claims"][0]
    p, ev = c["parameters"], c["evidence"]
    if edit == "error_log2":
        p["error_log2"] = 64
    elif edit == "prime_list":
        ev["freivalds"]["primes"][0] += 2
    elif edit == "vector_bits":
        ev["freivalds"]["vector_bits"] -= 1
        ev["freivalds"]["vectors"] += 1
    elif edit == "vectors":
        ev["freivalds"]["vectors"] += 1
    elif edit == "challenge":
        ev["freivalds"]["challenge"] = "0" * 64
    elif edit == "upper_bound":
        p["upper_bound"] = "exact"
    elif edit == "witness":
        ev["upper_witness"] = "column_span"
    else:
        del p["upper_bound"], p["error_log2"]
    from certify.checkers.statements import render
    c["statement"] = render("exact_rank", p, ev).text if edit not in ("upper_bound",) else c["statement"]
    assert not verify.verify_certificate(cert).holds, edit


def test_auto_stays_exact_where_the_exact_check_fits_its_budget():
    c = _cert(_planted(60, 4, 5), upper="auto")["claims"][0]
    assert c["evidence"]["upper_witness"] == "column_span" and "upper_bound" not in c["parameters"]
    assert "Freivalds" not in c["statement"]


def test_the_rank_command_takes_the_flag_and_verify_accepts_the_result(tmp_path, capsys):
    from certify.cli import main
    src, out = tmp_path / "m.npy", tmp_path / "c.json"
    np.save(src, _planted(50, 3, 6).astype(np.float64))
    assert main(["rank", str(src), "--upper-bound", "freivalds", "--out", str(out), "--no-progress"]) == 0
    assert "error probability <= 2^-128" in capsys.readouterr().err
    assert main(["verify", str(out)]) == 0
    assert "with error probability <= 2^-128" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["rank", str(src), "--upper-bound", "fast"])
    assert e.value.code == 2


def test_the_library_api_takes_the_mode_and_rejects_an_unknown_one(tmp_path):
    from certify import api
    from certify.core.errors import InputError
    src = tmp_path / "m.npy"
    np.save(src, _planted(40, 3, 7).astype(np.float64))
    c = api.rank_of_matrix(src, upper_bound="freivalds").claims[0]
    assert c.parameters["upper_bound"] == "freivalds" and c.evidence["upper_witness"] == "freivalds"
    assert api.rank_of_matrix(src, upper_bound="exact").claims[0].evidence["upper_witness"] == "column_span"
    with pytest.raises(InputError):
        api.rank_of_matrix(src, upper_bound="fast")


def test_the_checkers_row_elimination_is_the_pivot_minor():
    """certify.checkers.kernel.span.pivot_rows (blocks smaller than the rank): the first r rows
    outside the span of those before them and their pivot columns are python-flint's pivot minor;
    another nonsingular minor is not; a prime dividing every r x r minor gives fewer rows; a stop
    asked for (``more``) keeps the rows found before it; a large prime is left to python-flint."""
    import flint

    from certify.checkers.kernel import fmpz_matrix, pivot_minor_mod_p
    from certify.checkers.kernel.span import pivot_rows
    from certify.checkers.rank.span import pivot_rows_shared
    p = 1000003
    for trial in range(6):
        n1, n2, r = 40, 50, 6
        A = _planted(max(n1, n2), r, trial, 3)[:n1, :n2].copy()
        A[:, 7] = A[:, 3] * 2                         # a later column in the span of an earlier one
        A[[2, 30]] = A[[30, 2]]
        A[5] = A[1] - A[3]                            # a later row in the span of earlier ones
        want = pivot_minor_mod_p(fmpz_matrix(A.tolist()), p)
        assert len(want[0]) == r and pivot_rows(A, p, r, b=4) == want == pivot_rows(A, p, n1, b=7)
        R, C = want
        for k in range(r):                            # a later column instead of a pivot one
            j = next((j for j in range(C[k] + 1, n2) if j not in C and int(flint.nmod_mat(
                r, r, [int(A[i, c]) % p for i in R for c in sorted(C[:k] + C[k + 1:] + [j])], p).det())), None)
            if j is not None:
                assert pivot_rows(A, p, r, b=4) != (R, sorted(C[:k] + C[k + 1:] + [j]))
        assert pivot_rows(A, p, 3, b=4) == (R[:3], pivot_minor_mod_p(fmpz_matrix(A[R[:3]].tolist()), p)[1])
        # stopped after the first block that adds no row: the rows found before are the same
        early = pivot_rows(A, p, n1, lambda i, reduce: False, b=4)
        assert early[0] == R[:len(early[0])] and pivot_rows(A, p, len(early[0]), b=4) == early
        assert pivot_rows(A, (1 << 61) - 1, r) is None                 # python-flint decides
    q = 1048573
    D = np.diag([1, 3, q, 5]).astype(np.int64)                        # rank 4 over Q, 3 mod q
    assert pivot_rows(D, q, 4) == ([0, 1, 3], [0, 1, 3])
    # kept within one check's scratch by the number of rows found: asked with the rank, the same
    # answer; outside a scratch, and for another shape with the same digest, computed again
    from certify.checkers import scratch
    A = _planted(30, 5, 0, 3)
    with scratch.session():
        got = pivot_rows_shared(A, p, 30, digest="t", more=lambda i, reduce: False)
        assert pivot_rows_shared(A, p, 5, digest="t") is got and got == pivot_rows(A, p, 5)
        other = np.ascontiguousarray(A).reshape(A.shape[1], A.shape[0])
        assert pivot_rows_shared(other, p, 5, digest="t") == pivot_rows(other, p, 5)
    assert pivot_rows_shared(A, p, 5, digest="t") is not got


def test_a_rational_csv_source_too(tmp_path, capsys):
    """Row denominators (scale ``row_denominators``): the checker re-reads the CSV
    and runs the same test on the integer rows."""
    import csv

    from certify.cli import main
    M = _planted(45, 3, 9, 3)
    src, out = tmp_path / "m.csv", tmp_path / "c.json"
    with open(src, "w", newline="") as f:
        csv.writer(f).writerows([[f"{v}/{i % 3 + 1}" for v in row] for i, row in enumerate(M.tolist())])
    assert main(["rank", str(src), "--upper-bound", "freivalds", "--out", str(out), "--no-progress"]) == 0
    cert = json.loads(out.read_text())
    assert cert["claims"][0]["evidence"]["scale"]["kind"] == "row_denominators"
    assert cert["claims"][0]["evidence"]["upper_witness"] == "freivalds"
    assert main(["verify", str(out)]) == 0
    capsys.readouterr()


def test_the_kernel_test_skips_a_prime_at_which_the_minor_is_singular_and_keeps_counting():
    # M = A[R, C] has det 3: the candidate 3 is skipped and the next two primes are taken; on a
    # rank r + 1 matrix the test fails and still names the m primes the rule gives (the first m at
    # which M is invertible), so the checker can compare them with the certificate's
    import flint
    q1, q2 = [q for q in range((1 << 61) + 1, (1 << 61) + 400, 2) if flint.fmpz(q).is_prime()][:2]
    A = np.array([[1, 0], [0, 1], [2, 5], [7, 1]]) @ np.array([[1, 0, 1, 4], [0, 3, 6, 2]])   # rank 2
    X = np.array([[1], [2], [3], [4]], dtype=np.int64)
    assert round(np.linalg.det(A[:2, :2])) == 3
    assert fker.test(A, [0, 1], [0, 1], X, iter([3, q1, q2]), 2) == (True, [q1, q2])
    B = A.copy()
    B[3, 3] += 1                                                            # rank 3
    assert fker.test(B, [0, 1], [0, 1], X, iter([3, q1, q2, 5]), 2) == (False, [q1, q2])
    assert fker.test(A, [0, 1], [0, 1], X, iter([3, q1]), 2) == (True, [q1])     # candidates run out
