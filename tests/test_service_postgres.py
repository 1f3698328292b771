"""Two certify serve processes on one PostgreSQL database, each with its own
node-local data folder: they share one queue and one store; kill -9 of one
mid-job, and the other takes the job over once its lease has expired (by the
database's clock) and finishes it exactly once; nothing is lost, and either
server serves every certificate and its files. And PostgreSQL stopped under a
running server with a job running: 503s with the reason, one log line each
way, the job's result stored once the database is back. Opt-in
(``--runslow``, about 15 s each); the lease mechanics on a real PostgreSQL run
in the default suite (tests/test_service_store.py), and so does the outage
with the application in process (tests/test_service_outage.py)."""

from __future__ import annotations

import json

import httpx
import pytest
from service_support import (
    DYING_CPU_S,
    Server,
    cpu_now,
    cpu_until_gone,
    descendants,
    job_processes,
    postgres_cluster,
    wait_gone,
    wait_job,
)
from waits import wait_until

LEASE = "2"
#: a job's stage once its own process computes (certify.service.worker)
COMPUTING = "computing the claims (certify feasibility)"


@pytest.fixture(scope="module")
def pg(tmp_path_factory):
    yield from postgres_cluster(tmp_path_factory)


def _claims(url: str, job_id: str) -> list[tuple[str, str | None]]:
    import psycopg
    with psycopg.connect(url.replace("postgresql://", "postgresql://", 1)) as conn:
        return [tuple(r) for r in conn.execute(
            "select node_id, outcome from job_claims where job_id = %s order by claimed_at",
            (job_id,))]


def _sql(url: str, q: str, *args):
    import psycopg
    with psycopg.connect(url) as conn:
        return [tuple(r) for r in conn.execute(q, args)]


@pytest.mark.slow
def test_two_servers_share_the_queue_and_a_killed_ones_job_finishes_once_elsewhere(pg, tmp_path):
    url = pg.create_db("two")
    a = Server(tmp_path / "a", "--db", url, "--lease-seconds", LEASE, "--workers", "1",
               "--read-rate", "0").start()
    b = Server(tmp_path / "b", "--db", url, "--lease-seconds", LEASE, "--workers", "1",
               "--read-rate", "0")
    try:
        with httpx.Client(timeout=60) as c:
            node_a = c.get(a.url + "/api/health").json()["node"]
            job = c.post(a.url + "/api/jobs", headers=a.auth, data={
                "command": "feasibility", "family": "paper-5.1", "rank": "12",
                "time_limit": "2"}).json()["id"]
            j = wait_job(c, a.url, job, until=("running",))
            assert j["node_id"] == node_a
            b.start()
            node_b = c.get(b.url + "/api/health").json()["node"]
            assert node_b != node_a
            # small jobs through both servers: one queue
            small = [c.post(s.url + "/api/jobs", headers=s.auth, data={"command": "rank"},
                            files={"file": (f"m{i}.json", json.dumps([[i + 1, 0], [0, 1]]),
                                            "application/json")}).json()["id"]
                     for i, s in enumerate([a, b] * 2)]
            before = cpu_now(descendants(a.proc.pid))
            a.kill()
            assert cpu_until_gone(before) < DYING_CPU_S, "a process of the killed server computes on"
            done = wait_job(c, b.url, job)
            assert done["status"] == "done" and done["attempts"] == 2, done
            assert _claims(url, job) == [(node_a, "expired"), (node_b, "done")]
            assert _sql(url, "select count(*) from certificates where job_id = %s", job) == [(1,)]
            for jid in small:
                r = wait_job(c, b.url, jid)
                assert r["status"] == "done", r
                outcomes = [o for _, o in _claims(url, jid)]
                assert outcomes.count("done") == 1 and set(outcomes) <= {"done", "expired"}
            # nothing lost: B serves every certificate and its files
            for jid in [job, *small]:
                sha = c.get(f"{b.url}/api/jobs/{jid}").json()["cert_sha256"]
                assert c.get(f"{b.url}/api/certificates/{sha}").status_code == 200
                assert c.get(f"{b.url}/certificates/{sha}/files/report.md").status_code == 200
            assert _sql(url, "select count(*) from uploads") == [(0,)]
    finally:
        a.stop()
        b.stop()


def _get_all(c, base: str, job: str, auth: dict) -> dict[str, httpx.Response]:
    out = {p: c.get(base + p) for p in ("/api/health", "/api/certificates", f"/api/jobs/{job}",
                                         "/", f"/jobs/{job}", "/jobs")}
    out["POST /api/jobs"] = c.post(base + "/api/jobs", headers=auth,
                                   data={"command": "feasibility", "rank": "8"})
    return out


@pytest.mark.slow
def test_postgresql_stopped_under_a_running_server_and_its_job(pg, tmp_path):
    """The database stops while a job runs: every request is a 503 with the
    reason (pages as HTML), the log has one line for the outage and one for
    its end and no traceback; the job's process runs on and ends during the
    outage, and its result is stored when the database is back, by the same
    claim: done once, attempt 1, one certificate."""
    url = pg.create_db("outage")
    s = Server(tmp_path / "a", "--db", url, "--workers", "1", "--read-rate", "0").start()
    try:
        with httpx.Client(timeout=60) as c:
            job = c.post(s.url + "/api/jobs", headers=s.auth, data={
                "command": "feasibility", "family": "paper-5.1", "rank": "12",
                "time_limit": "4"}).json()["id"]
            wait_job(c, s.url, job, until=("running",))
            wait_until(lambda: c.get(f"{s.url}/api/jobs/{job}").json().get("stage") == COMPUTING,
                       "the job's own process to compute", proc=s.proc, output=s.log_path)
            jobs = job_processes(s.proc.pid)
            assert jobs, "no job process under the server's launcher"
            pg.pause()
            try:
                answers = _get_all(c, s.url, job, s.auth)
                for what, r in answers.items():
                    assert r.status_code == 503, (what, r.status_code, r.text[:200])
                    page = not what.startswith(("/api/", "POST"))
                    assert r.headers["content-type"].startswith("text/html" if page
                                                                else "application/json"), what
                    assert "the database is not answering (" in r.text, (what, r.text[:300])
                # the job's process (a 4 s search) runs on and ends during the outage
                assert not wait_gone(jobs), "the job's process did not end"
                assert all(r.status_code == 503 for r in _get_all(c, s.url, job, s.auth).values())
            finally:
                pg.resume()
            wait_until(lambda: c.get(s.url + "/api/health").status_code == 200,   # once resumed
                       "the server to answer again", proc=s.proc, output=s.log_path, pause=0.2,
                       absent=(httpx.HTTPError,))
            done = wait_job(c, s.url, job)
            assert done["status"] == "done" and done["attempts"] == 1 and done["reason"] is None, done
            assert [o for _, o in _claims(url, job)] == ["done"]
            assert _sql(url, "select count(*) from certificates where job_id = %s", job) == [(1,)]
            page = c.get(f"{s.url}/jobs/{job}").text
            assert f'href="/certificates/{done["cert_sha256"]}"' in page
    finally:
        s.stop()
    log = s.output()
    assert log.count("is not answering") == 1 and log.count("answers again") == 1, log
    assert "Traceback" not in log and "internal error" not in log, log
