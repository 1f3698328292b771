"""Killing certify serve mid-job (SIGKILL): no process of its tree computes on,
no certificate is lost, no half-written row; on restart the job runs again
exactly once (its interrupted work folder removed, a user's file beside it
kept), or is marked failed with its reason when no attempt is left; a
graceful stop gives a running job back at once without counting the attempt.
One server's life in three starts, so that the suite pays for few start-ups."""

from __future__ import annotations

import os
import sqlite3

import httpx
from service_support import DYING_CPU_S, Server, cpu_now, cpu_ticks, cpu_until_gone, descendants, wait_job
from waits import wait_until

#: a job that computes for its whole time limit (rank 12 on paper-5.1 is an honest unknown)
LONG_JOB = {"command": "feasibility", "family": "paper-5.1", "rank": "12", "time_limit": "50"}
#: its stage once its process computes (certify.service.worker)
COMPUTING = "computing the claims (certify feasibility)"


def _db(server, sql: str):
    with sqlite3.connect(server.data / "certify.db") as db:
        return db.execute(sql).fetchall()


def _submit_and_kill(s: Server, c: httpx.Client) -> tuple[str, list[str]]:
    """Submit a long job, wait until its process computes, SIGKILL the server;
    every process of the server's tree stops."""
    r = c.post(s.url + "/api/jobs", headers=s.auth, data=LONG_JOB)
    job_id = r.json()["id"]
    wait_job(c, s.url, job_id, until=("running",))
    _wait_computing(s, c, job_id)                # the job's own process, past its start
    tree = descendants(s.proc.pid)
    assert len(tree) >= 2, tree                   # the launcher and the job (at least)
    busy = {p: cpu_ticks(p) for p in tree}
    wait_until(lambda: any(cpu_ticks(p) > t for p, t in busy.items()),
               "a process of the tree to compute", proc=s.proc, output=s.log_path, pause=0.05,
               absent=(OSError,))
    work = sorted(os.listdir(s.data / "work"))
    assert len(work) == 1
    before = cpu_now(tree)
    s.kill()
    used = cpu_until_gone(before)
    print(f"\nkill -9 of the server: its {len(tree)} processes used {used:.2f} CPU s until gone")
    assert used < DYING_CPU_S, f"a process of the killed server computes on ({used} CPU s)"
    # the row is still 'running', and nothing half-written exists
    assert _db(s, f"select status, cert_sha256 from jobs where id = '{job_id}'") == [("running", None)]
    assert _db(s, "select count(*) from certificates") == [(0,)]
    assert _db(s, "select count(*) from claims") == [(0,)]
    return job_id, work


def _wait_computing(s: Server, c: httpx.Client, job_id: str) -> None:
    wait_until(lambda: c.get(f"{s.url}/api/jobs/{job_id}").json().get("stage") == COMPUTING,
               f"job {job_id} to compute", proc=s.proc, output=s.log_path, pause=0.05)


def test_kill_restart_rerun_then_fail_then_graceful_stop(tmp_path):
    s = Server(tmp_path / "data", "--job-attempts", "2")
    try:
        _lives(s, tmp_path)
    finally:
        s.stop()                          # whatever failed, no server outlives the test


def _lives(s: Server, tmp_path) -> None:
    with httpx.Client(timeout=60) as c:
        s.start()
        job_id, work = _submit_and_kill(s, c)
        (s.data / "work" / "thesis.tex").write_text("% the user's\n")
        s.start()
        try:
            j = wait_job(c, s.url, job_id, until=("running",))
            assert j["attempts"] == 2
            assert j["reason"].startswith("re-queued after attempt 1 was interrupted")
            # the killed claim's folder is gone; the user's file is untouched
            assert not (s.data / "work" / work[0]).exists()
            assert (s.data / "work" / "thesis.tex").read_text() == "% the user's\n"
            assert "left alone in" in s.output() and "thesis.tex" in s.output()
            claims = _db(s, f"select node_id, outcome from job_claims where job_id = '{job_id}' "
                            f"order by claimed_at")
            assert [o for _, o in claims] == ["expired", None] and claims[0][0] == claims[1][0]
            # killed again during its last attempt: on restart it is failed, with the reason
            _wait_computing(s, c, job_id)
            before = cpu_now(descendants(s.proc.pid))
            s.kill()
            assert cpu_until_gone(before) < DYING_CPU_S
        finally:
            s.stop()
        s.start()
        try:
            job = wait_job(c, s.url, job_id)
            assert job["status"] == "failed"
            assert job["reason"] == "not retried: 2 attempt(s) were interrupted (limit 2, --job-attempts)"
            assert job["cert_sha256"] is None
            assert _db(s, "select count(*) from certificates") == [(0,)]
            # the server still takes new work after the recovery
            r = c.post(s.url + "/api/jobs", headers=s.auth, data={"command": "rank"},
                       files={"file": ("i.json", "[[1,0],[0,1]]", "application/json")})
            assert wait_job(c, s.url, r.json()["id"])["status"] == "done"
            # a graceful stop (SIGTERM) gives a running job back without counting the attempt
            last = c.post(s.url + "/api/jobs", headers=s.auth, data=LONG_JOB).json()["id"]
            _wait_computing(s, c, last)
            before = cpu_now(descendants(s.proc.pid))
        finally:
            s.stop()
        assert s.proc.returncode == 0                  # a stop by SIGTERM is a clean exit
        assert cpu_until_gone(before) < DYING_CPU_S    # the job was given back, not computed on
        assert _db(s, f"select status, attempts, reason from jobs where id = '{last}'") == \
            [("queued", 0, "re-queued: the server running it was stopped")]
        assert sorted(os.listdir(s.data / "work")) == ["thesis.tex"]
