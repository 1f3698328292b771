"""The numerical rank of a float matrix (``numerical_rank``): the count numpy.linalg.matrix_rank
makes, certified two-sided by the kernel's rigorous float bounds (certify/checkers/kernel/singular.py),
an undecided count left unknown, and forged counts and enclosures refused by ``certify verify`` and
by the reference checker."""

from __future__ import annotations

import contextlib
import io
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from certify.checkers.kernel.singular import singular_bounds
from certify.checkers.statements import render
from certify.cli.rank import main as rank_main
from tests.oracle.runner import verify_exit


def _gauss(n: int, r: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, r)) @ rng.standard_normal((r, n))


def _rank(tmp: Path, A: np.ndarray, *args: str) -> tuple[int, dict, Path]:
    np.save(tmp / "m.npy", A)
    out = tmp / "c.json"
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        rc = rank_main([str(tmp / "m.npy"), "--out", str(out), "--no-progress", *args])
    return rc, json.loads(out.read_text()), out


def _claim(cert: dict) -> tuple[int, dict]:
    return next((i, c) for i, c in enumerate(cert["claims"]) if c["kind"] == "numerical_rank")


def _verify(path: Path, reference: bool = False) -> int:
    return verify_exit([path], reference=reference)


def _write(cert: dict, path: Path, i: int) -> Path:
    c = cert["claims"][i]
    c["statement"] = render(c["kind"], c["parameters"], c["evidence"]).text
    path.write_text(json.dumps(cert))
    return path


@pytest.mark.parametrize("n", [80, 130])
def test_gaussian_product_rank_64_is_numpys_count_proved(tmp_path, n):
    A = _gauss(n, 64)
    rc, cert, path = _rank(tmp_path, A)
    i, c = _claim(cert)
    assert rc == 0 and c["verdict"] == "proved"
    assert c["evidence"]["k_lower"] == c["evidence"]["k_upper"] == np.linalg.matrix_rank(A) == 64
    s1 = np.linalg.svd(A, compute_uv=False)[0]
    lo, hi = (Fraction(v) for v in c["evidence"]["sigma_max"])
    assert lo <= Fraction(float(s1)) * (1 + Fraction(1, 10 ** 12)) and Fraction(float(s1)) <= hi * (1 + Fraction(1, 10 ** 12))
    assert "different question" in c["statement"] and "matrix_rank" in c["statement"]
    assert _verify(path) == 0
    assert _verify(path, reference=True) == 0


def test_numerical_only_and_a_stated_tolerance(tmp_path):
    A = _gauss(70, 5, seed=3)
    s = np.linalg.svd(A, compute_uv=False)
    rc, cert, path = _rank(tmp_path, A, "--numerical-only", "--tol", "1/1000")
    assert [c["kind"] for c in cert["claims"]] == ["numerical_rank"] and rc == 0
    c = cert["claims"][0]
    assert c["parameters"]["tol"] == "1/1000" and c["evidence"]["sigma_max"] is None
    assert c["evidence"]["k_lower"] == c["evidence"]["k_upper"] == int(np.sum(s > 1e-3)) == 5
    assert _verify(path) == 0 and _verify(path, reference=True) == 0


def test_an_integer_matrix_gets_no_numerical_rank_unless_asked(tmp_path):
    A = (np.arange(12).reshape(3, 4) % 5).astype(np.float64)
    rc, cert, _ = _rank(tmp_path, A)
    assert [c["kind"] for c in cert["claims"]] == ["exact_rank"]
    rc, cert, path = _rank(tmp_path, A, "--tol", "1/2")
    assert [c["kind"] for c in cert["claims"]] == ["exact_rank", "numerical_rank"]
    assert _verify(path) == 0


def test_a_singular_value_at_the_tolerance_is_unknown_not_a_wrong_count(tmp_path):
    """diag(1, 2^-20, 80 x 2^-52, 2^-60, ...): sigma_3 is numpy's tolerance itself (sigma_1 = 1, N = 80),
    inside every enclosure of it; with a stated tol = 2^-20, sigma_2 is the tolerance."""
    d = np.zeros(80)
    d[:4] = [1.0, 2.0 ** -20, 80 * 2.0 ** -52, 2.0 ** -60]
    A = np.diag(d)
    rc, cert, path = _rank(tmp_path, A, "--numerical-only")
    c = cert["claims"][0]
    assert rc == 1 and c["verdict"] == "unknown" and c["reason"]
    assert (c["evidence"]["k_lower"], c["evidence"]["k_upper"]) == (2, 3)
    assert "undecided" in c["statement"]
    assert _verify(path) == 0 and _verify(path, reference=True) == 0
    rc, cert, path = _rank(tmp_path, A, "--numerical-only", "--tol", f"1/{1 << 20}")
    c = cert["claims"][0]
    assert c["verdict"] == "unknown" and (c["evidence"]["k_lower"], c["evidence"]["k_upper"]) == (1, 2)
    assert _verify(path) == 0 and _verify(path, reference=True) == 0


@pytest.mark.parametrize("edit", ["count+1", "count-1", "sigma-high", "sigma-low", "tol", "verdict"])
def test_forged_counts_and_enclosures_are_refused_by_both_checkers(tmp_path, edit):
    A = _gauss(40, 6, seed=1)
    _, cert, path = _rank(tmp_path, A, "--numerical-only")
    i, c = _claim(cert)
    ev = c["evidence"]
    k, (lo, hi) = ev["k_lower"], (Fraction(v) for v in ev["sigma_max"])
    if edit in ("count+1", "count-1"):
        ev["k_lower"] = ev["k_upper"] = k + (1 if edit == "count+1" else -1)
    elif edit == "sigma-high":              # an enclosure above sigma_1
        ev["sigma_max"] = [str(hi * 2), str(hi * 3)]
    elif edit == "sigma-low":
        ev["sigma_max"] = [str(lo / 3), str(lo / 2)]
    elif edit == "tol":
        ev["tol_upper"] = str(Fraction(ev["tol_upper"]) * 2)
    else:
        c["verdict"], c["reason"] = "unknown", "forged"
    if edit.startswith("sigma"):            # a consistent forger re-derives the tolerance's ends
        lo2, hi2 = (Fraction(v) for v in ev["sigma_max"])
        ev["tol_lower"], ev["tol_upper"] = (str(v * 40 / Fraction(1 << 52)) for v in (lo2, hi2))
    forged = _write(cert, tmp_path / "forged.json", i)
    assert _verify(forged) == 1
    assert _verify(forged, reference=True) == 1


def test_the_bounds_hold_on_planted_spectra():
    """Planted singular values, distinct powers of two (exact orthogonal factors: signed
    permutations): every lower bound is below its sigma, sigma_1 below the upper bound and sigma_{k+1}^2 below delta_sq."""
    rng = np.random.default_rng(5)
    n = 60
    s = np.sort(2.0 ** rng.choice(np.arange(-120, 10), n, replace=False).astype(float))[::-1]
    P = np.eye(n)[rng.permutation(n)] * rng.choice([-1.0, 1.0], n)
    Q = np.eye(n)[rng.permutation(n)]
    A = P @ np.diag(s) @ Q.T                       # exact: one nonzero per row and column
    for k in (0, 1, 7, 30, n):
        b = singular_bounds(A, k)
        assert b is not None
        assert all(lo <= Fraction(float(v)) for lo, v in zip(b.lower, s))
        assert Fraction(float(s[0])) <= b.sigma1_upper
        if k < n:
            assert Fraction(float(s[k])) ** 2 <= b.delta_sq
    assert singular_bounds(A, 7).lower[6] > Fraction(float(s[6])) / 4      # and not vacuous at a gap


def test_a_features_source_is_refused_with_tol(tmp_path):
    q = np.ones((4, 2)) / 3
    np.savez(tmp_path / "f.npz", phi_q=q, phi_k=q)
    with contextlib.redirect_stderr(io.StringIO()):
        from certify.cli import run
        assert run("rank", [str(tmp_path / "f.npz"), "--tol", "1/10", "--tokens", "index"]) == 2


def test_a_widened_bracket_is_refused_and_the_least_is_re_derived(tmp_path):
    """k_upper is the least rank the bounds settle: diag(1, 2^-20, 80 x 2^-52, ...) gives [2, 3];
    widened to [2, 4] (true, looser) it fails verify; the trivial bracket [2, 80] too, since a rank
    of its window (3) settles the rest. The reference checker decides truth only: both hold there."""
    d = np.zeros(80)
    d[:4] = [1.0, 2.0 ** -20, 80 * 2.0 ** -52, 2.0 ** -60]
    _, cert, path = _rank(tmp_path, np.diag(d), "--numerical-only")
    i, c = _claim(cert)
    assert (c["evidence"]["k_lower"], c["evidence"]["k_upper"]) == (2, 3)
    for wide in (4, 80):
        c["evidence"]["k_upper"] = wide
        forged = _write(cert, tmp_path / f"wide{wide}.json", i)
        assert _verify(forged) == 1
        assert _verify(forged, reference=True) == 0


def test_rank_zero_upper_bound_is_the_frobenius_norm_not_sigma_2(tmp_path):
    """A rank-1 matrix (sigma_1 = 8, sigma_2 = 0) at a stated tol = 1/2: a forged "0 singular values
    exceed tol" must fail -- the bounds at rank 1 prove sigma_2 <= tol, which says nothing of
    sigma_1; the upper bound at k_upper = 0 is read at rank 0."""
    u = np.zeros(30)
    u[:4] = 1.0
    A = 2.0 * np.outer(u, u)                               # sigma_1 = 2 * 4 = 8
    _, cert, path = _rank(tmp_path, A, "--numerical-only", "--tol", "1/2")
    i, c = _claim(cert)
    assert c["verdict"] == "proved" and c["evidence"]["k_lower"] == c["evidence"]["k_upper"] == 1
    c["evidence"]["k_lower"] = c["evidence"]["k_upper"] = 0
    forged = _write(cert, tmp_path / "zero.json", i)
    assert _verify(forged) == 1
    assert _verify(forged, reference=True) == 1
    _, cert, path = _rank(tmp_path, np.zeros((6, 9)), "--numerical-only", "--tol", "1/2")
    c = _claim(cert)[1]
    assert (c["verdict"], c["evidence"]["k_lower"], c["evidence"]["k_upper"]) == ("proved", 0, 0)
    assert _verify(path) == 0 and _verify(path, reference=True) == 0
