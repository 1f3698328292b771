"""certify.api: the library functions the commands and the service share."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from certify import api
from certify.core.errors import InputError


def test_feasibility_at_rank_8_is_proved_infeasible_on_paper51():
    cert = api.feasibility_at_rank("paper-5.1", 8, time_limit=5)
    (c,) = cert.claims
    assert (c.kind.value, c.verdict.value, c.parameters["rank"]) == ("infeasible", "proved", 8)
    assert cert.inputs == {"family:paper-5.1": c.parameters["family_sha256"]}
    res = api.verify_text(cert.dumps())
    assert res.holds and res.exit_code() == 0


def test_rank_of_matrix_and_a_tampered_copy(tmp_path):
    p = tmp_path / "m.json"
    p.write_text(json.dumps({"matrix": [[1, 2, 3], [2, 4, 6], [1, 0, 1]]}))
    cert = api.rank_of_matrix(p, eps="1/1000")
    ev = cert.claims[0].evidence
    assert (ev["rank_lower"], ev["rank_upper"]) == (2, 2)
    assert [c.kind.value for c in cert.claims] == ["exact_rank", "eps_rank"]
    good = api.verification_summary(api.verify_text(cert.dumps(), base=tmp_path))
    assert good["exit_code"] == 0 and good["exit_meaning"] == api.VERIFY_EXIT_MEANING[0]
    assert [i["status"] for i in good["inputs"]] == ["match"]
    doc = cert.to_json()
    doc["claims"][0]["evidence"]["rank_upper"] = 1
    doc["claims"][0]["evidence"]["rank_lower"] = 1
    bad = api.verification_summary(api.verify_text(json.dumps(doc)))
    assert bad["exit_code"] == 1 and bad["exit_meaning"].startswith("some claim fails")
    with pytest.raises(InputError):
        api.rank_of_matrix(p, eps="-1")


def test_transcript_check_without_an_argv():
    cert = api.transcript_check(12, 3, 6, 4, bits=1)
    assert cert.exit_code() == 1 and cert.claims[-1].verdict.value == "refuted"   # a collision
    assert api.verify_text(cert.dumps()).holds
    with pytest.raises(InputError, match="bits or format"):
        api.transcript_check(12, 3, 6, 4)             # no quantizer: refused before any work


def test_report_writes_the_certificate_and_its_report(tmp_path):
    cert = api.feasibility_at_rank("paper-5.1", 8, time_limit=5)
    files = api.report(cert.dumps(), tmp_path / "rep")
    assert {"certificate.json", "report.md", "report.tex"} <= set(files)
    assert (tmp_path / "rep" / "certificate.json").read_text() == cert.dumps()


def test_claim_index_reads_kinds_ranks_and_family_hashes():
    cert = api.feasibility_at_rank("paper-5.1", 8, time_limit=5).to_json()
    (row,) = api.claim_index(cert)
    assert row == {"kind": "infeasible", "verdict": "proved", "rank": 8,
                   "family_sha256": cert["claims"][0]["parameters"]["family_sha256"]}
    assert api._exact_positive("1/1000", "eps") == Fraction(1, 1000)
