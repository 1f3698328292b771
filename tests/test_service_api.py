"""certify serve through its HTTP API (one server for the module): token, size
limit, pickles, zips, every parameter validated at the edge (422 naming it),
upload failures as bad input naming the user's file and never a server path,
a checkpoint certified end to end and re-verified, filters, delete, retention."""

from __future__ import annotations

import html
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import numpy as np
import pytest
from service_support import CKPT, Server, answers, checkpoint_zip, env, free_port, wait_job
from waits import HANG_GUARD_S, wait_until

from certify.core.errors import InputError
from certify.core.files import sha256_bytes
from certify.service import uploads, worker

LIMIT_KB = 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("svc") / "data"
    with Server(data, "--max-upload-mb", str(LIMIT_KB / 1024), "--workers", "2",
                "--read-rate", "0", "--open-submit-rate", "0", "--max-anonymous-queued", "100") as s:
        yield s


@pytest.fixture(scope="module")
def client():
    with httpx.Client(timeout=60) as c:
        yield c


def _rows(server, table: str) -> int:
    with sqlite3.connect(server.data / "certify.db") as db:
        return db.execute(f"select count(*) from {table}").fetchone()[0]


def _submit(server, client, name: str, data: bytes, command: str = "checkpoint", **fields):
    return client.post(server.url + "/api/jobs", headers=server.auth,
                       data={"command": command, **fields},
                       files={"file": (name, data, "application/octet-stream")})


def _no_server_path(server, text: str) -> None:
    assert str(server.data) not in text and "/work/" not in text and "/tmp" not in text, text


@pytest.fixture(scope="module")
def certified(server, client):
    """One checkpoint certified through the service (shared by several tests)."""
    r = _submit(server, client, "my-model.zip", checkpoint_zip())
    assert r.status_code == 201, r.text
    job = wait_job(client, server.url, r.json()["id"])
    assert job["status"] == "done", job
    return job


def test_submit_without_or_with_wrong_token_is_401_and_stores_nothing(server, client):
    before = _rows(server, "jobs"), _rows(server, "uploads")
    for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"},
                    {"Authorization": server.token}):          # no "Bearer " scheme
        r = client.post(server.url + "/api/jobs", headers=headers, data={"command": "checkpoint"},
                        files={"file": ("m.zip", checkpoint_zip(), "application/zip")})
        assert r.status_code == 401, r.text
    assert (_rows(server, "jobs"), _rows(server, "uploads")) == before


def test_upload_over_the_limit_is_413_and_stores_nothing(server, client):
    before = _rows(server, "jobs"), _rows(server, "uploads")
    big = os.urandom(LIMIT_KB * 1024 * 3)
    assert _submit(server, client, "big.npy", big, "rank").status_code == 413
    # just above the limit: within the header's framing slack, caught while reading
    assert _submit(server, client, "big.npy", big[: LIMIT_KB * 1024 + 10], "rank").status_code == 413
    # the open verify endpoint has the same limit
    r = client.post(server.url + "/api/verify", files={"file": ("c.json", big, "application/json")})
    assert r.status_code == 413
    assert (_rows(server, "jobs"), _rows(server, "uploads")) == before


def test_pickle_suffixes_are_refused_at_submit(server, client):
    before = _rows(server, "jobs")
    for name in ("model.pkl", "model.pt", "weights.pth", "x.pickle"):
        r = _submit(server, client, name, b"\x80\x04K\x01.", "rank")
        assert r.status_code == 422 and "pickle" in r.json()["detail"], r.text
        assert r.json()["detail"].startswith("file:")
    assert _rows(server, "jobs") == before


def test_a_pickle_inside_a_checkpoint_zip_never_runs(server, client, tmp_path):
    import torch

    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    weights = io.BytesIO()
    torch.save({"w": Evil()}, weights)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(CKPT.name + ".json", CKPT.with_suffix(".json").read_text())
        z.writestr(CKPT.name + ".pt", weights.getvalue())
    r = _submit(server, client, "evil.zip", buf.getvalue())
    assert r.status_code == 201, r.text
    job = wait_job(client, server.url, r.json()["id"])
    assert job["status"] == "failed" and job["exit_code"] == 2
    assert "weights_only" in job["reason"] and "pickle" in job["reason"], job["reason"]
    assert job["reason"].startswith("bad input: evil.zip: ")
    assert not marker.exists()


def _zip(members) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members:
            z.writestr(name, data)
    return buf.getvalue()


@pytest.mark.parametrize("members, why", [
    ([("../escape.json", "{}")], "unsafe path"),
    ([("/abs.json", "{}")], "unsafe path"),
    ([("dir/../../x.json", "{}")], "unsafe path"),
    ([("a\\b.json", "{}")], "unsafe path"),
    ([(".hidden", "{}")], "names may use only"),
    ([("m.json", "{}"), ("m.json", "[]")], "appears twice"),
    ([("a", "x"), ("a/m.json", "{}")], "is both a file and a folder"),
    ([("a/m.json", "{}"), ("a", "x")], "is both a file and a folder")])
def test_bad_zips_are_refused_at_submit_naming_the_users_file(server, client, members, why):
    before = _rows(server, "jobs"), _rows(server, "uploads")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                   # zipfile warns about duplicate names
        data = _zip(members)
    r = _submit(server, client, "my-model.zip", data)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert detail.startswith("file: my-model.zip: ") and why in detail, detail
    _no_server_path(server, detail)
    assert (_rows(server, "jobs"), _rows(server, "uploads")) == before


def _lying_zip(tmp_path: Path) -> bytes:
    p = tmp_path / "liar.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("a.npy", b"x" * 20_000)
    raw = bytearray(p.read_bytes())
    at = raw.rfind(b"PK\x01\x02")                          # central directory entry
    raw[at + 24: at + 28] = (100).to_bytes(4, "little")    # uncompressed size 20000 -> 100
    return bytes(raw)


def _corrupt_zip() -> bytes:
    raw = bytearray(_zip([("m.json", "x" * 5000)]))
    at = raw.find(b"x" * 100)
    raw[at: at + 100] = b"y" * 100                         # the stored bytes no longer match the CRC
    return bytes(raw)


@pytest.mark.parametrize("kind", ["lying sizes", "corrupt member"])
def test_zips_failing_inside_the_job_are_bad_input_without_server_paths(server, client, tmp_path, kind):
    data = _lying_zip(tmp_path) if kind == "lying sizes" else _corrupt_zip()
    r = _submit(server, client, "upload-1.zip", data, "rank")
    assert r.status_code == 201, r.text                     # the headers look fine at the edge
    job = wait_job(client, server.url, r.json()["id"])
    assert job["status"] == "failed" and job["exit_code"] == 2, job
    assert job["reason"].startswith("bad input: upload-1.zip: "), job["reason"]
    _no_server_path(server, json.dumps(job))


def test_a_verify_upload_that_is_not_utf8_is_bad_input(server, client):
    r = client.post(server.url + "/api/verify", files={"file": ("c.json", b'{"a": "\xff\xfe"}',
                                                                "application/json")})
    job = wait_job(client, server.url, r.json()["id"])
    assert job["status"] == "failed" and job["exit_code"] == 2
    assert job["reason"] == "bad input: c.json: not UTF-8 text (byte 7)", job["reason"]


def test_zip_symlinks_and_unpacked_size_are_refused(tmp_path):
    p = tmp_path / "link.zip"
    with zipfile.ZipFile(p, "w") as z:
        info = zipfile.ZipInfo("link")
        info.external_attr = (0o120777 << 16)
        z.writestr(info, "/etc/passwd")
    with pytest.raises(InputError, match="not a plain file"):
        uploads.check_zip(p, 10_000)
    p = tmp_path / "bomb.zip"
    with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("zeros.npy", b"\0" * 50_000)            # 50 kB unpacked from ~100 bytes
    assert p.stat().st_size < 1000
    with pytest.raises(InputError, match="unpacks to more than 10000 bytes"):
        uploads.check_zip(p, 10_000)
    # a member whose declared size lies is caught while unpacking, as bad input
    p = tmp_path / "liar.zip"
    p.write_bytes(_lying_zip(tmp_path))
    assert uploads.check_zip(p, 10_000) == ["a.npy"]
    with pytest.raises(InputError, match="corrupt"):
        uploads.unpack_zip(p, tmp_path / "out", 10_000)
    assert (tmp_path / "out" / "a.npy").stat().st_size <= 100


def test_options_are_checked_before_anything_is_stored(server, client):
    before = _rows(server, "jobs")
    bad = [({"command": "feasibility", "family": "/etc/passwd", "rank": "3"}, "family"),
           ({"command": "feasibility", "family": "paper-5.1", "rank": "0"}, "rank"),
           ({"command": "feasibility", "rank": "9" * 30}, "rank"),
           ({"command": "feasibility", "rank": "8", "time_limit": "nan"}, "time_limit"),
           ({"command": "feasibility", "rank": "8", "bogus": "1"}, "'bogus'"),
           ({"command": "rank", "tokens": "cube:8; rm -rf /"}, "tokens"),
           ({"command": "rank", "tokens": "cube:99"}, "tokens"),
           ({"command": "rank"}, "file"),
           ({"command": "transcript", "M": "12", "s": "3", "h": "6", "q": "4"}, "bits"),
           ({"command": "transcript", "M": "100000", "s": "3", "h": "6", "q": "4", "bits": "1"}, "M"),
           ({"command": "nosuch"}, "command")]
    for data, name in bad:
        files = {"file": ("m.json", b"[[1]]", "application/json")} \
            if data["command"] == "rank" and name != "file" else None
        r = client.post(server.url + "/api/jobs", headers=server.auth, data=data, files=files)
        assert r.status_code == 422, (data, r.text)
        assert r.json()["detail"].startswith(name), (name, r.json()["detail"])
    assert _rows(server, "jobs") == before


@pytest.mark.parametrize("path, name", [
    ("/api/certificates?offset=" + "9" * 30, "offset"),
    ("/api/certificates?rank=" + "9" * 30, "rank"),
    ("/?until=9999-12-31", "until"),
    ("/api/certificates?limit=0", "limit"),
    ("/api/certificates?limit=nan", "limit"),
    ("/api/certificates?since=yesterday", "since"),
    ("/api/certificates?kind=bogus", "kind"),
    ("/?verdict=maybe", "verdict"),
    ("/api/certificates?model=xyz", "model"),
    ("/api/certificates?family=" + "g" * 64, "family"),
    ("/api/certificates?bogus=1", "'bogus'"),
    ("/api/certificates?rank=1&rank=2", "rank"),
    ("/jobs?x=1", "'x'")])
def test_query_parameters_are_validated_422_naming_them(server, client, path, name):
    r = client.get(server.url + path)
    assert r.status_code == 422, (path, r.status_code, r.text[:300])
    if path.startswith("/api/"):
        assert name in r.json()["detail"], r.json()
    else:                                  # a page answers with a page, never raw JSON
        assert r.headers["content-type"].startswith("text/html"), r.headers
        assert "<h1>422: Unprocessable Entity</h1>" in r.text and name in html.unescape(r.text), r.text


def _library_refusal(fn, *a, **k) -> str:
    """The message the library (so the job) gives for these options."""
    with pytest.raises(InputError) as e:
        fn(*a, **k)
    return str(e.value)


def test_every_option_a_job_would_refuse_is_refused_at_submit(server, client, tmp_path):
    """The same message as the job would end with, at submission (422), before
    anything is stored."""
    from certify import api
    from certify.core.families import load_family
    before = _rows(server, "jobs"), _rows(server, "uploads")
    (tmp_path / "one.json").write_text("[[1]]")
    np.save(tmp_path / "one.npy", np.ones((1, 1)))
    cases = [
        ({"command": "feasibility", "family": "ood-99-99-99-test", "rank": "3"}, None,
         "family ood-99-99-99-test: " + _library_refusal(load_family, "ood-99-99-99-test")),
        ({"command": "feasibility", "family": "ood-6-4-9-test", "rank": "3"}, None,
         "family ood-6-4-9-test: " + _library_refusal(load_family, "ood-6-4-9-test")),
        ({"command": "feasibility", "family": "multilevel-12-2-13-4", "rank": "3"}, None,
         "family multilevel-12-2-13-4: " + _library_refusal(load_family, "multilevel-12-2-13-4")),
        ({"command": "checkpoint", "family": "ood-4-6-12-test"}, ("m.zip", checkpoint_zip()),
         "family ood-4-6-12-test: " + _library_refusal(load_family, "ood-4-6-12-test")),
        ({"command": "transcript", "M": "4", "s": "1", "h": "6", "q": "2", "bits": "2"}, None,
         "M, s, h, q: " + _library_refusal(api.transcript_check, 4, 1, 6, 2, bits=2)),
        ({"command": "transcript", "M": "8", "s": "1", "h": "2", "q": "24", "bits": "2"}, None,
         "M, s, h, q: " + _library_refusal(api.transcript_check, 8, 1, 2, 24, bits=2)),
        ({"command": "rank", "tokens": "cube:24"}, ("one.json", b"[[1]]"),
         "tokens: " + _library_refusal(api.rank_of_matrix, str(tmp_path / "one.json"), tokens="cube:24")),
        ({"command": "rank", "tokens": "cube:3"}, ("one.npy", (tmp_path / "one.npy").read_bytes()),
         "tokens: " + _library_refusal(api.rank_of_matrix, str(tmp_path / "one.npy"), tokens="cube:3")),
        ({"command": "checkpoint"}, ("long.zip", _zip([("x" * 255 + ".json", "{}")])),
         "file: long.zip: zip member '" + "x" * 60 + "'...: each name in a member's path may have "
         "at most 200 characters, the path 1024")]
    for data, upload, want in cases:
        files = {"file": (upload[0], upload[1], "application/octet-stream")} if upload else None
        r = client.post(server.url + "/api/jobs", headers=server.auth, data=data, files=files)
        assert r.status_code == 422, (data, r.text)
        assert r.json()["detail"] == want, (r.json()["detail"], want)
    assert (_rows(server, "jobs"), _rows(server, "uploads")) == before
    # names at the limits are taken
    r = client.post(server.url + "/api/jobs", headers=server.auth, data={"command": "rank",
                    "tokens": "cube:1"}, files={"file": ("two.json", b"[[1,0],[0,1]]", "application/json")})
    assert r.status_code == 201, r.text
    assert uploads.check_zip(io.BytesIO(_zip([("d/" + "y" * 195 + ".json", "{}")])), 10**6)


def test_checkpoint_certified_end_to_end(server, client, certified, tmp_path):
    sha = certified["cert_sha256"]
    assert certified["exit_code"] == 1                    # the model fails test inputs: refuted
    text = client.get(f"{server.url}/api/certificates/{sha}").text
    assert sha256_bytes(text.encode()) == sha             # content-addressed, kept verbatim
    cert = json.loads(text)
    kinds = [c["kind"] for c in cert["claims"]]
    assert kinds == ["exact_rank", "eps_rank", "nonnegative", "correctness"]
    assert cert["claims"][0]["evidence"]["rank_lower"] == cert["claims"][0]["evidence"]["rank_upper"] == 8
    assert cert["claims"][3]["verdict"] == "refuted"
    # the user's file names and hashes, never a path on the server
    assert cert["inputs"]["upload:my-model.zip"] == sha256_bytes(checkpoint_zip())
    assert cert["inputs"][CKPT.name + ".safetensors"] == sha256_bytes(CKPT.with_suffix(".safetensors").read_bytes())
    _no_server_path(server, text)
    # the server's verification (sources present) and the command line agree
    v = client.get(f"{server.url}/api/certificates/{sha}/verification").json()
    assert v["mode"].startswith("sources present (")
    path = tmp_path / "downloaded.json"
    path.write_text(client.get(f"{server.url}/certificates/{sha}/certificate.json").text)
    # the user verifies beside their own checkpoint, replaying the extraction as the server did
    for suffix in (".json", ".safetensors"):
        shutil.copyfile(CKPT.with_suffix(suffix), tmp_path / (CKPT.name + suffix))
    cli = subprocess.run([sys.executable, "-m", "certify", "verify", str(path),
                          "--replay-extraction"], cwd=tmp_path, capture_output=True, text=True,
                         env=env())
    assert v["exit_code"] == cli.returncode == 0, cli.stderr
    assert "extraction replayed" in v["mode"]
    assert v["verification"]["exit_meaning"] == v["verification"]["exit_meaning"].strip() != ""
    # the page shows the claims and the verification with its meaning
    html = client.get(f"{server.url}/certificates/{sha}").text
    assert "certify verify: exit 0" in html and "sources present" in html
    assert "on {0,1}^8 (256 x 256) has rank exactly 8 over Q" in html
    assert 'src="/certificates/%s/files/singular_values.png"' % sha in html
    png = client.get(f"{server.url}/certificates/{sha}/files/singular_values.png")
    assert png.status_code == 200 and png.content[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.headers["content-type"] == "image/png"
    assert client.get(f"{server.url}/certificates/{sha}/files/..%2Fcertify.db").status_code == 404
    assert client.get(f"{server.url}/certificates/{sha}/files/report.md").text.startswith("#")


def test_jobs_leave_nothing_behind(server, client, certified):
    """Uploads are deleted when their job ends, and so are the work folders."""
    wait_until(lambda: client.get(server.url + "/api/health").json()["running"] == 0,
               "no job running", proc=server.proc, output=server.log_path)
    assert _rows(server, "uploads") == 0
    assert os.listdir(server.data / "work") == []


def test_filters(server, client, certified):
    sha = certified["cert_sha256"]
    model = sha256_bytes(CKPT.with_suffix(".safetensors").read_bytes())
    get = lambda **q: [r["sha256"] for r in client.get(server.url + "/api/certificates",  # noqa: E731
                                                        params=q).json()]
    assert sha in get(kind="correctness") and sha in get(kind="eps_rank")
    assert sha not in get(kind="infeasible")
    assert sha in get(verdict="refuted") and sha not in get(verdict="proved")
    assert sha in get(rank=8) and sha not in get(rank=7)
    assert sha in get(model=model) and sha not in get(model="0" * 64)
    import datetime as dt
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    assert sha in get(since="2000-01-01") and sha not in get(until="2000-01-01")
    assert sha in get(until=today) and sha in get(since=today)         # a date is a whole day
    assert sha in get(until="2999-12-31")
    html = client.get(server.url + "/", params={"verdict": "refuted"}).text
    assert sha[:12] in html and 'class="badge refuted"' in html


def test_verify_an_uploaded_certificate_open_as_a_job(server, client, certified):
    sha = certified["cert_sha256"]
    text = client.get(f"{server.url}/api/certificates/{sha}").text
    r = client.post(server.url + "/api/verify", files={"file": ("c.json", text, "application/json")})
    assert r.status_code == 201
    job = wait_job(client, server.url, r.json()["id"])
    # without the checkpoint on hand the weights -> features step is a named assumption
    assert job["status"] == "done" and job["exit_code"] == 4
    assert job["anonymous"] is True
    assert job["result"]["verification"]["holds"] is True
    assert any(a.startswith("extraction:") for a in job["result"]["verification"]["open_assumptions"])
    assert job["result"]["verify_mode"].startswith("certificate only")
    # a tampered rank is caught by the server's verify
    cert = json.loads(text)
    cert["claims"][0]["evidence"]["rank_upper"] = 7
    cert["claims"][0]["evidence"]["rank_lower"] = 7
    r = client.post(server.url + "/api/verify",
                    files={"file": ("t.json", json.dumps(cert), "application/json")})
    job = wait_job(client, server.url, r.json()["id"])
    assert job["status"] == "done" and job["exit_code"] == 1
    assert job["result"]["verification"]["claims"][0]["holds"] is False
    # not a certificate: the job fails with the one-line reason, as bad input
    r = client.post(server.url + "/api/verify", files={"file": ("n.json", "[1]", "application/json")})
    job = wait_job(client, server.url, r.json()["id"])
    assert job["status"] == "failed" and job["exit_code"] == 2
    assert job["reason"].startswith("bad input: n.json: ") and "not a certificate" in job["reason"]


def test_a_certificate_holding_a_lone_surrogate_is_served_not_a_500(server, client, tmp_path):
    """verify accepts a certificate whose text holds "\\ud800" (valid JSON), so
    the service shows it too (escaped), never an internal error."""
    subprocess.run([sys.executable, "-m", "certify", "bounds", "--m", "8", "--out",
                    str(tmp_path / "b.json")], check=True, env=env(), capture_output=True)
    cert = json.loads((tmp_path / "b.json").read_text())
    cert["claims"][0]["method"] = "\ud800 odd"
    r = client.post(server.url + "/api/verify",
                    files={"file": ("s.json", json.dumps(cert), "application/json")})
    job = wait_job(client, server.url, r.json()["id"])
    assert job["status"] == "done" and job["exit_code"] == 0, job
    page = client.get(server.url + f"/jobs/{job['id']}")
    assert page.status_code == 200


def test_feasibility_and_rank_jobs(server, client):
    r = client.post(server.url + "/api/jobs", headers=server.auth,
                    data={"command": "feasibility", "family": "paper-5.1", "rank": "8",
                          "time_limit": "10"})
    m = _submit(server, client, "m3.json", b'{"matrix": [[1,2,3],[2,4,6],[1,0,1]]}', "rank")
    job = wait_job(client, server.url, r.json()["id"])
    assert job["status"] == "done" and job["exit_code"] == 0 and job["anonymous"] is False
    cert = json.loads(client.get(f"{server.url}/api/certificates/{job['cert_sha256']}").text)
    assert [(c["kind"], c["verdict"], c["parameters"]["rank"]) for c in cert["claims"]] == \
        [("infeasible", "proved", 8)]
    job = wait_job(client, server.url, m.json()["id"])
    cert = json.loads(client.get(f"{server.url}/api/certificates/{job['cert_sha256']}").text)
    ev = cert["claims"][0]["evidence"]
    assert (ev["rank_lower"], ev["rank_upper"]) == (2, 2)
    assert "m3.json" in cert["inputs"]


def test_delete_needs_the_token(server, client):
    r = _submit(server, client, "d.json", b"[[1,0],[0,1]]", "rank")
    sha = wait_job(client, server.url, r.json()["id"])["cert_sha256"]
    assert client.delete(f"{server.url}/api/certificates/{sha}").status_code == 401
    assert client.get(f"{server.url}/api/certificates/{sha}").status_code == 200
    assert client.delete(f"{server.url}/api/certificates/{sha}", headers=server.auth).status_code == 200
    assert client.get(f"{server.url}/api/certificates/{sha}").status_code == 404
    assert client.get(f"{server.url}/certificates/{sha}/files/report.md").status_code == 404
    with sqlite3.connect(server.data / "certify.db") as db:
        assert db.execute("select count(*) from certificate_files where cert_sha256 = ?",
                          (sha,)).fetchone() == (0,)


def test_pages_render(server, client):
    for path in ("/", "/submit", "/verify", "/jobs"):
        r = client.get(server.url + path)
        assert r.status_code == 200 and "certify-attention" in r.text, path
    assert client.get(server.url + "/jobs/" + "0" * 32).status_code == 404
    assert client.get(server.url + "/certificates/xyz").status_code == 404


def test_an_internal_failure_says_internal_error_and_logs_the_traceback(tmp_path, monkeypatch):
    """In the job process: the record says "internal error", the traceback is
    kept for the server's log only (the dispatcher prints it and drops it)."""
    import certify.api as api

    work = tmp_path / "claim"
    work.mkdir()
    (work / "m.json").write_text("[[1,0],[0,1]]")
    (work / "job.json").write_text(json.dumps({
        "id": "j", "command": "rank", "options": {"tokens": None, "eps": None, "code": None,
                                                  "seed": 0},
        "upload": {"file": "m.json", "name": "m.json", "sha256": "0" * 64},
        "limits": {"time_seconds": 60, "memory_bytes": 8 << 30, "unpacked_bytes": 1 << 20,
                   "upload_bytes": 1 << 20, "max_attempts": 1}}))

    def broken(*a, **k):
        raise KeyError("a bug")

    monkeypatch.setattr(api, "rank_of_matrix", broken)
    cwd = os.getcwd()
    import resource
    limits = [resource.getrlimit(r) for r in (resource.RLIMIT_AS, resource.RLIMIT_CPU,
                                               resource.RLIMIT_CORE)]
    monkeypatch.setattr(worker, "limit_self", lambda lim: None)
    try:
        assert worker.worker_main(work) == 1
    finally:
        os.chdir(cwd)
    assert limits == [resource.getrlimit(r) for r in (resource.RLIMIT_AS, resource.RLIMIT_CPU,
                                                       resource.RLIMIT_CORE)]
    doc = json.loads((work / "result.json").read_text())
    assert doc["error"] == "internal error (KeyError); the server's log has the details"
    assert "Traceback" in doc["traceback"] and "a bug" in doc["traceback"]


@pytest.mark.slow  # a load run (7 s); the full one in test_service_load.py
def test_load_small(server):
    """A small load run against this module's server: 8 submissions from 4
    clients and 60 reads; every job done exactly once (the full run:
    tests/test_service_load.py, --runslow)."""
    from service_load import run_load

    res = run_load([server], submissions=8, reads=60, clients=4, anonymous=8)
    assert len(res.anonymous) == 8 and not res.refused           # this server sets no open caps
    ids = [j["id"] for j in res.jobs.values()] + [j["id"] for j in res.anonymous.values()]
    with sqlite3.connect(server.data / "certify.db") as db:
        for jid in ids:
            assert [o for (o,) in db.execute("select outcome from job_claims where job_id = ?",
                                             (jid,))] == ["done"]


def test_serve_needs_no_set_up(tmp_path):
    """``certify serve`` in an empty folder: creates its data folder, database and token."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "certify", "serve", "--port", str(port)],
                            cwd=tmp_path, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: answers(url), "certify serve to answer",
                   proc=proc, output=lambda: proc.stdout.read().decode(errors="replace"), pause=0.05,
                   absent=(httpx.HTTPError,))
        data = tmp_path / "certify-service"
        token = (data / "token").read_text().strip()
        assert len(token) >= 32 and (data / "certify.db").is_file()
        assert oct((data / "token").stat().st_mode & 0o777) == "0o600"
        manifest = json.loads((data / ".certify-manifest.json").read_text())
        assert manifest["format"] == "certify-attention/service-data/1"
        r = httpx.post(url + "/api/jobs", headers={"Authorization": f"Bearer {token}"},
                       data={"command": "rank"},
                       files={"file": ("i.json", "[[1,0],[0,1]]", "application/json")})
        assert r.status_code == 201
    finally:
        proc.terminate()
        proc.wait(HANG_GUARD_S)                 # a graceful stop (the bound: a hang guard)


def test_a_client_driven_by_the_served_schema_submits_polls_and_fetches(server, client):
    """A client that knows only /openapi.json: it finds the operations by their
    ids, builds the multipart body the schema describes, authenticates as the
    security scheme says, follows the response links from the submission to
    the job and from the job to its certificate, and validates every answer
    against the schema."""
    import jsonschema

    doc = client.get(server.url + "/openapi.json").json()
    ops = {op["operationId"]: (path, method, op) for path, item in doc["paths"].items()
           for method, op in item.items()}

    def resolve(schema: dict) -> dict:
        while "$ref" in schema:
            schema = _pointer(doc, schema["$ref"].split("#", 1)[1])
        return schema

    def call(op_id: str, params: dict | None = None, form: dict | None = None,
             files: dict | None = None):
        path, method, op = ops[op_id]
        url = server.url + path.format(**(params or {}))
        headers = {}
        for req in op.get("security", []):
            scheme = doc["components"]["securitySchemes"][next(iter(req))]
            assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
            headers["Authorization"] = f"Bearer {server.token}"
        if "requestBody" in op:
            (media, body), = op["requestBody"]["content"].items()
            assert media == "multipart/form-data"
            form_schema = resolve(body["schema"])
            given = set(form or {}) | set(files or {})
            assert set(form_schema["required"]) <= given <= set(form_schema["properties"]), given
            assert all(form_schema["properties"][f].get("format") == "binary" for f in files or {})
        r = client.request(method.upper(), url, headers=headers, data=form, files=files)
        resp = op["responses"][str(r.status_code)]             # every answer is documented
        (media, content), = [(m, c) for m, c in resp["content"].items()
                             if r.headers["content-type"].startswith(m.split(";")[0])]
        if media == "application/json":
            jsonschema.validate(r.json(), {**content["schema"], "components": doc["components"]})
        return r, resp

    def follow(link: dict, body: dict) -> dict:
        """A link's parameters: ``$response.body#/POINTER`` of the answer it is on."""
        assert all(v.startswith("$response.body#/") for v in link["parameters"].values())
        return {k: _pointer(body, v.split("#", 1)[1]) for k, v in link["parameters"].items()}

    r, resp = call("submit_job", form={"command": "rank"},
                   files={"file": ("schema-client.json", b"[[1,2],[2,4]]", "application/json")})
    assert r.status_code == 201
    link = resp["links"]["job"]
    final = doc["components"]["schemas"]["Job"]["properties"]["status"]["x-final"]
    def ended():
        answer = call(link["operationId"], follow(link, r.json()))
        return answer if answer[0].json()["status"] in final else None
    job, resp = wait_until(ended, "the job to end", proc=server.proc, output=server.log_path, pause=0.2)
    assert job.json()["status"] == "done", job.json()
    link = resp["links"]["certificate"]
    cert, _ = call(link["operationId"], follow(link, job.json()))
    claim = cert.json()["claims"][0]
    assert claim["kind"] == "exact_rank"
    assert claim["evidence"]["rank_lower"] == claim["evidence"]["rank_upper"] == 1
    assert "schema-client.json" in cert.json()["inputs"]


def _pointer(doc, pointer: str):
    for part in pointer.lstrip("/").split("/"):
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc
