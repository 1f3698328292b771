"""Closed-form bounds (certify.core.bounds) and their independent checker."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from fractions import Fraction as F

import mpmath
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certify.checkers.closed_form import check
from certify.cli import bounds as bounds_cli
from certify.core import bounds as B
from certify.core.certificate import Certificate, ClaimKind
from certify.core.errors import InputError, UncertifiableError, run_command
from certify.core.verdict import Verdict

HALF = F(1, 2)
SETTINGS = settings(derandomize=True, max_examples=60, deadline=None)


# ----------------------------------------------------------------- Lemma 3

def test_lemma3_factor_known_values():
    assert B.lemma3_factor(3, HALF, 2) == 1          # (n-2)(d-1) = 1 * 1
    assert B.lemma3_factor(3, HALF, 3) == 2          # the 5.1 jumps of 3: factor two
    assert B.lemma3_factor(5, F(1, 4), 2) == F(3 * (2 - F(1, 2)), F(1, 2))  # = 9
    assert B.lemma3_factor(4, HALF, F(3, 2)) == 1    # exactly at the gap threshold 3/2
    assert B.lemma3_min_gap(3, HALF) == 2
    assert B.lemma3_min_gap(4, HALF) == F(3, 2)


@SETTINGS
@given(n=st.integers(3, 60), d=st.integers(2, 60))
def test_lemma3_half_is_n_minus_2_times_d_minus_1(n, d):
    assert B.lemma3_factor(n, HALF, d) == (n - 2) * (d - 1)
    assert B.lemma3_factor(n, "1/2", d) == (n - 2) * (d - 1)


@pytest.mark.parametrize("n, eps, d, what", [
    (2, HALF, 2, "n must be >= 3"),
    (3, F(0), 2, "0 < eps <= 1/2"),
    (3, F(3, 5), 2, "0 < eps <= 1/2"),
    (3, HALF, 1, "gap d >= "),
    (4, HALF, F(7, 5), "gap d >= "),       # threshold 3/2
    (3, 0.5, 2, "exact"),                  # floats are not exact input
])
def test_lemma3_hypotheses_are_enforced(n, eps, d, what):
    with pytest.raises(InputError, match=what):
        B.lemma3_factor(n, eps, d)


# ----------------------------------------------------------------- Lemma 4

def test_lemma4_paper_51_values():
    assert B.lemma4_bound(15, 4) == 8
    assert B.lemma4_rank_bound(15, 4) == 8
    assert B.lemma4_rank_bound(15, 4, strict=True) == 9
    assert B.lemma4_rank_bound(15, F(4)) == 8
    # Non-integral bound: 10 / (1 + 9/9) = 5 ; lam = 3/2: 10/(1+9*4/9) = 2
    assert B.lemma4_bound(10, 3) == 5
    assert B.lemma4_bound(10, F(3, 2)) == 2
    assert B.lemma4_rank_bound(10, F(3, 2), strict=True) == 3
    assert B.lemma4_bound(7, 2) == F(28, 10)
    assert B.lemma4_rank_bound(7, 2) == 3 and B.lemma4_rank_bound(7, 2, strict=True) == 3
    assert B.lemma4_rank_bound(1, 1, strict=True) == 1    # no off-diagonal: not strict


@SETTINGS
@given(t=st.integers(1, 300), a=st.integers(1, 50), b=st.integers(1, 50), c=st.integers(1, 50))
@example(t=15, a=4, b=1, c=1)
def test_lemma4_properties(t, a, b, c):
    lam = F(a, b)
    plain = B.lemma4_rank_bound(t, lam)
    strict = B.lemma4_rank_bound(t, lam, strict=True)
    assert strict >= plain
    assert 1 <= plain <= t and 1 <= strict <= t
    assert B.lemma4_bound(t, lam + F(1, c)) >= B.lemma4_bound(t, lam)       # monotone in lambda
    assert B.lemma4_rank_bound(t, lam + F(1, c)) >= plain
    # the integer is the least one the real bound allows
    bound = B.lemma4_bound(t, lam)
    assert plain >= bound > plain - 1
    if t >= 2:
        assert strict > bound >= strict - 1


# ----------------------------------------------------------------- per pair

def test_per_pair_hand_worked():
    res = B.rank_bound_per_pair([[None, 2], [2, None]])
    assert res.frobenius_sq_max == F(5, 2) and res.bound == F(8, 5) and res.rank_bound == 2
    # 3 x 3, entries 2, 3, 5/2 and three without a bound (count 1 each):
    lam = [[None, 2, None], [3, None, F(5, 2)], [None, 0, None]]
    res = B.rank_bound_per_pair(lam)
    fro = 3 + F(1, 4) + F(1, 9) + F(4, 25) + 1 + 1 + 1
    assert res.frobenius_sq_max == fro
    assert res.bound == 9 / fro and res.rank_bound == math.ceil(9 / fro)
    # no bound at all: t^2/(t + t(t-1)) = 1 and strictness cannot apply
    res = B.rank_bound_per_pair([[None] * 4 for _ in range(4)], strict=True)
    assert res.bound == 1 and res.rank_bound == 1 and not res.strict_applied


def test_per_pair_paper_51_numbers():
    t = 15
    lam = [[None if i == j else 4 for j in range(t)] for i in range(t)]
    lam[0][1] = lam[1][0] = 16                    # the two ordered pairs at distance 12
    res = B.rank_bound_per_pair(lam, strict=True)
    assert res.frobenius_sq_max == 15 + F(208, 16) + F(2, 256)
    assert res.bound == F(225) / (15 + F(208, 16) + F(2, 256)) == F(5760, 717)
    assert res.rank_bound == 9 and res.strict_applied
    assert B.rank_bound_per_pair(lam).rank_bound == 9


@SETTINGS
@given(t=st.integers(1, 12), a=st.integers(1, 20), b=st.integers(1, 5), strict=st.booleans())
def test_per_pair_uniform_equals_lemma4(t, a, b, strict):
    lam = F(a, b)
    res = B.rank_bound_per_pair([[lam] * t for _ in range(t)], strict=strict)
    assert res.bound == B.lemma4_bound(t, lam)
    assert res.rank_bound == B.lemma4_rank_bound(t, lam, strict=strict)


@pytest.mark.parametrize("lam", [[], [[1, 2]], [[None, -1], [1, None]], [[None, 0.5], [1, None]]])
def test_per_pair_rejects_bad_matrices(lam):
    with pytest.raises(InputError):
        B.rank_bound_per_pair(lam)


# ----------------------------------------------------------------- Thm 5

def test_thm5_51_uniform():
    r = B.thm5(15, 6, 3)                 # n = 3, eps = 1/2, jumps of 3: mu = 2, Lambda = 4
    assert (r.mu, r.steps, r.lam) == (2, 2, 4)
    assert r.bound == 8 and r.rank_bound == 9           # strict: C_SU < 1/Lambda
    assert r.weak_bound == F(15, 2) and r.weak_rank_bound == 8
    assert B.thm5(1, 6, 3).rank_bound == 1


def test_thm5_general_n_eps():
    r = B.thm5(100, 12, 2, n=6, eps=F(1, 4))   # mu = 4 * (2 - 1/2) / (1/2) = 12, 6 steps
    assert r.mu == 12 and r.steps == 6 and r.lam == 12 ** 6
    lam2 = F(12 ** 12)
    assert r.bound == F(100) / (1 + 99 / lam2)
    assert r.rank_bound == 100                 # bound just below 100, strict
    assert r.weak_bound == 50


@pytest.mark.parametrize("args, what", [
    ((15, 2, 3), "g <= Delta"),
    ((15, 6, 2), "g > 2 eps"),          # n = 3, eps = 1/2: g must exceed 2
    ((0, 6, 3), ">= 1"),
    ((15, 6, 3, 2), "n must be >= 3"),
])
def test_thm5_hypotheses_are_enforced(args, what):
    with pytest.raises(InputError, match=what):
        B.thm5(*args)


@SETTINGS
@given(G=st.integers(1, 10**6), delta=st.integers(3, 40), g=st.integers(3, 10))
def test_thm5_weak_form_never_exceeds_sharp(G, delta, g):
    if g > delta:
        return
    r = B.thm5(G, delta, g)
    assert r.rank_bound >= r.weak_rank_bound
    assert r.rank_bound <= G


# ----------------------------------------------------------------- Thm 6

@pytest.mark.parametrize("m, M", [(168, 168), (169, 168), (200, 200), (241, 240), (1000, 1000)])
def test_thm6_exponent_matches_paper(m, M):
    r = B.thm6(m)
    paper = 4 * (M // 40) - 1                   # the paper's r >= 2^(4 floor(M/40) - 1)
    assert r.M == M and r.delta == M // 8 and r.mu == 4
    assert r.log2_lower_bound == paper == r.paper_exponent
    assert B.thm6_log2_lower_bound(m) == paper
    assert r.code_hypothesis and r.code_covers_lambda and r.paper_second_inequality
    assert r.code_size_lower ** 10 >= 2 ** M       # log2 T >= M/10, exactly
    assert 10 * paper >= m - 60                     # ... >= 2^(m/10 - 6)


def test_thm6_known_exponents():
    assert B.thm6_log2_lower_bound(168) == 15       # 4 * floor(168/40) - 1
    assert B.thm6_log2_lower_bound(200) == 19       # 4 * 5 - 1
    assert B.thm6_log2_lower_bound(167) is None
    assert B.thm6(1) is None


def test_thm6_code_size_against_direct_count():
    r = B.thm6(200)
    num = math.comb(200, 100)
    den = sum(math.comb(100, a) ** 2 for a in range(25))
    assert (r.code_numerator, r.code_denominator) == (num, den)
    assert r.code_size_lower == -(-num // den)
    assert r.lam_sq_log2 == 20


def test_thm6_sharp_form():
    # with the strict Lemma 4 and T >= (Lambda^2 - 1)^2 the rank reaches Lambda^2
    r = B.thm6(168)
    assert r.code_size_lower >= (2 ** 16 - 1) ** 2
    assert r.sharp_rank_bound == 2 ** 16 and r.sharp_log2_lower_bound == 16
    r = B.thm6(1000)                                # here T < (2^100 - 1)^2: one bit less
    assert r.code_size_lower < (2 ** 100 - 1) ** 2
    assert r.sharp_log2_lower_bound == 99 == r.log2_lower_bound


def test_thm6_extended_range():
    assert B.thm6(60) is None
    r = B.thm6(60, extended=True)
    assert r.extended and r.delta == 7 and r.lam_sq_log2 == 4 and r.log2_lower_bound == 3
    assert B.thm6(39, extended=True) is None
    assert not B.thm6(168, extended=True).extended


def test_thm6_whole_paper_range_agrees():
    for m in range(168, 700, 7):
        r = B.thm6(m)
        assert r.agrees_with_paper and r.paper_second_inequality, m


def test_thm6_limit():
    with pytest.raises(UncertifiableError):
        B.thm6(B.MAX_EXACT_M + 1)


# ----------------------------------------------------------------- Cor 7

def test_cor7_hand_worked():
    r = B.cor7(40, 18)                # n - 2 = 16, s = 4: 16^(2k) >= 2^40 first at k = 5
    assert (r.M, r.k, r.delta, r.g, r.mu, r.lam) == (40, 5, 10, 2, 16, 16 ** 5)
    T = -(-math.comb(40, 20) // sum(math.comb(20, a) ** 2 for a in range(10)))
    assert r.code_size_lower == T
    lam2 = 2 ** 40
    assert r.bound == F(T * lam2, lam2 + T - 1)
    assert r.rank_bound == (T * lam2) // (lam2 + T - 1) + 1
    assert r.delta_le_quarter


def test_cor7_least_k_is_exact():
    # n - 2 = 3: ceil(M / (2 log2 3)) decided by 3^(2k) >= 2^M
    for m in range(2, 120, 3):
        r = B.cor7(m, 5)
        M = 2 * (m // 2)
        assert 9 ** r.k >= 2 ** M and (r.k == 1 or 9 ** (r.k - 1) < 2 ** M)


def test_cor7_needs_n_at_least_4():
    with pytest.raises(InputError, match="n >= 4"):
        B.cor7(100, 3)


# ----------------------------------------------------------------- Thm 1

def test_thm1_temperature_is_log6_at_n3():
    tau = B.thm1_temperature(3, HALF)
    assert tau.ratio == 6
    with mpmath.workdps(40):
        assert abs(tau.value(40) - mpmath.log(6)) < mpmath.mpf(10) ** -35
    assert B.thm1_temperature(8, F(1, 4)).ratio == 32
    with pytest.raises(InputError):
        B.thm1_temperature(3, 0)


# ----------------------------------------------------------------- Thm 9 / Eq. 8

def test_eq8_exact_comparisons():
    assert B.bits_needed(3, 8) == 16                   # 4^8 = 2^16
    assert B.transcript_bound_holds(16, 3, 8)          # equality holds
    assert not B.transcript_bound_holds(15, 3, 8)
    assert B.bits_needed(2, 5) == 8                    # 3^5 = 243 <= 256, > 128
    assert not B.transcript_bound_holds(7, 2, 5)
    assert B.bits_available(2, 3, 4, 5, 6) == 2 * 3 * 4 * 6 * 6
    assert B.alphabets_suffice([256, 256], 3, 8)
    assert not B.alphabets_suffice([256, 255], 3, 8)
    assert B.alphabets_suffice([243], 2, 5) and not B.alphabets_suffice([242], 2, 5)
    assert B.minimal_bits_per_coordinate(1, 1, 2, 3, 3, 8) == 2   # 8 bits per p, 16 needed
    assert B.minimal_bits_per_coordinate(1, 1, 2, 3, 3, 9) == 3   # 18 needed
    e = B.eq8(1, 1, 2, 3, 1, 3, 8)
    assert not e.holds and e.bits_available == 8 and e.bits_needed == 16


@SETTINGS
@given(s=st.integers(1, 40), q=st.integers(1, 60))
def test_bits_needed_is_least(s, q):
    b = B.bits_needed(s, q)
    assert 2 ** b >= (s + 1) ** q > 2 ** (b - 1)


# ----------------------------------------------------------------- Prop 10

def test_prop10_at_32():
    r = B.prop10(32)
    assert (r.s, r.M, r.h) == (6, 24, 12)           # 32^6 = 2^30 <= 2^32 < 32^7
    den = sum(math.comb(12, a) ** 2 for a in range(7))
    assert r.greedy_denominator == den and r.greedy_numerator == math.comb(24, 12)
    assert r.greedy_lower == 2 and r.paper_lower == 0 and r.radius_legal


def test_prop10_s_is_floor_m_over_log2m():
    with mpmath.workdps(60):
        for m in list(range(32, 400)) + [1024, 4096]:
            s = B.prop10_s(m)
            x = mpmath.mpf(m) / mpmath.log(m, 2)
            # an oracle with a margin: never near an integer for these m except powers of 2
            assert s == int(mpmath.floor(x + mpmath.mpf(10) ** -40)), m


def test_prop10_greedy_dominates_paper_form():
    for m in (32, 64, 200, 1000, 4096):
        r = B.prop10(m)
        assert r.greedy_lower >= r.paper_lower
        assert r.h > r.s + 1
    assert B.prop10(4096).paper_lower > 0
    with pytest.raises(InputError, match="m >= 32"):
        B.prop10(31)


# ----------------------------------------------------------------- exact input

@pytest.mark.parametrize("bad", [0.5, "nan", "inf", "1/0", "", "x", True, None])
def test_as_fraction_rejects_inexact(bad):
    with pytest.raises(InputError):
        B.as_fraction(bad, "v")


def test_as_fraction_accepts_exact():
    assert B.as_fraction("1/2", "v") == HALF
    assert B.as_fraction("0.25", "v") == F(1, 4)
    assert B.as_fraction(3, "v") == 3


# ----------------------------------------------------------------- claims + checker

def _claims():
    return [B.bound_claim(r) for r in [
        B.lemma3(3, HALF, 3), B.lemma3(7, F(1, 3), F(5, 2)), B.lemma4(15, 4), B.lemma4(15, 4, True),
        B.rank_bound_per_pair([[None, 2, 3], [None, None, F(7, 2)], [1, 2, None]], strict=True),
        B.thm5(15, 6, 3), B.thm5(100, 12, 2, n=6, eps=F(1, 4)), B.thm6(168), B.thm6(201),
        B.thm6(50, extended=True), B.cor7(60, 18), B.eq8(1, 1, 2, 3, 2, 3, 8),
        B.eq8(1, 1, 2, 3, 1, 3, 8), B.prop10(40)]]


def test_claims_are_proved_and_rechecked():
    claims = _claims()
    cert = Certificate(claims=claims, command=["test"])
    obj = json.loads(cert.dumps())
    for c in claims:
        assert c.kind is ClaimKind.BOUND and c.verdict is Verdict.PROVED
    for cl in obj["claims"]:
        assert check(cl, obj) == [], cl["parameters"]


def _tamper(claim_json, field, value):
    cl = copy.deepcopy(claim_json)
    cl["evidence"][field] = value
    return cl


def test_checker_catches_planted_errors():
    lemma4 = B.bound_claim(B.lemma4(15, 4)).to_json()
    assert check(_tamper(lemma4, "rank_bound", 9), {})            # 9 is the strict value only
    assert check(_tamper(lemma4, "bound", "8.0"), {})
    assert check(_tamper(lemma4, "bound", 8.0), {})                # floats are not evidence
    t6 = B.bound_claim(B.thm6(168)).to_json()
    assert check(_tamper(t6, "log2_lower_bound", 16), {})
    assert check(_tamper(t6, "code_size_lower", t6["evidence"]["code_size_lower"] + 1), {})
    assert check(_tamper(t6, "code_hypothesis", 1), {})            # bool, not int
    pp = B.bound_claim(B.rank_bound_per_pair([[None, 2], [2, None]], strict=True)).to_json()
    assert check(_tamper(pp, "rank_bound", 3), {})
    # a changed parameter no longer matches its evidence
    t5 = B.bound_claim(B.thm5(15, 6, 3)).to_json()
    t5x = copy.deepcopy(t5)
    t5x["parameters"]["code_size"] = 16
    assert check(t5x, {})
    # a violated hypothesis with consistent evidence still cannot be proved
    bad = copy.deepcopy(t5)
    bad["parameters"]["g"] = 2                                      # g > 2 eps (n-1)/(n-2) fails
    bad["evidence"].update({"mu": "1", "steps": 3, "lam": "1", "bound": "1", "rank_bound": 1,
                            "weak_bound": "1/2", "weak_rank_bound": 1})
    problems = check(bad, {})
    assert any("hypothesis" in p for p in problems)
    # missing / extra evidence, wrong verdict, unknown bound
    cl = copy.deepcopy(lemma4)
    del cl["evidence"]["bound"]
    assert check(cl, {})
    cl = _tamper(lemma4, "bonus", 1)
    assert check(cl, {})
    cl = copy.deepcopy(lemma4)
    cl["verdict"] = "refuted"
    assert check(cl, {})
    cl = copy.deepcopy(lemma4)
    cl["parameters"]["bound"] = "lemma99"
    assert check(cl, {})
    assert check({"kind": "exact_rank"}, {})


def test_bound_claim_rejects_non_results():
    with pytest.raises(TypeError):
        B.bound_claim(42)


# ----------------------------------------------------------------- command

def test_cli_json(capsys):
    assert bounds_cli.main(["--m", "200", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["thm6_log2_lower_bound"] == 19
    assert obj["thm6"]["agrees_with_paper"] is True
    assert obj["thm1"]["ratio"] == "6"
    assert obj["lemma3"]["factor"] == "1"
    assert obj["cor7"] is None                       # n = 3
    assert obj["prop10"]["s"] == 26


def test_cli_small_m_and_n(capsys):
    assert bounds_cli.main(["--m", "100", "--n", "18", "--eps", "1/4", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["thm6_log2_lower_bound"] is None
    assert obj["thm6_extended_log2_lower_bound"] == 7     # M = 100: 4 * 2 - 1
    assert obj["cor7"]["delta"] == 26                     # 16^(2k) >= 2^100 first at k = 13
    assert obj["eps"] == "1/4" and obj["thm1"]["ratio"] == "72"
    assert bounds_cli.main(["--m", "1", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["thm6"] is None and obj["prop10"] is None and obj["eq8"] is None


def test_cli_table_goes_to_stderr(capsys):
    assert bounds_cli.main(["--m", "168"]) == 0
    out = capsys.readouterr()
    assert out.out == "" and "r >= 2^15" in out.err and "agrees" in out.err


def test_cli_out_certificate(tmp_path, capsys):
    path = tmp_path / "bounds.json"
    assert bounds_cli.main(["--m", "170", "--n", "20", "--out", str(path)]) == 0
    cert = Certificate.read(path)
    assert cert.all_proved and len(cert.claims) == 4   # lemma3, thm6, cor7, prop10
    obj = json.loads(path.read_text())
    assert all(check(cl, obj) == [] for cl in obj["claims"])


@pytest.mark.parametrize("argv, code", [
    (["--m", "0"], 2), (["--m", "10", "--n", "2"], 2), (["--m", "10", "--eps", "0.6"], 2),
    (["--m", "10", "--eps", "half"], 2), (["--m", "ten"], 2), (["--m", "10", "--eps", "0"], 2),
    (["--m", str(B.MAX_EXACT_M + 1)], 3),
])
def test_cli_bad_input(argv, code, capsys, tmp_path):
    out = tmp_path / "c.json"
    assert run_command("certify bounds", bounds_cli.main, argv + ["--out", str(out)]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("certify bounds:")
    assert not out.exists()


def test_cli_subprocess_exit_2():
    proc = subprocess.run([sys.executable, "-m", "certify", "bounds", "--m", "0", "--json"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2
    assert json.loads(proc.stdout) == {"error": "--m must be >= 1, got 0", "exit_code": 2}   # --json: one object
    assert len(proc.stderr.strip().splitlines()) == 1 and "m" in proc.stderr
