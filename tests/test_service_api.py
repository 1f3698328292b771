"""certify serve through its HTTP API: token, size limit, pickles, zips, a
checkpoint certified end to end and re-verified, filters, delete, limits."""

from __future__ import annotations

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
import pytest
from service_support import CKPT, ROOT, Server, checkpoint_zip, wait_job

from certify.core.errors import InputError
from certify.core.files import sha256_bytes
from certify.service import jobs

LIMIT_KB = 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("svc") / "data"
    with Server(data, "--max-upload-mb", str(LIMIT_KB / 1024), "--workers", "2") as s:
        yield s


@pytest.fixture(scope="module")
def client():
    with httpx.Client(timeout=60) as c:
        yield c


def _rows(server, table: str) -> int:
    with sqlite3.connect(server.data / "certify.db") as db:
        return db.execute(f"select count(*) from {table}").fetchone()[0]


def _uploads(server) -> list[str]:
    return sorted(os.listdir(server.data / "uploads"))


@pytest.fixture(scope="module")
def certified(server, client):
    """One checkpoint certified through the service (shared by several tests)."""
    r = client.post(server.url + "/api/jobs", headers=server.auth,
                    data={"command": "checkpoint"},
                    files={"file": ("my-model.zip", checkpoint_zip(), "application/zip")})
    assert r.status_code == 201, r.text
    job = wait_job(client, server.url, r.json()["id"])
    assert job["status"] == "done", job
    return job


def test_submit_without_or_with_wrong_token_is_401_and_stores_nothing(server, client):
    jobs_before, uploads_before = _rows(server, "jobs"), _uploads(server)
    for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"},
                    {"Authorization": server.token}):          # no "Bearer " scheme
        r = client.post(server.url + "/api/jobs", headers=headers, data={"command": "checkpoint"},
                        files={"file": ("m.zip", checkpoint_zip(), "application/zip")})
        assert r.status_code == 401, r.text
    assert _rows(server, "jobs") == jobs_before
    assert _uploads(server) == uploads_before


def test_upload_over_the_limit_is_413_and_stores_nothing(server, client):
    jobs_before, uploads_before = _rows(server, "jobs"), _uploads(server)
    big = os.urandom(LIMIT_KB * 1024 * 3)
    r = client.post(server.url + "/api/jobs", headers=server.auth, data={"command": "rank"},
                    files={"file": ("big.npy", big, "application/octet-stream")})
    assert r.status_code == 413, r.text
    # just above the limit: within the header's framing slack, caught while storing
    r = client.post(server.url + "/api/jobs", headers=server.auth, data={"command": "rank"},
                    files={"file": ("big.npy", big[: LIMIT_KB * 1024 + 10], "application/octet-stream")})
    assert r.status_code == 413, r.text
    # the open verify endpoint has the same limit
    r = client.post(server.url + "/api/verify", files={"file": ("c.json", big, "application/json")})
    assert r.status_code == 413
    assert _rows(server, "jobs") == jobs_before
    assert _uploads(server) == uploads_before


def test_pickle_suffixes_are_refused_at_submit(server, client):
    jobs_before = _rows(server, "jobs")
    for name in ("model.pkl", "model.pt", "weights.pth", "x.pickle"):
        r = client.post(server.url + "/api/jobs", headers=server.auth, data={"command": "rank"},
                        files={"file": (name, b"\x80\x04K\x01.", "application/octet-stream")})
        assert r.status_code == 400 and "pickle" in r.json()["detail"], r.text
    assert _rows(server, "jobs") == jobs_before


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
    r = client.post(server.url + "/api/jobs", headers=server.auth, data={"command": "checkpoint"},
                    files={"file": ("evil.zip", buf.getvalue(), "application/zip")})
    assert r.status_code == 201, r.text
    job = wait_job(client, server.url, r.json()["id"])
    assert job["status"] == "failed"
    assert "weights_only" in job["reason"] and "pickle" in job["reason"], job["reason"]
    assert not marker.exists()


@pytest.mark.parametrize("member, why", [("../escape.json", "unsafe path"),
                                         ("/abs.json", "unsafe path"),
                                         ("dir/../../x.json", "unsafe path"),
                                         ("a\\b.json", "unsafe path"),
                                         (".hidden", "names may use only")])
def test_zip_member_paths_are_sanitized(server, client, member, why):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(member, "{}")
    jobs_before, uploads_before = _rows(server, "jobs"), _uploads(server)
    r = client.post(server.url + "/api/jobs", headers=server.auth, data={"command": "checkpoint"},
                    files={"file": ("m.zip", buf.getvalue(), "application/zip")})
    assert r.status_code == 400 and why in r.json()["detail"], r.text
    assert _rows(server, "jobs") == jobs_before and _uploads(server) == uploads_before


def test_zip_symlinks_and_unpacked_size_are_refused(tmp_path):
    lim = jobs.Limits(unpacked_bytes=10_000)
    p = tmp_path / "link.zip"
    with zipfile.ZipFile(p, "w") as z:
        info = zipfile.ZipInfo("link")
        info.external_attr = (0o120777 << 16)
        z.writestr(info, "/etc/passwd")
    with pytest.raises(InputError, match="not a plain file"):
        jobs.check_zip(p, lim)
    p = tmp_path / "bomb.zip"
    with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("zeros.npy", b"\0" * 50_000)            # 50 kB unpacked from ~100 bytes
    assert p.stat().st_size < 1000
    with pytest.raises(InputError, match="unpacks to more than 10000 bytes"):
        jobs.check_zip(p, lim)
    # a member whose declared size lies is caught while unpacking
    p = tmp_path / "liar.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("a.npy", b"x" * 20_000)
    raw = bytearray(p.read_bytes())
    at = raw.rfind(b"PK\x01\x02")                          # central directory entry
    raw[at + 24: at + 28] = (100).to_bytes(4, "little")    # uncompressed size 20000 -> 100
    p.write_bytes(bytes(raw))
    assert jobs.check_zip(p, lim) == ["a.npy"]
    with pytest.raises(Exception):
        jobs.unpack_zip(p, tmp_path / "out", lim)
    assert not (tmp_path / "out" / "a.npy").exists() or (tmp_path / "out" / "a.npy").stat().st_size <= 10_000


def test_options_are_checked_before_anything_is_stored(server, client):
    jobs_before = _rows(server, "jobs")
    bad = [{"command": "feasibility", "family": "/etc/passwd", "rank": "3"},
           {"command": "feasibility", "family": "paper-5.1", "rank": "0"},
           {"command": "rank", "tokens": "cube:8; rm -rf /"},
           {"command": "transcript", "M": "12", "s": "3", "h": "6", "q": "4"},
           {"command": "nosuch"}]
    for data in bad:
        r = client.post(server.url + "/api/jobs", headers=server.auth, data=data)
        assert r.status_code == 400, (data, r.text)
    assert _rows(server, "jobs") == jobs_before


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
    assert str(server.data) not in text and "/tmp" not in text
    # the server's verification (sources present) and the command line agree
    v = client.get(f"{server.url}/api/certificates/{sha}/verification").json()
    assert v["mode"].startswith("sources present (3 input file(s)") or v["mode"].startswith("sources present (2")
    path = tmp_path / "downloaded.json"
    path.write_text(client.get(f"{server.url}/certificates/{sha}/certificate.json").text)
    # the user verifies beside their own checkpoint, replaying the extraction as the server did
    for suffix in (".json", ".safetensors"):
        shutil.copyfile(CKPT.with_suffix(suffix), tmp_path / (CKPT.name + suffix))
    cli = subprocess.run([sys.executable, "-m", "certify", "verify", str(path),
                          "--replay-extraction"], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert v["exit_code"] == cli.returncode == 0, cli.stderr
    assert "extraction replayed" in v["mode"]
    assert v["verification"]["exit_meaning"].startswith("every claim's verdict is re-derived")
    # the page shows the claims and the verification with its meaning
    html = client.get(f"{server.url}/certificates/{sha}").text
    assert "certify verify: exit 0" in html and "sources present" in html
    assert "on {0,1}^8 (256 x 256) has rank exactly 8 over Q" in html
    assert 'src="/certificates/%s/files/singular_values.png"' % sha in html
    png = client.get(f"{server.url}/certificates/{sha}/files/singular_values.png")
    assert png.status_code == 200 and png.content[:8] == b"\x89PNG\r\n\x1a\n"
    assert client.get(f"{server.url}/certificates/{sha}/files/..%2Fcertify.db").status_code == 404
    assert client.get(f"{server.url}/certificates/{sha}/files/report.md").text.startswith("#")


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
    fam = json.loads(client.get(f"{server.url}/api/certificates/{sha}").text)["claims"][3]["parameters"]
    import datetime as dt
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    assert sha in get(since="2000-01-01") and sha not in get(until="2000-01-01")
    assert sha in get(until=today) and sha in get(since=today)         # a date is a whole day
    html = client.get(server.url + "/", params={"verdict": "refuted"}).text
    assert sha[:12] in html and 'class="badge refuted"' in html
    assert client.get(server.url + "/api/certificates", params={"rank": "x"}).status_code == 400
    del fam


def test_verify_an_uploaded_certificate_open_as_a_job(server, client, certified):
    sha = certified["cert_sha256"]
    text = client.get(f"{server.url}/api/certificates/{sha}").text
    r = client.post(server.url + "/api/verify", files={"file": ("c.json", text, "application/json")})
    assert r.status_code == 201
    job = wait_job(client, server.url, r.json()["id"])
    # without the checkpoint on hand the weights -> features step is a named assumption
    assert job["status"] == "done" and job["exit_code"] == 4
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
    # not a certificate: the job fails with the one-line reason
    r = client.post(server.url + "/api/verify", files={"file": ("n.json", "[1]", "application/json")})
    job = wait_job(client, server.url, r.json()["id"])
    assert job["status"] == "failed" and "not a certificate" in job["reason"]


def test_feasibility_and_rank_jobs(server, client):
    r = client.post(server.url + "/api/jobs", headers=server.auth,
                    data={"command": "feasibility", "family": "paper-5.1", "rank": "8",
                          "time_limit": "10"})
    m = client.post(server.url + "/api/jobs", headers=server.auth, data={"command": "rank"},
                    files={"file": ("m3.json", '{"matrix": [[1,2,3],[2,4,6],[1,0,1]]}',
                                    "application/json")})
    job = wait_job(client, server.url, r.json()["id"])
    assert job["status"] == "done" and job["exit_code"] == 0
    cert = json.loads(client.get(f"{server.url}/api/certificates/{job['cert_sha256']}").text)
    assert [(c["kind"], c["verdict"], c["parameters"]["rank"]) for c in cert["claims"]] == \
        [("infeasible", "proved", 8)]
    job = wait_job(client, server.url, m.json()["id"])
    cert = json.loads(client.get(f"{server.url}/api/certificates/{job['cert_sha256']}").text)
    ev = cert["claims"][0]["evidence"]
    assert (ev["rank_lower"], ev["rank_upper"]) == (2, 2)
    assert "m3.json" in cert["inputs"]


def test_delete_needs_the_token(server, client):
    r = client.post(server.url + "/api/jobs", headers=server.auth, data={"command": "rank"},
                    files={"file": ("d.json", '[[1,0],[0,1]]', "application/json")})
    sha = wait_job(client, server.url, r.json()["id"])["cert_sha256"]
    assert client.delete(f"{server.url}/api/certificates/{sha}").status_code == 401
    assert client.get(f"{server.url}/api/certificates/{sha}").status_code == 200
    assert client.delete(f"{server.url}/api/certificates/{sha}", headers=server.auth).status_code == 200
    assert client.get(f"{server.url}/api/certificates/{sha}").status_code == 404
    assert not (server.data / "certificates" / sha).exists()


def test_pages_render(server, client):
    for path in ("/", "/submit", "/verify", "/jobs"):
        r = client.get(server.url + path)
        assert r.status_code == 200 and "certify-attention" in r.text, path


def test_time_and_memory_limits(tmp_path):
    with Server(tmp_path / "tight", "--job-seconds", "2", "--workers", "1") as s, \
            httpx.Client(timeout=60) as c:
        r = c.post(s.url + "/api/jobs", headers=s.auth, data={"command": "checkpoint"},
                   files={"file": ("m.zip", checkpoint_zip(), "application/zip")})
        job = wait_job(c, s.url, r.json()["id"], timeout=60)
        assert job["status"] == "failed"
        assert "time limit" in job["reason"] or "SIGKILL" in job["reason"] \
            or "SIGXCPU" in job["reason"], job["reason"]
    with Server(tmp_path / "small", "--job-memory-mb", "256", "--workers", "1") as s, \
            httpx.Client(timeout=60) as c:
        r = c.post(s.url + "/api/jobs", headers=s.auth, data={"command": "checkpoint"},
                   files={"file": ("m.zip", checkpoint_zip(), "application/zip")})
        job = wait_job(c, s.url, r.json()["id"], timeout=120)
        assert job["status"] == "failed" and job["reason"], job
        assert job["cert_sha256"] is None


def test_serve_needs_no_set_up(tmp_path):
    """``certify serve`` in an empty folder: creates its data folder, database and token."""
    import subprocess
    import time

    from service_support import free_port
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "certify", "serve", "--port", str(port)],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                if httpx.get(url + "/api/health").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        token = (tmp_path / "certify-service" / "token").read_text().strip()
        assert len(token) >= 32 and (tmp_path / "certify-service" / "certify.db").is_file()
        assert oct((tmp_path / "certify-service" / "token").stat().st_mode & 0o777) == "0o600"
        r = httpx.post(url + "/api/jobs", headers={"Authorization": f"Bearer {token}"},
                       data={"command": "rank"},
                       files={"file": ("i.json", "[[1,0],[0,1]]", "application/json")})
        assert r.status_code == 201
        with httpx.Client(timeout=30) as c:
            assert wait_job(c, url, r.json()["id"])["status"] == "done"
    finally:
        proc.terminate()
        proc.wait(20)
