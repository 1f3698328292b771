"""Committed reference certificates still verify; the demo produces the bracket."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from certify import verify

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "reports" / "reference"
CERTS = sorted(p for p in REFERENCE.glob("*.json")) if REFERENCE.is_dir() else []


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
    from certify import demo
    res = demo.run(tmp_path / "demo", time_limit=2.0)
    assert res["verified"] is True
    claims = [c for name in res["certificates"]
              for c in json.loads((tmp_path / "demo" / name).read_text())["claims"]]
    proved = {(c["kind"], c["parameters"].get("rank"), c["parameters"].get("features"))
              for c in claims if c["verdict"] == "proved"}
    assert ("infeasible", 8, "real") in proved and ("infeasible", 11, "real") in proved
    assert ("feasible", 15, "real") in proved and ("feasible", 15, "nonnegative") in proved
    cube = [c for c in claims if c["kind"] == "exact_rank" and "cube:6" in c["statement"]]
    assert cube and cube[0]["evidence"]["rank_lower"] == cube[0]["evidence"]["rank_upper"] == 64
    assert (tmp_path / "demo" / "report.md").is_file()
