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
import os
import shlex
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from service_support import ROOT, Server, answers, env, postgres_cluster, serve_exit, wait_job
from sqlalchemy import create_engine, text
from waits import HANG_GUARD_S, wait_until

from certify import api
from certify.service import datadir
from certify.service.schema import migrate


def _old_folder(d: Path, tmp: Path, url: str | None = None) -> dict:
    """A data folder as revision 0001 left it: one certificate with its report
    folder (its files and the report's manifest), one queued job with its
    upload, one finished job, the token; the database is ``DATA/certify.db``
    in WAL mode as that version kept it, or the PostgreSQL database ``url``."""
    d.mkdir()
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1) if url
                           else f"sqlite:///{d / 'certify.db'}")
    if url is None:
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA journal_mode=WAL")
    migrate(engine, "0001")
    (tmp / "m.json").write_text("[[2,1],[4,2]]")
    text_ = api.rank_of_matrix(str(tmp / "m.json"), command=["certify", "rank", "m.json"]).dumps()
    sha = hashlib.sha256(text_.encode()).hexdigest()
    files = api.report(text_, tmp / "rep")
    (d / "certificates" / sha).mkdir(parents=True)
    for name in [*files, ".certify-manifest.json"]:
        (d / "certificates" / sha / name).write_bytes((tmp / "rep" / name).read_bytes())
    upload = b"[[1,0,0],[0,1,0],[0,0,0]]"
    storage = uuid.uuid4().hex + ".json"
    (d / "uploads").mkdir()
    (d / "uploads" / storage).write_bytes(upload)
    (d / "work").mkdir()
    (d / "token").write_text("old-token-0123456789abcdef\n")
    t = dt.datetime(2026, 11, 30, tzinfo=dt.timezone.utc)
    done_id, queued_id = uuid.uuid4().hex, uuid.uuid4().hex
    opts = json.dumps({"tokens": None, "eps": None, "code": None, "seed": 0})
    with engine.begin() as db:
        db.execute(text("insert into certificates (sha256, kind, verdict, rank, stored_at, command, "
                        "job_id, json_text, verify_exit, verify_mode) values (:s, 'exact_rank', "
                        "'proved', 1, :t, 'rank', :j, :x, 0, 'sources present')"),
                   {"s": sha, "t": t, "j": done_id, "x": text_})
        db.execute(text("insert into claims (cert_sha256, idx, kind, verdict, rank) "
                        "values (:s, 0, 'exact_rank', 'proved', 1)"), {"s": sha})
        db.execute(text("insert into jobs (id, command, options, status, created_at, finished_at, "
                        "attempts, exit_code, cert_sha256) values (:i, 'rank', :o, 'done', :t, :t, "
                        "1, 0, :s)"), {"i": done_id, "o": opts, "t": t, "s": sha})
        db.execute(text("insert into jobs (id, command, options, status, created_at, attempts, "
                        "upload_name, upload_sha256, upload_storage) values (:i, 'rank', :o, "
                        "'queued', :t, 0, 'mine.json', :h, :u)"),
                   {"i": queued_id, "o": opts, "t": t, "h": hashlib.sha256(upload).hexdigest(),
                    "u": storage})
    engine.dispose()
    return {"sha": sha, "files": files, "queued": queued_id, "storage": storage,
            "report_md": (tmp / "rep" / "report.md").read_bytes()}


def _tree(d: Path) -> dict[str, bytes]:
    return {str(q.relative_to(d)): q.read_bytes() for q in sorted(d.rglob("*")) if q.is_file()}


def _printed_command(stderr: str, after: str) -> list[str]:
    """The command a message tells the user to run (the rest of its line after
    ``after``), as words; ``certify`` is this interpreter's ``-m certify``."""
    line = stderr.split(after, 1)[1].splitlines()[0].strip()
    words = shlex.split(line)
    assert words[0] == "certify", line
    return [sys.executable, "-m", "certify", *words[1:]]


def test_refusing_an_old_folder_writes_nothing_and_the_migration_leaves_nothing_behind(tmp_path):
    old = tmp_path / "svc"
    _old_folder(old, tmp_path)
    before = _tree(old)
    p = serve_exit("--data", str(old), "--port", "1")
    assert p.returncode == 2, p.stderr
    assert _tree(old) == before                    # not even SQLite's -wal / -shm files
    assert not (old / "certify.db-wal").exists() and not (old / "certify.db-shm").exists()
    m = subprocess.run(_printed_command(p.stderr, "layout first: "), cwd=ROOT, env=env(),
                       capture_output=True, text=True, timeout=600)
    assert m.returncode == 0, m.stderr
    # the report folders' manifests went with the files they listed
    assert not (old / "certificates").exists(), sorted(str(q) for q in old.rglob("*"))
    assert set(os.listdir(old)) - {"certify.db-wal", "certify.db-shm"} == {
        ".certify-manifest.json", "certify.db", "token", "work"}
    # the printed start command names this folder and no other database
    start = _printed_command(m.stderr, "Start it with: ")
    assert start[3:] == ["serve", "--data", str(old)], start


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
        assert db.execute("select version_num from alembic_version").fetchone() == ("0004",)
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
        job = wait_job(c, s.url, made["queued"])
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


@pytest.fixture(scope="module")
def pg(tmp_path_factory):
    yield from postgres_cluster(tmp_path_factory)


def _run_printed_server(words: list[str], tmp: Path) -> tuple[str, subprocess.Popen]:
    """Start the printed ``certify serve ...`` line (on a free port of its own)."""
    from service_support import free_port
    port = free_port()
    log = open(tmp / "printed-server.log", "wb")
    proc = subprocess.Popen([*words, "--port", str(port), "--job-nice", "0"], cwd=ROOT, env=env(),
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: answers(url),
               "the printed command's server to answer", proc=proc,
               output=tmp / "printed-server.log", pause=0.05, absent=(httpx.HTTPError,))
    return url, proc


def _printed_lines_run_against_the_given_database(old: Path, tmp: Path, db: str, made: dict,
                                                  show_db: str) -> None:
    before = _tree(old)
    p = serve_exit("--data", str(old), "--db", db, "--port", "1")
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().endswith(f"certify serve migrate --data {old} --db {show_db}"), p.stderr
    assert _tree(old) == before
    m = subprocess.run(_printed_command(p.stderr, "layout first: "), cwd=ROOT, env=env(),
                       capture_output=True, text=True, timeout=600)
    assert m.returncode == 0, m.stderr
    start = _printed_command(m.stderr, "Start it with: ")
    assert start[3:] == ["serve", "--data", str(old), "--db", show_db], start
    url, proc = _run_printed_server(start, tmp)
    try:
        # the migrated store, not a new empty one: the old certificate, the old token
        r = httpx.get(f"{url}/api/certificates/{made['sha']}")
        assert r.status_code == 200 and r.json()["claims"][0]["kind"] == "exact_rank"
        assert httpx.get(f"{url}/certificates/{made['sha']}/files/report.md").content == made["report_md"]
        r = httpx.post(url + "/api/jobs", headers={"Authorization": "Bearer old-token-0123456789abcdef"},
                       data={"command": "nosuch"})
        assert r.status_code == 422                  # past the token check: the old token holds
    finally:
        proc.terminate()
        proc.wait(HANG_GUARD_S)                      # a graceful stop (the bound: a hang guard)
    assert not (old / "certify.db").exists()         # no second, empty store beside it


def test_the_printed_commands_run_with_a_database_elsewhere(tmp_path):
    """``--db sqlite:///ELSEWHERE``: the refusal names ``--db``, and so does the
    migration's start line; run as printed, the server uses that database."""
    old = tmp_path / "svc"
    db_file = tmp_path / "elsewhere" / "old.db"
    db_file.parent.mkdir()
    made = _old_folder(old, tmp_path, url=None)
    (old / "certify.db").rename(db_file)
    db = f"sqlite:///{db_file}"
    _printed_lines_run_against_the_given_database(old, tmp_path, db, made, db)


@pytest.mark.slow             # a PostgreSQL cluster and a server (about 15 s)
def test_the_printed_commands_run_with_postgresql(pg, tmp_path):
    url = pg.create_db("oldlayout")
    old = tmp_path / "svc"
    made = _old_folder(old, tmp_path, url=url)
    _printed_lines_run_against_the_given_database(old, tmp_path, url, made, url)
