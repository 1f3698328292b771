"""Committed reference certificates still verify; the demo produces the bracket."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from committed import report_json

from certify.checkers import verify

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "reports" / "reference"
CERTS = sorted(p for p in REFERENCE.glob("*.json") if not p.name.startswith(".")) if REFERENCE.is_dir() else []


@pytest.mark.skipif(not CERTS, reason="no committed reference certificates yet")
@pytest.mark.parametrize("path", CERTS, ids=[p.name for p in CERTS])
def test_reference_certificate_verifies(path, monkeypatch):
    monkeypatch.chdir(ROOT)                  # inputs are named relative to the repository
    r = verify.verify_file(path)
    assert r.holds, [(c.index, c.problems) for c in r.claims if not c.holds] + \
        [i.name for i in r.inputs if not i.holds]


@pytest.mark.skipif(not CERTS, reason="no committed reference certificates yet")
def test_reference_folder_is_complete_and_documented():
    names = {p.name for p in REFERENCE.iterdir()}
    assert {"report.md", "report.tex", "README.md"} <= names
    assert "python -m certify demo --out reports/reference" in (REFERENCE / "README.md").read_text()
    md = (REFERENCE / "report.md").read_text()
    for p in CERTS:
        for c in json.loads(p.read_text())["claims"]:
            assert c["statement"].replace("|", "\\|") in md


def test_demo_brackets_the_minimal_rank(tmp_path):
    from certify.api import demo
    res = demo.run(tmp_path / "demo", time_limit=0.5)
    assert res["verified"] is True
    claims = [c for name in res["certificates"]
              for c in json.loads((tmp_path / "demo" / name).read_text())["claims"]]
    proved = {(c["kind"], c["parameters"].get("rank"), c["parameters"].get("features"))
              for c in claims if c["verdict"] == "proved"}
    assert ("infeasible", 8, "real") in proved and ("infeasible", 11, "real") in proved
    assert ("feasible", 15, "real") in proved and ("feasible", 15, "nonnegative") in proved
    cube = [c for c in claims if c["kind"] == "exact_rank" and "{0,1}^6" in c["statement"]]
    assert cube and cube[0]["evidence"]["rank_lower"] == cube[0]["evidence"]["rank_upper"] == 64
    assert (tmp_path / "demo" / "report.md").is_file()


def _feasible_claims():
    for path in report_json():
        try:
            doc = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        if not isinstance(doc, dict) or "claims" not in doc:
            continue
        for c in doc["claims"]:
            if c.get("kind") == "feasible" and c.get("verdict") == "proved":
                yield path, c


@pytest.mark.slow  # every committed witness re-evaluated (4.5 CPU s)
def test_every_committed_witness_is_in_the_papers_class(monkeypatch):
    """Every feasible witness in reports/ is a head of the paper's class: verify
    re-derives alpha >= 0 on all (query, token) pairs, alpha(q, q) > 0 and its
    whole-cube extension rule, exactly."""
    monkeypatch.chdir(ROOT)
    seen = 0
    for path, c in _feasible_claims():
        assert c["parameters"]["class"] == "paper", (path.name, c["parameters"])
        assert c["evidence"]["witness"]["extension"]["rule"] in ("copy-query", "plus-one")
        seen += 1
    assert seen >= 10
    paths = sorted({p for p, _ in _feasible_claims()})
    results = verify.verify_many([(str(p), verify.read_certificate(p), p.parent) for p in paths])
    assert all(r.exit_code() == 0 for r in results), [
        (c.certificate, c.index, c.problems) for r in results for c in r.claims if not c.holds]


@pytest.mark.skipif(not CERTS, reason="no committed reference certificates yet")
def test_reference_checkpoints_replay_to_exit_0(monkeypatch):
    """The checkpoint certificates hold assuming extraction (exit 4) until the
    weights -> features step is replayed in a separate process (exit 0)."""
    import subprocess
    import sys
    paths = [str(p) for p in CERTS if p.name.startswith("checkpoint-")]
    p = subprocess.run([sys.executable, "-m", "certify", "verify", *paths], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 4 and "holds, assuming: extraction:" in p.stderr
    p = subprocess.run([sys.executable, "-m", "certify", "verify", "--replay-extraction", *paths],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]


@pytest.mark.slow  # a torch-free replay in a subprocess; tests/test_replay_without_torch.py runs that path by default
@pytest.mark.skipif(not CERTS, reason="no committed reference certificates yet")
def test_reference_checkpoint_replay_does_not_depend_on_torch(tmp_path):
    """A models/ checkpoint's features are canonical (float64, models.canonical):
    the torch version the certificate recorded does not decide its replay (a
    certificate claiming another torch still replays to exit 0), while a wrong
    features hash still fails."""
    import subprocess
    import sys
    src = REFERENCE / "checkpoint-paper51-lookup-r32-s0.json"
    cert = json.loads(src.read_text())
    assert cert["claims"][0]["evidence"]["features_sha256"]["dtype"] == "float64"
    cert["environment"]["packages"]["torch"] = "0.0.1-another-build"
    other = tmp_path / "other-torch.json"
    other.write_text(json.dumps(cert))
    p = subprocess.run([sys.executable, "-m", "certify", "verify", "--replay-extraction", str(other)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={**__import__("os").environ, "ATEN_CPU_CAPABILITY": "default"})
    assert p.returncode == 0, p.stderr[-2000:]
