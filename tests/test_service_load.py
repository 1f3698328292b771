"""The load test against real servers: 200 submissions from 20 clients and
2,000 reads of pages and API while the jobs run, and 200 open verify uploads
without the token against the caps (at most 8 anonymous jobs waiting, 40
open submissions a minute per client, counted in the database: with two
PostgreSQL servers the window is shared); every job ends done exactly once
(one claim that finished, one certificate) and nothing is lost; the caps hold
(the most anonymous jobs seen waiting, the open submissions admitted in any
minute, the bytes stored); latency percentiles printed. On SQLite (one
server) and on PostgreSQL (two servers sharing one queue). Opt-in:
``pytest --runslow tests/test_service_load.py -s``; the default suite runs a
small version against the API tests' server."""

from __future__ import annotations

import sqlite3

import pytest
from service_load import run_load
from service_support import PostgresCluster, Server

SUBMISSIONS, READS, CLIENTS, OPEN = 200, 2000, 20, 200
MAX_ANON, RATE, STORAGE_MB = 8, 40, 512
CAPS = ("--max-anonymous-queued", str(MAX_ANON), "--open-submit-rate", str(RATE),
        "--max-storage-mb", str(STORAGE_MB))


def _caps_held(res, anonymous_epochs) -> None:
    """The caps, from what the servers reported and what the database holds."""
    assert res.max_anonymous_queued <= MAX_ANON, res.max_anonymous_queued
    assert res.max_storage <= STORAGE_MB << 20
    assert res.refused.get(429, 0) > 0, "the anonymous caps were never reached"
    t = sorted(anonymous_epochs)
    most = max((sum(1 for u in t if x <= u < x + 60) for x in t), default=0)
    assert most <= RATE, most                      # open submissions admitted in any minute
    print(f"caps held: at most {res.max_anonymous_queued} anonymous jobs waiting (cap {MAX_ANON}), "
          f"{most} open submissions admitted in one minute (cap {RATE}), "
          f"{res.max_storage / (1 << 20):.2f} MB stored (cap {STORAGE_MB})")


def _exactly_once_sqlite(db, job_ids) -> None:
    with sqlite3.connect(db) as conn:
        for jid in job_ids:
            outcomes = [o for (o,) in conn.execute(
                "select outcome from job_claims where job_id = ?", (jid,))]
            assert outcomes == ["done"], (jid, outcomes)
            assert conn.execute("select count(*) from certificates where job_id = ?",
                                (jid,)).fetchone() == (1,)


@pytest.mark.slow
def test_load_sqlite(tmp_path):
    with Server(tmp_path / "data", "--workers", "2", "--read-rate", "0", "--job-nice", "10",
                *CAPS) as s:
        res = run_load([s], SUBMISSIONS, READS, CLIENTS, anonymous=OPEN)
        _exactly_once_sqlite(s.data / "certify.db", [j["id"] for j in res.jobs.values()])
        with sqlite3.connect(s.data / "certify.db") as conn:
            for jid in [j["id"] for j in res.anonymous.values()]:
                assert [o for (o,) in conn.execute("select outcome from job_claims where job_id = ?",
                                                   (jid,))] == ["done"]
            epochs = [e for (e,) in conn.execute("select created_epoch from jobs where anonymous")]
        _caps_held(res, epochs)
    # latency is a measurement (printed), not a pass mark: it depends on the machine's load


@pytest.mark.slow
def test_load_postgres_two_servers(tmp_path):
    cluster = PostgresCluster(tmp_path / "pg")
    try:
        cluster.start()
        url = cluster.create_db("load")
        servers = [Server(tmp_path / name, "--db", url, "--workers", "2", "--read-rate", "0",
                          "--job-nice", "10", *CAPS)
                   for name in ("a", "b")]
        for s in servers:
            s.launch()
        try:
            for s in servers:
                s.wait_ready()
            res = run_load(servers, SUBMISSIONS, READS, CLIENTS, anonymous=OPEN)
        finally:
            for s in servers:
                s.stop()
        import psycopg
        with psycopg.connect(url) as conn:
            nodes = set()
            for j in res.jobs.values():
                rows = conn.execute("select node_id, outcome from job_claims where job_id = %s",
                                    (j["id"],)).fetchall()
                assert [o for _, o in rows] == ["done"], (j["id"], rows)
                nodes.add(rows[0][0])
                assert conn.execute("select count(*) from certificates where job_id = %s",
                                    (j["id"],)).fetchone() == (1,)
            for j in res.anonymous.values():
                rows = conn.execute("select outcome from job_claims where job_id = %s",
                                    (j["id"],)).fetchall()
                assert [o for (o,) in rows] == ["done"], (j["id"], rows)
            epochs = [e for (e,) in conn.execute("select created_epoch from jobs where anonymous")]
        _caps_held(res, epochs)
        assert len(nodes) == 2, "both servers ran jobs"
    finally:
        cluster.stop()
