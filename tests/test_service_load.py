"""The load test against real servers: 200 submissions from 20 clients and
2,000 reads of pages and API while the jobs run; every job ends done exactly
once (one claim that finished, one certificate) and nothing is lost; latency
percentiles printed. On SQLite (one server) and on PostgreSQL (two servers
sharing one queue). Opt-in: ``pytest --runslow tests/test_service_load.py -s``;
the default suite runs a small version against the API tests' server."""

from __future__ import annotations

import sqlite3

import pytest
from service_load import run_load
from service_support import PostgresCluster, Server

SUBMISSIONS, READS, CLIENTS = 200, 2000, 20
READ_P99_SQLITE = 0.150          # seconds


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
    with Server(tmp_path / "data", "--workers", "2", "--read-rate", "0", "--job-nice", "10") as s:
        res = run_load([s], SUBMISSIONS, READS, CLIENTS)
        _exactly_once_sqlite(s.data / "certify.db", [j["id"] for j in res.jobs.values()])
    assert res.p("read", 99) < READ_P99_SQLITE, f"reads p99 {res.p('read', 99) * 1000:.0f} ms"


@pytest.mark.slow
def test_load_postgres_two_servers(tmp_path):
    cluster = PostgresCluster(tmp_path / "pg")
    try:
        cluster.start()
        url = cluster.create_db("load")
        servers = [Server(tmp_path / name, "--db", url, "--workers", "2", "--read-rate", "0",
                          "--job-nice", "10")
                   for name in ("a", "b")]
        for s in servers:
            s.launch()
        try:
            for s in servers:
                s.wait_ready()
            res = run_load(servers, SUBMISSIONS, READS, CLIENTS)
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
        assert len(nodes) == 2, "both servers ran jobs"
    finally:
        cluster.stop()
