"""The pages a person reads, rendered by the server from the database (the
application in process on SQLite, no job processes): a job's page in each
state shows its real stage, claims, start and the time since it (the
fragment the page's script refreshes is exactly that page's state), links
to the certificate when done, and says why it failed when it failed; a
certificate page states the claims' verdict and whether the certificate
checks out as two labelled facts, with every input named in words. The
same in a real browser without JavaScript: tests/test_service_browser.py
(``--runslow``)."""

from __future__ import annotations

import datetime as dt
import html
import json
import re

import pytest

from certify import api
from certify.core.files import sha256_bytes
from certify.service.app import create_app
from certify.service.config import ServiceConfig
from certify.service.queue import Queue
from certify.service.store import Store

TOKEN = "pages-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def served(tmp_path):
    from starlette.testclient import TestClient
    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    cfg = ServiceConfig(data=tmp_path, db="", token=TOKEN, dispatch=False, read_rate=0, node="n1")
    with TestClient(create_app(cfg, store)) as c:
        yield c, Queue(store)
    store.dispose()


def _text(page: str, id_: str) -> str:
    m = re.search(rf'id="{id_}"[^>]*>(.*?)</(dd|span|p|div|a)>', page, re.S)
    assert m, (id_, page[:2000])
    return html.unescape(re.sub(r"<[^>]+>", "", m.group(1))).strip()


def _certificate(tmp_path) -> dict:
    """A real certificate (an exact rank, proved) with the server's verification."""
    import os
    (tmp_path / "m.json").write_text("[[2,1],[4,2]]")
    cwd = os.getcwd()
    os.chdir(tmp_path)                      # the input named as a user names it: m.json
    try:
        text = api.rank_of_matrix("m.json", command=["certify", "rank", "m.json"]).dumps()
    finally:
        os.chdir(cwd)
    ver = api.verification_summary(api.verify_text(text, base=tmp_path))
    return {"sha256": sha256_bytes(text.encode()), "text": text, "command": "rank",
            "verification": ver, "verify_exit": ver["exit_code"], "verify_mode": "sources present"}


def test_a_jobs_page_shows_its_real_state_in_every_state(served, tmp_path):
    c, queue = served
    ids = [c.post("/api/jobs", headers=AUTH, data={"command": "feasibility", "rank": "8"}).json()["id"]
           for _ in range(3)]
    page = c.get(f"/jobs/{ids[2]}").text
    assert _text(page, "job-status") == "queued"
    assert _text(page, "job-queue") == "(2 job(s) ahead of it in the queue)"
    assert 'width: 0%' in page and '<noscript><meta http-equiv="refresh"' in page

    claim = queue.claim("n1", 60)
    assert claim.job.id == ids[0]
    page = c.get(f"/jobs/{ids[0]}").text
    assert _text(page, "job-stage") == "starting its process" and _text(page, "job-node") == "this server"
    queue.set_progress(claim.claim_id, json.dumps({
        "step": 2, "steps": 3, "stage": "verifying the claims (exact arithmetic)", "claims": 4,
        "checked": 0}))
    page = c.get(f"/jobs/{ids[0]}").text
    frag = c.get(f"/jobs/{ids[0]}/state").text
    assert _text(page, "job-stage") == "step 2 of 3: verifying the claims (exact arithmetic)"
    assert _text(page, "job-claims") == "0 of 4 verified"
    assert "width: 33%" in page and _text(page, "job-bar-label") == "1 of 3 stages done"
    job = c.get(f"/api/jobs/{ids[0]}").json()
    assert job["progress"] == {"step": 2, "steps": 3, "claims": 4, "checked": 0,
                               "stage": "verifying the claims (exact arithmetic)"}
    assert job["stage"] == "verifying the claims (exact arithmetic)"
    started = dt.datetime.fromisoformat(job["started_at"])
    assert _text(page, "job-started") == started.strftime("%Y-%m-%d %H:%M:%S") + " UTC"
    as_of = dt.datetime.fromisoformat(_text(page, "job-asof")[:19]).replace(tzinfo=dt.timezone.utc)
    shown = int(_text(page, "job-elapsed").split()[0])
    assert abs(shown - (as_of - started).total_seconds()) <= 1           # since the job's start
    # the fragment the script puts in place is the page's own state
    inner = page.split('data-live="yes">', 1)[1].split('<p id="job-poll"', 1)[0]
    norm = lambda t: re.sub(r"\s+", " ", re.sub(r'id="job-asof">[^<]*', "", t)).strip()  # noqa: E731
    assert norm(frag) in norm(inner)

    # given back, then finished: the re-queue note is gone, the certificate is linked
    queue.release([claim.claim_id])
    assert "re-queued: the server running it was stopped" in c.get(f"/jobs/{ids[0]}").text
    claim = queue.claim("n2", 60)
    page = c.get(f"/jobs/{ids[0]}").text
    assert _text(page, "job-node") == "another server (node n2)"
    cert = _certificate(tmp_path)
    assert queue.finish(ids[0], claim.claim_id, exit_code=0, result=None, certificate=cert)
    page = c.get(f"/jobs/{ids[0]}").text
    assert _text(page, "job-status") == "done" and "re-queued" not in page
    assert f'<a id="job-certificate" href="/certificates/{cert["sha256"]}">' in page
    assert _text(page, "job-exit") == "0: every claim is proved"
    assert _text(page, "overall") == "proved" and _text(page, "fact-check") == "checks out"
    assert "width: 100%" in page and "noscript" not in page          # no reload once it ended
    assert c.get(f"/api/jobs/{ids[0]}").json()["certificate_page"] == f"/certificates/{cert['sha256']}"

    # failed: the reason, said as why
    claim = queue.claim("n1", 60)
    queue.fail(claim.job.id, claim.claim_id, "bad input: m.json: not a matrix", exit_code=2)
    page = c.get(f"/jobs/{claim.job.id}").text
    assert _text(page, "job-status") == "failed"
    assert _text(page, "job-reason") == "bad input: m.json: not a matrix"
    assert _text(page, "job-exit") == "2: bad input"


def test_a_certificate_page_states_the_verdict_and_the_check_as_two_facts(served, tmp_path):
    c, queue = served
    job = c.post("/api/jobs", headers=AUTH, data={"command": "feasibility", "rank": "8"}).json()["id"]
    claim = queue.claim("n1", 60)
    cert = _certificate(tmp_path)
    queue.finish(job, claim.claim_id, exit_code=0, result=None, certificate=cert)
    page = c.get(f"/certificates/{cert['sha256']}").text
    assert _text(page, "overall") == "proved" and _text(page, "fact-check") == "checks out"
    assert "a refutation that checks out is itself proved" in _text(page, "facts-explained")
    assert "exact rank (exact_rank)" in page and "claim: <span" in page and "check: re-derived" in page
    assert "file m.json: present; its sha256 matches the certificate&#39;s" in page
    assert "bound per claim" not in page and ": match" not in page
    assert _text(page, "verify-exit") == "certify verify: exit 0"
    # the command it prints names the file as it downloads
    name = c.get(f"/certificates/{cert['sha256']}/certificate.json").headers["content-disposition"]
    assert f"certify verify {name.split('filename=')[1].strip(chr(34))}</code>" in page
    # a certificate whose check fails says so, beside its verdict
    bad = dict(cert, verification={**cert["verification"], "exit_code": 1}, verify_exit=1,
               text=cert["text"].replace('"created"', '"created" ', 1))
    bad["sha256"] = sha256_bytes(bad["text"].encode())
    job = c.post("/api/jobs", headers=AUTH, data={"command": "feasibility", "rank": "8"}).json()["id"]
    claim = queue.claim("n1", 60)
    queue.finish(job, claim.claim_id, exit_code=0, result=None, certificate=bad)
    page = c.get(f"/certificates/{bad['sha256']}").text
    assert _text(page, "fact-check") == "does not check out"


def test_inputs_are_named_in_words():
    from types import SimpleNamespace

    from certify.service.app import _shown_inputs
    row = SimpleNamespace(source_sha256="ab" * 32)
    shown = _shown_inputs({"inputs": [
        {"name": "family:paper-5.1", "status": "bound per claim"},
        {"name": "w.safetensors", "status": "MISMATCH"},
        {"name": "c.json", "status": "absent"},
        {"name": "upload:m.zip", "status": "absent"}]}, row)
    assert [(i["label"], i["status"]) for i in shown] == [
        ("built-in family paper-5.1", "built in, not a file: each claim that uses it names the "
                                      "family's sha256, checked with that claim"),
        ("file w.safetensors", "present, but its sha256 differs from the certificate's: the claims "
                               "are not about this file"),
        ("file c.json", "not found beside the certificate, so not re-hashed"),
        ("the upload m.zip", f"the file submitted to this server (sha256 {'ab' * 32} computed when "
                             f"it arrived; not kept after the job)")]


def test_a_browsers_verify_form_without_the_script_lands_on_the_job_page(served):
    c, _ = served
    r = c.post("/api/verify", files={"file": ("c.json", b"{}", "application/json")},
               headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}, follow_redirects=False)
    assert r.status_code == 303 and re.fullmatch(r"/jobs/[0-9a-f]{32}", r.headers["location"])
    assert _text(c.get(r.headers["location"]).text, "job-status") == "queued"
    # a script or a client gets the JSON
    r = c.post("/api/verify", files={"file": ("c.json", b"{}", "application/json")})
    assert r.status_code == 201 and r.json()["page"].startswith("/jobs/")
    assert 'action="/api/verify" method="post"' in c.get("/verify").text


def test_a_certificate_of_a_retired_version_is_shown_refused_with_the_command_that_remakes_it(served, tmp_path):
    """After an upgrade (`certify serve migrate`), a stored certificate of a version this
    release no longer reads (verified with exit 0 by the release that made it) is shown as
    refused, exit 2, with the `certify` command that re-makes it: a service job's
    `certify serve checkpoint model.zip` is `certify checkpoint model/`, a command line's is
    itself."""
    from certify.checkers.schema import RETIRED, VERSIONS
    from certify.checkers.verify import NotACertificate, parse
    c, queue = served
    old_version = next(iter(RETIRED))
    assert old_version not in VERSIONS
    cert = _certificate(tmp_path)
    for command, remake in ((["certify serve", "checkpoint", "model.zip"],
                             "certify checkpoint model/ (with model.zip unpacked into model/)"),
                            (["certify", "rank", "m.json"], "certify rank m.json")):
        obj = json.loads(cert["text"])
        obj.update(schema=old_version, command=command)
        text = json.dumps(obj, indent=1)
        old = dict(cert, text=text, sha256=sha256_bytes(text.encode()))        # verify_exit 0, as it was made
        job = c.post("/api/jobs", headers=AUTH, data={"command": "feasibility", "rank": "8"}).json()["id"]
        claim = queue.claim("n1", 60)
        queue.finish(job, claim.claim_id, exit_code=0, result=None, certificate=old)
        page = c.get(f"/certificates/{old['sha256']}").text
        assert _text(page, "fact-check") == "refused by this release"
        assert _text(page, "verify-exit") == "certify verify: exit 2" and "certify verify: exit 0" not in page
        assert _text(page, "remake") == f"Re-make it with this release: {remake}"
        assert "certify serve checkpoint" not in _text(page, "verify-refused")
        with pytest.raises(NotACertificate, match=re.escape(remake)):         # certify verify says the same
            parse(text)
        api_ver = c.get(f"/api/certificates/{old['sha256']}/verification").json()
        assert (api_ver["exit_code"], api_ver["remake"], api_ver["made_with_exit_code"]) == (2, remake, 0)
