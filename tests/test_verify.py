"""certify verify: parsing, dispatch, exit codes, input hashes, import hygiene."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from certify.checkers import verify
from certify.checkers.common import NotACertificate
from certify.checkers.statements import RENDERER, render
from certify.cli import bounds as bounds_cli
from certify.core.certificate import SCHEMA, ClaimKind
from certify.core.files import sha256_bytes

ROOT = Path(__file__).resolve().parent.parent


def _cert(*claims, inputs=None):
    return {"schema": SCHEMA, "renderer": RENDERER, "created": "", "command": ["test"],
            "inputs": inputs or {}, "seeds": {}, "environment": {}, "claims": list(claims)}


_LEMMA3 = ({"bound": "lemma3", "n": 3, "eps": "1/2", "d": "3"}, {"gap_threshold": "2", "factor": "2"})


def _claim(kind="bound", verdict="proved", reason=None, evidence=None):
    params, ev = _LEMMA3
    ev = ev if evidence is None else evidence
    statement = render("bound", params, ev).text if kind == "bound" else "a statement"
    return {"kind": kind, "statement": statement, "verdict": verdict, "parameters": params,
            "evidence": ev, "method": "m", "reason": reason, "timings": {}}


@pytest.fixture
def fake_checker(monkeypatch):
    """A checker module 'certify.checkers._fake' whose answer the test sets."""
    mod = types.ModuleType("certify.checkers._fake")
    mod.answer = []

    def check(claim, cert):
        if mod.answer == "raise":
            raise KeyError("evidence")
        return list(mod.answer)

    mod.check = check
    monkeypatch.setitem(sys.modules, "certify.checkers._fake", mod)
    monkeypatch.setitem(verify.CHECKERS, "bound", "_fake")
    return mod


def test_every_claim_kind_has_a_checker_area():
    assert set(verify.CHECKERS) == {k.value for k in ClaimKind}


def test_checker_answer_decides(fake_checker):
    cert = _cert(_claim())
    assert verify.verify_certificate(cert).holds
    fake_checker.answer = ["minor is singular mod p"]
    r = verify.verify_certificate(cert)
    assert not r.holds and r.claims[0].problems == ("minor is singular mod p",)
    assert r.exit_code() == 1
    fake_checker.answer = "raise"
    r = verify.verify_certificate(cert)
    assert not r.holds and "KeyError" in r.claims[0].problems[0]


def test_missing_or_unknown_checker_fails_never_passes(monkeypatch):
    monkeypatch.setitem(verify.CHECKERS, "bound", "no_such_area_xyz")
    r = verify.verify_certificate(_cert(_claim("bound")))
    assert not r.holds and any("no checker" in p for p in r.claims[0].problems)
    r = verify.verify_certificate(_cert(_claim("telepathy")))       # not a kind of the format
    assert not r.holds and any("$.claims[0].kind" in p for p in r.claims[0].problems)


def test_unknown_and_refuted_hold_when_consistent_but_need_reasons(fake_checker):
    for verdict in ("unknown", "refuted"):
        assert verify.verify_certificate(_cert(_claim(verdict=verdict, reason="why"))).holds
        r = verify.verify_certificate(_cert(_claim(verdict=verdict)))
        assert not r.holds and "$.claims[0].reason" in r.claims[0].problems[0]
    r = verify.verify_certificate(_cert(_claim(verdict="probably")))
    assert not r.holds


def test_counts(fake_checker):
    other = {"gap_threshold": "2", "factor": "3"}            # another sentence
    cert = _cert(_claim(), _claim(verdict="unknown", reason="time"),
                 _claim(verdict="refuted", reason="x", evidence=other))
    n = verify.verify_certificate(cert).counts()
    assert n == {"proved": 1, "refuted": 1, "unknown": 1, "failed": 0}


def test_one_sentence_proved_and_refuted_contradicts(fake_checker):
    """Two claims with the same rendered sentence and opposite verdicts both fail."""
    r = verify.verify_certificate(_cert(_claim(), _claim(verdict="refuted", reason="x")))
    assert [c.holds for c in r.claims] == [False, False]
    assert all("proves and" in c.problems[-1] for c in r.claims)


@pytest.mark.parametrize("text", ["", "{", "[]", json.dumps({"schema": "other", "claims": []}),
                                  json.dumps(_cert()), json.dumps({**_cert(_claim()), "claims": [3]}),
                                  json.dumps({**_cert(_claim()), "inputs": {"a": 5}})])
def test_malformed_is_input_error(text):
    with pytest.raises(NotACertificate):
        verify.parse(text)


def test_input_hashes(tmp_path, fake_checker):
    data = tmp_path / "family.json"
    data.write_bytes(b"some input")
    good = sha256_bytes(b"some input")
    r = verify.verify_certificate(_cert(_claim(), inputs={"family.json": good, "builtin:paper-5.1": good}),
                                  base=tmp_path)
    assert r.holds
    assert [i.status for i in r.inputs] == ["match", "absent"]
    r = verify.verify_certificate(_cert(_claim(), inputs={"family.json": "0" * 64}), base=tmp_path)
    assert not r.holds and r.inputs[0].status == "MISMATCH"


def _run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "certify", "verify", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def test_command_exit_codes(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    p = _run(str(bad))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    p = _run(str(tmp_path / "missing.json"))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    nochecker = tmp_path / "nochecker.json"
    nochecker.write_text(json.dumps(_cert(_claim("telepathy"))))
    p = _run(str(nochecker), "--json")
    assert p.returncode == 1
    doc = json.loads(p.stdout)
    assert doc["holds"] is False and any("$.claims[0].kind" in q for q in doc["claims"][0]["problems"])


def test_verify_imports_no_solver_no_torch_no_producer():
    """The checker stays independent of what produced the claims."""
    code = (
        "import sys, importlib, pkgutil\n"
        "import certify.checkers.verify as v\n"
        "import certify.checkers as c\n"
        "for m in pkgutil.iter_modules(c.__path__):\n"
        "    importlib.import_module('certify.checkers.' + m.name)\n"
        "for area in set(v.CHECKERS.values()):\n"
        "    v.checker_for([k for k, a in v.CHECKERS.items() if a == area][0])\n"
        "import certify.checkers.convex_dual\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'cvxpy', 'highspy', 'scipy',"
        " 'models', 'solvers', 'mpmath', 'matplotlib', 'clarabel', 'scs') or"
        " (m.startswith('certify.') and not m.startswith('certify.checkers'))]\n"
        "print(','.join(sorted(bad)))\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "", f"forbidden modules imported: {p.stdout.strip()}"


@pytest.mark.skipif(importlib.util.find_spec("certify.checkers.closed_form") is None,
                    reason="certify.checkers.closed_form has not landed")
def test_bounds_command_certificate_verifies(tmp_path):
    out = tmp_path / "bounds.json"
    assert bounds_cli.main(["--m", "200", "--out", str(out)]) == 0
    p = _run(str(out))
    assert p.returncode == 0, p.stderr


def test_int_matrix_fast_path_accepts_and_refuses_as_the_entrywise_parse():
    """Rows of plain ints are taken in one step; any other entry (a bool, a float, a
    string, an int subclass) goes through the entrywise parse, with its message."""
    import enum

    from certify.checkers.common import Bad, int_matrix

    class Small(enum.IntEnum):
        A = 3
    rows = [[1, -2, 2 ** 200], [0, 5, -7]]
    got = int_matrix(rows, "m", (2, 3))
    assert got == rows and got is not rows and got[0] is not rows[0]
    assert int_matrix([[Small.A, 1]], "m") == [[3, 1]]
    for bad, msg in (([[1, True]], "m must be an integer, got True"), ([[1.0, 2]], "m must be an integer"),
                     ([["1"]], "m must be an integer"), ([[1, 2], [3]], "m has rows of the wrong length"),
                     ([[1, 2]], "m has 1 rows, expected 2"), ([(1, 2)], "m must be a list of rows")):
        with pytest.raises(Bad, match=msg):
            int_matrix(bad, "m", (2, None) if msg.endswith("expected 2") else (None, None))


def test_gram_conversion_reused_only_for_equal_rows(monkeypatch):
    """The Grams of one head's claims are converted once within a certificate's check:
    equal rows reuse the conversion (as a copy: changing one result changes no other);
    rows differing in one entry, or equal in value but of another size, get their own;
    another check converts again."""
    from certify.checkers import scratch
    from certify.checkers.rank import evidence
    calls = []
    real = evidence.fmpz_matrix
    monkeypatch.setattr(evidence, "fmpz_matrix", lambda rows: calls.append(rows) or real(rows))
    with scratch.session():
        a = evidence._gram_matrix([[1, 2], [2, 5]])
        b = evidence._gram_matrix([[1, 2], [2, 5]])
        assert a == b and a is not b and len(calls) == 1
        b[0, 0] = 9
        assert evidence._gram_matrix([[1, 2], [2, 5]])[0, 0] == 1
        c = evidence._gram_matrix([[1, 2], [2, 6]])
        assert c[1, 1] == 6 and len(calls) == 2
        assert evidence._gram_matrix([[1]]).nrows() == 1 and len(calls) == 3
    with scratch.session():
        evidence._gram_matrix([[1, 2], [2, 5]])
        assert len(calls) == 4
