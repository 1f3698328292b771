"""Upgrading a data folder of the previous layout (database revision 0001,
``uploads/`` and ``certificates/`` beside it, no manifest), built here as
that version laid it out: ``certify serve`` refuses it naming the command,
``certify serve migrate`` moves it (uploads and report files into the
database, checked and read back before the old files go), and the server then
serves the old reports and figures and runs the queued job from its upload."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sqlite3
import uuid
from pathlib import Path

import httpx
import pytest
from service_support import Server, serve_exit, wait_job
from sqlalchemy import create_engine

from certify import api
from certify.service import datadir
from certify.service.schema import migrate


def _old_folder(d: Path, tmp: Path) -> dict:
    """A data folder as revision 0001 left it: one certificate with its report
    folder, one queued job with its upload, one finished job, the token."""
    d.mkdir()
    engine = create_engine(f"sqlite:///{d / 'certify.db'}")
    migrate(engine, "0001")
    engine.dispose()
    (tmp / "m.json").write_text("[[2,1],[4,2]]")
    text = api.rank_of_matrix(str(tmp / "m.json"), command=["certify", "rank", "m.json"]).dumps()
    sha = hashlib.sha256(text.encode()).hexdigest()
    files = api.report(text, tmp / "rep")
    (d / "certificates" / sha).mkdir(parents=True)
    for name in files:
        (d / "certificates" / sha / name).write_bytes((tmp / "rep" / name).read_bytes())
    upload = b"[[1,0,0],[0,1,0],[0,0,0]]"
    storage = uuid.uuid4().hex + ".json"
    (d / "uploads").mkdir()
    (d / "uploads" / storage).write_bytes(upload)
    (d / "work").mkdir()
    (d / "token").write_text("old-token-0123456789abcdef\n")
    t = dt.datetime(2026, 11, 30, tzinfo=dt.timezone.utc).isoformat(" ")
    done_id, queued_id = uuid.uuid4().hex, uuid.uuid4().hex
    with sqlite3.connect(d / "certify.db") as db:
        db.execute("insert into certificates (sha256, kind, verdict, rank, stored_at, command, "
                   "job_id, json_text, verify_exit, verify_mode) values (?,?,?,?,?,?,?,?,?,?)",
                   (sha, "exact_rank", "proved", 1, t, "rank", done_id, text, 0, "sources present"))
        db.execute("insert into claims (cert_sha256, idx, kind, verdict, rank) values (?,0,?,?,1)",
                   (sha, "exact_rank", "proved"))
        db.execute("insert into jobs (id, command, options, status, created_at, finished_at, "
                   "attempts, exit_code, cert_sha256) values (?,?,?,?,?,?,1,0,?)",
                   (done_id, "rank", json.dumps({"tokens": None, "eps": None, "code": None, "seed": 0}),
                    "done", t, t, sha))
        db.execute("insert into jobs (id, command, options, status, created_at, attempts, "
                   "upload_name, upload_sha256, upload_storage) values (?,?,?,?,?,0,?,?,?)",
                   (queued_id, "rank", json.dumps({"tokens": None, "eps": None, "code": None, "seed": 0}),
                    "queued", t, "mine.json", hashlib.sha256(upload).hexdigest(), storage))
    return {"sha": sha, "files": files, "queued": queued_id, "storage": storage,
            "report_md": (tmp / "rep" / "report.md").read_bytes()}


@pytest.mark.slow            # a real server on a migrated folder (about 16 s): make test-all
def test_previous_layout_refused_then_migrated_and_served(tmp_path):
    old = tmp_path / "svc"
    made = _old_folder(old, tmp_path)
    # serve names the command to run, and changes nothing
    before = sorted(p.name for p in old.rglob("*"))
    p = serve_exit("--data", str(old), "--port", "1")
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().endswith(f"certify serve migrate --data {old}"), p.stderr
    assert "revision 0001" in p.stderr
    assert sorted(q.name for q in old.rglob("*")) == before
    # the migration
    m = serve_exit("migrate", "--data", str(old))
    assert m.returncode == 0, m.stderr
    assert "1 upload(s) and" in m.stderr and f"{len(made['files'])} report file(s) of 1 certificate" in m.stderr
    assert datadir.read_manifest(old)["migrated_from"] == "revision 0001"
    assert not (old / "uploads").exists() and not (old / "certificates").exists()
    assert (old / "token").read_text().startswith("old-token")
    with sqlite3.connect(old / "certify.db") as db:
        assert db.execute("select version_num from alembic_version").fetchone() == ("0003",)
        assert db.execute("select upload_storage, upload_size from jobs where id = ?",
                          (made["queued"],)).fetchone() == (".json", 25)
    again = serve_exit("migrate", "--data", str(old))
    assert again.returncode == 2 and "already in the current layout" in again.stderr
    # served: the old report and figures, and the queued job runs from its upload
    with Server(old, token="old-token-0123456789abcdef") as s, httpx.Client(timeout=60) as c:
        sha = made["sha"]
        r = c.get(f"{s.url}/certificates/{sha}/files/report.md")
        assert r.status_code == 200 and r.content == made["report_md"]
        for name in made["files"]:
            assert c.get(f"{s.url}/certificates/{sha}/files/{name}").status_code == 200, name
        assert "rank exactly 1" in c.get(f"{s.url}/certificates/{sha}").text
        job = wait_job(c, s.url, made["queued"], timeout=120)
        assert job["status"] == "done" and job["exit_code"] == 0, job
        cert = c.get(f"{s.url}/api/certificates/{job['cert_sha256']}").json()
        assert cert["claims"][0]["evidence"]["rank_lower"] == 2


def test_a_bad_copy_keeps_every_old_file(tmp_path):
    old = tmp_path / "svc"
    made = _old_folder(old, tmp_path)
    (old / "uploads" / made["storage"]).write_bytes(b"[[9]]")        # not the recorded upload
    before = {str(q.relative_to(old)): q.read_bytes() for q in old.rglob("*")
              if q.is_file() and not q.name.startswith("certify.db")}
    m = serve_exit("migrate", "--data", str(old))
    assert m.returncode == 2 and "does not have the sha256 job" in m.stderr, m.stderr
    assert {str(q.relative_to(old)): q.read_bytes() for q in old.rglob("*")
            if q.is_file() and not q.name.startswith("certify.db")} == before
    assert datadir.read_manifest(old) is None


def test_other_folders_are_not_taken_for_the_previous_layout(tmp_path):
    from certify.service.upgrade import previous_layout
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "uploads").mkdir()
    (mine / "certify.db").write_bytes(b"not a database")
    assert not previous_layout(mine)
    (mine / "thesis.tex").write_text("x")
    assert not previous_layout(mine)
    m = serve_exit("migrate", "--data", str(mine))
    assert m.returncode == 2 and "not a data folder of an earlier certify serve" in m.stderr
