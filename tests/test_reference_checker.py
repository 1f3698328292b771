"""``certify verify --reference``: the independent slow path (certify/reference/).

(a) it ends with the same exit code as the fast ``verify`` on the committed
certificates (a representative subset of every claim kind here, all of them with
``--runslow``; the checkpoint ones with ``--replay-extraction`` too);
(b) it rejects planted wrong certificates made from genuine ones, refuses what it
cannot read exactly (exit 2), and reads what it reads exactly (an int64 of -2^63).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from committed import ROOT, report_json

from certify.cli.rank import main as rank_main
from certify.cli.verify import main as verify_main
from certify.core.errors import InputError
from certify.reference import check as ref
from certify.reference import files
from certify.reference.exact import Refused

#: every committed certificate (of any version: one that is no longer read is refused by both)
COMMITTED = [p for p in report_json() if '"certify-attention/certificate/' in p.read_text()]
CURRENT = '"certify-attention/certificate/3"'


def current(path: Path) -> None:
    """Skip a committed certificate that is not yet re-made in the current version."""
    if CURRENT not in path.read_text():
        pytest.skip(f"{path.name} is not yet re-made as certificate/3")


def verify(*args: str) -> int:
    """``certify verify ARGS`` in this process: its exit code (2 for a refused input)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            return verify_main(list(args))
    except InputError:
        return 2


def reference_json(*args: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        verify_main(["--reference", "--json", *args])
    return json.loads(out.getvalue())


def produce(tmp_path: Path, matrix: np.ndarray, name: str = "M.npy", *extra: str) -> Path:
    """A genuine certificate of ``matrix`` by the producer (``certify rank``)."""
    src = tmp_path / name
    np.save(src, matrix)
    cert = tmp_path / (name + ".cert.json")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert rank_main([str(src), "--out", str(cert), *extra]) == 0
    return cert


def edit(cert: Path, fn) -> Path:
    obj = json.loads(cert.read_text())
    fn(obj)
    out = cert.with_name("edited-" + cert.name)
    out.write_text(json.dumps(obj))
    return out


def rebind(cert: dict, path: Path) -> None:
    """Point every claim of ``cert`` and its inputs at the new content of the file
    ``path`` (its sha256): what a forger who replaced the file would do."""
    sha = files.sha256_file(path)
    for name in list(cert["inputs"]):
        if Path(name).name == path.name:
            cert["inputs"][name] = sha
    for c in cert["claims"]:
        if Path(str(c["parameters"].get("source"))).name == path.name:
            c["parameters"]["source_sha256"] = sha


# ---------------------------------------------------------------- (a) the same exit codes

def _committed(name: str) -> Path:
    return ROOT / "reports" / name


#: one or more of every claim kind and evidence form among the committed certificates
SUBSET = ["reference/bounds.json",                                  # bound (Lemma 3/4, Thm 5/6)
          "reference/feasibility-r8-real.json",                     # infeasible: chains + Lemma 4
          "reference/feasibility-r15-nonnegative.json",             # feasible witness, paper class
          "reference/feasibility-r12-real.json",                    # feasible unknown
          "feasibility/bracket-greedy-12-6-3-nonnegative.json",     # infeasible: convex dual
          "reference/cube-kernel.json",                             # construction (exit 4 unreplayed)
          "reference/theorems.json",                                # theorem: Thm 1 (balls), Thm 6, Thm 8
          "transcript/random-M12-s3-h6-q4.cert.json",               # transcript collisions, an error
          "gallery/fla-linear-attn/certificate.json"]               # third-party head (exit 4)


@pytest.mark.parametrize("name", SUBSET)
def test_same_exit_code_as_verify(name):
    current(_committed(name))
    path = str(_committed(name))
    fast = verify(path)
    assert fast in (0, 4)
    assert verify("--reference", path) == fast


@pytest.mark.parametrize("name", ["gallery/fla-linear-attn/certificate.json",
                                  "reference/checkpoint-paper51-lookup-r8-s0.json"])
def test_same_exit_code_with_replay(name):
    """Replayed: the features come from the replay's file, hashed and re-derived here;
    the r8 checkpoint also has a refuted correctness and gap claim (exact counterexamples)."""
    current(_committed(name))
    path = str(_committed(name))
    assert verify("--replay-extraction", path) == 0
    doc = reference_json("--replay-extraction", path)
    assert doc["exit_code"] == 0 and doc["holds"] and not doc["assumptions"]
    assert {c["kind"] for c in doc["claims"]} >= {"exact_rank", "eps_rank", "nonnegative"}


@pytest.mark.slow
@pytest.mark.parametrize("path", COMMITTED, ids=[str(p.relative_to(ROOT / "reports")) for p in COMMITTED])
def test_every_committed_certificate(path):
    assert verify("--reference", str(path)) == verify(str(path))
    if '"adapter"' in path.read_text() and CURRENT in path.read_text():
        assert verify("--reference", "--replay-extraction", str(path)) \
            == verify("--replay-extraction", str(path)) == 0


def test_committed_set_is_the_expected_one():
    assert len(COMMITTED) == 38
    assert sum(CURRENT in p.read_text() for p in COMMITTED) >= 14


def test_assume_and_unknown_assume():
    path = str(_committed("reference/cube-kernel.json"))
    assert verify("--reference", "--assume", "extraction", path) == 0
    assert verify("--reference", "--assume", "nonsense", path) == 2


# ---------------------------------------------------------------- (b) planted wrong certificates

def _rank4(n: int = 6) -> np.ndarray:
    rng = np.random.default_rng(7)
    return (rng.integers(-3, 4, (n, 4)) @ rng.integers(-3, 4, (4, n))).astype(np.float64)


def test_rank_claimed_one_too_low_fails(tmp_path):
    M = _rank4()
    assert np.linalg.matrix_rank(M) == 4
    cert = produce(tmp_path, M)
    assert verify("--reference", str(cert)) == 0

    def lie(c):                                 # rank 3, with a 3x3 minor and the column-span witness
        ev = c["claims"][0]["evidence"]
        ev["rank_lower"] = ev["rank_upper"] = 3
        ev["minor_rows"], ev["minor_cols"] = ev["minor_rows"][:3], ev["minor_cols"][:3]
        ev["upper_witness"] = "column_span"
    bad = edit(cert, lie)
    doc = reference_json(str(bad))
    assert doc["exit_code"] == 1
    assert "exact rank is 4" in " ".join(doc["claims"][0]["problems"])


def test_freivalds_witness_with_a_wrong_rank_fails(tmp_path):
    cert = produce(tmp_path, _rank4(8), "F.npy", "--upper-bound", "freivalds")
    obj = json.loads(cert.read_text())
    assert obj["claims"][0]["evidence"]["upper_witness"] == "freivalds"
    assert verify("--reference", str(cert)) == 0      # the rank re-derived exactly: no assumption

    def lie(c):
        ev = c["claims"][0]["evidence"]
        ev["rank_lower"] = ev["rank_upper"] = 3
    assert verify("--reference", str(edit(cert, lie))) == 1


def test_eps_rank_off_by_one_fails(tmp_path):
    cert = produce(tmp_path, _rank4(), "E.npy", "--eps", "1/100")
    assert verify("--reference", str(cert)) == 0
    for delta in (1, -1):
        def lie(c, d=delta):
            e = next(x for x in c["claims"] if x["kind"] == "eps_rank")
            e["evidence"]["k"] += d
        doc = reference_json(str(edit(cert, lie)))
        assert doc["exit_code"] == 1
        assert any("singular values > eps" in p for c in doc["claims"] for p in c["problems"])


def test_longdouble_source_is_refused(tmp_path):
    """[[1, 1 + 2^-60], [1, 1]] in longdouble has rank 2; read as float64 it has rank 1."""
    cert = produce(tmp_path, np.ones((2, 2)), "L.npy")
    src = tmp_path / "L.npy"
    ld = np.array([[1, 1], [1, 1]], dtype=np.longdouble)
    ld[0, 1] += np.longdouble(2) ** -60
    if ld[0, 1] == 1:
        pytest.skip("this platform's longdouble is float64")
    np.save(src, ld)
    bad = edit(cert, lambda c: rebind(c, src))
    shutil.copy(bad, cert)
    assert verify("--reference", str(cert)) == 2
    with pytest.raises(Refused, match="longdouble"):
        files.read_source(src, "L.npy")


def test_int64_minimum_is_read_exactly(tmp_path):
    """[[-2^63, -2^62], [2, 1]] has rank 1 (det = -2^63 + 2^63 = 0); |-2^63| does not fit int64."""
    M = np.array([[-2 ** 63, -2 ** 62], [2, 1]], dtype=np.int64)
    cert = produce(tmp_path, M, "I.npy")
    assert files.read_source(tmp_path / "I.npy", "I.npy")["matrix"][0][0] == -(1 << 63)
    assert verify("--reference", str(cert)) == 0
    obj = json.loads(cert.read_text())
    assert obj["claims"][0]["evidence"]["rank_upper"] == 1

    def lie(c):
        ev = c["claims"][0]["evidence"]
        ev["rank_lower"] = ev["rank_upper"] = 2
    assert verify("--reference", str(edit(cert, lie))) == 1


def test_shape_matters(tmp_path):
    """A 6x6 matrix certified, then its file replaced by a 4x9 matrix of the same 36
    numbers (hashes updated): the reference reads the file's shape."""
    M = _rank4(6)
    cert = produce(tmp_path, M, "S.npy")
    src = tmp_path / "S.npy"
    np.save(src, M.reshape(4, 9))

    def swap(c):
        rebind(c, src)
        for cl in c["claims"]:
            cl["evidence"].pop("matrix", None)     # re-read from the file
    bad = edit(cert, swap)
    doc = reference_json(str(bad))
    assert doc["exit_code"] == 1
    assert any("shape" in p for c in doc["claims"] for p in c["problems"])


def test_feasible_witness_failing_one_input_fails():
    src = _committed("reference/feasibility-r15-nonnegative.json")
    obj = json.loads(src.read_text())
    g = obj["claims"][0]["evidence"]["witness"]["g"]
    g[0][2] = str(Fraction(g[0][2]) + 7)          # one value of one query's lookup table
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        bad = Path(d) / "bad.json"
        bad.write_text(json.dumps(obj))
        doc = reference_json(str(bad))
    assert doc["exit_code"] == 1
    assert any(">= 1/2" in p for p in doc["claims"][0]["problems"])


def test_infeasible_rank_above_the_derivation_fails(tmp_path):
    obj = json.loads(_committed("reference/feasibility-r8-real.json").read_text())
    d = obj["claims"][0]["evidence"]["derivation"]
    obj["claims"][0]["parameters"]["rank"] = d["max_infeasible_rank"] + 1
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(obj))
    doc = reference_json(str(bad))
    assert doc["exit_code"] == 1 and "not excluded" in " ".join(doc["claims"][0]["problems"])


def test_edited_embedded_features_fail_their_hash():
    """The embedded features of a gallery head, one entry's sign flipped: the features'
    hash no longer matches, so every claim on them fails."""
    current(_committed("gallery/fla-linear-attn/certificate.json"))
    obj = json.loads(_committed("gallery/fla-linear-attn/certificate.json").read_text())
    ev = obj["claims"][0]["evidence"]
    row = ev["features"]["phi_k"][0]
    j = next(j for j, v in enumerate(row) if v)
    row[j] = -row[j]                                # still a float64, another kernel
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        bad = Path(d) / "bad.json"
        bad.write_text(json.dumps(obj))
        doc = reference_json(str(bad))
    assert doc["exit_code"] == 1
    assert any("features_sha256 is not the hash" in p for c in doc["claims"] for p in c["problems"])


def test_bound_with_a_wrong_value_fails(tmp_path):
    obj = json.loads(_committed("reference/bounds.json").read_text())
    obj["claims"][1]["evidence"]["rank_bound"] += 1
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(obj))
    doc = reference_json(str(bad))
    assert doc["exit_code"] == 1 and not doc["claims"][1]["holds"] and doc["claims"][0]["holds"]


# ---------------------------------------------------------------- pins and limits

def test_paper51_pins_are_the_builders():
    from certify.core.families.chain import paper51_family
    from certify.reference.families import PAPER51_SHA256, PAPER51_TOKENS
    fam = paper51_family()
    assert fam.sha256 == PAPER51_SHA256
    assert len(fam.tokens) == PAPER51_TOKENS[0]


def test_size_limit_refuses_with_one_line(tmp_path, monkeypatch):
    from certify.reference import exact
    cert = produce(tmp_path, _rank4(8), "B.npy")
    monkeypatch.setattr(exact, "MAX_MATRIX_ENTRIES", 63)
    with pytest.raises(Refused, match="8 x 8 = 64 entries, above the reference checker's limit of 63"):
        ref.check_many([("c", json.loads(cert.read_text()), tmp_path)])


def test_reference_imports_no_fast_checker_module():
    import subprocess
    import sys
    code = ("import sys, certify.reference.check, certify.reference.claims; "
            "bad = [m for m in sys.modules if m.startswith(('certify.checkers.', 'certify.core', "
            "'models', 'solvers', 'torch')) and m not in ('certify.checkers.schema', "
            "'certify.checkers.reading', 'certify.checkers.kinds', 'certify.checkers.fields', "
            "'certify.checkers.statements', 'certify.checkers.names', 'certify.checkers.scratch')]; "
            "print(bad); sys.exit(bool(bad))")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0
