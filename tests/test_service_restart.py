"""Killing certify serve mid-job: no certificate is lost, no half-written row;
on restart the job is re-run, or marked failed with its reason."""

from __future__ import annotations

import os
import sqlite3
import time

import httpx
from service_support import Server, checkpoint_zip, wait_job


def _db(server, sql: str):
    with sqlite3.connect(server.data / "certify.db") as db:
        return db.execute(sql).fetchall()


def _worker_pids(server) -> list[int]:
    """Processes running a job of this server (each job folder names its pid)."""
    out = []
    for f in (server.data / "work").glob("*/worker.pid"):
        try:
            out.append(int(f.read_text()))
        except (OSError, ValueError):
            pass
    return out


def _alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().split()[2] != "Z"
    except OSError:
        return False


def _submit_and_kill(s: Server, c: httpx.Client) -> str:
    r = c.post(s.url + "/api/jobs", headers=s.auth, data={"command": "checkpoint"},
               files={"file": ("m.zip", checkpoint_zip(), "application/zip")})
    job_id = r.json()["id"]
    wait_job(c, s.url, job_id, timeout=60, until=("running",))
    t0 = time.monotonic()
    while not _worker_pids(s) and time.monotonic() - t0 < 20:
        time.sleep(0.05)
    workers = _worker_pids(s)
    assert workers, "the job's worker process did not start"
    s.kill()
    t0 = time.monotonic()
    while any(_alive(p) for p in workers) and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    assert not [p for p in workers if _alive(p)], "a job's worker outlived the server"
    # the row is still 'running', and nothing half-written exists
    assert _db(s, f"select status, cert_sha256 from jobs where id = '{job_id}'") == [("running", None)]
    assert _db(s, "select count(*) from certificates") == [(0,)]
    assert _db(s, "select count(*) from claims") == [(0,)]
    assert os.listdir(s.data / "certificates") == []
    return job_id


def test_kill_mid_job_then_restart_reruns_it(tmp_path):
    s = Server(tmp_path / "data")
    with httpx.Client(timeout=60) as c:
        s.start()
        job_id = _submit_and_kill(s, c)
        t_restart = time.monotonic()
        s.start()
        try:
            job = wait_job(c, s.url, job_id, timeout=240)
            print(f"\nrestart -> job done again in {time.monotonic() - t_restart:.1f} s")
            assert job["status"] == "done" and job["attempts"] == 2, job
            assert job["reason"] == "re-queued after the server stopped during attempt 1"
            sha = job["cert_sha256"]
            cert = c.get(f"{s.url}/api/certificates/{sha}")
            assert cert.status_code == 200
            v = c.get(f"{s.url}/api/certificates/{sha}/verification").json()
            assert v["exit_code"] == 0 and v["verification"]["holds"]
            assert _db(s, "select count(*) from certificates") == [(1,)]
            assert _db(s, "select count(*) from claims") == [(4,)]
            assert os.listdir(s.data / "work") == []
        finally:
            s.stop()


def test_kill_mid_job_with_no_attempt_left_marks_it_failed(tmp_path):
    s = Server(tmp_path / "data", "--job-attempts", "1")
    with httpx.Client(timeout=60) as c:
        s.start()
        job_id = _submit_and_kill(s, c)
        s.start()
        try:
            job = c.get(f"{s.url}/api/jobs/{job_id}").json()
            assert job["status"] == "failed"
            assert job["reason"] == "the server stopped during the job 1 times (limit 1); not retried"
            assert job["cert_sha256"] is None
            assert _db(s, "select count(*) from certificates") == [(0,)]
            # the server still takes new work after the recovery
            r = c.post(s.url + "/api/jobs", headers=s.auth, data={"command": "rank"},
                       files={"file": ("i.json", "[[1,0],[0,1]]", "application/json")})
            assert wait_job(c, s.url, r.json()["id"])["status"] == "done"
        finally:
            s.stop()
