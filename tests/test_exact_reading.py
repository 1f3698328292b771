"""Every number read from a matrix file is read exactly or refused, by both readers.

The producer (``certify.sources.files``, through ``certify.core.numbers.check_matrix`` and
``solvers.exact.dyadic``) and the checker (``certify.checkers.sources``, its own code) are fed
the same adversarial files: extreme integers (int64 -2^63 and 2^63 - 1, uint64 above 2^63),
2^53 +- 1, -0.0, subnormals, float16, Fortran order and big-endian arrays must come out as the
exact values stored, equal on both sides; NaN/Inf, longdouble, complex, object, datetime,
strings, structured arrays, a malformed header and an empty array must be refused by both.
End to end: ``certify rank`` refuses a longdouble matrix (exit 2, one line), proves the true
rank of an int64 matrix holding -2^63, and no edit of the claimed rank verifies at exit 0.
"""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from certify.checkers import verify
from certify.checkers.sources import SourceError, read_source
from certify.checkers.sources import _rows as checker_rows
from certify.checkers.statements import render
from certify.cli import rank as rank_cli
from certify.core.errors import InputError
from certify.sources.files import read_kernel_file
from solvers.exact import dyadic

ROOT = Path(__file__).resolve().parents[1]
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


def producer_values(path: Path) -> list[list[Fraction]]:
    """The exact matrix the producer certifies (its rows as rationals)."""
    k = read_kernel_file(path)
    if k.rational is not None:
        return [list(r) for r in k.rational]
    N = dyadic(k.matrix)
    f = Fraction(2) ** N.exponent
    return [[Fraction(int(v)) * f for v in row] for row in N.values.tolist()]


def checker_values(path: Path) -> list[list[Fraction]]:
    """The exact matrix ``certify verify`` re-reads from the same file."""
    return checker_rows(read_source(path)["matrix"])


def _exact(a: np.ndarray) -> list[list[Fraction]]:
    """What the array holds, exactly (Python ints, or the float each entry is)."""
    return [[Fraction(v) for v in row] for row in np.asarray(a).tolist()]


# ---------------------------------------------------------------- values read exactly

EXACT = {
    "int64-extremes": np.array([[I64_MIN, I64_MAX], [0, -1]], dtype=np.int64),
    "int64-2^53+-1": np.array([[2 ** 53 - 1, 2 ** 53 + 1], [-(2 ** 53) - 1, 3]], dtype=np.int64),
    "uint64-above-2^63": np.array([[(1 << 64) - 1, 1 << 63], [1, 0]], dtype=np.uint64),
    "float64-2^53+-1": np.array([[2.0 ** 53 - 1, 2.0 ** 53 + 2], [1.0, -(2.0 ** 53) + 1]]),
    "negative-zero": np.array([[-0.0, 1.0], [1.0, -0.0]]),
    "subnormals": np.array([[5e-324, 2.2250738585072014e-308], [-5e-324, 1.0]]),
    "float16": np.array([[0.1, 65504.0], [6e-08, -2.0]], dtype=np.float16),
    "float32": np.array([[0.1, 3.4e38], [1e-45, -2.0]], dtype=np.float32),
    "bool": np.array([[True, False], [True, True]]),
    "int8": np.array([[-128, 127], [0, 1]], dtype=np.int8),
    "fortran-order": np.asfortranarray(np.arange(12, dtype=np.int64).reshape(3, 4) - 5),
    "big-endian-float": np.array([[0.1, -3.5], [2.0 ** -60, 7.0]], dtype=">f8"),
    "big-endian-int": np.array([[I64_MIN, 2], [3, I64_MAX]], dtype=">i8"),
}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_both_readers_read_the_stored_values_exactly(tmp_path, name):
    a = EXACT[name]
    want = _exact(a)
    for suffix in (".npy", ".npz"):
        path = tmp_path / f"m{suffix}"
        np.save(path, a) if suffix == ".npy" else np.savez(path, matrix=a)
        assert producer_values(path) == want, (name, suffix)
        assert checker_values(path) == want, (name, suffix)


def test_values_that_differ_only_beyond_float64_stay_different(tmp_path):
    """2^53 + 1 as int64 is not 2^53: the integer path never goes through a float."""
    np.save(tmp_path / "a.npy", np.array([[2 ** 53 + 1]], dtype=np.int64))
    np.save(tmp_path / "b.npy", np.array([[2 ** 53]], dtype=np.int64))
    for read in (producer_values, checker_values):
        assert read(tmp_path / "a.npy") == [[2 ** 53 + 1]] != read(tmp_path / "b.npy")


def test_two_shapes_of_the_same_bytes_are_read_with_their_shapes(tmp_path):
    data = np.arange(36, dtype=np.int64)
    np.save(tmp_path / "a.npy", data.reshape(4, 9))
    np.save(tmp_path / "b.npy", data.reshape(6, 6))
    for read in (producer_values, checker_values):
        a, b = read(tmp_path / "a.npy"), read(tmp_path / "b.npy")
        assert (len(a), len(a[0]), len(b), len(b[0])) == (4, 9, 6, 6)


# ---------------------------------------------------------------- refused by both

def _refused(path: Path) -> None:
    with pytest.raises(InputError):
        producer_values(path)
    with pytest.raises(SourceError):
        checker_values(path)


REFUSED = {
    "nan": np.array([[1.0, np.nan], [0.0, 1.0]]),
    "inf": np.array([[1.0, -np.inf], [0.0, 1.0]]),
    "longdouble": np.array([[1, 1 + np.longdouble(2) ** -60], [1, 1]], dtype=np.longdouble),
    "complex": np.array([[1 + 0j, 2], [3, 4]]),
    "complex-real-valued": np.array([[1, 2], [3, 4]], dtype=np.complex128),
    "datetime": np.array([["2020-01-01", "2021-01-01"]] * 2, dtype="datetime64[D]"),
    "timedelta": np.array([[1, 2], [3, 4]], dtype="timedelta64[s]"),
    "str": np.array([["1", "2"], ["3", "4"]]),
    "bytes": np.array([[b"1", b"2"], [b"3", b"4"]]),
    "structured": np.zeros((2, 2), dtype=[("a", "<i8"), ("b", "<f8")]),
    "void": np.zeros((2, 2), dtype="V8"),
    "empty": np.zeros((0, 0)),
    "empty-rows": np.zeros((0, 3), dtype=np.int64),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_both_readers_refuse(tmp_path, name):
    a = REFUSED[name]
    np.save(tmp_path / "m.npy", a)
    _refused(tmp_path / "m.npy")
    np.savez(tmp_path / "m.npz", matrix=a)
    _refused(tmp_path / "m.npz")


def test_object_arrays_and_malformed_headers_are_refused(tmp_path):
    np.save(tmp_path / "obj.npy", np.array([[1, 2], [3, 4]], dtype=object), allow_pickle=True)
    _refused(tmp_path / "obj.npy")
    good = tmp_path / "good.npy"
    np.save(good, np.eye(3))
    raw = good.read_bytes()
    for i, bad in enumerate((raw.replace(b"'shape': (3, 3)", b"'shape': (3, 9)"),     # too short for its shape
                             raw.replace(b"'descr': '<f8'", b"'descr': '<q8'"),       # no such dtype
                             raw[:20], raw.replace(b"\x93NUMPY", b"\x93NUMPX"))):
        (tmp_path / f"bad{i}.npy").write_bytes(bad)
        _refused(tmp_path / f"bad{i}.npy")


def test_factor_files_of_inexact_dtypes_are_refused(tmp_path):
    ld = np.ones((4, 2), dtype=np.longdouble)
    np.savez(tmp_path / "f.npz", phi_q=ld, phi_k=ld)
    with pytest.raises(InputError):
        read_kernel_file(tmp_path / "f.npz")
    with pytest.raises(SourceError):
        read_source(tmp_path / "f.npz")


# ---------------------------------------------------------------- end to end

def _certify(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "certify", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)


def test_rank_refuses_a_longdouble_matrix_with_one_line(tmp_path):
    a = REFUSED["longdouble"]
    np.save(tmp_path / "ld.npy", a)
    np.savez(tmp_path / "ld.npz", matrix=a)
    for name in ("ld.npy", "ld.npz"):
        out = tmp_path / f"{name}.json"
        r = _certify("rank", str(tmp_path / name), "--out", str(out))
        assert r.returncode == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "float128" in r.stderr, r.stderr
        assert not out.exists()


def _rank_cert(tmp_path: Path, name: str, A: np.ndarray) -> dict:
    path = tmp_path / name
    np.save(path, A)
    out = tmp_path / f"{name}.json"
    assert rank_cli.main([str(path), "--out", str(out)]) == 0
    return json.loads(out.read_text())


def _exit(cert: dict, tmp_path: Path) -> int:
    return verify.verify_certificate(cert, tmp_path).exit_code()


def _with_rank(cert: dict, r: int) -> dict:
    """The certificate with its exact rank claim edited to ``r`` (statement re-rendered)."""
    c = copy.deepcopy(cert)
    claim = next(cl for cl in c["claims"] if cl["kind"] == "exact_rank")
    claim["evidence"]["rank_lower"] = claim["evidence"]["rank_upper"] = r
    claim["statement"] = render(claim["kind"], claim["parameters"], claim["evidence"]).text
    return c


def test_int64_minimum_gets_its_true_rank_and_edits_fail(tmp_path):
    A = np.diag(np.array([I64_MIN, 1, 1, 1], dtype=np.int64))
    A[1, 0] = I64_MAX
    cert = _rank_cert(tmp_path, "m.npy", A)
    claim = next(cl for cl in cert["claims"] if cl["kind"] == "exact_rank")
    assert claim["verdict"] == "proved" and "rank exactly 4" in claim["statement"]
    assert _exit(cert, tmp_path) == 0
    for r in (3, 5, 0):
        assert _exit(_with_rank(cert, r), tmp_path) != 0, r


def _forge_column_span(tmp_path: Path, A: np.ndarray, R: list[int], C: list[int]) -> dict:
    """A rank-|R| claim about the file holding ``A`` with a column-span witness and no embedded
    matrix (the checker re-reads the file), hashes made as the producer makes them."""
    from certify.checkers.kernel.hashing import array_sha256
    genuine = _rank_cert(tmp_path, "seed.npy", np.eye(3, dtype=np.int64))
    path = tmp_path / "big.npy"
    np.save(path, A)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    c = copy.deepcopy(genuine)
    c["inputs"] = {str(path): sha}
    claim = next(cl for cl in c["claims"] if cl["kind"] == "exact_rank")
    claim["parameters"].update(source=str(path), source_sha256=sha, shape=list(A.shape),
                               num_tokens=A.shape[0])
    ev = claim["evidence"]
    ev.pop("matrix", None)
    ev.update(shape=list(A.shape), matrix_sha256=array_sha256(A, ev["scale"]), minor_rows=R,
              minor_cols=C, upper_witness="column_span", rank_lower=len(R), rank_upper=len(R),
              prime=1000003)
    c["claims"] = [claim]
    claim["statement"] = render(claim["kind"], claim["parameters"], claim["evidence"]).text
    return c


def test_a_forged_lower_rank_of_an_int64_minimum_matrix_fails(tmp_path):
    """The reviewer's hole: -2^63 in a row after the minor's block of 64 rows, where the old
    checker's ``np.abs`` left it negative and the kernel's int32 cast made it -2^31 =
    -2^30 - 2^30, in the span: a rank-3 matrix verified as rank 2. Now the reader hands the
    matrix to the exact path, which finds the true rank."""
    A = np.zeros((70, 3), dtype=np.int64)
    A[0], A[1] = [1, 0, 1], [0, 1, 1]
    R = np.random.default_rng(0).integers(-3, 4, (58, 2))
    A[2:60, :2], A[2:60, 2] = R, R.sum(1)
    A[69] = [-(1 << 30), -(1 << 30), I64_MIN]
    import flint
    assert flint.fmpz_mat(A.tolist()).rank() == 3
    forged = _forge_column_span(tmp_path, A, [0, 1], [0, 1])
    assert _exit(forged, tmp_path) == 1
    A[69, 2] = -(1 << 31)                       # the matrix the old checker saw: rank 2, and it holds
    assert _exit(_forge_column_span(tmp_path, A, [0, 1], [0, 1]), tmp_path) == 0


def test_a_certificate_of_the_rounded_longdouble_matrix_fails_against_the_file(tmp_path):
    """The certificate the old reading made (the float64 rounding, rank 1) pointed at the
    longdouble file: the checker refuses the file's numbers and the claim fails."""
    ld = REFUSED["longdouble"]
    cert = _rank_cert(tmp_path, "rounded.npy", ld.astype(np.float64))
    assert "rank exactly 1" in cert["claims"][0]["statement"]
    path = tmp_path / "ld.npy"
    np.save(path, ld)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    cert["inputs"] = {str(path): sha}
    for claim in cert["claims"]:
        claim["parameters"].update(source=str(path), source_sha256=sha)
        claim["statement"] = render(claim["kind"], claim["parameters"], claim["evidence"]).text
    r = verify.verify_certificate(cert, tmp_path)
    assert r.exit_code() == 1
    assert any("not read exactly" in p for c in r.claims for p in c.problems)
